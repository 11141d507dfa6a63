"""The `harness` command: argv -> the calls of the pipeline and the workflows -> an
exit code. main.py parses and dispatches (a workflow's subcommands are parsed by its
own package's `cli` module), doctor.py checks the host, listing.py lists what a plan
can name, completion.py writes shell completion. Nothing below imports it."""
