"""Kconfig stage: base + fragments -> a verified .config (`ConfigReport`: every
requested symbol against its value in .config, and for one that did not stick why and
the fragment lines that fix it).

fragments.py  fragments and .config files as data (requests, conflicts, values)
configure.py  the stage: merge_config.sh + olddefconfig, verify, the results section
explain.py    why a requested symbol did not stick, and the checked, minimal fix lines
walk.py       the walk from a missing symbol down to the symbols a fragment must set
expr.py       Kconfig expressions: rendered as menuconfig does, and what they need
tool.py       the tree's own Kconfig parser as a service (dump.c, linked against it),
              its answers as typed records
cli.py        `harness config check|diff`
"""
from .configure import (BASE_LIMIT, ConfigReport, analyse, check, check_tree, configure,  # noqa: F401
                        explain_text, fix_lines, summary)
from .fragments import (KCONFIG_DIR, Request, diff, effective_requests,  # noqa: F401
                        fragment_path, parse_fragment, read_config, read_pair)
