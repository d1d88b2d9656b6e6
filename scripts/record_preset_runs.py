#!/usr/bin/env python
"""Record, or resume, the paper preset's committed runs under the preset as it is now (no output caps, no re-asks,
10 answer facts, repeats kept, the context grown when a prompt needs it).

    .venv/bin/python scripts/record_preset_runs.py n24             # the 24-query answered run (Tables 2, 3, 21, 22)
    .venv/bin/python scripts/record_preset_runs.py all-retrieval   # the 72-query retrieval-only run

Each run is recorded into `recordings/<run>/` with `pace.eval.reproduce.recorded_run`. With the bundled 0.5B model on
a CPU the preset is slow: a reply that loops runs to the end of the 8,192-token context (one planner reply took 29
minutes on 2 cores), so a recording takes several sittings. A stop (Ctrl-C, SIGTERM, the end of a session) exports
the call cache beside the rows (`cache.jsonl.gz`, vectors to `results/_embeddings/`); commit the folder and the next
sitting resumes it, asking only what is still missing. `all-retrieval` starts from the 24-query run's export, whose
PaceMaker calls it shares. When a run is complete, move its folder to `results/main_results/`, point its entry in
`nbs/experiments/settings.json` at it without the pins of the earlier preset, and `pace reproduce 05` replays it.
"""
import argparse
from pathlib import Path
from pace.cache import Cache, import_cache
from pace.eval.reproduce import recorded_run
from pace.eval.run import stop_on_sigterm

ROOT = Path(__file__).resolve().parent.parent
COMMON = dict(dataset=str(ROOT / "data/mini"), chat="llamacpp:qwen2.5-0.5b", judge=None, embedder=None, preset="paper")
RUNS = {   # run -> (its folder name, its own settings), as in nbs/experiments/settings.json
    "n24": ("mini-qwen2.5-0.5b-paper-n24",
            dict(methods=["oracle", "bm25", "dense", "hybrid", "pacemaker"], limit=24, retrieval_only=False)),
    "all-retrieval": ("mini-qwen2.5-0.5b-paper-all-retrieval",
                      dict(methods=["bm25", "dense", "hybrid", "hybrid@15", "pacemaker"], limit=0,
                           retrieval_only=True, depth=100)),
}


def record(run: str, where: Path = ROOT / "recordings") -> str:
    "Record or resume `run` in `where`/<its folder>; a summary line (a stop raises, after the export)."
    name, own = RUNS[run]
    out, store = where / name, ROOT / "results/_embeddings"
    shared = where / RUNS["n24"][0] / "cache.jsonl.gz"
    if run != "n24" and shared.exists() and not (out / "cache.sqlite").exists() and not (out / "cache.jsonl.gz").exists():
        out.mkdir(parents=True, exist_ok=True)   # the calls the two runs share are made once
        import_cache(Cache(out / "cache.sqlite"), shared, embeddings=store)
    with stop_on_sigterm():
        return recorded_run(out, store, **COMMON, **own)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", choices=sorted(RUNS))
    a = ap.parse_args(argv)
    try: print(record(a.run), flush=True)
    except KeyboardInterrupt as e:   # Ctrl-C or SIGTERM: the rows so far and the export stay; the same command resumes
        raise SystemExit(f"record_preset_runs: {e}; its calls are exported beside it: rerun the same command to resume")


if __name__ == "__main__":
    main()
