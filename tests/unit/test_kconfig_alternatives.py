"""A fragment line with "# or:" names: one option under the names it had in
different kernel versions; the first the tree defines is set, and the
fragment merge_config.sh gets says that name."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.kconfig.fragments import (choose, effective_requests, parse_fragment,
                                       write_chosen)

TEXT = """\
# /proc and /proc/sys for the guest's init
CONFIG_PROC_FS=y
# or: CONFIG_SYSCTL (7.3 renamed it)
CONFIG_PROC_SYSCTL=y
CONFIG_SYSFS=y
"""


def fragment(tmp_path: Path, text: str = TEXT) -> Path:
    path = tmp_path / "guest.config"
    path.write_text(text)
    return path


def test_an_or_line_names_alternatives_of_the_setting_below_it_only(tmp_path):
    requests = {r.symbol: r for r in parse_fragment(fragment(tmp_path))}
    assert requests["PROC_SYSCTL"].alternatives == ("SYSCTL",)
    assert requests["PROC_SYSCTL"].names == ("PROC_SYSCTL", "SYSCTL")
    assert requests["PROC_FS"].alternatives == requests["SYSFS"].alternatives == ()
    # the "# or:" line is no part of the group's why
    assert requests["PROC_SYSCTL"].why == "/proc and /proc/sys for the guest's init"


@pytest.mark.parametrize("defines, chosen", [
    ({"PROC_FS", "PROC_SYSCTL", "SYSCTL", "SYSFS"}, "PROC_SYSCTL"),   # 7.2: its own name
    ({"PROC_FS", "SYSCTL", "SYSFS"}, "SYSCTL"),                       # 7.3: the alternative
    ({"PROC_FS", "SYSFS"}, "PROC_SYSCTL"),          # neither: as written, for the unknown check
])
def test_the_first_name_the_tree_defines_is_chosen(tmp_path, defines, chosen):
    requests = choose(parse_fragment(fragment(tmp_path)), defines.__contains__)
    (request,) = [r for r in requests if r.line == 4]
    assert request.symbol == chosen
    assert request.named == ("PROC_SYSCTL" if chosen != "PROC_SYSCTL" else "")
    assert request.where == "guest.config:4"


def test_the_fragment_merged_names_the_chosen_symbol_and_keeps_the_rest(tmp_path):
    source = fragment(tmp_path)
    requests = effective_requests([source], {"PROC_FS", "SYSCTL", "SYSFS"}.__contains__)
    written = write_chosen(source, requests)
    assert written == TEXT.replace("CONFIG_PROC_SYSCTL=y", "CONFIG_SYSCTL=y")


def test_two_lines_that_become_one_symbol_conflict_as_written_lines_do(tmp_path):
    source = fragment(tmp_path, TEXT + "\n# sysctl off\n# CONFIG_SYSCTL is not set\n")
    with pytest.raises(ConfigError) as info:
        effective_requests([source], {"PROC_FS", "SYSCTL", "SYSFS"}.__contains__)
    assert "guest.config:8: CONFIG_SYSCTL=n conflicts with CONFIG_SYSCTL=y" in str(info.value)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("text, line, words", [
    ("# or: CONFIG_SYSCTL\n\nCONFIG_PROC_SYSCTL=y\n", 1, "just above the setting"),
    ("# or: CONFIG_SYSCTL\n# why\nCONFIG_PROC_SYSCTL=y\n", 1, "just above the setting"),
    ("# or: sysctl\nCONFIG_PROC_SYSCTL=y\n", 1, "names no symbol"),
])
def test_an_or_line_that_names_nothing_or_stands_apart_is_bad_input(tmp_path, text, line, words):
    path = fragment(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        parse_fragment(path)
    assert f"{path}:{line}:" in str(info.value) and words in str(info.value)
    assert info.value.exit_code == 2
