"""Kernel validation harness: plan -> source -> series -> kconfig -> build ->
selftests -> image -> vm -> guest -> suites -> detect -> results (the picture:
docs/architecture.md, "The pipeline")."""
