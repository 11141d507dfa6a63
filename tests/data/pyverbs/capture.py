"""Write <provider>.out here from a real run's node1 ssh.log: the output of
every pyverbs_runner command of that provider, in the order they ran.

    .venv/bin/harness run plans/quickstart.yaml --set 'suites=[pyverbs]'
    .venv/bin/python tests/data/pyverbs/capture.py runs/<run-id>
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEVICES = {"rxe0": "rxe", "siw0": "siw"}
COMMAND = re.compile(r"^\$ (.*pyverbs_runner\.py.*)$")


def outputs(ssh_log: str) -> dict[str, list[str]]:
    """provider -> the runner commands' output, one string per command."""
    found: dict[str, list[str]] = {}
    blocks = re.split(r"^(?=\$ )", ssh_log, flags=re.MULTILINE)
    for block in blocks:
        head, _, rest = block.partition("\n")
        match = COMMAND.match(head)
        if not match:
            continue
        device = re.search(r"--dev (\S+)", match.group(1)).group(1)
        body = rest.partition("\n")[2]          # after "# exit N in S s"
        found.setdefault(DEVICES[device], []).append(body.rstrip("\n") + "\n")
    return found


def main(run_dir: str) -> None:
    log = (Path(run_dir) / "nodes" / "node1" / "ssh.log").read_text()
    for provider, texts in outputs(log).items():
        (HERE / f"{provider}.out").write_text("".join(texts))
        print(f"{provider}.out: {len(texts)} runner commands")


if __name__ == "__main__":
    main(sys.argv[1])
