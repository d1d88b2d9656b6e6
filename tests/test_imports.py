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
