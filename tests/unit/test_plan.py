from pathlib import Path

import pytest

from harness.plan import plan as plan_mod
from harness.errors import EXIT_BAD_INPUT, PlanError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return path


def test_quickstart_plan_loads_with_the_documented_defaults():
    plan = plan_mod.load(plan_mod.PROJECT_ROOT / "plans" / "quickstart.yaml")
    assert plan.name == "quickstart"
    assert plan.kernel.source == "debian"
    # the newest 7.x Debian offers, whichever package carries it
    assert (plan.kernel.debian_package, plan.kernel.debian_version) == ("linux-source-7.*", "*")
    assert set(plan.kconfig.fragments) >= {"virt-guest", "rdma", "hmm-p2p", "ionic", "mlx5"}
    assert plan.suites == ("modules", "verbs-smoke")     # + what the series brings (cli)
    assert plan.series == ("demo-rxe-counters",) and not plan.per_patch
    assert plan.vm.nodes == 2


def test_set_overrides_dotted_keys_with_yaml_values(tmp_path):
    path = write(tmp_path, "name: x\n")
    plan = plan_mod.load(path, ["vm.accel=tcg", "suites=[modules]", "vm.memory_mb=1024",
                                "build.ccache=false"])
    assert plan.vm.accel == "tcg"
    assert plan.suites == ("modules",)
    assert plan.vm.memory_mb == 1024
    assert plan.build.ccache is False


def test_naming_a_tree_switches_to_git_source(tmp_path):
    plan = plan_mod.load(write(tmp_path, "name: x\n"), ["kernel.tree=/src/linux"])
    assert plan.kernel.source == "git"
    assert plan.kernel.tree == "/src/linux"


@pytest.mark.parametrize("override, words", [
    ("vm.acel=tcg", ["unknown key 'vm.acel'", "accel"]),
    ("nosuch=1", ["unknown key 'nosuch'"]),
    ("vm.accel=warp", ["vm.accel", "auto, kvm, tcg", "'warp'"]),
    ("vm.memory_mb=lots", ["vm.memory_mb", "expected int"]),
    ("vm.nodes=3", ["vm.nodes", "between 1 and 2"]),
    ("suites", ["KEY=VALUE"]),
])
def test_bad_overrides_name_the_key(tmp_path, override, words):
    with pytest.raises(PlanError) as info:
        plan_mod.load(write(tmp_path, "name: x\n"), [override])
    assert info.value.exit_code == EXIT_BAD_INPUT
    for word in words:
        assert word in str(info.value)


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "name: x\nvm:\n  nodes: [1,\n")
    with pytest.raises(PlanError) as info:
        plan_mod.load(path)
    assert str(path) in str(info.value)
    assert "malformed YAML" in str(info.value)


def test_missing_plan_file(tmp_path):
    with pytest.raises(PlanError, match="plan file not found"):
        plan_mod.load(tmp_path / "nope.yaml")


def test_wrong_type_in_file_names_the_key_path(tmp_path):
    path = write(tmp_path, "kconfig:\n  fragments: {a: 1}\n")
    with pytest.raises(PlanError, match=r"kconfig.fragments: expected a list"):
        plan_mod.load(path)


def test_waivers_need_a_reason_and_match_title_signature_or_prefix(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nwaivers:\n  - match: WARNING in rxe_requester\n"
                    "    reason: demo-broken patch 3, on purpose\n"
                    "  - match: 'KASAN: slab-use-after-free*'\n    reason: known, bug 123\n")
    plan = plan_mod.load(path)
    assert plan_mod.waiver_for(plan, "WARNING in rxe_requester").reason.startswith("demo")
    assert plan_mod.waiver_for(plan, "KASAN: slab-use-after-free Read in x") is not None
    assert plan_mod.waiver_for(plan, "x", "warning|rxe_completer|do_task") is None
    assert plan_mod.waiver_for(plan, "WARNING in rxe_completer") is None
    path.write_text("name: p\nwaivers:\n  - match: WARNING in rxe_requester\n")
    with pytest.raises(PlanError) as info:
        plan_mod.load(path)
    assert "waivers[0]" in str(info.value) and "reason" in str(info.value)


