"""The walk from a requested symbol that did not stick down to the symbols a
fragment must set (the roots): unmet `depends on` terms, select-only symbols
and their selectors, choices, `m` without MODULES, ranges. It produces the
"why" lines, with a fix mark where a line of the fix is proposed, and the fix
itself; explain.py checks that fix with the parser."""
from __future__ import annotations

from dataclasses import dataclass, field

from .expr import (TRI, AnyOf, Lower, Never, Raise, Requirement, is_constant, level, render,
                   unmet)
from .tool import KconfigDB, Operation, Property, Symbol

FIX_MARK = "\x00"


def mark(symbol: str) -> str:
    """Where the fix line for `symbol` is proposed; explain.py later writes
    "[add ...]" there, or a note when the minimal fix does without it."""
    return f"{FIX_MARK}{symbol}{FIX_MARK}"


@dataclass
class FixState:
    fix: dict[str, str] = field(default_factory=dict)     # symbol -> value, in order
    seen: set[str] = field(default_factory=set)
    complete: bool = True                                  # every path has a fix

    def copy(self) -> "FixState":
        return FixState(dict(self.fix), set(self.seen), self.complete)

    def adopt(self, other: "FixState") -> None:
        self.fix, self.seen, self.complete = other.fix, other.seen, other.complete


@dataclass
class Walk:
    """What the walk found for one missing request."""
    lines: list[str]
    state: FixState
    select_only: bool = False
    selectors: tuple[str, ...] = ()


@dataclass
class _Option:
    """One way through a select or an ||, tried on a copy of the state."""
    cost: int
    state: FixState
    lines: list[str]
    label: str = ""


