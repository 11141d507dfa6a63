"""The Kconfig parser's answers, captured from a real tree and replayed.

tests/data/kconfig/capture.py runs each scenario (a fragment on a base config)
through the real stage with a `Recording` between the dump process and the
KconfigDB; the unit tests run the same scenarios with a `Replay` of what was
recorded, so the explainer, its verification and its minimisation all see the
real 7.2 Kconfig without a kernel tree.

A state is what the parser was asked to `read`: the base .config, then
OVERLAY, then fragment and fix lines. It is keyed by the values set below
OVERLAY, so a replayed read (no base text above OVERLAY) finds the answers
recorded for the real one, and a read the capture never saw fails loudly.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.kconfig.configure import ConfigReport, _report, analyse_with, check
from harness.kconfig.fragments import parse_config, parse_fragment
from harness.kconfig.tool import Channel, KconfigDB

DATA = Path(__file__).resolve().parent.parent / "data" / "kconfig"
OVERLAY = "# harness kconfig capture: the base is above this line, the requests below\n"


def state_key(config: Path) -> str:
    """The values set below OVERLAY, sorted: "A=y B=m" ("" for the base alone)."""
    overlay = Path(config).read_text(errors="replace").split(OVERLAY, 1)[-1]
    return " ".join(f"{s}={v}" for s, v in sorted(parse_config(overlay).items()))


class Recording:
    """A channel that passes every question on and keeps the answers, per
    state: {key: {"sym": {NAME: answer}, "selectors": {NAME: answer}}}."""

    def __init__(self, channel: Channel):
        self.channel = channel
        self.states: dict[str, dict[str, dict[str, Any]]] = {}
        self._state: dict[str, dict[str, Any]] = {}

    def ask(self, command: str) -> Any:
        answer = self.channel.ask(command)
        verb, _, arg = command.partition(" ")
        if verb == "read":
            self._state = self.states.setdefault(state_key(Path(arg)),
                                                 {"sym": {}, "selectors": {}})
        else:
            self._state[verb][arg] = answer
        return answer

    def close(self) -> None:
        self.channel.close()


class NotCaptured(LookupError):
    pass


class Replay:
    """A channel answering from a captured file (tests/data/kconfig/*.json)."""

    def __init__(self, data: dict):
        self.data = data
        self._state: dict[str, dict[str, Any]] = {}
        self._key = ""

    def ask(self, command: str) -> Any:
        verb, _, arg = command.partition(" ")
        if verb == "read":
            self._key = state_key(Path(arg))
            if self._key not in self.data["states"]:
                raise NotCaptured(f"no captured answers for a .config with {self._key!r} "
                                  f"on {self.data['base']}: run {DATA}/capture.py again")
            self._state = self.data["states"][self._key]
            return {"ok": True}
        table = self._state.get(verb, {})
        if arg not in table:
            raise NotCaptured(f"{command!r} (state {self._key!r}) was not captured on "
                              f"{self.data['base']}: run {DATA}/capture.py again")
        return table[arg]

    def close(self) -> None:
        pass


@functools.cache
def _load(base: str) -> str:
    return (DATA / f"{base}.json").read_text()


def load(base: str) -> dict:
    """A base's captured answers (a fresh copy: callers may change it)."""
    return json.loads(_load(base))


def replay_db(base: str) -> KconfigDB:
    return KconfigDB(Replay(load(base)))


def scenario(base: str, name: str) -> tuple[str, dict[str, str]]:
    """A captured scenario: its fragment text and what olddefconfig made of it."""
    captured = load(base)["scenarios"][name]
    return captured["fragment"], captured["olddefconfig"]


def session(base: str, fragment: str, workdir: Path) -> KconfigDB:
    """A replayed parser session that has read base + `fragment` (text)."""
    merged = workdir / "session.merged"
    merged.write_text(OVERLAY + fragment)
    return replay_db(base).read(merged)


def run_scenario(db: KconfigDB, base: str, name: str, fragment: str, values: dict[str, str],
                 workdir: Path, base_text: str = "") -> ConfigReport:
    """The stage's analysis of `fragment` (its text) on `base`: what
    configure.analyse does after merge_config.sh + olddefconfig, which gave
    `values`. `base_text` is the base .config (empty when replaying)."""
    path = workdir / f"{name}.config"
    path.write_text(fragment)
    requests = parse_fragment(path)
    merged = workdir / f"{name}.merged"
    merged.write_text(base_text + OVERLAY + fragment)
    unknown, explanations = analyse_with(db, merged, values, requests, workdir,
                                         workdir / "kconfig.log")
    config = workdir / f"{name}.olddefconfig"
    config.write_text("".join(f"# CONFIG_{s} is not set\n" if v == "n" else
                              f"CONFIG_{s}={v}\n" for s, v in values.items()))
    return _report(config, base, requests, False, unknown, explanations, config)


def failure_text(report: ConfigReport) -> str:
    """What `harness config check` prints after "fail: " ("" when all stuck)."""
    try:
        check(report)
    except ConfigError as exc:
        return str(exc)
    return ""