@pytest.mark.parametrize("assignment, key", [
    ("name=../../../escaped", "name"),
    ("name=/abs", "name"),
    ("name=.hidden", "name"),
    ("name=a b", "name"),
    ("name=a`touch x`", "name"),
    ("name=" + "x" * 81, "name"),
    ("name=''", "name"),
    ("build.jobs=-1", "build.jobs"),
    ("build.timeout=0", "build.timeout"),
    ("build.timeout=-5", "build.timeout"),
])
def test_bad_name_and_build_values_are_bad_input_naming_file_and_key(tmp_path, assignment, key):
    path = write(tmp_path, "name: x\n")
    with pytest.raises(PlanError) as exc:
        plan_mod.load(path, [assignment])
    assert exc.value.exit_code == EXIT_BAD_INPUT
    assert str(path) in str(exc.value) and f"{key}:" in str(exc.value)


@pytest.mark.parametrize("name", ["quickstart", "rxe-7.2+fix_1", "a.b", "x" * 80])
def test_good_names_are_accepted(tmp_path, name):
    assert plan_mod.load(write(tmp_path, f"name: '{name}'\n")).name == name


def test_plan_that_is_not_utf8_names_the_file_and_offset(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_bytes(b"name: x\ndescription: caf\xe9\n")
    with pytest.raises(PlanError) as exc:
        plan_mod.load(path)
    assert exc.value.exit_code == EXIT_BAD_INPUT
    assert str(path) in str(exc.value) and "offset 24" in str(exc.value)


@pytest.mark.parametrize("assignment, key", [
    ("kernel.ref=--output=x", "kernel.ref"),
    ("kernel.ref=''", "kernel.ref"),
    ("kernel.tree=-x", "kernel.tree"),
    ("kernel.tree=--upload-pack=touch x", "kernel.tree"),
    ("kernel.debian_package=-x", "kernel.debian_package"),
    ("kernel.debian_package='linux source'", "kernel.debian_package"),
    ("kernel.debian_package=Linux-Source-7.2", "kernel.debian_package"),
    ("kernel.debian_package=linux-source-7.*/x", "kernel.debian_package"),
    ("kernel.debian_version=-1", "kernel.debian_version"),
    ("kernel.debian_version=''", "kernel.debian_version"),
    ("kernel.debian_version='7.2 *'", "kernel.debian_version"),
    ("kernel.debian_suites=[]", "kernel.debian_suites"),
    ("kernel.debian_suites=[sid, -x]", "kernel.debian_suites[1]"),
    ("kernel.debian_suites=['sid main contrib']", "kernel.debian_suites[0]"),
    ("kernel.debian_suites=[\"sid\\ndeb x y\"]", "kernel.debian_suites[0]"),
])
def test_kernel_values_given_to_git_and_apt_are_refused_naming_the_key(tmp_path, assignment,
                                                                        key):
    path = write(tmp_path, "name: x\n")
    with pytest.raises(PlanError) as exc:
        plan_mod.load(path, [assignment])
    assert exc.value.exit_code == EXIT_BAD_INPUT
    assert f"{path}: {key}:" in str(exc.value)


@pytest.mark.parametrize("assignment", [
    "kernel.ref=v7.2-rc1", "kernel.ref=origin/for-next", "kernel.ref=HEAD~3",
    "kernel.tree=~/src/linux-next", "kernel.tree=../linux",
    "kernel.debian_version=1:7.2.13-1~bpo13+1", "kernel.debian_version=7.[23].*",
    "kernel.debian_package=linux-source-7.*", "kernel.debian_package=linux-source-7.[23]",
    "kernel.debian_suites=[trixie-backports, sid]",
])
def test_ordinary_refs_trees_and_debian_versions_are_accepted(tmp_path, assignment):
    plan_mod.load(write(tmp_path, "name: x\n"), [assignment])


def test_a_glob_value_that_yaml_reads_as_an_alias_says_how_to_quote_it(tmp_path):
    with pytest.raises(PlanError) as exc:
        plan_mod.load(write(tmp_path, "name: x\n"), ["kernel.debian_version=*"])
    assert exc.value.exit_code == EXIT_BAD_INPUT
    assert "quote it, e.g. --set \"kernel.debian_version='*'\"" in str(exc.value)
    plan = plan_mod.load(write(tmp_path, "name: x\n"), ["kernel.debian_version='*'"])
    assert plan.kernel.debian_version == "*"
