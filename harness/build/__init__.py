"""Build stage: tree + `.config` -> `KernelBuild` (bzImage, modules staging, release,
warnings), and what else is built from the same tree on the host: build.py the kernel,
ccache.py the compiler cache per trust domain, buildwatch.py a long make's progress,
selftests.py the programs the suites copy into the guests."""
