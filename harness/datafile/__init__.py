"""The harness's YAML data files, read one way: a file and its kind →
frozen dataclasses, every refusal exit 2 naming the file and the dotted key
path; the same records → a JSON Schema per kind for editors (schema.py).

`loader.py` reads (types, choices and ranges by key path, unknown and
missing keys, `--set a.b=value`); the stages define their kinds (the plan,
the nightly file, an image recipe, suite.yaml, series.yaml, expectations,
modules.yaml) next to their records and keep the checks of meaning (a safe
name, a file that exists) to themselves. Below every stage: it imports only
the root modules (errors, inputs)."""
from __future__ import annotations

from .loader import REQUIRED, Kind, apply_set, convert, load, read, required, to_record

__all__ = ["REQUIRED", "Kind", "apply_set", "convert", "load", "read", "required",
           "to_record"]
