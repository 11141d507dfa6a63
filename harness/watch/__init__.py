"""The list's CI (`harness watch WATCH.yaml`): new series from a patchwork
project or a public-inbox list, each tested once by `series check` against
the base it names, answered with patchwork checks per patch and, for a
failure, a reply mail. A workflow above the pipeline (docs/manual/watch.md)."""
