"""`harness completion bash|zsh`: a shell completion script made from the
command line's own parser (shtab), so that it never lists an option the
harness does not have.

    .venv/bin/harness completion bash > ~/.local/share/bash-completion/completions/harness
    .venv/bin/harness completion zsh > ~/.zfunc/_harness     # fpath+=(~/.zfunc)
"""
from __future__ import annotations

import argparse
from typing import Callable

SHELLS = ("bash", "zsh")


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "completion", help="print a bash or zsh completion script for harness",
        description="Source it, or put it where your shell loads completions from: "
                    "bash: ~/.local/share/bash-completion/completions/harness; zsh: a file "
                    "_harness in a directory of $fpath.")
    parser.add_argument("shell", choices=SHELLS, help="the shell the script is for")


def completion_command(args: argparse.Namespace, build_parser: Callable[[], argparse.ArgumentParser]
                       ) -> int:
    import shtab
    print(shtab.complete(build_parser(), shell=args.shell), end="")
    return 0
