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
