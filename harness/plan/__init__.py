"""Plan stage: the run plan and the data files around it — a YAML file + `--set` (and
`$HARNESS_SET`, overrides.py) -> `Plan` (plan.py), read key by key into frozen
dataclasses by datafile/; every error names the file and the key path (exit 2)."""
