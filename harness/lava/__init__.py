"""A LAVA lab as a place where a plan's nodes run (`vm.backend: lava`): its
REST API v0.2 (`client.py`) and the jobs the harness submits."""
