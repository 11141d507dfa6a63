"""The modules suite: every module of the plan through load/unload cycles on every
node, checked against modules.yaml (suite.yaml, test_modules.py, parse.py)."""
