"""docs/ci's nightly templates fail the pipeline on a regression (no exit
code swallowed) and publish each job's junit.xml and the night's report."""
from __future__ import annotations

import re

import pytest
import yaml

from ..conftest import REPO

TEMPLATES = sorted((REPO / "docs" / "ci").glob("*.yml"))


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_a_template_fails_on_a_regression_and_publishes_junit_and_the_report(path):
    text = path.read_text()
    yaml.safe_load(text)
    commands = [line for line in text.splitlines() if "harness nightly" in line
                and not line.lstrip().startswith("#")]
    assert commands, "the template runs no night"
    for line in commands:
        assert not re.search(r"\|\|\s*(true|test|:|exit 0)", line), line
    assert "junit.xml" in text
    assert "report.html" in text


def test_there_are_templates():
    assert {p.name for p in TEMPLATES} == {"gitlab-ci.yml", "github-actions.yml"}
