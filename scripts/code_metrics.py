#!/usr/bin/env python
"""Size and shape of the `pace` package, the figures issue 46 asks for before and after a restructuring.

    .venv/bin/python scripts/code_metrics.py [--package pace] [--json]

Lines are the package's lines of code: not blank, not a comment, not the generated `_modidx.py`. A public name is a
module-level name in a module's `__all__`. Parameters count every named parameter (`self` and `cls` aside, `*args`
and `**kw` included), of functions and methods alike. The class chain is the longest chain of base classes defined
in the package (a class deriving from nothing of the package is 1).
"""
import argparse, ast, io, json, tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def code_lines(src: str) -> int:
    "Lines holding a token other than a comment, a newline or indentation."
    keep = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
            tokenize.ENDMARKER}
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type not in skip: keep.update(range(t.start[0], t.end[0] + 1))
    return len(keep)


def n_params(fn) -> int:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + [x.arg for x in (a.vararg, a.kwarg) if x]
    return len([n for n in names if n not in ("self", "cls")])


def measure(pkg: Path) -> dict:
    files = sorted(p for p in pkg.rglob("*.py") if p.name != "_modidx.py")
    lines, physical, public, sigs, bases, big = 0, 0, 0, [], {}, []
    for p in files:
        src = p.read_text()
        n = code_lines(src)
        lines += n
        physical += len(src.splitlines())
        if n > 500: big.append((str(p.relative_to(pkg.parent)), n))
        tree = ast.parse(src)
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                public += len(ast.literal_eval(node.value))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                sigs.append((n_params(node), f"{p.relative_to(pkg.parent)}:{node.name}"))
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]

    def depth(c, seen=()):
        if c not in bases or c in seen: return 0
        return 1 + max([depth(b, seen + (c,)) for b in bases[c]] or [0])
    chain = max(((depth(c), c) for c in bases), default=(0, ""))
    sigs.sort(reverse=True)
    return dict(files=len(files), lines=lines, physical_lines=physical, modules_over_500=sorted(big, key=lambda x: -x[1]), public_names=public,
                functions_8plus_params=sum(n >= 8 for n, _ in sigs), functions_over_10_params=sum(n > 10 for n, _ in sigs),
                longest_signature=list(sigs[0]) if sigs else None, deepest_class_chain=list(chain),
                longest_signatures=[list(s) for s in sigs[:8]])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default=str(ROOT / "pace"))
    ap.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    a = ap.parse_args(argv)
    m = measure(Path(a.package))
    if a.json: print(json.dumps(m)); return
    print(f"package lines (code, no _modidx): {m['lines']:,}; physical lines {m['physical_lines']:,}; in {m['files']} files")
    print(f"modules over 500 lines: {len(m['modules_over_500'])}: " + ", ".join(f"{f} {n}" for f, n in m['modules_over_500']))
    print(f"public names (__all__): {m['public_names']}")
    print(f"functions with 8+ parameters: {m['functions_8plus_params']} (over 10: {m['functions_over_10_params']})")
    print(f"longest signature: {m['longest_signature'][0]} parameters ({m['longest_signature'][1]})")
    print(f"deepest class chain: {m['deepest_class_chain'][0]} ({m['deepest_class_chain'][1]})")
    print("longest signatures: " + "; ".join(f"{n} {w}" for n, w in m['longest_signatures']))


if __name__ == "__main__":
    main()
