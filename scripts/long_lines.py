"""Lines of exported code over the limit, per notebook: the check CI runs (exit 1 when any is found).

    python scripts/long_lines.py            # every notebook of nbs/ (experiments/ too)
    python scripts/long_lines.py --max 110 nbs/02_llm.ipynb
    python scripts/long_lines.py --report   # a count per notebook, exit 0
"""
import argparse, json, sys
from pathlib import Path

EXPORT = ("#| export", "#|export", "#| exports", "#| exporti")


def exported_lines(nb: Path):
    "(cell number, line) for every line of the notebook's exported code cells."
    cells = json.loads(nb.read_text())["cells"]
    for i, c in enumerate(cells):
        src = "".join(c["source"])
        if c["cell_type"] == "code" and src.lstrip().startswith(EXPORT):
            yield from ((i, line) for line in src.splitlines())


def long_lines(nb: Path, limit: int) -> list[tuple[int, int]]:
    "(cell number, length) of each exported line longer than `limit` characters."
    return [(i, len(line)) for i, line in exported_lines(nb) if len(line) > limit]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook under nbs/")
    p.add_argument("--max", type=int, default=110, help="longest line allowed (default 110)")
    p.add_argument("--report", action="store_true", help="print the count per notebook and exit 0")
    a = p.parse_args(argv)
    nbs = a.notebooks or sorted(Path(__file__).parents[1].joinpath("nbs").rglob("*.ipynb"))
    total = 0
    for nb in nbs:
        if ".ipynb_checkpoints" in nb.parts: continue
        found = long_lines(nb, a.max)
        total += len(found)
        if found and a.report: print(f"{len(found):5d}  {nb}")
        elif found: print(f"{nb}: {len(found)} exported line(s) over {a.max} characters, the first in cell {found[0][0]}")
    print(f"{total} exported line(s) over {a.max} characters in {len(nbs)} notebook(s)")
    return 0 if a.report or not total else 1


if __name__ == "__main__": sys.exit(main())
