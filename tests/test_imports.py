"""`import pace` and every exported module work without the dev extra (nbdev, fastcore, papermill ...)."""
import pkgutil, subprocess, sys
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
    mods = ["pace"] + [f"pace.{m.name}" for m in pkgutil.iter_modules(pace.__path__) if not m.name.startswith("_")]
    assert "pace.data" in mods and "pace.cli" in mods
    code = BLOCKER.format(dev=DEV_ONLY, mods=mods)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(pace.__file__).parents[1])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"ok {len(mods)}"


def _pace_imports(path: Path) -> set:
    "The `pace` modules a module imports anywhere in its body (top level or inside functions)."
    import ast
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1: base = f"pace.{node.module}" if node.module else "pace"
            elif (node.module or "").startswith("pace"): base = node.module
            else: continue
            if base == "pace": found |= {f"pace.{a.name}" for a in node.names}
            else: found.add(base)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("pace.")}
    return found


def test_no_import_cycles():
    "No chain of imports, lazy ones included, leads from a `pace` module back to itself."
    root = Path(pace.__file__).parent
    graph = {f"pace.{p.stem}": _pace_imports(p) for p in root.glob("*.py") if not p.stem.startswith("_")}
    assert graph["pace.run"] >= {"pace.baselines", "pace.judge"}   # the parser sees multi-line and relative imports
    def cycle_from(start):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start: return path + [nxt]
                if nxt not in seen: seen.add(nxt); stack.append((nxt, path + [nxt]))
    cycles = [c for c in map(cycle_from, graph) if c]
    assert not cycles, cycles


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_uses(path: Path, modules: set) -> list:
    "`(line, text)` for each private name `path` takes from another `pace` module, by import or `module._name`."
    import ast
    tree, me, found = ast.parse(path.read_text()), path.stem, []
    aliases = {}   # local name -> pace module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1: base = node.module or ""
            elif node.module == "pace" or (node.module or "").startswith("pace."): base = node.module[5:]
            else: continue
            for a in node.names:
                if not base and a.name in modules: aliases[a.asname or a.name] = a.name
                elif base and base != me and _is_private(a.name): found.append((node.lineno, f"{base}.{a.name}"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("pace.") and a.asname: aliases[a.asname] = a.name[5:]
                elif a.name.split(".")[0] == "pace": aliases["pace"] = ""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)): continue
        v = node.value
        if isinstance(v, ast.Name) and aliases.get(v.id): mod = aliases[v.id]
        elif (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "pace"
              and v.attr in modules): mod = v.attr
        else: continue
        if mod != me: found.append((node.lineno, f"{mod}.{node.attr}"))
    return found


def test_no_private_names_across_modules():
    "No `pace` module imports, or reaches through a module for, a `_private` name of another `pace` module."
    root = Path(pace.__file__).parent
    modules = {p.stem for p in root.glob("*.py")}
    uses = [f"pace/{p.name}:{line} {name}" for p in sorted(root.glob("*.py")) if not p.stem.startswith("_")
            for line, name in sorted(_private_uses(p, modules))]
    assert not uses, "private names used across modules:\n" + "\n".join(uses)


def test_index_notebook_names_every_module_notebook():
    "nbs/index.ipynb's reading order names every numbered notebook of nbs/ (a new notebook must be added to it)."
    import json
    from pathlib import Path
    nbs = Path(__file__).parents[1] / "nbs"
    text = "".join("".join(c["source"]) for c in json.loads((nbs / "index.ipynb").read_text())["cells"])
    missing = [p.stem for p in sorted(nbs.glob("[0-9][0-9]*.ipynb")) if f"`{p.stem}`" not in text]
    assert not missing, f"nbs/index.ipynb does not name: {', '.join(missing)}"
