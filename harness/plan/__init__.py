"""Plan stage: the run plan and the data files around it — a YAML file + `--set` ->
`Plan` (plan.py), read key by key into frozen dataclasses (mapping.py); every error names
the file and the key path (exit 2)."""
