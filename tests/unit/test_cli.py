"""Bad input ends a run with exit 2 and a message naming the culprit: from the
command line (cli.main) and from preflight (pipeline/request.py), before
anything is downloaded or built and before a run directory exists."""
import contextlib
import io
import json

import pytest
from rich.console import Console

from harness.plan import plan as plan_mod
from harness.image import image
from harness.pipeline import stages as pipeline, resolve
from harness.cache import Cache
from harness.cli.main import main
from harness.errors import EXIT_BAD_INPUT
from tests.runs import error_run, run_plan

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
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))   # the default --runs-dir


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


# --- preflight problems: refused before a run directory exists ----------------------

def refused_run(tmp_path, overrides):
    """`harness run` of the unit plan with --set overrides: (exit code, the
    runs directory, what it printed)."""
    runs = tmp_path / "runs"
    argv = ["run", str(plan_file(tmp_path)), "--runs-dir", str(runs),
            "--cache-dir", str(tmp_path / "cache")]
    for override in overrides:
        argv += ["--set", override]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, runs, " ".join(out.getvalue().split())


def assert_refused(code, runs, out, *words):
    """Exit 2, the words in the message, and nothing left behind: no run
    directory, no history entry, no junit.xml (input refused before the run)."""
    assert code == EXIT_BAD_INPUT, out
    for word in words:
        assert word in out, out
    left = sorted(p.name for p in runs.iterdir()) if runs.exists() else []
    assert left == [], f"a refused run left {left} in {runs}"


def test_unknown_kconfig_fragment_stops_the_run(tmp_path):
    code, runs, out = refused_run(tmp_path, ["kconfig.fragments=[virt-guest, rdma-typo]"])
    assert_refused(code, runs, out, "'rdma-typo' not found")
    assert "rdma" in out.split("known:")[1]
    assert not (tmp_path / "cache" / "apt").exists()


def test_unknown_suite_stops_the_run(tmp_path):
    code, runs, out = refused_run(tmp_path, ["suites=[modules, verbs-smok]"])
    assert_refused(code, runs, out, "unknown suite(s) verbs-smok", str(tmp_path / "plan.yaml"))
    assert "verbs-smoke" in out.split("known:")[1]


def test_unknown_image_recipe_stops_the_run(tmp_path):
    assert_refused(*refused_run(tmp_path, ["image=trixie-rdmaa"]), "trixie-rdmaa")


def test_git_source_that_is_not_a_kernel_tree_stops_the_run(tmp_path):
    other = tmp_path / "not-linux"
    other.mkdir()
    assert_refused(*refused_run(tmp_path, [f"kernel.tree={other}"]), str(other),
                   "not a Linux kernel tree")


def test_refused_input_leaves_no_run_behind_and_compare_finds_no_previous_run(tmp_path,
                                                                              capsys):
    """Before, `harness run --tree /nonexistent` (or an unknown suite or
    machine) exited 2 but left a run directory, a history entry and a
    junit.xml with 0 tests, which `harness compare` then took as the
    previous run."""
    for sets in (["suites=[nosuch]"], ["vm.machine=nosuchmachine"]):
        code, runs, out = refused_run(tmp_path, sets)
        assert_refused(code, runs, out, sets[0].split("=")[1].strip("[]"))
    runs = tmp_path / "runs"
    code = main(["run", str(plan_file(tmp_path)), "--tree", str(tmp_path / "nonexistent"),
                 "--runs-dir", str(runs), "--cache-dir", str(tmp_path / "cache")])
    out = capsys.readouterr().out
    assert_refused(code, runs, " ".join(out.split()), "nonexistent")


def test_systemd_init_needs_an_image_with_systemd(tmp_path):
    assert_refused(*refused_run(tmp_path, ["vm.init=systemd"]), "vm.init=systemd",
                   "systemd-sysv", "trixie-rdma-systemd")


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
    out_file = io.StringIO()
    result = run_plan(plan_mod.load(plan_file(tmp_path)), tmp_path / "runs",
                      Cache(tmp_path / "cache"), Console(file=out_file, width=400))
    run_dir, out = tmp_path / "runs" / result.run_id, out_file.getvalue()
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
    out_file = io.StringIO()
    result = error_run(plan_mod.load(plan_file(tmp_path)), tmp_path / "runs",
                       Cache(tmp_path / "cache"),
                       Console(file=out_file, width=400, highlight=False))
    out = out_file.getvalue()
    data = json.loads((tmp_path / "runs" / result.run_id / "results.json").read_text())
    assert data["exit_code"] == EXIT_BAD_INPUT and data["verdict"] == "error"
    assert (tmp_path / "runs" / result.run_id / "junit.xml").exists()
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
    assert_refused(*refused_run(tmp_path, [f"kconfig.base={base}"]), "kconfig.base", base,
                   why, str(tmp_path / "plan.yaml"))


@pytest.mark.parametrize("base", ["tinyconfig", "defconfig", "{tmp}/my.config"])
def test_kconfig_base_that_exists_passes_the_check(tmp_path, base):
    (tmp_path / "my.config").write_text("CONFIG_X=y\n")
    plan = plan_mod.load(plan_file(tmp_path), [f"kconfig.base={base.format(tmp=tmp_path)}"])
    resolve.check_kconfig_base(plan)     # raises on a problem