class Explainer:
    def __init__(self, db: KconfigDB, requested: dict[str, str]):
        self.db, self.requested = db, requested       # requested: symbol -> "file:line"

    # -- entry point
    def explain(self, symbol: str, want: str) -> Walk:
        """The why lines and the fix for one missing request."""
        state = FixState()
        record = self.db.get(symbol)
        got = self.db.value(symbol)
        selectors = tuple(s.name for s in self.db.selectors(symbol))
        if record is None:
            return Walk([f"{symbol} is not defined by this tree's Kconfig"], state)
        if record.type in ("bool", "tristate"):
            if want == "n":
                lines = self._why_not_off(record)
            elif want == "m" and got == "y":
                lines = self._why_not_module(record, state)
            else:
                lines = self._need(symbol, want, state, depth=0)
        else:
            lines = self._why_value(record, want, state)
        return Walk(lines, state, not record.prompts, selectors)

    # -- raising a bool/tristate symbol to `want`
    def _need(self, name: str, want: str, state: FixState, depth: int) -> list[str]:
        pad = "  " * depth
        record = self.db.get(name)
        if record is None:
            state.complete = False
            return [f"{pad}{name} is not defined on this architecture: it cannot be set"]
        if name in state.seen:
            return [f"{pad}{name}: see above"]
        state.seen.add(name)
        if not record.prompts:
            return self._need_select_only(record, want, state, depth)
        prompt = max(record.prompts, key=lambda p: level(p.cond))
        threshold = _threshold(record, want)
        if level(prompt.cond) >= TRI[threshold]:
            # a visible choice member can be chosen; only the requested symbol
            # itself is worth a remark when another member won
            choice = record.choice
            if depth == 0 and choice and choice.active not in (None, name):
                return [f"{pad}{name} [={record.value}] is in the choice \"{choice.prompt}\" "
                        f"({choice.at}), where {choice.active} is chosen"]
            if want == "m" and self.db.value("MODULES") != "y":
                state.fix.setdefault("MODULES", "y")
                return [f"{pad}{name} can only be m with MODULES=y (MODULES [=n])"
                        f"{mark('MODULES')}"]
            return []       # visible: setting it is enough
        lines = [f"{pad}{name} [={record.value}] depends on {render(prompt.cond)}  "
                 f"({prompt.at})"]
        lines += self._requirements(self._unmet(prompt.cond, threshold), state, depth + 1)
        return lines

    def _need_select_only(self, record: Symbol, want: str, state: FixState,
                          depth: int) -> list[str]:
        pad = "  " * depth
        name = record.name
        selectors = self.db.selectors(name)
        if not selectors:
            return self._need_default(record, want, state, depth)
        listed = ", ".join(f"{s.name} [={self.db.value(s.name)}]" for s in selectors)
        lines = [f"{pad}{name} [={record.value}] is select-only (no prompt): only "
                 f"`select {name}` sets it; selected by: {listed}"]
        threshold = _threshold(record, want)
        options = []
        for selector in selectors:
            sel = self.db.get(selector.name)
            if sel is None:
                continue
            # a bool target is y even when an m symbol selects it
            reqs: list[Requirement] = ([Raise(selector.name, threshold)]
                                       if TRI[sel.tri] < TRI[threshold] else [])
            reqs += self._unmet(selector.cond, threshold)
            option = self._try(reqs, state, depth + 1, selector.name)
            if option.state.complete:
                options.append(option)
        if not options:
            state.complete = False
            return lines + [f"{pad}  none of them can be set with this base and these "
                            "fragments"]
        best = min(options, key=lambda o: o.cost)
        state.fix, state.seen = best.state.fix, best.state.seen
        more = " (the one needing the fewest other options)" if len(options) > 1 else ""
        return lines + [f"{pad}  through {best.label}{more}:"] + best.lines

    def _need_default(self, record: Symbol, want: str, state: FixState,
                      depth: int) -> list[str]:
        """No prompt and no selector: def_bool/def_tristate, the default decides."""
        pad = "  " * depth
        for default in record.defaults:
            if is_constant(default.expr, "n"):
                continue
            lines = [f"{pad}{record.name} [={record.value}] has no prompt; its default "
                     f"is {render(default.expr)}"
                     + (f" if {render(default.cond)}" if default.cond else "")
                     + f"  ({default.at})"]
            lines += self._requirements(self._unmet_both(default, want), state, depth + 1)
            return lines
        state.complete = False
        return [f"{pad}{record.name} [={record.value}] has no prompt and nothing selects "
                f"it here: no fragment can set it"]

    def _unmet_both(self, default: Property, want: str) -> list[Requirement]:
        reqs = []
        for part in (default.expr, default.cond):
            if part is not None and level(part) < TRI[want]:
                reqs += self._unmet(part, want)
        return reqs

    def _unmet(self, e, threshold: str) -> list[Requirement]:
        return unmet(e, threshold, self.db.known)

    def _try(self, reqs: list[Requirement], state: FixState, depth: int,
             label: str = "") -> _Option:
        trial = state.copy()
        lines = self._requirements(reqs, trial, depth)
        return _Option(len(trial.fix) - len(state.fix), trial, lines, label)

    def _requirements(self, reqs: list[Requirement], state: FixState,
                      depth: int) -> list[str]:
        pad = "  " * depth
        lines: list[str] = []
        for req in reqs:
            if isinstance(req, Raise):
                lines += self._set(req.symbol, req.value, state, depth)
            elif isinstance(req, Lower):
                lines += self._unset(req.symbol, req.limit, state, depth)
            elif isinstance(req, AnyOf):
                lines += self._choose(req.alternatives, state, depth)
            elif isinstance(req, Never):
                state.complete = False
                lines.append(f"{pad}{req.reason}: cannot be met")
            else:
                state.complete = False
                lines.append(f"{pad}{req.text} is false (not a symbol a fragment can set)")
        return lines

    def _set(self, name: str, want: str, state: FixState, depth: int) -> list[str]:
        pad = "  " * depth
        record = self.db.get(name)
        value = record.value if record else "n"
        want = "y" if record and record.is_bool else want
        if name in self.requested:
            # its own entry explains it; its fix lines count for this one too
            if name not in state.seen:
                self._need(name, want, state, depth + 1)
            return [f"{pad}{name} [={value}] is requested too ({self.requested[name]}) "
                    f"and did not stick either: see CONFIG_{name}"]
        if name in state.seen:
            return [f"{pad}{name}: see above"]
        settable = record is not None and bool(record.prompts)
        if settable:
            state.fix[name] = want
        sub = self._need(name, want, state, depth + 1)
        fix_mark = mark(name) if settable else ""
        if not sub:
            return [f"{pad}{name} [={value}] must be {want} (it can be: its own "
                    f"dependencies are met){fix_mark}"]
        return [f"{pad}{name} [={value}] must be {want}{fix_mark}, and:"] + sub

    def _unset(self, name: str, limit: str, state: FixState, depth: int) -> list[str]:
        pad = "  " * depth
        record = self.db.get(name)
        value = record.value if record else "n"
        if name in self.requested:
            state.complete = False
            return [f"{pad}{name} [={value}] must be at most {limit}, but the fragments "
                    f"request it ({self.requested[name]}): the two requests conflict"]
        # the reverse dependency that keeps it above `limit`, if any
        selected = (record.selected_by if record is not None and record.selected_by is not None
                    and level(record.selected_by) > TRI[limit] else None)
        if record is None or not record.prompts or selected is not None:
            state.complete = False
            return [f"{pad}{name} [={value}] must be at most {limit}, but "
                    + (f"it is selected by {render(selected)}" if selected is not None
                       else "it has no prompt") + ": no fragment line can lower it"]
        state.fix[name] = limit
        return [f"{pad}{name} [={value}] must be at most {limit}{mark(name)}"]

    def _choose(self, alternatives: tuple[list, ...], state: FixState,
                depth: int) -> list[str]:
        pad = "  " * depth
        options = [self._try(alt, state, depth + 1) for alt in alternatives]
        # complete ones first, then the fewest fix lines; the first of equals
        best = min(options, key=lambda o: (not o.state.complete, len(o.state.fix)))
        state.adopt(best.state)
        return [f"{pad}one of {len(alternatives)} alternatives is needed; the one needing "
                "the fewest other options:"] + best.lines

    # -- the other directions
    def _why_not_off(self, record: Symbol) -> list[str]:
        name, value = record.name, record.value
        if record.selected_by and level(record.selected_by) > 0:
            active = [s.name for s in self.db.selectors(name) if self.db.value(s.name) != "n"]
            return [f"{name} [={value}] is forced by `select` from: {', '.join(active)} "
                    f"({render(record.selected_by)}); unset those to turn it off"]
        if not record.prompts or record.visible == "n":
            applying = [d for d in record.defaults if level(d.cond) > 0]
            default = (f"; its default {render(applying[0].expr)} applies ({applying[0].at})"
                       if applying else "")
            return [f"{name} [={value}] has no visible prompt, so a fragment cannot turn it "
                    f"off{default}"]
        return [f"{name} [={value}]: requested n but olddefconfig kept {value}"]

    def _why_not_module(self, record: Symbol, state: FixState) -> list[str]:
        name = record.name
        if record.is_bool:
            return [f"{name} is bool: it cannot be m; request CONFIG_{name}=y"]
        if self.db.value("MODULES") != "y":
            state.fix["MODULES"] = "y"
            return [f"{name}: without MODULES=y every m becomes y{mark('MODULES')}"]
        if record.selected_by and level(record.selected_by) == 2:
            active = [s.name for s in self.db.selectors(name) if self.db.value(s.name) == "y"]
            return [f"{name} is selected by {', '.join(active)} [=y], which forces y"]
        return [f"{name}: requested m but olddefconfig chose y"]

    def _why_value(self, record: Symbol, want: str, state: FixState) -> list[str]:
        name, value = record.name, record.value
        lines = []
        if record.visible == "n":
            lines += self._need(name, "y", state, 0) or [
                f"{name} has no visible prompt: its default applies"]
        for rng in record.ranges:
            if level(rng.cond) > 0 and rng.expr:
                assert isinstance(rng.expr, Operation)  # Operation("range", low, high)
                lines.append(f"{name} must lie in the range {render(rng.expr.left)} .. "
                             f"{render(rng.expr.right)} ({rng.at}); {want} is outside")
        return lines or [f"{name} [={value}]: requested {want!r} but olddefconfig chose "
                         f"{value!r}"]


def _threshold(record: Symbol, want: str) -> str:
    """A bool's prompt is usable from m up (`depends on` an m symbol gives y)."""
    return "m" if record.is_bool else want
