#!/usr/bin/env python
"""Compare the retrieval metrics (and PASS, where both runs were judged) of two `pace run` folders query by query: per
method, each metric in A and in B and the paired difference B - A (points) with its 95% bootstrap interval over the
queries both hold. Each run is scored as its own tables score it (a run under the paper preset: repeats kept).

    .venv/bin/python scripts/compare_retrieval.py results/mini-all-retrieval-bm25-pace results/mini-all-retrieval-bm25-release
"""
import argparse, json
from pathlib import Path
import pandas as pd
from pace.eval.evaluate import read_jsonl, results_frame
from pace.metrics import bootstrap_ci

METRICS = ("recall@10", "gold@10", "hit@10", "release_precision@10", "mrr@10", "mrr")


def compare(run_a: Path, run_b: Path, methods=None, metrics=METRICS) -> pd.DataFrame:
    "One row per (method, metric): mean in A and in B (%), and B - A in points with its 95% bootstrap interval."
    meta = lambda r: json.loads((Path(r) / "run.json").read_text()) if (Path(r) / "run.json").exists() else None
    a, b = (results_frame(read_jsonl(Path(r) / "results.jsonl"), meta=meta(r)).set_index(["method", "query_id"])
            for r in (run_a, run_b))
    a, b = a[a.ranked], b[b.ranked]
    if a["pass"].notna().any() and b["pass"].notna().any(): metrics = (*metrics, "pass")
    both = a.index.intersection(b.index)
    out = []
    for m in methods or list(dict.fromkeys(both.get_level_values("method"))):
        idx = [k for k in both if k[0] == m]
        for c in metrics:
            d = 100 * (b.loc[idx, c] - a.loc[idx, c]).to_numpy(float)
            lo, hi = bootstrap_ci(d)
            out.append(dict(method=m, metric=c, n=len(idx), A=100 * a.loc[idx, c].mean(), B=100 * b.loc[idx, c].mean(),
                            **{"B - A": d.mean(), "95% CI": f"[{lo:+.1f}, {hi:+.1f}]"}))
    return pd.DataFrame(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path); ap.add_argument("run_b", type=Path)
    ap.add_argument("--methods", default=None, help="comma-separated (default: every ranked method both runs hold)")
    a = ap.parse_args(argv)
    print(compare(a.run_a, a.run_b, a.methods.split(",") if a.methods else None).round(1).to_markdown(index=False))


if __name__ == "__main__":
    main()
