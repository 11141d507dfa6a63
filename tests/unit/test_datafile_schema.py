"""The JSON Schemas in schemas/ are what `python -m harness.datafile.schema`
writes from the records (byte for byte), and they agree with the loader:
every data file the project ships loads through harness.datafile and
validates against its kind's schema (jsonschema, draft 2020-12), and the
same broken documents are refused by both."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from harness import datafile
from harness.datafile import schema
from harness.errors import HarnessError
from harness.plan.plan import PROJECT_ROOT
from harness.suites import SUITES_DIR

from ..conftest import REPO

jsonschema = pytest.importorskip("jsonschema")

# the nightly files among plans/ (every other file there is a plan)
NIGHTLY = {"nightly.yaml"}


def shipped() -> dict[str, list[Path]]:
    """kind -> the project's files of that kind, in the checkout and under
    harness/_data (an installed package's copies)."""
    plans = [p for root in (REPO, PROJECT_ROOT) for p in sorted(root.glob("plans/*.yaml"))]
    return {
        "plan": [p for p in plans if p.name not in NIGHTLY],
        "nightly": [p for p in plans if p.name in NIGHTLY],
        "recipe": [p for root in (REPO, PROJECT_ROOT)
                   for p in sorted(root.glob("vm-images/*.yaml"))],
        "suite": sorted(SUITES_DIR.glob("*/suite.yaml")),
        "series": [p for root in (REPO, PROJECT_ROOT)
                   for p in sorted(root.glob("patches/*/series.yaml"))],
        "expectations": sorted(SUITES_DIR.glob("*/expectations.yaml")),
        "plan-expectations": [],
        "modules": [SUITES_DIR / "modules" / "modules.yaml"],
        "watch": sorted((REPO / "docs" / "examples").glob("watch-*.yaml")),
    }


def validator(kind: str):
    document = json.loads((REPO / "schemas" / f"{kind}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document)


def test_the_committed_schemas_are_what_the_generator_writes():
    committed = sorted(p.name for p in (REPO / "schemas").glob("*.schema.json"))
    assert committed == sorted(f"{name}.schema.json" for name in schema.KINDS), (
        "schemas/ holds one file per kind of harness.datafile.schema.KINDS")
    for name in schema.KINDS:
        assert schema.kind(name).name == name
        assert (REPO / "schemas" / f"{name}.schema.json").read_text() == schema.render(name), (
            f"schemas/{name}.schema.json is stale: {schema.COMMAND}")
    assert schema.main(["--check"]) == 0


def test_check_says_which_schema_is_stale(tmp_path, capsys):
    assert schema.main(["--check", "--directory", str(tmp_path), "suite"]) == 1
    assert "suite.schema.json" in capsys.readouterr().err
    assert schema.main(["--write", "--directory", str(tmp_path), "suite"]) == 0
    assert schema.main(["--check", "--directory", str(tmp_path), "suite"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["suite.schema.json"]


def test_every_shipped_data_file_loads_and_validates_against_its_schema():
    files = shipped()
    assert set(files) == set(schema.KINDS)
    counted = {kind: len(paths) for kind, paths in files.items()}
    assert counted["plan"] >= 4 and counted["nightly"] >= 2 and counted["recipe"] >= 4
    assert counted["suite"] == 9 and counted["series"] >= 20 and counted["expectations"] >= 2
    for kind, paths in files.items():
        check = validator(kind)
        for path in paths:
            datafile.load(path, schema.kind(kind))       # the loader takes it ...
            errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                      for e in check.iter_errors(yaml.safe_load(path.read_text()) or {})]
            assert not errors, f"{path}: not valid against schemas/{kind}.schema.json: {errors}"


GOOD = {
    "plan-expectations": {"verbs": {"siw": [{"test": "x*", "reason": "y", "until": "abc"}],
                                    "any": [{"test": "z", "reason": "w",
                                             "until": {"commit": "a", "subject": "b"}}]}},
    "plan": {"suites": "modules", "kernel": {"debian_version": 7.2},
             "results": {"readable": None}},
}
# broken documents: each refused by the loader and by the schema
BAD = [
    ("plan", {"vm": {"acel": "tcg"}}),
    ("plan", {"vm": {"accel": "fast"}}),
    ("plan", {"vm": {"memory_mb": 64}}),
    ("plan", {"suites": [["modules"]]}),
    ("plan", {"perf": {"fail_on_regression": "yes"}}),
    ("nightly", {"name": "n", "sources": [{"name": "a", "colour": 1}]}),
    ("nightly", {"name": "n", "sources": [{"git": "x"}]}),
    ("recipe", {"name": "r", "suite": "trixie", "variant": "minbase", "disk_size_mb": 64,
                "pakages": []}),
    ("recipe", {"name": "r", "suite": "trixie", "variant": "tiny", "disk_size_mb": 64}),
    ("recipe", {"name": "r", "variant": "minbase", "disk_size_mb": 64}),
    ("suite", {"name": "x", "needs": {"fragment": []}}),
    ("suite", {"name": "x", "timeouts": {"run": "long"}}),
    ("suite", {"name": "x", "covers": {"narrow": [{"paths": ["a"]}]}}),
    ("series", {"patchez": []}),
    ("series", {"kconfig": [{"a": 1}]}),
    ("expectations", {"siw": [{"test": "x", "reason": "y", "untill": "z"}]}),
    ("expectations", {"siw": {"test": "x", "reason": "y"}}),
    ("plan-expectations", {"verbs": {"siw": [{"test": "x", "reason": "y",
                                              "intermittent": "no"}]}}),
    ("modules", {"rdma_rxe": {"lnk": "rxe"}}),
]


@pytest.mark.parametrize("kind, document", list(GOOD.items()))
def test_a_good_document_passes_both(kind, document):
    datafile.convert(copy.deepcopy(document), schema.kind(kind).record, "", "x.yaml",
                     schema.kind(kind))
    assert not list(validator(kind).iter_errors(document))


@pytest.mark.parametrize("kind, document", BAD)
def test_a_broken_document_is_refused_by_both(kind, document):
    spec = schema.kind(kind)
    with pytest.raises(HarnessError) as info:
        datafile.convert(copy.deepcopy(document), spec.record, "", "x.yaml", spec)
    assert info.value.exit_code == 2 and info.value.message.startswith("x.yaml: ")
    assert list(validator(kind).iter_errors(document)), f"the schema takes {document}"


def test_the_schema_carries_the_comments_choices_ranges_and_defaults():
    plan = json.loads(schema.render("plan"))
    accel = plan["properties"]["vm"]["properties"]["accel"]
    assert accel == {"description": "auto | kvm | tcg", "enum": ["auto", "kvm", "tcg"],
                     "default": "auto"}
    memory = plan["properties"]["vm"]["properties"]["memory_mb"]
    assert (memory["minimum"], memory["maximum"], memory["default"]) == (128, 1 << 20, 2048)
    suite = json.loads(schema.render("suite"))
    assert suite["required"] == ["name", "description", "tests"]
    assert suite["additionalProperties"] is False
