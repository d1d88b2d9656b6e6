"""`import pace` and every exported module work without the dev extra (nbdev, fastcore, papermill ...)."""
import subprocess, sys
from pathlib import Path

import pace

DEV_ONLY = ["nbdev", "fastcore", "execnb", "papermill", "jupyterlab", "notebook", "IPython", "pytest", "seaborn", "matplotlib"]

BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {dev!r}: raise ImportError(f'{{name}} is a dev-only package')
sys.meta_path.insert(0, Block())
import importlib
for m in {mods!r}: importlib.import_module(m)
print('ok', len({mods!r}))
"""


def test_modules_import_without_dev_packages():
    mods = list(_modules())
    assert "pace.data" in mods and "pace.cli" in mods
    code = BLOCKER.format(dev=DEV_ONLY, mods=mods)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(pace.__file__).parents[1])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"ok {len(mods)}"


ROOT = Path(pace.__file__).parent


def _modules() -> dict:
    "{dotted module name: its file} for every module of the package (subpackages included, `_modidx` left out)."
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__": parts = parts[:-1]
        if not parts[-1].startswith("_"): out[".".join(parts)] = p
    return out


def _package(mod: str, path: Path) -> str:
    return mod if path.name == "__init__.py" else mod.rpartition(".")[0]


def _imported(node, mod: str, path: Path) -> str | None:
    "The absolute `pace...` module an `ImportFrom` node names (relative ones resolved), or None for other packages."
    if node.level:
        base = _package(mod, path).split(".")
        base = base[:len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module if (node.module or "").split(".")[0] == "pace" else None


def _pace_imports(mod: str, path: Path, modules: dict) -> set:
    "The `pace` modules a module imports anywhere in its body (top level or inside functions)."
    import ast
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (base := _imported(node, mod, path)):
            subs = {f"{base}.{a.name}" for a in node.names} & set(modules)
            found |= subs or {base}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("pace.")}
    return found - {"pace"}


def _graph() -> dict:
    mods = _modules()
    return {m: _pace_imports(m, p, mods) for m, p in mods.items() if m != "pace"}


def test_no_import_cycles():
    "No chain of imports, lazy ones included, leads from a `pace` module back to itself."
    graph = _graph()
    assert graph["pace.eval.run"] >= {"pace.methods.baselines", "pace.eval.judge"}   # the parser sees multi-line and relative imports
    def cycle_from(start):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start: return path + [nxt]
                if nxt not in seen: seen.add(nxt); stack.append((nxt, path + [nxt]))
    cycles = [c for c in map(cycle_from, graph) if c]
    assert not cycles, cycles


WINGS = {"foundation": set(), "methods": {"foundation"}, "eval": {"foundation", "methods"}, "gen": {"foundation"}}


def wing(mod: str) -> str:
    "'methods', 'eval' or 'gen' for a module of that subpackage; 'cli' for the command line; 'foundation' for the rest."
    part = mod.split(".")[1] if mod.count(".") else ""
    return part if part in WINGS else "cli" if mod == "pace.cli" else "foundation"


def arrows_against_the_layout(graph: dict) -> list:
    "Imports from the foundation up into a wing, and between generation and evaluation (in either direction)."
    bad = []
    for m, deps in graph.items():
        w = wing(m)
        if w == "cli": continue
        for d in sorted(deps):
            v = wing(d)
            if v != w and v not in WINGS[w]: bad.append(f"{m} ({w}) -> {d} ({v})")
    return bad


def test_wings_import_only_downward():
    "The foundation imports no wing; methods import the foundation; evaluation imports methods and the foundation; generation only the foundation."
    graph = _graph()
    assert {wing(m) for m in graph} == {"foundation", "methods", "eval", "gen", "cli"}
    assert not arrows_against_the_layout(graph), "\n".join(arrows_against_the_layout(graph))
    # the check itself: an upward and a sideways import are caught
    assert arrows_against_the_layout({"pace.data": {"pace.eval.run"}, "pace.gen.kb": {"pace.eval.judge", "pace.data"},
                                      "pace.eval.run": {"pace.methods.agents", "pace.data"}}) == [
        "pace.data (foundation) -> pace.eval.run (eval)", "pace.gen.kb (gen) -> pace.eval.judge (eval)"]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_uses(mod: str, path: Path, modules: dict) -> list:
    "`(line, text)` for each private name `mod` takes from another `pace` module, by import or `module._name`."
    import ast
    tree, found, aliases = ast.parse(path.read_text()), [], {}   # aliases: local name -> pace module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (base := _imported(node, mod, path)):
            for a in node.names:
                if f"{base}.{a.name}" in modules: aliases[a.asname or a.name] = f"{base}.{a.name}"
                elif base != mod and _is_private(a.name): found.append((node.lineno, f"{base}.{a.name}"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("pace.") and a.asname: aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)): continue
        target = aliases.get(node.value.id) if isinstance(node.value, ast.Name) else None
        if target is None and isinstance(node.value, (ast.Attribute, ast.Name)):
            target = ast.unparse(node.value) if ast.unparse(node.value) in modules else None
        if target and target != mod: found.append((node.lineno, f"{target}.{node.attr}"))
    return found


def test_no_private_names_across_modules():
    "No `pace` module imports, or reaches through a module for, a `_private` name of another `pace` module."
    modules = _modules()
    uses = [f"{p.relative_to(ROOT.parent)}:{line} {name}" for m, p in modules.items()
            for line, name in sorted(_private_uses(m, p, modules))]
    assert not uses, "private names used across modules:\n" + "\n".join(uses)
    # the check itself, on a module written for it
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "x.py"
        f.write_text("from ..runfolder import _holder\nimport pace.eval.run as r\nr._failed\nfrom . import judge\njudge._judge\n")
        test = _private_uses("pace.eval.x", f, modules)
    assert [n for _, n in test] == ["pace.runfolder._holder", "pace.eval.run._failed", "pace.eval.judge._judge"], test


def test_index_notebook_names_every_module_notebook():
    "nbs/index.ipynb's reading order names every numbered notebook of nbs/ (a new notebook must be added to it)."
    import json
    from pathlib import Path
    nbs = Path(__file__).parents[1] / "nbs"
    text = "".join("".join(c["source"]) for c in json.loads((nbs / "index.ipynb").read_text())["cells"])
    missing = [p.stem for p in sorted(nbs.glob("[0-9][0-9]*.ipynb")) if f"`{p.stem}`" not in text]
    assert not missing, f"nbs/index.ipynb does not name: {', '.join(missing)}"
