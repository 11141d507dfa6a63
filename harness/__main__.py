"""`python -m harness`: the `harness` command (cli/main.py's `entry`)."""
from .cli.main import entry

entry()
