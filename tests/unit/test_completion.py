"""`harness completion bash|zsh`: scripts made from the parser; bash, loading
the script, completes the commands and a command's options."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest


def script(shell: str) -> str:
    return subprocess.run([sys.executable, "-m", "harness", "completion", shell],
                          capture_output=True, text=True, check=True).stdout


def complete(source: str, words: list[str]) -> list[str]:
    """What bash's completion function offers for the last word."""
    line = " ".join(words)
    program = (f"source {source}\n"
               f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; "
               f"COMP_POINT={len(line)}\n"
               "_shtab_harness harness \"${COMP_WORDS[-1]}\" \"${COMP_WORDS[-2]}\"\n"
               "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    return subprocess.run(["bash", "-c", program], capture_output=True, text=True,
                          check=True).stdout.split()


@pytest.mark.skipif(not shutil.which("bash"), reason="no bash")
def test_bash_completes_commands_and_options(tmp_path):
    path = tmp_path / "harness.bash"
    path.write_text(script("bash"))
    assert {"series", "bisect", "list", "completion"} <= set(complete(str(path), ["harness", ""]))
    assert "--runs-dir" in complete(str(path), ["harness", "bisect", "--ru"])
    # an old option name, hidden for its last release, is not offered
    assert complete(str(path), ["harness", "bisect", "--re"]) == ["--repeat"]
    assert complete(str(path), ["harness", "reproduce", "--at"]) == []
    assert complete(str(path), ["harness", "list", "s"]) == ["suites", "series"]


def test_zsh_script_is_made_from_the_same_parser():
    text = script("zsh")
    assert text.startswith("#compdef harness") and "--runs-dir" in text
    assert "--runs-per-step" not in text and "--attempts" not in text
