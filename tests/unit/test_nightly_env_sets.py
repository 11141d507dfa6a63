"""$HARNESS_SET applies to every job of a night: `harness nightly` checks it
against the jobs' plans before anything else, `--list` included, as `harness
run` does — a typo is exit 2 naming the variable and the key."""
from __future__ import annotations

from harness.cli.main import main


def nightly(tmp_path, *extra: str) -> list[str]:
    config = tmp_path / "nightly.yaml"
    config.write_text(f"name: n\nplans: [quickstart]\nsources:\n"
                      f"  - {{name: deb, debian_package: linux-source-7.2}}\n"
                      f"  - {{name: tree, git: {tmp_path}, bisect: true}}\n")
    return ["nightly", str(config), "--runs-dir", str(tmp_path / "runs"), *extra]


def test_an_unknown_key_in_harness_set_is_refused_by_list(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_SET", "vm.accel=tcg vm.acel=kvm")
    assert main(nightly(tmp_path, "--list")) == 2
    out = capsys.readouterr().out
    assert "$HARNESS_SET" in out and "unknown key 'vm.acel'" in out
    assert not (tmp_path / "runs").exists()


def test_a_value_the_plan_refuses_is_refused_before_the_night(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_SET", "vm.memory_mb=99999999")
    assert main(nightly(tmp_path)) == 2
    out = capsys.readouterr().out
    assert "$HARNESS_SET" in out and "vm.memory_mb" in out
    assert not (tmp_path / "runs").exists()


def test_known_keys_list_the_jobs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_SET", "vm.accel=tcg")
    assert main(nightly(tmp_path, "--list")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1:] for line in lines] == [["deb", "quickstart"],
                                                    ["tree", "quickstart"]]
    assert not any(line.endswith(" ") for line in lines)
