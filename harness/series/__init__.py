"""Series stage: patch series applied with `git am -3` (`AppliedSeries`) and
the per-patch check (which patch a crash points at: results/blame.py).

apply.py  load a series (series.yaml, a directory, an mbox, a message-id) and apply it
check.py  build after every patch: new warnings, checkpatch, .config changes, bisectability
"""
from .apply import (PATCHES_DIR, AppliedPatch, AppliedSeries, PatchFile,  # noqa: F401
                    SeriesSpec, apply, checkout_base, is_message_id, load)
