"""Kernel validation harness: plan -> source -> kconfig -> build -> image -> vm ->
guest -> suites -> detect -> results (see docs/architecture.md)."""
