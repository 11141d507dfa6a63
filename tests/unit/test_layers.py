"""The import layers the design holds to (docs/architecture.md), checked on
the source: stages import nothing above them, results/ imports no stage but
plan and detect, no import cycle among harness's modules nor among its
packages (a root module counts as a package of its own), and no module uses
another module's `_private` name. Read with `ast`, nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"

# the stages, as top-level names under harness/ (a module or a package)
STAGES = {"plan", "source", "series", "kconfig", "build", "image", "vm", "suites", "detect"}
# what sits above the stages: the stage sequence and the workflows over it
ABOVE = {"pipeline", "devloop", "bisect", "nightly", "watch", "lab", "report", "export", "cli"}
# at most this many modules at harness/'s root: what every room shares
ROOT_MODULES = 17


def module_name(path: Path) -> str:
    parts = list(path.relative_to(HARNESS.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) for every `from M import name` and `import M` in the
    file, lazy imports inside functions included; relative ones resolved."""
    inside = HARNESS.parent in path.parents
    name = module_name(path) if inside else ""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            found += [(base, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
    return [(m, n) for m, n in found if m == "harness" or m.startswith("harness.")]


def target(module: str, name: str) -> str:
    """The harness module an import reaches: `from harness.x import y` is the
    module harness.x.y when that is a module, else harness.x."""
    if name:
        sub = HARNESS.parent / (module.replace(".", "/") + "/" + name)
        if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file():
            return f"{module}.{name}"
    return module


def top(module: str) -> str:
    """The top-level part under harness (harness.vm.qemu -> vm)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def graph() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in HARNESS.rglob("*.py"):
        out[module_name(path)] = {target(m, n) for m, n in imports(path)}
    return out


def test_stages_import_nothing_above_them():
    bad = [f"{m} imports {d}" for m, deps in sorted(graph().items()) if top(m) in STAGES
           for d in sorted(deps) if top(d) in ABOVE]
    assert not bad, ("a stage imports a module above it (pass what it needs in as "
                     "data or move the code up): " + "; ".join(bad))


def test_results_imports_no_stage_but_plan_and_detect():
    bad = [f"{m} imports {d}" for m, deps in sorted(graph().items()) if top(m) == "results"
           for d in sorted(deps) if top(d) in STAGES - {"plan", "detect"} or top(d) in ABOVE]
    assert not bad, "results/ reads runs and takes stage facts as data: " + "; ".join(bad)


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of two or more nodes: the cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in edges:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                item = stack.pop()
                part.append(item)
                if item == node:
                    break
            if len(part) > 1:
                cycles.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycle():
    cycles = strongly_connected(graph())
    assert not cycles, f"import cycles: {cycles}"


def package_graph() -> dict[str, dict[str, list[str]]]:
    """Packages (and root modules) -> the packages they import -> which
    module imports which, for the message."""
    out: dict[str, dict[str, list[str]]] = {}
    for module, deps in graph().items():
        here = top(module) or module
        out.setdefault(here, {})
        for dep in deps:
            there = top(dep) or dep
            if there != here:
                out[here].setdefault(there, []).append(f"{module} -> {dep}")
    return out


def test_no_package_cycle():
    packages = package_graph()
    cycles = strongly_connected({k: set(v) for k, v in packages.items()})
    why = [f"{a} -> {b} ({', '.join(packages[a][b][:2])})" for cycle in cycles
           for a in cycle for b in cycle if b in packages[a]]
    assert not cycles, f"package cycles: {cycles}: " + "; ".join(why)


def test_the_root_holds_only_what_is_shared():
    root = sorted(p.name for p in HARNESS.glob("*.py"))
    assert len(root) <= ROOT_MODULES, (
        f"{len(root)} modules at harness/'s root (at most {ROOT_MODULES}): {root}; a module "
        "that belongs to one stage or workflow goes into its folder")


def test_no_module_uses_another_modules_private_names():
    bad = []
    for path in sorted(HARNESS.rglob("*.py")):
        for module, name in imports(path):
            if name.startswith("_") and not name.startswith("__"):
                bad.append(f"{path.relative_to(HARNESS.parent)}: from {module} import {name}")
        tree = ast.parse(path.read_text())
        modules = {alias.asname or alias.name for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom) for alias in node.names}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                    and node.value.id in modules and node.value.id not in ("self", "cls")):
                bad.append(f"{path.relative_to(HARNESS.parent)}:{node.lineno}: "
                           f"{node.value.id}.{node.attr}")
    assert not bad, "another module's private name used: " + "; ".join(bad)


def test_the_checks_see_a_violation(tmp_path, monkeypatch):
    """The graph reader finds what the checks look for (they cannot pass by
    reading nothing)."""
    edges = graph()
    assert "harness.pipeline.stages" in edges["harness.pipeline.runner"]
    assert "harness.results.model" in edges["harness.pipeline.stages"]
    assert top("harness.vm.qemu") == "vm"
    planted = tmp_path / "mod.py"
    planted.write_text("from harness.pipeline.stages import _private\n")
    assert imports(planted) == [("harness.pipeline.stages", "_private")]


# what makes a run's request: only pipeline/request.py calls these (a command
# hands its choices to request.prepare, a plan made in code to request.for_plan)
REQUEST_MAKERS = {"preflight", "plan_for", "select_suites", "read_series",
                  "command_line_sets", "check_choices"}


def test_one_request_carries_a_runs_inputs_from_the_command_line_to_the_runner():
    import inspect

    from harness.pipeline import runner
    from harness.pipeline.request import RunRequest
    params = list(inspect.signature(runner.run).parameters.values())
    assert params[0].name == "request" and params[0].annotation in (RunRequest, "RunRequest")
    assert all(p.kind == p.KEYWORD_ONLY or p.name in ("request", "console") for p in params)
    bad = []
    for path in sorted(HARNESS.rglob("*.py")):
        if path.parent.name == "pipeline" and path.name in ("request.py", "resolve.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "resolve" and node.func.attr in REQUEST_MAKERS):
                bad.append(f"{path.relative_to(HARNESS.parent)}:{node.lineno}: "
                           f"resolve.{node.func.attr}")
    assert not bad, ("a run's inputs are read and checked once, by pipeline/request.py "
                     "(prepare, for_plan): " + "; ".join(bad))
