"""The suites' registry (harness/suites/registry.py): every folder with a
suite.yaml is a suite, each suite.yaml is valid and everything it names
exists, every suite a plan or a series names is one of them, and a broken
suite.yaml is named with its file and key (exit 2)."""
import importlib

import pytest
import yaml

from harness.plan import plan as plan_mod
from harness.build import selftests
from harness.errors import EXIT_BAD_INPUT, SuiteError
from harness.suites import SUITES, SUITES_DIR, registry
from harness.suites.fabric import PROVIDERS

PROJECT = plan_mod.PROJECT_ROOT


def package(spec: registry.SuiteSpec) -> str:
    return f"harness.suites.{spec.directory.name}"


def test_every_suite_folder_has_a_valid_suite_yaml():
    folders = sorted(p.parent for p in SUITES_DIR.glob("*/__init__.py"))
    assert folders == sorted(spec.directory for spec in SUITES.values())
    assert len(SUITES) == 9
    for name, spec in SUITES.items():
        assert spec.name == name == spec.directory.name.replace("_", "-")
        assert spec.description and spec.tests


def test_every_suites_pytest_modules_and_parsers_import():
    for spec in SUITES.values():
        modules = [name[:-3] for name in spec.tests]
        if (spec.directory / "parse.py").exists():
            modules.append("parse")
        for module in modules:
            importlib.import_module(f"{package(spec)}.{module}")


def test_what_the_suites_need_exists():
    for spec in SUITES.values():
        for artifact in spec.needs.artifacts:
            assert artifact in selftests.ARTIFACT_FILES, f"{spec.name}: no builder for {artifact}"
        for provider in spec.providers:
            assert provider in PROVIDERS, f"{spec.name}: unknown provider {provider}"


def test_the_suites_the_plans_and_series_name_exist():
    named = {"plan.py default": plan_mod.Plan.__dataclass_fields__["suites"].default}
    for path in [*PROJECT.glob("plans/*.yaml"), *PROJECT.glob("patches/*/series.yaml")]:
        named[str(path.relative_to(PROJECT))] = yaml.safe_load(path.read_text()).get("suites", ())
    assert len(named) > 5
    for where, suites in named.items():
        for suite in suites:
            assert suite in SUITES, f"{where}: no suite {suite}"


def test_the_registry_answers_what_the_rest_of_the_harness_asks():
    assert SUITES["verbs"].tests == ("test_verbs.py",)
    assert SUITES["verbs"].providers == ("rxe", "siw")
    assert SUITES["kselftest-rdma"].timeouts == {"script": 300.0}
    assert registry.default("modules") == ("rdma_rxe", "siw", "ib_uverbs", "rdma_ucm",
                                           "ionic_rdma", "mlx5_core", "mlx5_ib")
    assert registry.of_file(SUITES["perf"].files[0]) is SUITES["perf"]
    assert registry.extra_devices(("modules", "verbs-smoke")) == ()
    assert [d.node for d in registry.extra_devices(("modules", "p2pdma"))] == [1]
    assert registry.artifacts(["modules", "kselftest-rdma", "hmm"]) == ("kselftest-rdma",
                                                                       "hmm-tests")


GOOD = {"name": "my-suite", "description": "checks things", "tests": ["test_my_suite.py"]}


