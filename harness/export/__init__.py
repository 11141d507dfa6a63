"""Run results in other systems' formats: `kcidb.py` (the kernel community's
shared results database, KCIDB), `submit.py` (its REST submission), `cli.py`
(`harness export`)."""
