"""Series stage: patch series applied with `git am -3` (`AppliedSeries`), the
per-patch check, and which patch a crash points at.

apply.py  load a series (series.yaml, a directory, an mbox, a message-id) and apply it
check.py  build after every patch: new warnings, checkpatch, .config changes, bisectability
blame.py  the patch a crash report most likely comes from, with the evidence
"""
from .apply import (PATCHES_DIR, AppliedPatch, AppliedSeries, PatchFile,  # noqa: F401
                    SeriesSpec, apply, checkout_base, is_message_id, load)
