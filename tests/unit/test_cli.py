"""Bad input ends a run with exit 2 and a message naming the culprit: from the
command line (cli.main) and from the runner's preflight (runner.run), before
anything is downloaded or built."""
import io
import json

import pytest
from rich.console import Console

from harness.plan import plan as plan_mod
from harness.image import image
from harness.pipeline import stages as pipeline, resolve, runner
from harness.cache import Cache
from harness.cli.main import main
from harness.errors import EXIT_BAD_INPUT

GOOD_PLAN = """\
name: unit
kernel:
  source: debian
  debian_package: linux-source-7.2
kconfig:
  base: tinyconfig
  fragments: [virt-guest, rdma]
image: trixie-rdma
suites: [modules]
"""


def forbid_stages(monkeypatch) -> None:
    """No stage past preflight may run: they download, build and boot."""
    def forbidden(*args, **kwargs):
        pytest.fail("a pipeline stage ran although preflight should have stopped the run")

    for module, name in ((pipeline.source, "prepare"), (pipeline.kconfig, "configure"),
                         (pipeline.build, "build"), (pipeline.image, "build_image")):
        monkeypatch.setattr(module, name, forbidden)


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    forbid_stages(monkeypatch)
    monkeypatch.setenv("COLUMNS", "400")     # rich wraps at 80 columns otherwise
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)              # the default --runs-dir is ./runs


