"""bootstrap.sh as an ordinary user with sudo, run in a copy of the tree
with stand-ins for what it must not really do (sudo, apt, pip, Sphinx; `id`
and `getent` for a user "ann" outside the kvm group): it adds the user to the
kvm group once and says a new login is needed, installs the bash completion
and the man page under ~/.local/share, and on a second run rebuilds and
reinstalls nothing."""
from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bootstrap.sh"


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)


@pytest.fixture
def tree(tmp_path):
    root, fake, log = tmp_path / "repo", tmp_path / "bin", tmp_path / "log"
    log.write_text("")
    (root / "docs").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "bootstrap.sh")
    for name in ("harness.md", "conf.py"):
        (root / "docs" / name).write_text("")
    executable(root / ".venv" / "bin" / "python", "exit 0\n")
    executable(root / ".venv" / "bin" / "pip", f"echo pip \"$@\" >> {log}\n")
    # the real completion script, from this checkout's parser
    executable(root / ".venv" / "bin" / "harness",
               f"PYTHONPATH={REPO} exec {sys.executable} -m harness \"$@\"\n")
    pins = re.search(r'^DOCS_PINS="(.*)"$', SCRIPT.read_text(), re.M).group(1)
    (root / ".venv" / "docs").mkdir()
    (root / ".venv" / "docs" / "pins").write_text(pins + "\n")
    executable(root / ".venv" / "docs" / "bin" / "sphinx-build",
               f"echo sphinx-build \"$@\" >> {log}\nmkdir -p docs/_build/man\n"
               "echo '.TH \"HARNESS\" \"1\"' > docs/_build/man/harness.1\n")
    executable(root / "scripts" / "services.sh", "exit 0\n")
    # ann: in the kvm group once sudo usermod put her there, never in this login
    executable(fake / "id", f"""case "$*" in
  -u) echo 1000 ;;
  -un) echo ann ;;
  "-nG ann") if grep -q usermod {log}; then echo ann kvm; else echo ann; fi ;;
  -nG) echo ann ;;
  *) exit 1 ;;
esac
""")
    executable(fake / "sudo", f"echo sudo \"$@\" >> {log}\n")
    executable(fake / "getent", '[ "$*" = "group kvm" ] && echo kvm:x:994:\n')
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(home), "USER": "ann",
           "LANG": "C.UTF-8"}
    return root, home, log, env


def run(root: Path, env: dict[str, str]) -> str:
    done = subprocess.run(["sh", "./bootstrap.sh"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.skipif(not os.path.exists("/dev/kvm"), reason="no /dev/kvm: no kvm step")
def test_a_user_outside_the_kvm_group_is_added_once(tree):
    root, _, log, env = tree
    said = run(root, env)
    assert "sudo usermod -aG kvm ann" in log.read_text().splitlines()
    assert "added ann to the kvm group" in said and "log in again" in said
    said = run(root, env)
    assert log.read_text().count("usermod") == 1
    assert "ann is in the kvm group but this login began before" in said


def test_completion_and_man_page_under_local_share_and_nothing_twice(tree):
    root, home, log, env = tree
    said = run(root, env)
    assert "sudo ./bootstrap.sh --system" in log.read_text().splitlines()
    completion = home / ".local/share/bash-completion/completions/harness"
    page = home / ".local/share/man/man1/harness.1"
    assert "_shtab_harness" in completion.read_text()
    assert page.read_text() == (root / "docs/_build/man/harness.1").read_text()
    assert f"installed {completion}" in said and f"installed {page}" in said
    assert log.read_text().count("sphinx-build -q -b man docs docs/_build/man") == 1
    # up to date: nothing built, nothing installed again
    said = run(root, env)
    assert "installed" not in said
    assert log.read_text().count("sphinx-build") == 1
    # the page's source changed: built and installed again
    os.utime(root / "docs/harness.md", (2e9, 2e9))
    (root / ".venv/docs/bin/sphinx-build").write_text(
        (root / ".venv/docs/bin/sphinx-build").read_text().replace("HARNESS", "HARNESS2"))
    said = run(root, env)
    assert log.read_text().count("sphinx-build") == 2 and "HARNESS2" in page.read_text()


def test_the_completion_dir_follows_xdg_data_home(tree, tmp_path):
    root, home, _, env = tree
    run(root, {**env, "XDG_DATA_HOME": str(tmp_path / "data")})
    assert (tmp_path / "data/bash-completion/completions/harness").is_file()
    assert (home / ".local/share/man/man1/harness.1").is_file()     # man-db's place


def test_the_script_parses_and_its_pins_and_places_are_the_documented_ones():
    for shell in ("sh", "dash", "bash"):
        if shutil.which(shell):
            subprocess.run([shell, "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    pins = re.search(r'^DOCS_PINS="(.*)"$', text, re.M).group(1)
    assert pins.split() == tox["testenv:docs"]["deps"].split()
    # root's places, and where `harness completion --help` tells a user to put it
    assert "man_dir=/usr/local/share/man/man1" in text
    assert "completion_dir=/usr/local/share/bash-completion/completions" in text
    from harness.cli import completion
    assert "~/.local/share/bash-completion/completions/harness" in completion.__doc__
    assert "$HOME/.local/share}/bash-completion}/completions" in text
