"""Kernel validation harness: plan -> source -> series -> kconfig -> build -> image ->
vm -> suites -> detect -> results, run by pipeline/ for the `harness` command (cli/) and
the workflows above it (the pictures: docs/architecture.md, "The pipeline"; every
module: docs/modules.md)."""
