"""`run`/`boot --tree DIR [--ref R]`, and a tree of the user's own never gets
the plan file's demo series unless the command line asks for series."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.plan import plan as plan_mod
from harness.errors import PlanError
from harness.pipeline.resolve import command_line_sets


def test_tree_and_ref_are_the_plan_keys_and_the_demo_series_stays_out(tmp_path):
    sets, note = command_line_sets("run", None, [], tmp_path, "my-branch")
    assert f"kernel.tree={json.dumps(str(tmp_path))}" in sets
    assert 'kernel.ref="my-branch"' in sets and "series=[]" in sets
    assert "demo-rxe-counters" in note and "--set series" in note
    plan = plan_mod.load(None, sets)
    assert (plan.kernel.source, plan.kernel.tree, plan.kernel.ref) == \
        ("git", str(tmp_path), "my-branch")
    assert plan.series == ()


def test_set_kernel_tree_is_a_tree_of_your_own_too(tmp_path):
    sets, note = command_line_sets("boot", None, [f"kernel.tree={tmp_path}"], None, None)
    assert sets[-1] == "series=[]" and note


def test_series_asked_for_are_applied(tmp_path):
    sets, note = command_line_sets("run", None, ["series=[demo-rxe-counters]"], tmp_path,
                                   None)
    assert "series=[]" not in sets and not note
    assert plan_mod.load(None, sets).series == ("demo-rxe-counters",)


def test_a_plan_file_that_names_its_tree_keeps_its_series(tmp_path):
    plan = tmp_path / "mine.yaml"
    plan.write_text(f"kernel: {{source: git, tree: {tmp_path}}}\nseries: [demo-rxe-counters]\n")
    assert command_line_sets("run", str(plan), [], None, None) == ([], "")


def test_series_check_is_left_to_its_own_options(tmp_path):
    assert command_line_sets("series", None, ["x=1"], tmp_path, None) == (["x=1"], "")


def test_ref_without_tree_is_refused():
    with pytest.raises(PlanError, match="--ref v7.2: a ref of --tree"):
        command_line_sets("run", None, [], None, "v7.2")


def test_boot_and_reload_offer_no_verdict_options():
    def options(*words):
        return subprocess.run([sys.executable, "-m", "harness", *words, "--help"],
                              capture_output=True, text=True, check=True).stdout
    for command in ("boot", "reload"):
        text = options(command)
        assert "--bisect" not in text and "--repeat" not in text and "--history" in text
    assert "--tree" in options("boot") and "--tree" in options("run")
    assert "--bisect" in options("run") and "--plan" in options("run")


def test_one_list_syntax_and_the_old_spellings_still_parse():
    from harness.cli.main import build_parser
    parse = build_parser().parse_args
    args = parse(["doctor", "--passthrough", "0000:3b:00.0,3c:00.0", "3d:00.0"])
    assert args.passthrough == ["0000:3b:00.0", "3c:00.0", "3d:00.0"]
    args = parse(["doctor", "--uri", "qemu:///system,qemu:///session", "--uri", "test:///default"])
    assert args.uri == ["qemu:///system", "qemu:///session", "test:///default"]
    args = parse(["bisect", "--series", "a,b", "c", "--test", "x"])
    assert args.series == ["a", "b", "c"] and args.repeat is None
    # runs per try is --repeat everywhere; the old names still work (one release)
    assert parse(["bisect", "--series", "a", "--runs-per-step", "4"]).repeat == 4
    assert parse(["bisect", "--series", "a", "--repeat", "4"]).repeat == 4
    assert parse(["reproduce", "r", "--attempts", "5"]).repeat == 5
    assert parse(["reproduce", "r", "--repeat", "5"]).repeat == 5
    assert parse(["reproduce", "r"]).repeat == 2
    # the history index is --history everywhere; --db still works
    assert parse(["history", "--history", "h.sqlite"]).db == Path("h.sqlite")
    assert parse(["history", "--db", "h.sqlite"]).db == Path("h.sqlite")
    assert parse(["history"]).db is None


def test_every_option_of_every_command_says_what_it_does():
    import argparse

    from harness.cli.main import build_parser

    def parsers(parser, prog="harness"):
        yield prog, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from parsers(sub, f"{prog} {name}")
    silent = [f"{prog} {'/'.join(a.option_strings)}"
              for prog, parser in parsers(build_parser()) for a in parser._actions
              if a.option_strings and a.help is None]
    assert not silent, f"options without help: {silent}"