@pytest.mark.parametrize("change, words", [
    ({"name": None}, ["suite.yaml: name: missing", "my-suite"]),
    ({"name": "other"}, ["suite.yaml: name: 'other' does not match its folder my_suite"]),
    ({"description": ""}, ["suite.yaml: description: missing"]),
    ({"tests": None}, ["suite.yaml: tests: the suite's pytest file(s)"]),
    ({"tests": ["test_gone.py"]}, ["suite.yaml: tests: test_gone.py is not in"]),
    ({"tests": ["suite.py"]}, ["'suite.py' is not a pytest file name"]),
    # keys and types: harness.datafile's refusals, by dotted key path
    ({"needs": {"fragment": ["rdma"]}}, ["suite.yaml: unknown key 'needs.fragment'",
                                         "known here: artifacts, devices, fragments, packages",
                                         "did you mean 'needs.fragments'?"]),
    ({"needs": {"packages": "kmod"}}, ["suite.yaml: needs.packages: expected a list, got 'kmod'"]),
    ({"needs": {"packages": ["kmod", " "]}}, ["suite.yaml: needs: packages: a list of names"]),
    ({"needs": {"devices": {"first": {"args": []}}}},
     ["suite.yaml: needs: devices: first: a node name (node1, node2, ...)"]),
    ({"needs": {"devices": {"node1": {"args": ["nvme,serial=x"]}}}},
     ["needs: devices: node1: args item 1", '"-option value"']),
    ({"needs": {"devices": {"node1": {"files": {"d.img": "64M"}}}}},
     ["suite.yaml: needs.devices.node1.files.d.img: expected int, got '64M'"]),
    ({"needs": {"devices": {"node1": {"files": {"d.img": 0}}}}},
     ["needs: devices: node1: files: d.img", "size in MiB"]),
    ({"timeouts": {"run": -1}}, ["suite.yaml: timeouts: run: seconds (a positive number)"]),
    ({"providers": [1]}, ["suite.yaml: providers[0]: expected str, got 1"]),
    ({"defaults": {"module": ["x"]}}, ["suite.yaml: unknown key 'defaults.module'",
                                       "did you mean 'defaults.modules'?"]),
    ({"test": ["test_my_suite.py"]}, ["suite.yaml: unknown key 'test'", "did you mean 'tests'?"]),
    ({"timeouts": {"run": "long"}}, ["suite.yaml: timeouts.run: expected float, got 'long'"]),
    ({"covers": {"path": ["x/**"]}}, ["suite.yaml: unknown key 'covers.path'",
                                      "did you mean 'covers.paths'?"]),
])
def test_a_broken_suite_yaml_names_the_file_and_the_key(tmp_path, change, words):
    folder = tmp_path / "my_suite"
    folder.mkdir()
    (folder / "test_my_suite.py").write_text("")
    data = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    (folder / "suite.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SuiteError) as error:
        registry.discover(tmp_path)
    assert error.value.exit_code == EXIT_BAD_INPUT
    assert str(folder / "suite.yaml") in error.value.message
    for word in words:
        assert word in error.value.message, error.value.message


def test_not_yaml_and_a_pytest_file_of_two_suites_are_named(tmp_path):
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_same.py").write_text("")
        (tmp_path / folder / "suite.yaml").write_text(yaml.safe_dump(
            {"name": folder, "description": "x", "tests": ["test_same.py"]}))
    with pytest.raises(SuiteError, match="two/suite.yaml: tests: test_same.py is also a test "
                                         "file of suite one"):
        registry.discover(tmp_path)
    (tmp_path / "two" / "suite.yaml").write_text("name: [two\n")
    with pytest.raises(SuiteError, match="two/suite.yaml:2: malformed YAML"):
        registry.discover(tmp_path)


def test_a_valid_suite_yaml_gives_its_spec(tmp_path):
    folder = tmp_path / "my_suite"
    folder.mkdir()
    (folder / "test_my_suite.py").write_text("")
    (folder / "suite.yaml").write_text(yaml.safe_dump({
        **GOOD, "providers": ["rxe"], "timeouts": {"run": 90},
        "needs": {"fragments": ["rdma"], "devices": {"node2": {
            "files": {"d.img": 8}, "args": ["-drive file={node_dir}/d.img,if=none,id=d"]}}}}))
    (spec,) = registry.discover(tmp_path).values()
    assert (spec.name, spec.tests, spec.providers, spec.timeouts) == (
        "my-suite", ("test_my_suite.py",), ("rxe",), {"run": 90.0})
    assert spec.needs.fragments == ("rdma",) and spec.needs.packages == ()
    (devices,) = spec.needs.devices
    assert (devices.node, devices.args, devices.files) == (
        2, ("-drive", "file={node_dir}/d.img,if=none,id=d"), (("d.img", 8),))
    assert spec.expectations is None and spec.files == (folder / "test_my_suite.py",)


def test_a_broken_suite_yaml_stops_a_plan_in_preflight(tmp_path, monkeypatch):
    from harness.pipeline import resolve
    (tmp_path / "my_suite").mkdir()
    (tmp_path / "my_suite" / "suite.yaml").write_text("name: my-suite\n")
    monkeypatch.setattr(registry, "suites", lambda: registry.discover(tmp_path))
    with pytest.raises(SuiteError, match="my_suite/suite.yaml: description: missing") as error:
        resolve.preflight(plan_mod.load(None, ["suites=[modules]"]), tmp_path)
    assert error.value.exit_code == EXIT_BAD_INPUT
