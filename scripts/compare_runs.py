#!/usr/bin/env python
"""Compare one method across two `pace run` folders, query by query: tokens and model seconds per stage, and retrieval.

Only the queries both runs hold are compared. Model seconds are what the calls took when they were made (a cache hit
keeps the seconds of the call that filled it), so compare seconds only between runs made on equally busy machines.

    .venv/bin/python scripts/compare_runs.py results/prompt_tokens/docid results/prompt_tokens/position --method pacemaker
"""
import argparse
from pathlib import Path
import numpy as np, pandas as pd
from pace.eval.evaluate import read_jsonl, results_frame
from pace.metrics import bootstrap_ci


def stage_frame(run: Path, method: str) -> pd.DataFrame:
    "One row per (query, stage) of `method`: prompt and completion tokens, calls, and model seconds."
    secs = {}
    tpath = run / "timings.jsonl"
    for t in read_jsonl(tpath) if tpath.exists() else []:
        if t["method"] == method:
            for st, u in ((t.get("volatile") or {}).get("usage") or {}).items(): secs[(t["query_id"], st)] = u.get("model_seconds", np.nan)
    out = [dict(query_id=r["query_id"], stage=st, calls=u.get("calls", 0), prompt_tokens=u.get("prompt_tokens", 0),
                completion_tokens=u.get("completion_tokens", 0), model_seconds=secs.get((r["query_id"], st), np.nan))
           for r in read_jsonl(run / "results.jsonl") if r["method"] == method for st, u in (r.get("usage") or {}).items()]
    if not out: raise SystemExit(f"{run}: no rows of method {method!r}")
    return pd.DataFrame(out)


def paired(a: pd.Series, b: pd.Series) -> str:
    "Mean of b - a with its 95% bootstrap interval (per-query pairs)."
    d = (b - a).to_numpy(dtype=float)
    lo, hi = bootstrap_ci(d)
    return f"{d.mean():+.3g} [{lo:+.3g}, {hi:+.3g}]"


def compare(run_a: Path, run_b: Path, method: str, method_b: str | None = None) -> str:
    method_b = method_b or method
    sa, sb = stage_frame(run_a, method), stage_frame(run_b, method_b)
    qs = sorted(set(sa.query_id) & set(sb.query_id))
    if not qs: raise SystemExit("the two runs share no query")
    sa, sb = sa[sa.query_id.isin(qs)], sb[sb.query_id.isin(qs)]
    per_stage = lambda s: s.groupby("stage")[["calls", "prompt_tokens", "completion_tokens", "model_seconds"]].sum() / len(qs)
    pa, pb = per_stage(sa), per_stage(sb)
    rows = []
    for st in list(dict.fromkeys(list(pa.index) + list(pb.index))) + ["all"]:
        x = pa.sum() if st == "all" else pa.loc[st] if st in pa.index else pd.Series(0.0, pa.columns)
        y = pb.sum() if st == "all" else pb.loc[st] if st in pb.index else pd.Series(0.0, pb.columns)
        rows.append(dict(stage=st, **{f"{c} (A)": round(x[c], 1) for c in pa.columns}, **{f"{c} (B)": round(y[c], 1) for c in pa.columns},
                         prompt_change=f"{(y.prompt_tokens / x.prompt_tokens - 1) * 100:+.1f}%" if x.prompt_tokens else "n/a",
                         seconds_change=f"{(y.model_seconds / x.model_seconds - 1) * 100:+.1f}%" if x.model_seconds else "n/a"))
    fa = results_frame([r for r in read_jsonl(run_a / "results.jsonl") if r["method"] == method and r["query_id"] in qs]).set_index("query_id").loc[qs]
    fb = results_frame([r for r in read_jsonl(run_b / "results.jsonl") if r["method"] == method_b and r["query_id"] in qs]).set_index("query_id").loc[qs]
    ret = []
    for col in [c for c in ("recall@10", "gold@10", "hit@10") if c in fa.columns]:
        ret.append(dict(metric=col, A=f"{fa[col].mean() * 100:.1f}", B=f"{fb[col].mean() * 100:.1f}", **{"B - A (points, 95% CI)": paired(fa[col] * 100, fb[col] * 100)}))
    lines = [f"A = {run_a} ({method}), B = {run_b} ({method_b}); {len(qs)} queries in both", "",
             "Per query, by stage (model seconds: as measured when each call was made):", "",
             pd.DataFrame(rows).to_markdown(index=False), "", pd.DataFrame(ret).to_markdown(index=False)]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path); ap.add_argument("run_b", type=Path)
    ap.add_argument("--method", default="pacemaker"); ap.add_argument("--method-b", default=None, help="B's method (default: --method)")
    a = ap.parse_args(argv)
    print(compare(a.run_a, a.run_b, a.method, a.method_b))


if __name__ == "__main__":
    main()