def plan_file(tmp_path, text=GOOD_PLAN, name="plan.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# --- cli.main: plan problems ---------------------------------------------------

def test_missing_plan_file(tmp_path, capsys):
    missing = tmp_path / "plans" / "nightly.yaml"
    assert main(["run", str(missing)]) == EXIT_BAD_INPUT
    out = capsys.readouterr().out
    assert f"{missing}: plan file not found" in out
    assert not (tmp_path / "runs").exists()


def test_malformed_yaml_names_file_and_line(tmp_path, capsys):
    path = plan_file(tmp_path, "name: unit\nvm:\n  nodes: 2\n   accel: tcg\n")
    assert main(["run", str(path)]) == EXIT_BAD_INPUT
    out = capsys.readouterr().out
    assert f"{path}:4: malformed YAML" in out
    assert not (tmp_path / "runs").exists()


def test_unknown_set_key_is_named(tmp_path, capsys):
    path = plan_file(tmp_path)
    assert main(["run", str(path), "--set", "vm.acel=tcg"]) == EXIT_BAD_INPUT
    out = capsys.readouterr().out
    assert "unknown key 'vm.acel'" in out
    assert "accel" in out.split("known here:")[1]
    assert str(path) in out


def test_bad_set_value_is_shown_as_typed(tmp_path, capsys):
    # the message is text, not rich markup: brackets must survive
    path = plan_file(tmp_path)
    assert main(["run", str(path), "--set", "suites=[modules"]) == EXIT_BAD_INPUT
    out = capsys.readouterr().out
    assert "--set suites: value '[modules' is not valid YAML" in out
    assert "expected ',' or ']', but got '<stream end>'" in out


def test_plan_path_with_brackets_is_shown_as_is(tmp_path, capsys):
    missing = tmp_path / "[/wip]" / "plan.yaml"
    assert main(["run", str(missing)]) == EXIT_BAD_INPUT
    assert f"{missing}: plan file not found" in capsys.readouterr().out


# --- runner.run: preflight problems --------------------------------------------

def run_plan(tmp_path, overrides):
    plan = plan_mod.load(plan_file(tmp_path), overrides)
    out = io.StringIO()
    result = runner.run(plan, tmp_path / "runs", Cache(tmp_path / "cache"),
                        Console(file=out, width=400, highlight=False))
    run_dir = tmp_path / "runs" / result.run_id
    return result, run_dir, out.getvalue()


def assert_error_run(result, run_dir, *words):
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.verdict == "error"
    data = json.loads((run_dir / "results.json").read_text())
    assert data["verdict"] == "error" and data["exit_code"] == EXIT_BAD_INPUT
    assert data["stages"] == []          # stopped before the first stage
    for word in words:
        assert word in data["error"], data["error"]
    assert (run_dir / "junit.xml").exists()
    assert (run_dir / "plan.yaml").exists()
    return data


def test_unknown_kconfig_fragment_stops_the_run(tmp_path):
    result, run_dir, out = run_plan(tmp_path, ["kconfig.fragments=[virt-guest, rdma-typo]"])
    data = assert_error_run(result, run_dir, "kconfig", "'rdma-typo' not found")
    assert "rdma" in data["error"].split("known:")[1]
    assert "rdma-typo" in out and "verdict: error" in out
    assert not (tmp_path / "cache" / "apt").exists()
    # the run directory is said first: where logs/make.log is during a long build
    assert out.splitlines()[0].strip() == f"run {result.run_id}: {run_dir}"


def test_unknown_suite_stops_the_run(tmp_path):
    result, run_dir, out = run_plan(tmp_path, ["suites=[modules, verbs-smok]"])
    data = assert_error_run(result, run_dir, "plan:", "unknown suite(s) verbs-smok")
    assert "verbs-smoke" in data["error"].split("known:")[1]
    assert str(tmp_path / "plan.yaml") in data["error"]


def test_unknown_image_recipe_stops_the_run(tmp_path):
    result, run_dir, _ = run_plan(tmp_path, ["image=trixie-rdmaa"])
    assert_error_run(result, run_dir, "trixie-rdmaa")


def test_git_source_that_is_not_a_kernel_tree_stops_the_run(tmp_path):
    other = tmp_path / "not-linux"
    other.mkdir()
    result, run_dir, _ = run_plan(tmp_path, [f"kernel.tree={other}"])
    assert_error_run(result, run_dir, "source:", str(other), "not a Linux kernel tree")


def test_cli_run_with_an_unknown_suite_exits_2_and_leaves_a_run_directory(tmp_path, capsys):
    path = plan_file(tmp_path)
    code = main(["run", str(path), "--set", "suites=[nosuch]", "--runs-dir",
                 str(tmp_path / "my-runs"), "--cache-dir", str(tmp_path / "cache")])
    assert code == EXIT_BAD_INPUT
    assert "unknown suite(s) nosuch" in capsys.readouterr().out
    (run_dir,) = [p for p in (tmp_path / "my-runs").iterdir() if p.is_dir()]
    assert json.loads((run_dir / "results.json").read_text())["verdict"] == "error"


def test_systemd_init_needs_an_image_with_systemd(tmp_path):
    result, run_dir, _ = run_plan(tmp_path, ["vm.init=systemd"])
    assert_error_run(result, run_dir, "vm.init=systemd", "systemd-sysv",
                     "trixie-rdma-systemd")


def test_systemd_image_recipe_passes_preflight(tmp_path):
    plan = plan_mod.load(None, ["vm.init=systemd", "image=trixie-rdma-systemd"])
    resolved = resolve.preflight(plan, tmp_path)       # raises on a problem
    assert "systemd-sysv" in resolved.recipe.packages
    assert resolved.recipe == image.load_recipe(plan.image)
    assert [s.name for s in resolved.series if s] == list(plan.series)


def test_an_unexpected_exception_is_an_infrastructure_error_with_a_traceback(tmp_path,
                                                                              monkeypatch):
    def broken(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/cache/apt/.lock")

    monkeypatch.setattr(pipeline.source, "prepare", broken)
    result, run_dir, out = run_plan(tmp_path, [])
    assert result.exit_code == 3 and result.verdict == "error"
    data = json.loads((run_dir / "results.json").read_text())
    assert data["error"].startswith("harness internal error: PermissionError")
    assert data["stages"][0]["name"] == "source" and data["stages"][0]["status"] == "error"
    assert "Traceback" in (run_dir / "logs" / "traceback.txt").read_text()
    assert "verdict: error" in out


def test_the_suites_a_series_brings_leave_with_it(tmp_path):
    """The quickstart's demo series brings rxe-counters (its series.yaml);
    another series, or --set suites, does not get our demo's counters check
    (which failed every series but the demo)."""
    def run_plan(overrides: list[str]) -> plan_mod.Plan:
        plan = plan_mod.load(None, overrides)
        read = resolve.read_series(plan.series, tmp_path)
        return resolve.plan_for(plan, resolve.Choices("run", tuple(overrides)), read)

    quick = plan_mod.load(None)
    assert "rxe-counters" not in quick.suites
    assert run_plan([]).suites == ("modules", "verbs-smoke", "rxe-counters")
    assert run_plan(["series=[demo-broken]"]).suites == ("modules", "verbs-smoke")
    assert run_plan(["suites=[modules]"]).suites == ("modules",)
    assert run_plan(["series=[]"]) == plan_mod.load(None, ["series=[]"])


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_during_clean_up_does_not_cost_the_results(tmp_path, monkeypatch, signame):
    """A second Ctrl-C (or a SIGTERM, or the terminal going away) while the
    run writes its directory is noted, not obeyed: results.json and junit.xml
    are written. Before, the interrupt aborted the clean-up: only plan.yaml."""
    import os
    import signal

    from harness.results import baseline
    real = baseline.compare_run

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, signame))    # delivered here, in _finish
        return real(*args, **kwargs)

    monkeypatch.setattr(baseline, "compare_run", signalled)
    # what the caller had (a job started with `&` inherits SIGINT ignored)
    before = signal.getsignal(signal.SIGINT)
    result, run_dir, out = run_plan(tmp_path, ["suites=[nosuch]"])
    assert_error_run(result, run_dir, "nosuch")
    assert f"{signame} during clean-up: writing the run directory first" in out
    assert signal.getsignal(signal.SIGINT) is before     # the harness's handler is gone


# --- runner.run: kconfig.base as a path ------------------------------------------

@pytest.mark.parametrize("base, why", [
    ("/nonexistent/.config", "does not exist"),
    ("{tmp}", "is a directory"),
    ("{tmp}/missing.config", "does not exist"),
])
def test_kconfig_base_path_that_is_not_a_readable_file_stops_the_run(tmp_path, base, why):
    base = base.format(tmp=tmp_path)
    result, run_dir, _ = run_plan(tmp_path, [f"kconfig.base={base}"])
    assert_error_run(result, run_dir, "plan:", "kconfig.base", base, why,
                     str(tmp_path / "plan.yaml"))


@pytest.mark.parametrize("base", ["tinyconfig", "defconfig", "{tmp}/my.config"])
def test_kconfig_base_that_exists_passes_the_check(tmp_path, base):
    (tmp_path / "my.config").write_text("CONFIG_X=y\n")
    plan = plan_mod.load(plan_file(tmp_path), [f"kconfig.base={base.format(tmp=tmp_path)}"])
    resolve.check_kconfig_base(plan)     # raises on a problem
