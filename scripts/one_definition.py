"""Exported cells that define more than one public function, per notebook: the check CI runs (exit 1 when any is found).

    python scripts/one_definition.py            # every notebook of nbs/ (experiments/ too)
    python scripts/one_definition.py nbs/13_metrics.ipynb
    python scripts/one_definition.py --report   # a count per notebook, exit 0

A public function is a top-level `def` (or `async def`) whose name does not start with `_`. Private helpers may
sit with the public function they serve, and cells that define only classes may group.
"""
import argparse, ast, json, re, sys
from pathlib import Path

EXPORT = ("#| export", "#|export", "#| exports", "#| exporti")
DEF = re.compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)", re.M)


def public_functions(src: str) -> list[str]:
    "Names of the top-level public functions a cell's source defines."
    try: tree = ast.parse(src)
    except SyntaxError: return [n for n in DEF.findall(src) if not n.startswith("_")]  # magics: fall back to text
    return [n.name for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.name.startswith("_")]


def crowded_cells(nb: Path) -> list[tuple[int, list[str]]]:
    "(cell number, public function names) of each exported cell that defines more than one public function."
    cells = json.loads(nb.read_text())["cells"]
    out = []
    for i, c in enumerate(cells):
        src = "".join(c["source"])
        if c["cell_type"] != "code" or not src.lstrip().startswith(EXPORT): continue
        names = public_functions(src)
        if len(names) > 1: out.append((i, names))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook under nbs/")
    p.add_argument("--report", action="store_true", help="print every offending cell and exit 0")
    a = p.parse_args(argv)
    nbs = a.notebooks or sorted(Path(__file__).parents[1].joinpath("nbs").rglob("*.ipynb"))
    nbs = [nb for nb in nbs if ".ipynb_checkpoints" not in nb.parts]
    total = 0
    for nb in nbs:
        found = crowded_cells(nb)
        total += len(found)
        if found and a.report:
            print(f"{len(found):5d}  {nb}")
            for i, names in found: print(f"         cell {i}: {', '.join(names)}")
        elif found: print(f"{nb}: {len(found)} exported cell(s) with more than one public function, the first "
                          f"cell {found[0][0]} ({', '.join(found[0][1])})")
    print(f"{total} exported cell(s) with more than one public function in {len(nbs)} notebook(s)")
    return 0 if a.report or not total else 1


if __name__ == "__main__": sys.exit(main())
