"""Option names on the command line: no option is taken by a prefix of its
name (argparse's abbreviations are off in every parser), and the runs per
try are `--repeat N` in every command, the old names hidden but still
working for one release, with a note on stderr."""
from __future__ import annotations

import argparse
import ast
import subprocess
from pathlib import Path

import pytest

from harness.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[2]


def parsers(parser: argparse.ArgumentParser, path: str = "harness"):
    """Every parser of the command line: the top one and each subcommand's."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, f"{path} {name}")


def test_a_prefix_of_an_option_is_refused_not_guessed(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--suite", "verbs"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --suite" in capsys.readouterr().err
    # the whole name still works
    args = build_parser().parse_args(["run", "--suites", "verbs", "--repeat", "2"])
    assert (args.suites, args.repeat) == ("verbs", 2)


def test_no_parser_of_the_command_line_takes_abbreviations():
    found = dict(parsers(build_parser()))
    assert {"harness run", "harness series check", "harness bisect"} <= set(found)
    assert [name for name, parser in found.items() if parser.allow_abbrev] == []


def sources() -> list[Path]:
    """The project's Python files under harness/, bench/ and scripts/ (git's
    tracked ones when this is a checkout: a file still being written is
    judged once it is committed)."""
    dirs = ("harness", "bench", "scripts")
    if (REPO / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "-z", "--", *dirs], cwd=REPO,
                                capture_output=True, check=True).stdout.decode()
        return [REPO / name for name in listed.split("\0") if name.endswith(".py")]
    return [path for d in dirs for path in (REPO / d).rglob("*.py")]


def test_every_argument_parser_in_the_source_refuses_abbreviations():
    """The helper scripts too (bench/, python -m harness.detect, the guest's
    pyverbs runner): an ArgumentParser(...) call says allow_abbrev=False."""
    bad = []
    paths = sources()
    assert REPO / "harness" / "detect" / "__main__.py" in paths
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name != "ArgumentParser":
                continue
            off = [k for k in node.keywords if k.arg == "allow_abbrev"
                   and isinstance(k.value, ast.Constant) and k.value.value is False]
            if not off:
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert bad == []


# command, the one name, where it lands, the old name
RENAMED = [
    (["bisect", "--series", "a", "--test", "x"], "repeat", "--runs-per-step"),
    (["reproduce", "runs/r"], "repeat", "--attempts"),
    (["nightly", "plans/nightly.yaml"], "bisect_repeat", "--bisect-repeat"),
]


@pytest.mark.parametrize("argv, dest, old", RENAMED)
def test_runs_per_try_are_repeat_everywhere_the_old_name_hidden_and_noted(
        capsys, argv, dest, old):
    parse = build_parser().parse_args
    assert getattr(parse([*argv, "--repeat", "4"]), dest) == 4
    assert capsys.readouterr().err == ""
    assert getattr(parse([*argv, old, "5"]), dest) == 5
    note = capsys.readouterr().err
    assert note.count("\n") == 1 and f"{old} is deprecated" in note and "use --repeat" in note
    help_text = dict(parsers(build_parser()))[f"harness {argv[0]}"].format_help()
    assert "--repeat N" in help_text and old not in help_text


def test_run_has_repeat_and_no_other_name_for_it():
    help_text = dict(parsers(build_parser()))["harness run"].format_help()
    assert "--repeat N" in help_text
    for old in ("--attempts", "--runs-per-step", "--bisect-repeat"):
        assert old not in help_text
