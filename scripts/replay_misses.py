#!/usr/bin/env python
"""Which (query, method) pairs of the committed runs their caches cannot replay; with --drop, remove them so that a
recording makes them again.

A change to the project's own arithmetic (the index's vector format, how ties are cut) can move two facts in a list
that a prompt shows, and then a committed run needs a model call its cache does not hold. `pace reproduce` stops at
the first such call; this script finds all of them. It replays the chosen notebooks leniently in a scratch copy of
the checkout (`nbs/`, `results/`, `data/`, `tests/fixtures/`): a reply or token count the cache lacks is logged
with its pair and answered with "{}" (so later calls of that pair may miss too), and no rows are compared. It
prints, per run folder, the pairs that missed and the calls by stage. Nothing in the checkout changes unless
--drop is given: then those pairs' rows leave the run's results.jsonl and timings.jsonl, and

    pace reproduce NAME --record -p ...     # with the models installed: makes the dropped pairs again
    pace reproduce NAME --accept-rows -p ...  # replays, taking the other rows' new digits

bring the run back to a state that replays byte for byte. The arguments are those of `pace reproduce` (notebook
names, -p settings; none: every notebook and committed setting):

    .venv/bin/python scripts/replay_misses.py 05 -p limit=0 -p ... [--drop]
"""
import argparse, collections, json, os, shutil, subprocess, sys, tempfile, textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Loaded by every Python process of the lenient replay (the CLI and the notebooks' kernels) through PYTHONPATH.
SITECUSTOMIZE = textwrap.dedent('''
    import os
    if os.environ.get("PACE_LENIENT_LOG"):
        import json, threading
        _log, _cur = os.environ["PACE_LENIENT_LOG"], threading.local()
        def _note(kind, stage, n):
            run, pair = getattr(_cur, "run", None), getattr(_cur, "pair", None)
            with open(_log, "a") as f: f.write(json.dumps(dict(run=run, pair=pair, kind=kind, stage=stage, n=n)) + "\\n")
        import pace.llm as L, pace.eval.run as R, pace.eval.reproduce as P
        L.Cached._on_miss = lambda self, preps: self.replay and _note("reply", preps[0]["stage"], len(preps))
        L.Cached._on_token_miss = lambda self, texts, keys, stage: self.replay and _note("tokens", stage, len(texts))
        L.RecordedChat._complete = lambda self, reqs: [L.Completion(text="{}") for _ in reqs]
        L.RecordedChat._count_tokens = lambda self, t: (len(t) + 3) // 4
        _pair0, _ror0 = R._pair, P._record_or_replay
        def _record_or_replay(out, store, runs):   # where each run is committed, relative to the checkout
            _cur.where = {n: os.path.relpath(os.path.join(p, n), os.environ["PACE_LENIENT_ROOT"]) for p, n, _ in runs}
            return _ror0(out, store, runs)
        def _pair(run, q, m, old):
            _cur.pair, name = [q.query_id, m], run.run_dir.name
            _cur.run = getattr(_cur, "where", {}).get(name, name)
            try: return _pair0(run, q, m, old)
            finally: _cur.pair = None
        R._pair, P._record_or_replay = _pair, _record_or_replay
        P.accept_rows_enabled = lambda: True         # a replay that differs goes on ...
        P.write_bytes = lambda *a, **k: None          # ... and writes nothing
''')


def lenient_replay(args: list[str]) -> list[dict]:
    "Run `pace reproduce ARGS` leniently in a scratch copy of the checkout; the logged misses."
    with tempfile.TemporaryDirectory(prefix="replay-misses-") as tmp:
        tmp = Path(tmp)
        for d in ("nbs", "results", "data", "tests/fixtures"):
            shutil.copytree(ROOT / d, tmp / d, ignore=shutil.ignore_patterns("cache.sqlite*", "index"))
        shutil.copy(ROOT / "settings.ini", tmp / "settings.ini")
        (tmp / "site").mkdir(); (tmp / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        log = tmp / "misses.jsonl"; log.touch()
        env = os.environ | {"PACE_LENIENT_LOG": str(log), "PACE_LENIENT_ROOT": str(tmp),
                            "PYTHONPATH": os.pathsep.join([str(tmp / "site"), os.environ.get("PYTHONPATH", "")])}
        cmd = [sys.executable, "-c", "import sys; from pace.cli import main; sys.exit(main())", "reproduce",
               "--no-progress", *args]
        subprocess.run(cmd, cwd=tmp, env=env, check=False, stdout=subprocess.DEVNULL)
        return [json.loads(line) for line in log.read_text().splitlines()]


def drop_pairs(run_dir: Path, pairs: set) -> int:
    "Remove `pairs` ((query_id, method)) from the run's results.jsonl and timings.jsonl; rows removed."
    n = 0
    for name in ("results.jsonl", "timings.jsonl"):
        p = run_dir / name
        lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
        keep = [l for l in lines if (lambda r: (r["query_id"], r["method"]) not in pairs)(json.loads(l))]
        if name == "results.jsonl": n = len(lines) - len(keep)
        p.write_text("".join(keep), encoding="utf-8")
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drop", action="store_true", help="remove the pairs that missed from their runs' rows")
    a, rest = ap.parse_known_args()
    misses = lenient_replay(rest)
    runs = collections.defaultdict(lambda: dict(pairs=set(), calls=collections.Counter()))
    for m in misses:
        r = runs[m["run"] or "(outside a run)"]
        if m["pair"]: r["pairs"].add(tuple(m["pair"]))
        r["calls"][f"{m['kind']} {m['stage']}"] += m["n"]
    if not runs: print("every pair replays from the committed caches"); return
    for name, r in sorted(runs.items()):
        print(f"{name}: {len(r['pairs'])} pair(s) need calls the cache lacks; missing: "
              + ", ".join(f"{k} {v}" for k, v in sorted(r["calls"].items())))
        for q, m in sorted(r["pairs"]): print(f"  {q} {m}")
        if a.drop and r["pairs"]:
            if not (ROOT / name / "results.jsonl").is_file(): sys.exit(f"{name}: no run folder there")
            print(f"  dropped {drop_pairs(ROOT / name, r['pairs'])} rows from {name}")


if __name__ == "__main__":
    main()
