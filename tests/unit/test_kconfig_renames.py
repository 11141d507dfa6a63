"""Where a symbol went (harness/kconfig/renames.py), on small git trees
shaped like the kernel's Kconfig: the successor by prompt, by help text,
from the tree's own history or from another tree, and nothing invented."""
from __future__ import annotations

import subprocess
from pathlib import Path

from harness.kconfig.renames import definitions, find_renames

OLD = """\
menu "File systems"
config PROC_FS
\tbool "/proc file system support" if EXPERT
\tdefault y

config PROC_SYSCTL
\tbool "Sysctl support (/proc/sys)" if EXPERT
\tdepends on PROC_FS
\tselect SYSCTL
\tdefault y
\thelp
\t  The sysctl interface provides a means of dynamically changing
\t  certain kernel parameters and variables on the fly without requiring
\t  a recompile of the kernel or reboot of the system.

config SYSCTL_OLDNAME
\tbool "Old knob"
\thelp
\t  Lets the kernel count the frobnications of every widget it drives,
\t  for the statistics file.
endmenu
"""

# the next version: PROC_SYSCTL renamed SYSCTL (same prompt, no select of
# itself), SYSCTL_OLDNAME renamed WIDGET_STATS with a new prompt and its help
# text wrapped anew
NEW = (OLD.replace("config PROC_SYSCTL", "config SYSCTL").replace("\tselect SYSCTL\n", "")
       .replace('config SYSCTL_OLDNAME\n\tbool "Old knob"',
                'config WIDGET_STATS\n\tbool "Widget statistics"')
       .replace("widget it drives,\n\t  for", "widget it\n\t  drives, for"))


def git_tree(path: Path, *versions: str) -> Path:
    """A git tree whose fs/Kconfig went through `versions`, a commit each."""
    path.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(path), *a], check=True,  # noqa: E731
                                    capture_output=True)
    run("init", "-q")
    (path / "fs").mkdir()
    for i, text in enumerate(versions):
        (path / "fs" / "Kconfig").write_text(text)
        run("add", "-A")
        run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"v{i}")
    return path


def test_a_definition_is_read_with_its_prompt_and_help(tmp_path):
    (old,) = definitions(git_tree(tmp_path / "old", OLD), "PROC_SYSCTL")
    assert old.at == "fs/Kconfig:6" and old.prompt == "Sysctl support (/proc/sys)"
    assert old.help.startswith("The sysctl interface provides") and old.help.endswith("system.")


def test_the_successor_has_the_prompt_found_in_another_tree(tmp_path):
    old, new = git_tree(tmp_path / "old", OLD), git_tree(tmp_path / "new", NEW)
    (rename,) = find_renames(new, ["PROC_SYSCTL"], [old], lambda name: True)
    assert (rename.successor, rename.how) == ("SYSCTL", "prompt")
    assert rename.old_at == "fs/Kconfig:6" and rename.new_at == "fs/Kconfig:6"
    assert rename.sentence("7.3.4").startswith(
        "PROC_SYSCTL is not defined in 7.3.4; SYSCTL has its prompt 'Sysctl support "
        "(/proc/sys)'")
    assert "use CONFIG_SYSCTL" in rename.sentence()


def test_the_tree_s_own_history_says_where_it_was(tmp_path):
    tree = git_tree(tmp_path / "tree", OLD, NEW)
    (rename,) = find_renames(tree, ["PROC_SYSCTL"], [], lambda name: True)
    assert rename.successor == "SYSCTL" and rename.old_at.endswith("^:fs/Kconfig:6")


def test_a_new_prompt_with_the_same_help_text_is_found_by_the_help(tmp_path):
    old, new = git_tree(tmp_path / "old", OLD), git_tree(tmp_path / "new", NEW)
    (rename,) = find_renames(new, ["SYSCTL_OLDNAME"], [old], lambda name: True)
    assert (rename.successor, rename.how) == ("WIDGET_STATS", "help")


def test_nothing_is_invented(tmp_path):
    old, new = git_tree(tmp_path / "old", OLD), git_tree(tmp_path / "new", NEW)
    # unknown everywhere: a typo
    assert find_renames(new, ["PROC_SYSCLT"], [old], lambda name: True) == []
    # the parser of this tree does not define the candidate (another arch's file)
    assert find_renames(new, ["PROC_SYSCTL"], [old], lambda name: name != "SYSCTL") == []
