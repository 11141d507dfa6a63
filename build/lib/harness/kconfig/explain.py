"""Why did a requested Kconfig option not stick, and which fragment lines fix it.

The tree's own Kconfig parser (kconfig_tool.py) gives each symbol's value,
prompts, `depends on`, `select` and `default` expressions with the value of
every node. This module walks those
expressions from a missing symbol down to the symbols that must be set (the
roots), names select-only symbols and their selectors, and proves the fix by
evaluating base + fragments + fix with the same parser (what merge_config.sh +
olddefconfig would produce).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .tool import KconfigDB

TRI = {"n": 0, "m": 1, "y": 2}
_ROUNDS = 4


@dataclass(frozen=True)
class Explanation:
    symbol: str
    want: str
    got: str
    fragment: str                  # "file:line" of the request
    why: str                       # human text, several lines
    fix: tuple[str, ...]           # fragment lines that make every request stick
    roots: tuple[str, ...]         # the symbols the (minimal) fix sets for this one
    select_only: bool = False
    selectors: tuple[str, ...] = ()
    verified: bool = False         # the tree's Kconfig keeps every request with the fix


def render(e, parent: str = "") -> str:
    """An expression as menuconfig shows it: FOO [=y] && (BAR [=n] || BAZ [=m])."""
    if e is None:
        return "y"
    op = e[0]
    if op == "s":
        name, value, const = e[2], e[3], e[4]
        if const:
            return name if name in TRI else f'"{name}"'
        return f"{name} [={value}]"
    if op in ("&&", "||"):
        text = f"{render(e[2], op)} {op} {render(e[3], op)}"
        return f"({text})" if parent and parent != op else text
    if op == "!":
        return f"!{render(e[2], '!')}"
    return f"{render(e[2], op)} {op} {render(e[3], op)}"


def _tri(e) -> int:
    return 2 if e is None else TRI.get(e[1], 0)


# ---------------------------------------------------------------- explaining

@dataclass
class _State:
    fix: dict[str, str] = field(default_factory=dict)     # symbol -> value, in order
    seen: set[str] = field(default_factory=set)
    complete: bool = True                                  # every path has a fix

    def copy(self) -> "_State":
        return _State(dict(self.fix), set(self.seen), self.complete)


class Explainer:
    def __init__(self, db: KconfigDB, requested: dict[str, str]):
        self.db, self.requested = db, requested

    # -- entry point
    def explain(self, symbol: str, want: str) -> tuple[list[str], _State, bool, list[str]]:
        """(why lines, fix state, select-only, selectors) for one missing request."""
        state = _State()
        record = self.db.get(symbol)
        got = self.db.value(symbol)
        selectors = [name for name, _ in self.db.selectors(symbol)]
        select_only = bool(record) and not record["prompts"]
        if record is None:
            return [f"{symbol} is not defined by this tree's Kconfig"], state, False, []
        if record["type"] in ("bool", "tristate"):
            if want == "n":
                lines = self._why_not_off(record)
            elif want == "m" and got == "y":
                lines = self._why_not_module(record, state)
            else:
                lines = self._need(symbol, want, state, depth=0)
        else:
            lines = self._why_value(record, want, state)
        return lines, state, select_only, selectors

    # -- raising a bool/tristate symbol to `want`
    def _need(self, name: str, want: str, state: _State, depth: int) -> list[str]:
        pad = "  " * depth
        record = self.db.get(name)
        if record is None:
            state.complete = False
            return [f"{pad}{name} is not defined on this architecture: it cannot be set"]
        if name in state.seen:
            return [f"{pad}{name}: see above"]
        state.seen.add(name)
        value = record["value"]
        if not record["prompts"]:
            return self._need_select_only(record, want, state, depth)
        prompt = max(record["prompts"], key=lambda p: _tri(p["if"]))
        threshold = "m" if record["type"] == "bool" else want
        if _tri(prompt["if"]) >= TRI[threshold]:
            # a visible choice member can be chosen; only the requested symbol
            # itself is worth a remark when another member won
            if depth == 0 and record["choice"] and \
                    record["choice"]["active"] not in (None, name):
                choice = record["choice"]
                return [f"{pad}{name} [={value}] is in the choice \"{choice['prompt']}\" "
                        f"({choice['at']}), where {choice['active']} is chosen"]
            if want == "m" and self.db.value("MODULES") != "y":
                state.fix.setdefault("MODULES", "y")
                return [f"{pad}{name} can only be m with MODULES=y (MODULES [=n])"
                        f"{_mark('MODULES')}"]
            return []       # visible: setting it is enough
        lines = [f"{pad}{name} [={value}] depends on {render(prompt['if'])}  "
                 f"({prompt['at']})"]
        lines += self._requirements(self._unmet(prompt["if"], threshold), state, depth + 1)
        return lines

    def _need_select_only(self, record: dict, want: str, state: _State,
                          depth: int) -> list[str]:
        pad = "  " * depth
        name = record["name"]
        selectors = self.db.selectors(name)
        if not selectors:
            # def_bool/def_tristate: the default expression decides
            for default in record["defaults"]:
                cond = ["&&", "n", default["expr"], default["if"]] if default["if"] else \
                    default["expr"]
                if default["expr"] and default["expr"][0] == "s" and default["expr"][4] \
                        and default["expr"][2] == "n":
                    continue
                lines = [f"{pad}{name} [={record['value']}] has no prompt; its default "
                         f"is {render(default['expr'])}"
                         + (f" if {render(default['if'])}" if default["if"] else "")
                         + f"  ({default['at']})"]
                lines += self._requirements(self._unmet_both(default, want), state, depth + 1)
                return lines
            state.complete = False
            return [f"{pad}{name} [={record['value']}] has no prompt and nothing selects "
                    f"it here: no fragment can set it"]
        listed = ", ".join(f"{s} [={self.db.value(s)}]" for s, _ in selectors)
        lines = [f"{pad}{name} [={record['value']}] is select-only (no prompt): only "
                 f"`select {name}` sets it; selected by: {listed}"]
        threshold = "m" if record["type"] == "bool" else want
        options = []
        for selector, at in selectors:
            sel = self.db.get(selector)
            if sel is None:
                continue
            # the select's own condition: the selector's dependencies + `if ...`
            cond = next((p["if"] for p in sel["selects"] if p["at"] == at), None)
            # a bool target is y even when an m symbol selects it
            reqs = ([("sym", selector, threshold)] if TRI[sel["tri"]] < TRI[threshold]
                    else [])
            reqs += self._unmet(cond, threshold)
            trial = state.copy()
            trial_lines = self._requirements(reqs, trial, depth + 1)
            if trial.complete:
                options.append((len(trial.fix) - len(state.fix), selector, trial, trial_lines))
        if not options:
            state.complete = False
            return lines + [f"{pad}  none of them can be set with this base and these "
                            "fragments"]
        options.sort(key=lambda o: o[0])
        _, selector, trial, trial_lines = options[0]
        state.fix, state.seen = trial.fix, trial.seen
        more = " (the one needing the fewest other options)" if len(options) > 1 else ""
        return lines + [f"{pad}  through {selector}{more}:"] + trial_lines

    def _unmet_both(self, default: dict, want: str) -> list:
        reqs = []
        for part in (default["expr"], default["if"]):
            if part is not None and _tri(part) < TRI[want]:
                reqs += self._unmet(part, want)
        return reqs

    # -- what an expression below `threshold` needs
    def _unmet(self, e, threshold: str) -> list:
        if e is None or _tri(e) >= TRI[threshold]:
            return []
        op = e[0]
        if op == "s":
            name, const = e[2], e[4]
            if const or not self.db.known(name):
                return [("never", f"{name} is not defined on this architecture"
                         if not const else f"the constant {name}")]
            return [("sym", name, threshold)]
        if op == "&&":
            return self._unmet(e[2], threshold) + self._unmet(e[3], threshold)
        if op == "||":
            alternatives = []
            stack = [e]
            while stack:
                node = stack.pop()
                if node and node[0] == "||":
                    stack += [node[3], node[2]]
                else:
                    alternatives.append(self._unmet(node, threshold))
            possible = [a for a in alternatives if not any(r[0] == "never" for r in a)]
            if len(possible) == 1:
                return possible[0]
            return [("any", possible or alternatives)]
        if op == "!":
            inner = e[2]
            if inner and inner[0] == "s" and not inner[4]:
                return [("not", inner[2], "n" if threshold == "y" else "m")]
            return [("text", render(e))]
        if op in ("=", "!=") and e[2] and e[3] and e[3][4] and e[3][2] in TRI \
                and not e[2][4]:
            target = e[3][2]
            if op == "=" and target in ("y", "m"):
                return [("sym", e[2][2], target)]
            if op == "!=" and target == "n":
                return [("sym", e[2][2], "m")]
            if op == "=" and target == "n" or op == "!=" and target == "y":
                return [("not", e[2][2], "n" if target == "n" else "m")]
        return [("text", render(e))]

    def _requirements(self, reqs: list, state: _State, depth: int) -> list[str]:
        pad = "  " * depth
        lines: list[str] = []
        for req in reqs:
            kind = req[0]
            if kind == "sym":
                lines += self._set(req[1], req[2], state, depth)
            elif kind == "not":
                lines += self._unset(req[1], req[2], state, depth)
            elif kind == "any":
                lines += self._choose(req[1], state, depth)
            elif kind == "never":
                state.complete = False
                lines.append(f"{pad}{req[1]}: cannot be met")
            else:
                state.complete = False
                lines.append(f"{pad}{req[1]} is false (not a symbol a fragment can set)")
        return lines

    def _set(self, name: str, want: str, state: _State, depth: int) -> list[str]:
        pad = "  " * depth
        record = self.db.get(name)
        value = record["value"] if record else "n"
        want = "y" if record and record["type"] == "bool" else want
        if name in self.requested:
            # its own entry explains it; its fix lines count for this one too
            if name not in state.seen:
                self._need(name, want, state, depth + 1)
            return [f"{pad}{name} [={value}] is requested too ({self.requested[name]}) "
                    f"and did not stick either: see CONFIG_{name}"]
        if name in state.seen:
            return [f"{pad}{name}: see above"]
        settable = record is not None and bool(record["prompts"])
        if settable:
            state.fix[name] = want
        sub = self._need(name, want, state, depth + 1)
        mark = _mark(name) if settable else ""
        if not sub:
            return [f"{pad}{name} [={value}] must be {want} (it can be: its own "
                    f"dependencies are met){mark}"]
        return [f"{pad}{name} [={value}] must be {want}{mark}, and:"] + sub

    def _unset(self, name: str, limit: str, state: _State, depth: int) -> list[str]:
        pad = "  " * depth
        record = self.db.get(name)
        value = record["value"] if record else "n"
        if name in self.requested:
            state.complete = False
            return [f"{pad}{name} [={value}] must be at most {limit}, but the fragments "
                    f"request it ({self.requested[name]}): the two requests conflict"]
        selected = record and record["selected_by"] and _tri(record["selected_by"]) > TRI[limit]
        if record is None or not record["prompts"] or selected:
            state.complete = False
            return [f"{pad}{name} [={value}] must be at most {limit}, but "
                    + (f"it is selected by {render(record['selected_by'])}" if selected
                       else "it has no prompt") + ": no fragment line can lower it"]
        state.fix[name] = limit
        return [f"{pad}{name} [={value}] must be at most {limit}{_mark(name)}"]

    def _choose(self, alternatives: list, state: _State, depth: int) -> list[str]:
        pad = "  " * depth
        trials = []
        for alt in alternatives:
            trial = state.copy()
            trial_lines = self._requirements(alt, trial, depth + 1)
            trials.append((not trial.complete, len(trial.fix), trial, trial_lines))
        best = min(range(len(trials)), key=lambda i: trials[i][:2])
        _, _, trial, trial_lines = trials[best]
        state.fix, state.seen, state.complete = trial.fix, trial.seen, trial.complete
        return [f"{pad}one of {len(alternatives)} alternatives is needed; the one needing "
                "the fewest other options:"] + trial_lines

    # -- the other directions
    def _why_not_off(self, record: dict) -> list[str]:
        name, value = record["name"], record["value"]
        if record["selected_by"] and _tri(record["selected_by"]) > 0:
            active = [s for s, _ in self.db.selectors(name) if self.db.value(s) != "n"]
            return [f"{name} [={value}] is forced by `select` from: {', '.join(active)} "
                    f"({render(record['selected_by'])}); unset those to turn it off"]
        if not record["prompts"] or record["visible"] == "n":
            active = [d for d in record["defaults"] if _tri(d["if"]) > 0]
            default = (f"; its default {render(active[0]['expr'])} applies ({active[0]['at']})"
                       if active else "")
            return [f"{name} [={value}] has no visible prompt, so a fragment cannot turn it "
                    f"off{default}"]
        return [f"{name} [={value}]: requested n but olddefconfig kept {value}"]

    def _why_not_module(self, record: dict, state: _State) -> list[str]:
        name = record["name"]
        if record["type"] == "bool":
            return [f"{name} is bool: it cannot be m; request CONFIG_{name}=y"]
        if self.db.value("MODULES") != "y":
            state.fix["MODULES"] = "y"
            return [f"{name}: without MODULES=y every m becomes y{_mark('MODULES')}"]
        if record["selected_by"] and _tri(record["selected_by"]) == 2:
            active = [s for s, _ in self.db.selectors(name) if self.db.value(s) == "y"]
            return [f"{name} is selected by {', '.join(active)} [=y], which forces y"]
        return [f"{name}: requested m but olddefconfig chose y"]

    def _why_value(self, record: dict, want: str, state: _State) -> list[str]:
        name, value = record["name"], record["value"]
        lines = []
        if record["visible"] == "n":
            lines += self._need(name, "y", state, 0) or [
                f"{name} has no visible prompt: its default applies"]
        for rng in record["ranges"]:
            if _tri(rng["if"]) > 0 and rng["expr"]:
                lines.append(f"{name} must lie in the range {render(rng['expr'][2])} .. "
                             f"{render(rng['expr'][3])} ({rng['at']}); {want} is outside")
        return lines or [f"{name} [={value}]: requested {want!r} but olddefconfig chose "
                         f"{value!r}"]


def fragment_lines(fix: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"# CONFIG_{s} is not set" if v == "n" else f"CONFIG_{s}={v}"
                 for s, v in fix.items())


def explain_missing(db: KconfigDB, merged: Path, requests: list,
                    scratch: Path) -> list[Explanation]:
    """Explanations for every request that does not stick in `merged` (base +
    fragments, before olddefconfig). The fix is checked with the tree's parser:
    merged + fix lines must keep every request; when a round of fixes opens new
    dependencies, the next round explains those too."""
    db.read(merged)
    requested = {r.symbol: f"{Path(r.fragment).name}:{r.line}" for r in requests}
    missing = {r.symbol: db.value(r.symbol) for r in requests if db.value(r.symbol) != r.want}
    results: dict[str, list] = {}
    fix: dict[str, str] = {}
    verified = False
    for _ in range(_ROUNDS):
        still = [r for r in requests if db.value(r.symbol) != r.want]
        if not still:
            verified = True
            break
        explainer = Explainer(db, requested)
        progress = False
        for request in still:
            lines, state, select_only, selectors = explainer.explain(request.symbol,
                                                                     request.want)
            if request.symbol in results:      # a later round: what the fix left open
                old = results[request.symbol]
                old[1] = old[1] + ["and with those lines added:"] + lines
                old[2] = _merge(old[2], state)
            else:
                results[request.symbol] = [request, lines, state, select_only, selectors]
            for symbol, value in state.fix.items():
                if fix.get(symbol) != value:
                    fix[symbol] = value
                    progress = True
        if not progress:
            break
        verified = _verify(db, merged, requests, fix, scratch)
        if verified:
            break
    if verified:
        fix = _minimise(db, merged, requests, fix, scratch)
    db.read(merged)      # leave the session where it was
    out = []
    for symbol, (request, lines, state, select_only, selectors) in results.items():
        if symbol not in missing:
            continue
        mine = {s: v for s, v in fix.items() if s in state.fix}
        out.append(Explanation(
            symbol=symbol, want=request.want, got=missing[symbol],
            fragment=requested[symbol], why=_unmark("\n".join(lines), fix, verified),
            fix=fragment_lines(mine), roots=tuple(mine), select_only=select_only,
            selectors=tuple(selectors), verified=verified))
    return out


def _verify(db: KconfigDB, merged: Path, requests: list, fix: dict[str, str],
            scratch: Path) -> bool:
    """Does base + fragments + fix keep every request (olddefconfig semantics)?"""
    trial = scratch / "harness-kconfig-fix.config"
    text = merged.read_text(errors="replace")
    trial.write_text(text + ("" if text.endswith("\n") else "\n")
                     + "\n".join(_request_line(r) for r in requests) + "\n"
                     + "\n".join(fragment_lines(fix)) + "\n")
    db.read(trial)
    return all(db.value(r.symbol) == r.want for r in requests)


def _minimise(db: KconfigDB, merged: Path, requests: list, fix: dict[str, str],
              scratch: Path) -> dict[str, str]:
    """Drop every fix line the others make unnecessary (on a 32-bit base, 64BIT=y
    brings SPARSEMEM and the hotplug arch options by their defaults)."""
    keep = dict(fix)
    for symbol in reversed(list(fix)):
        trial = {k: v for k, v in keep.items() if k != symbol}
        if _verify(db, merged, requests, trial, scratch):
            keep = trial
    return keep


_MARK = "\x00"


def _mark(symbol: str) -> str:
    return f"{_MARK}{symbol}{_MARK}"


def _unmark(text: str, fix: dict[str, str], verified: bool) -> str:
    """Fix markers -> "[add CONFIG_X=y]", or a note when the minimal fix does
    without that line."""
    parts = text.split(_MARK)
    out = parts[0]
    for symbol, rest in zip(parts[1::2], parts[2::2]):
        if symbol in fix:
            out += f"  [add {fragment_lines({symbol: fix[symbol]})[0]}]"
        elif verified:
            out += "  (follows from the other fix lines)"
        out += rest
    return out


def _merge(a: _State, b: _State) -> _State:
    merged = a.copy()
    for symbol, value in b.fix.items():
        merged.fix.setdefault(symbol, value)
    merged.complete = a.complete and b.complete
    return merged


def _request_line(request) -> str:
    if request.want == "n":
        return f"# CONFIG_{request.symbol} is not set"
    if request.want in TRI or request.want.lstrip("-").isdigit() or \
            request.want.startswith("0x"):
        return f"CONFIG_{request.symbol}={request.want}"
    return f'CONFIG_{request.symbol}="{request.want}"'
