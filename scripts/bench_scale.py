#!/usr/bin/env python
"""Time and memory of `pace run --retrieval-only` (BM25, Dense, Hybrid) on one instance with a 200,000-fact KB.

It writes a deterministic dataset folder: the instance mini-01 of data/mini (its ego, its 18 queries, its 561
facts) with synthetic facts (the templates of scripts/bench_retrieval.py) added up to --facts. It then runs

    pace run --data DATA --retrieval-only --methods bm25 dense hybrid --embedder hash --all

in a child process (the code of --code: a checkout of pace, default this one) and prints the wall seconds, the
indexing seconds (the index manifest's timings), each method's mean seconds per query (timings.jsonl), the
child's peak RSS (`ru_maxrss`), the size of the run's cache file and of its index folder. With --compare RUN it
checks that each (query, method) of the new run retrieved the same ids as in RUN (an earlier run folder, e.g. the
one made by the old code). With --graph it also builds the neighbour graph of that index in a second child (the
approximate k-NN above `pace.index.GRAPH_EXACT_MAX`) and reports its seconds, peak RSS and recall@10 against the
exact neighbours of --recall-rows sampled rows.

    .venv/bin/python scripts/bench_scale.py --out /tmp/scale --name after --graph
    .venv/bin/python scripts/bench_scale.py --code /tmp/main --out /tmp/scale --name before
    .venv/bin/python scripts/bench_scale.py --out /tmp/scale --name after --compare /tmp/scale/before
"""
import argparse, json, os, shutil, subprocess, sys, time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_retrieval import synthetic_facts   # noqa: E402  (the same fact templates)

INSTANCE = "mini-01"


def make_dataset(src: Path, dst: Path, n: int) -> Path:
    "Write the dataset folder `dst`: instance mini-01 of `src`, its queries and facts, synthetic facts up to `n`."
    stamp = dst / ".bench-facts"
    if stamp.exists() and stamp.read_text() == str(n): return dst
    if dst.exists(): shutil.rmtree(dst)
    (dst / "kb").mkdir(parents=True)
    pick = lambda p: [l for l in p.read_text().splitlines() if json.loads(l)["instance_id"] == INSTANCE]
    (dst / "instances.jsonl").write_text("\n".join(pick(src / "instances.jsonl")) + "\n")
    (dst / "queries.jsonl").write_text("\n".join(pick(src / "queries.jsonl")) + "\n")
    real = (src / "kb" / f"{INSTANCE}.jsonl").read_text().splitlines()
    extra = synthetic_facts(max(0, n - len(real)), seed=0)
    with open(dst / "kb" / f"{INSTANCE}.jsonl", "w") as f:
        for l in real: f.write(l + "\n")
        for x in extra:
            f.write(json.dumps({"doc_id": f"{INSTANCE}-s{x.doc_id[1:]:0>6}", "text": x.text,
                                "meta": {"origin": "synthetic", "cases": []}}) + "\n")
    stamp.write_text(str(n))
    return dst


