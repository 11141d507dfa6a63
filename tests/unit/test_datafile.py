"""harness.datafile, the one reader of the harness's YAML data files: its
refusals (unknown key with the closest known one, missing key, wrong type
naming the type, choices, ranges, unions, mappings), each exit 2 naming the
file and the dotted key path, and the refusals it brings to each file kind
(an image recipe, series.yaml, a suite's expectations file, modules.yaml)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from harness import datafile
from harness.errors import EXIT_BAD_INPUT, ImageError, PlanError, SeriesError, SuiteError
from harness.image.image import load_recipe
from harness import series
from harness.suites import expectations
from harness.suites.modules import parse as modules_parse


@dataclass(frozen=True)
class Until:
    commit: str = ""
    subject: str = ""


@dataclass(frozen=True)
class Inner:
    colour: str = "red"
    size: int = 1
    until: str | Until | None = None


@dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner = field(default_factory=Inner)
    items: tuple[Inner, ...] = ()
    names: tuple[str, ...] = ()
    limits: dict[str, float] = field(default_factory=dict)
    ratio: float = 0.5
    on: bool = False
    source_file: str = ""


STRICT = datafile.Kind("outer", Outer, "test file", choices={"items[].colour": ("red", "blue")},
                       ranges={"inner.size": (1, 9, "things")}, error=SuiteError)
LENIENT = datafile.Kind("outer", Outer, "test file", lenient=True)


def refused(data, words, kind=STRICT, error=SuiteError):
    with pytest.raises(error) as info:
        datafile.convert(data, Outer, "", "f.yaml", kind)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert info.value.message.startswith("f.yaml: "), info.value.message
    for word in words:
        assert word in info.value.message, info.value.message


def test_a_mapping_becomes_the_records_key_by_key():
    got = datafile.convert({"name": "n", "inner": {"size": 3, "until": {"commit": "abc"}},
                            "items": [{"colour": "blue", "until": "def"}],
                            "limits": {"run": 2}, "ratio": 1, "on": True}, Outer, "", "f.yaml",
                           STRICT)
    assert got == Outer("n", Inner(size=3, until=Until("abc")), (Inner("blue", until="def"),),
                        limits={"run": 2.0}, ratio=1.0, on=True)
    assert isinstance(got.limits["run"], float) and isinstance(got.ratio, float)


@pytest.mark.parametrize("data, words", [
    ({"name": "n", "inner": {"colur": "x"}},
     ["unknown key 'inner.colur' (known here: colour, size, until)",
      "did you mean 'inner.colour'?"]),
    ({"name": "n", "zzz": 1}, ["unknown key 'zzz'", "known here: inner, items, limits"]),
    ({"name": "n", "source_file": "x"}, ["unknown key 'source_file'"]),   # the harness's own
    ({"inner": {}}, ["missing key 'name' (required here: name)"]),
    ({"name": 7}, ["name: expected str, got 7"]),
    ({"name": "n", "inner": {"size": "big"}}, ["inner.size: expected int, got 'big'"]),
    ({"name": "n", "inner": {"size": True}}, ["inner.size: expected int, got True"]),
    ({"name": "n", "inner": {"size": 10}}, ["inner.size: between 1 and 9 things, got 10"]),
    ({"name": "n", "on": "yes"}, ["on: expected bool, got 'yes'"]),
    ({"name": "n", "ratio": "half"}, ["ratio: expected float, got 'half'"]),
    ({"name": "n", "names": "a"}, ["names: expected a list, got 'a'"]),
    ({"name": "n", "names": ["a", None]}, ["names[1]: expected str, got None"]),
    ({"name": "n", "items": [{}, {"colour": "green"}]},
     ["items[1].colour: expected one of red, blue, got 'green'"]),
    ({"name": "n", "items": [{"until": ["x"]}]}, ["items[0].until: expected str, got ['x']"]),
    ({"name": "n", "items": [{"until": {"comit": "x"}}]},
     ["unknown key 'items[0].until.comit'", "did you mean 'items[0].until.commit'?"]),
    ({"name": "n", "limits": {"run": "long"}}, ["limits.run: expected float, got 'long'"]),
    ({"name": "n", "limits": [1]}, ["limits: expected a mapping, got [1]"]),
    ({"name": "n", "inner": None}, ["inner: expected a mapping, got None"]),
    (["name"], ["top level: expected a mapping"]),
])
def test_every_refusal_names_the_file_and_the_dotted_key(data, words):
    refused(data, words)


def test_a_lenient_kind_takes_numbers_as_text_and_one_text_as_a_list():
    got = datafile.convert({"name": 7.2, "names": "a"}, Outer, "", "f.yaml", LENIENT)
    assert (got.name, got.names) == ("7.2", ("a",))
    refused({"name": 7.2}, ["name: expected str, got 7.2"])
    refused({"name": True}, ["name: expected str, got True"], LENIENT, PlanError)


def test_to_record_is_the_plans_reading_and_apply_set_its_overrides():
    data = {"name": "n"}
    datafile.apply_set(data, "inner.size=4")
    datafile.apply_set(data, "names=[a, b]")
    got = datafile.to_record(Outer, data, "", "f.yaml")
    assert (got.inner.size, got.names) == (4, ("a", "b"))
    with pytest.raises(PlanError, match=r"--set names: value '\*' is not valid YAML: a value "
                                        "starting with '\\*' is YAML syntax: quote it"):
        datafile.apply_set(data, "names=*")
    with pytest.raises(SeriesError, match="'name' is not a mapping"):
        datafile.apply_set(data, "name.x=1", error=SeriesError)


def test_load_reads_the_file_bounded_and_says_what_its_top_level_must_be(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text("name: n\ninner: {size: 2}\n")
    assert datafile.load(path, STRICT, ["inner.colour=blue"]).inner == Inner("blue", 2)
    path.write_text("")
    with pytest.raises(SuiteError, match="f.yaml: missing key 'name'"):
        datafile.load(path, STRICT)
    path.write_text("- a\n")
    with pytest.raises(SuiteError, match="f.yaml: top level must be a mapping$"):
        datafile.load(path, STRICT)
    path.write_text("name: n\n? [a, b]\n: 1\n")      # YAML, but a key Python cannot hold
    with pytest.raises(SuiteError, match="f.yaml:2: malformed YAML: found unhashable key"):
        datafile.load(path, STRICT)
    with pytest.raises(FileNotFoundError):     # the caller says what a missing file means
        datafile.load(tmp_path / "none.yaml", STRICT)


# ---- the refusals it brings to each kind ----------------------------------------------

RECIPE = "name: r\nsuite: trixie\nvariant: minbase\ndisk_size_mb: 64\n"


@pytest.mark.parametrize("text, words", [
    ("pakages: [kmod]\n", ["unknown key 'pakages'", "did you mean 'packages'?"]),
    ("packages: [kmod, 3]\n", ["packages[1]: expected str, got 3"]),
    ("description: [a]\n", ["description: expected str, got ['a']"]),
])
def test_a_recipe_names_file_and_key(tmp_path, text, words):
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE + text)
    with pytest.raises(ImageError) as info:
        load_recipe(str(path))
    assert info.value.exit_code == EXIT_BAD_INPUT
    for word in [f"{path}: ", *words]:
        assert word in info.value.message, info.value.message
    path.write_text(RECIPE.replace("64", "32"))
    with pytest.raises(ImageError, match="disk_size_mb: between 64 and 1048576 MiB, got 32"):
        load_recipe(str(path))


@pytest.mark.parametrize("text, words", [
    ("name: s\npatchez: [a.patch]\n", ["unknown key 'patchez'", "did you mean 'patches'?"]),
    ("name: s\npatches: {a: 1}\n", ["patches: expected a list, got {'a': 1}"]),
    ("name: s\nsuites: [{a: 1}]\n", ["suites[0]: expected str, got {'a': 1}"]),
    ("name: s\nstatus: [merged]\n", ["status: expected str, got ['merged']"]),
])
def test_a_series_yaml_names_file_and_key(tmp_path, text, words):
    (tmp_path / "s").mkdir()
    path = tmp_path / "s" / "series.yaml"
    path.write_text(text)
    with pytest.raises(SeriesError) as info:
        series.load(str(tmp_path / "s"), tmp_path, tmp_path / "log")
    assert info.value.exit_code == EXIT_BAD_INPUT
    for word in [f"{path}: ", *words]:
        assert word in info.value.message, info.value.message


def test_a_series_yaml_base_may_be_a_number_and_one_suite_a_word(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "0001-x.patch").write_text(
        "From: A <a@example.org>\nSubject: [PATCH] x: y\n\n---\ndiff --git a/x b/x\n")
    (tmp_path / "s" / "series.yaml").write_text(
        "base: 7.2\nsuites: modules\npatches: [0001-x.patch]\n")
    spec = series.load(str(tmp_path / "s"), tmp_path, tmp_path / "log")
    assert (spec.name, spec.base, spec.suites) == ("s", "7.2", ("modules",))


def test_a_suites_own_expectations_file_is_named_by_its_path(tmp_path, monkeypatch):
    from harness.suites import registry
    folder = tmp_path / "verbs"
    folder.mkdir()
    (folder / "expectations.yaml").write_text("siw:\n  - {test: x, reason: y, untill: z}\n")
    spec = registry.SuiteSpec("verbs", "d", folder, ("test_verbs.py",))
    monkeypatch.setattr(registry, "get", lambda name: spec)
    with pytest.raises(PlanError) as info:
        expectations.load(("verbs",))
    assert info.value.message.startswith(f"{folder / 'expectations.yaml'}: unknown key "
                                         "'siw[0].untill'"), info.value.message
    (folder / "expectations.yaml").write_text("siw: [{test: x, reason: y, until: 1234567}]\n")
    (entry,) = expectations.load(("verbs",))
    assert (entry.until_commit, entry.source) == ("1234567", "verbs/expectations.yaml (x)")


@pytest.mark.parametrize("text, words", [
    ("rdma_rxe: {link: rxe, path: /x}\n", ["rdma_rxe: one of auxiliary, pci, link or path",
                                          "got link, path"]),
    ("rdma_rxe: {lnk: rxe}\n", ["unknown key 'rdma_rxe.lnk'", "did you mean 'rdma_rxe.link'?"]),
    ("rdma_rxe: link\n", ["rdma_rxe: expected a mapping, got 'link'"]),
])
def test_modules_yaml_names_the_module_and_the_key(tmp_path, text, words):
    path = tmp_path / "modules.yaml"
    path.write_text(text)
    with pytest.raises(SuiteError) as info:
        modules_parse.read_registration(path)
    for word in [f"{path}: ", *words]:
        assert word in info.value.message, info.value.message
