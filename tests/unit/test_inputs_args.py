"""Command-line values refused while argparse reads them (harness/inputs.py:
count, number, duration, arg_type, and dashed_values, which lets a value such
as '-1h' reach its option's type instead of being read as an option)."""
from __future__ import annotations

import argparse
import datetime

import pytest

from harness.errors import PlanError
from harness.inputs import arg_type, count, dashed_values, duration, number


@pytest.mark.parametrize("argv, joined", [
    (["gc", "--older-than", "-1h"], ["gc", "--older-than=-1h"]),
    (["bisect", "--repeat", "-3", "--test", "x"], ["bisect", "--repeat=-3", "--test", "x"]),
    (["compare", "--threshold", "-.5"], ["compare", "--threshold=-.5"]),
    # what is not a dashed value after a long option stays as it is
    (["report", "-o", "-"], ["report", "-o", "-"]),
    (["gc", "--dry-run", "--older-than", "2h"], ["gc", "--dry-run", "--older-than", "2h"]),
    (["x", "--set=a=-1", "-1"], ["x", "--set=a=-1", "-1"]),
    (["ssh", "r", "--", "--n", "-1"], ["ssh", "r", "--", "--n", "-1"]),
    (["x", "--", "-1h"], ["x", "--", "-1h"]),
])
def test_dashed_values_are_joined_to_their_option(argv, joined):
    assert dashed_values(argv) == joined


def test_counts():
    parse = count(1, "runs")
    assert parse("3") == 3 and parse(" 12 ") == 12
    for bad in ("0", "-1", "1.5", "x", "", "1e3"):
        with pytest.raises(argparse.ArgumentTypeError) as error:
            parse(bad)
        assert str(error.value) == f"{bad!r}: a whole number, at least 1 (runs)"


def test_numbers():
    parse = number(0, "percent")
    assert parse("0") == 0.0 and parse("12.5") == 12.5
    for bad in ("-5", "-0.1", "nan", "inf", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError) as error:
            parse(bad)
        assert str(error.value) == f"{bad!r}: a number, 0 or more (percent)"


def test_durations():
    assert duration("90s") == datetime.timedelta(seconds=90)
    assert duration("1d") == datetime.timedelta(days=1)
    for bad in ("-1h", "0s", "2", "2 hours", "1.5h", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="a time span more than 0"):
            duration(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="too long"):
        duration("99999999999999d")


def test_a_check_becomes_an_argparse_type():
    def check(text: str) -> str:
        if text != "ok":
            raise PlanError(f"{text!r}: only 'ok'")
        return text

    parse = arg_type(check)
    assert parse("ok") == "ok" and parse.__name__ == "check"
    with pytest.raises(argparse.ArgumentTypeError, match="'no': only 'ok'"):
        parse("no")


@pytest.mark.parametrize("argv, words", [
    (["gc", "--older-than", "-1h"], "argument --older-than: '-1h': a time span more than 0"),
    (["gc", "--older-than", "0m"], "argument --older-than: '0m': a time span more than 0"),
    (["bisect", "--series", "s", "--test", "x", "--repeat", "-1"],
     "argument --repeat: '-1': a whole number, at least 1 (runs per step)"),
    (["reproduce", "runs/r", "--repeat", "0"],
     "argument --repeat: '0': a whole number, at least 1 (runs)"),
    (["compare", "--threshold", "-5"], "argument --threshold: '-5': a number, 0 or more"),
])
def test_the_command_line_refuses_them_at_parse_time(capsys, argv, words):
    from harness.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert words in capsys.readouterr().err
