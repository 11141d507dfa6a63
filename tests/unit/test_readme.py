"""The README: short, opening with the two set-up commands, its links alive."""
from __future__ import annotations

import re

from ..conftest import REPO


def test_the_readme_is_short_and_links_into_the_manual():
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= 16_000, "README.md over 16,000 bytes: move detail to docs/"
    lines = readme.splitlines()
    # it opens with the two set-up commands
    assert lines[2:6] == ["```sh", "./bootstrap.sh && .venv/bin/harness run plans/quickstart.yaml",
                          "./bootstrap.sh && .venv/bin/tox", "```"]
    for target in re.findall(r"\]\(([^)#]+)", readme):
        if not target.startswith("http"):
            assert (REPO / target).exists(), f"README links to a missing {target}"