def child(code: Path, args: list, log: Path) -> tuple[float, float, int]:
    "Run `python args` with `code` first on the path: (wall seconds, peak RSS in MB, exit status)."
    env = dict(os.environ, PYTHONPATH=str(code), PACE_REPLAY="", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", ""))
    if not env["OMP_NUM_THREADS"]: env.pop("OMP_NUM_THREADS")
    t = time.perf_counter()
    with open(log, "w") as f:
        # a fresh interpreter per child: ru_maxrss of RUSAGE_CHILDREN is the largest child so far
        p = subprocess.Popen([sys.executable, *args], env=env, stdout=f, stderr=subprocess.STDOUT, cwd=code)
        _, status, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def folder_mb(p: Path) -> float:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6 if p.exists() else 0.0


def report_run(run: Path) -> dict:
    "Indexing seconds from the index manifest, and each method's mean seconds per query."
    mans = sorted((run / "index").glob("*/manifest.json"))
    t = json.loads(mans[0].read_text())["timings"] if mans else {}
    per = {}
    for l in (run / "timings.jsonl").read_text().splitlines():
        r = json.loads(l); per.setdefault(r["method"], []).append(r["seconds"])
    return dict(index_timings={k: round(v, 1) for k, v in t.items()},
                index_s=round(sum(t.get(k, 0.0) for k in ("embed_s", "faiss_s", "bm25_s", "graph_s")), 1),
                per_query_s={m: round(sum(v) / len(v), 3) for m, v in per.items()},
                cache_mb=round(sum(p.stat().st_size for p in run.glob("cache.sqlite*")) / 1e6, 1),
                index_mb=round(folder_mb(run / "index"), 1))


def compare(new: Path, old: Path) -> str:
    "Whether each (query, method) retrieved the same ids in both runs."
    rows = lambda p: {(r["query_id"], r["method"]): r["retrieved_ids"]
                      for r in map(json.loads, (p / "results.jsonl").read_text().splitlines())}
    a, b = rows(new), rows(old)
    same = sum(a[k] == b.get(k) for k in a)
    diff = sorted(k for k in a if a[k] != b.get(k))
    return f"{same} of {len(a)} (query, method) rankings identical to {old}" + (f"; differ: {diff[:5]}" if diff else "")


GRAPH = r"""
import json, resource, sys, time, numpy as np
from types import SimpleNamespace
from pace.index import InstanceIndex
from pace.embed import HashEmbedder
run, rows = sys.argv[1], int(sys.argv[2])
facts = [SimpleNamespace(doc_id=r["doc_id"], text=r["text"]) for r in map(json.loads, open(sys.argv[3]))]
t = time.perf_counter()
idx = InstanceIndex.load(run + "/index/mini-01", facts, HashEmbedder(cache=False), knn_k=10)
t1 = time.perf_counter()
gi = idx.graph_ids
t2 = time.perf_counter()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # before the recall's own arrays
r = np.sort(np.random.default_rng(0).choice(len(idx), size=min(rows, len(idx)), replace=False))
k, got = gi.shape[1], []
for s in range(0, len(r), 50):   # exact similarities of 50 sampled rows at a time
    rr = r[s:s + 50]
    sims = idx.vectors[rr] @ idx.vectors.T
    sims[np.arange(len(rr)), rr] = -np.inf
    kth = -np.partition(-sims, k - 1, axis=1)[:, k - 1]   # the exact k-th best similarity (a tie counts as found)
    got += [(sims[i, g[g >= 0]] >= kth[i] - 1e-5).sum() for i, g in enumerate(gi[rr])]
print(json.dumps(dict(load_s=round(t1 - t, 1), graph_s=round(t2 - t1, 1), graph_peak_rss_mb=round(rss),
                      recall_at_10=round(float(np.mean(got)) / k, 4), rows=len(r), kind=idx.graph_kind)))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--facts", type=int, default=200_000, help="facts in the KB")
    ap.add_argument("--code", type=Path, default=HERE.parent, help="the pace checkout to run")
    ap.add_argument("--out", type=Path, default=Path("/tmp/pace-scale"), help="folder of the dataset and the runs")
    ap.add_argument("--name", default="run", help="run folder name inside --out")
    ap.add_argument("--compare", type=Path, help="an earlier run folder: check that the rankings are the same")
    ap.add_argument("--graph", action="store_true", help="also build the neighbour graph and report its recall")
    ap.add_argument("--recall-rows", type=int, default=1000, help="rows sampled for the graph's recall")
    ap.add_argument("--graph-only", action="store_true", help="only the graph of the run --name made before")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    data = make_dataset(HERE.parent / "data" / "mini", a.out / f"kb{a.facts}", a.facts)
    run = a.out / a.name
    if a.graph_only: return print(json.dumps(graph(a, data, run), indent=1))
    if run.exists(): shutil.rmtree(run)
    cmd = ["-m", "pace.cli", "run", "--data", str(data), "--retrieval-only", "--methods", "bm25,dense,hybrid",
           "--embedder", "hash:hash", "--all", "--out", str(a.out), "--name", a.name, "--no-progress"]
    wall, rss, rc = child(a.code.resolve(), cmd, a.out / f"{a.name}.log")
    if rc: sys.exit(f"pace run failed ({rc}): see {a.out / f'{a.name}.log'}")
    res = dict(code=str(a.code), facts=a.facts, embedder="hash:hash (dim 256)", wall_s=round(wall, 1),
               peak_rss_mb=round(rss), **report_run(run), loadavg=os.getloadavg())
    if a.compare: res["compare"] = compare(run, a.compare)
    if a.graph: res["graph"] = graph(a, data, run)
    print(json.dumps(res, indent=1))


def graph(a, data: Path, run: Path) -> dict:
    "Build the neighbour graph of `run`'s index in a child; its seconds, peak RSS and recall against the exact one."
    g_log = a.out / f"{a.name}-graph.log"
    kb = data / "kb" / f"{INSTANCE}.jsonl"
    w, _, rc = child(a.code.resolve(), ["-c", GRAPH, str(run), str(a.recall_rows), str(kb)], g_log)
    if rc: sys.exit(f"graph build failed ({rc}): see {g_log}")
    return dict(json.loads(g_log.read_text().splitlines()[-1]), wall_s=round(w, 1), loadavg=os.getloadavg())


if __name__ == "__main__":
    main()
