#!/usr/bin/env python
"""Benchmark pace's indexing and the non-model part of PaceMaker retrieval on synthetic KBs.

For each KB size it prints the index build seconds (embedding vs FAISS add, BM25 build and the
k-NN graph) and the per-query time of everything that is not a model call: dense search with
precomputed query vectors, BM25, WRRF over 4 views x 2 retrievers, and BFS (H=5, M=3) from 10 seeds.

Sizes up to --embed-max are embedded with the real embedder (pace.embed's default: int8 ONNX
MiniLM). Above it, the embedder is timed on a sample of --embed-sample facts and the full time is
extrapolated (marked "~" in the table); the indexes are then built from synthetic vectors: real
sample embeddings plus Gaussian noise, so that they keep some neighbourhood structure. Sizes from
--approximate-from up use an approximate FAISS index (IVF by default) for dense search and for
the k-NN graph instead of the exact one; graph_r10 reports how much of the exact graph it finds.

    .venv/bin/python scripts/bench_retrieval.py                       # 2K, 20K, 200K
    .venv/bin/python scripts/bench_retrieval.py --sizes 2000 --embedder hash   # no model at all
"""
import argparse, statistics, sys, time
import faiss, numpy as np

from pace.embed import get_embedder
from pace.index import InstanceIndex
from pace.retrieve import hybrid_search, wrrf
from pace.traverse import bfs_expand

NAMES = "Mina Joon Sofia Tariq Elena Kenji Amara Lucas Priya Omar Hana Diego Ingrid Wei Zara Felix".split()
RELS = "brother sister mother father manager colleague neighbour friend cousin landlord coach dentist".split()
PLACES = ("Riverside clinic|city library|Harbor gym|Central station|Blue Door cafe|Maple hotel|north office|"
          "community pool|Lotus Thai restaurant|airport terminal 2|Oak Street pharmacy|concert hall").split("|")
EVENTS = ("dentist appointment|team review|yoga class|piano lesson|flight to Lisbon|birthday dinner|job interview|"
          "car service|parent-teacher meeting|physiotherapy session|book club|tax deadline").split("|")
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
FOODS = "peanuts shellfish gluten dairy eggs sesame soy strawberries".split()
PREFS = ("window seats|quiet rooms|early flights|vegetarian meals|aisle seats|morning workouts|"
         "short walks|spicy food|late check-out|public transport").split("|")
CITIES = "Busan Lisbon Oslo Lyon Kyoto Austin Porto Accra Lima Perth".split()
TEMPLATES = [
    "{n} has a {e} at the {p} on {d} at {h}:{m:02d}.",
    "{n}'s {r} {n2} lives in {c} and visits on {d}s.",
    "The {p} closes at {h}:{m:02d} on {d}s.",
    "{n} is allergic to {f} and avoids dishes that contain them.",
    "{n} prefers {pr} when travelling to {c}.",
    "{n} booked the {e} for {d} {h}:{m:02d} through the {p}.",
    "{n} usually takes {k} minutes to get from home to the {p}.",
    "{n}'s {r} {n2} asked {n} to help with the {e} on {d}.",
    "{n} renewed a membership at the {p} in {c} last {d}.",
    "{n} has been recovering from a knee injury since {d} and walks {k} minutes a day.",
]


def synthetic_facts(n, seed=0):
    "n varied fact sentences (doc_id, text) built from templates."
    from collections import namedtuple
    Fact = namedtuple("Fact", "doc_id text")
    rng = np.random.default_rng(seed)
    pick = lambda xs: xs[rng.integers(len(xs))]
    out = []
    for i in range(n):
        t = pick(TEMPLATES).format(n=pick(NAMES), n2=pick(NAMES), r=pick(RELS), p=pick(PLACES), e=pick(EVENTS),
                                   d=pick(DAYS), h=int(rng.integers(6, 23)), m=int(rng.choice([0, 15, 30, 45])),
                                   f=pick(FOODS), pr=pick(PREFS), c=pick(CITIES), k=int(rng.integers(5, 90)))
        out.append(Fact(f"f{i}", f"{t} (note {i})"))
    return out


def synthetic_queries(nq, seed=1):
    "nq groups of 4 views (original + 3 counter views) with paper weights."
    rng = np.random.default_rng(seed)
    pick = lambda xs: xs[rng.integers(len(xs))]
    out = []
    for _ in range(nq):
        n, e, p, d = pick(NAMES), pick(EVENTS), pick(PLACES), pick(DAYS)
        out.append([(f"Book {n} a {e} at the {p} on {d} evening.", 1.0),
                    (f"{n} schedule commitments on {d}", 1.2),
                    (f"{p} opening hours {d}", 1.2),
                    (f"{n} health, allergies or travel that block a {e}", 1.2)])
    return out


class ReplayEmbedder:
    "Hands out precomputed vectors in order (used to build big indexes from random vectors)."
    def __init__(self, model_id, vectors): self.model_id, self.dim, self.v, self.i = model_id, vectors.shape[1], vectors, 0
    def embed(self, texts, *, stage="embed", show_progress=False):
        out = self.v[self.i:self.i + len(texts)]; self.i += len(texts)
        return out


def perturbed(sample, n, seed=0, sigma=0.6):
    "n unit vectors, each a real sample embedding plus Gaussian noise (cosine ~0.86 to its source)."
    rng = np.random.default_rng(seed)
    v = sample[rng.integers(len(sample), size=n)] + rng.standard_normal((n, sample.shape[1]), dtype=np.float32) * (sigma / sample.shape[1] ** 0.5)
    return np.ascontiguousarray(v / np.linalg.norm(v, axis=1, keepdims=True), dtype=np.float32)


def graph_recall(idx, rows=200, seed=0):
    "Share of the exact top-10 neighbours that the graph holds, on a sample of rows."
    r = np.random.default_rng(seed).choice(len(idx), size=min(rows, len(idx)), replace=False)
    sims = idx.vectors[r] @ idx.vectors.T
    sims[np.arange(len(r)), r] = -np.inf
    k = idx.graph_ids.shape[1]
    kth = -np.partition(-sims, k - 1, axis=1)[:, k - 1]          # exact k-th best similarity (ties count as found)
    got = [(sims[i, g[g >= 0]] >= kth[i] - 1e-5).sum() for i, g in enumerate(idx.graph_ids[r])]
    return float(np.mean(got) / k)


def bench_size(n, emb, args):
    facts = synthetic_facts(n, seed=n)          # a fresh KB per size: nothing is shared between sizes
    queries = synthetic_queries(args.queries, seed=n + 1)
    approximate = args.approximate_kind if n >= args.approximate_from else False
    real = n <= args.embed_max
    if real:
        idx = InstanceIndex.build(facts, emb, knn_k=10, approximate=approximate, show_progress=args.progress)
        embed_s, embed_note = idx.timings["embed_s"], ""
        qv = [idx.embed_queries([t for t, _ in q]) for q in queries]       # not timed: a model call
    else:
        sample = [f.text for f in facts[:args.embed_sample]]
        t = time.perf_counter(); sv = emb.embed(sample, stage="bench"); dt = time.perf_counter() - t
        embed_s, embed_note = dt * n / len(sample), "~"
        idx = InstanceIndex.build(facts, ReplayEmbedder(emb.model_id, perturbed(sv, n)), knn_k=10,
                                  approximate=approximate, show_progress=args.progress)
        qv = [perturbed(sv, 4, seed=s + 1) for s in range(len(queries))]
    idx.graph_ids                               # built on first use (pace.index): now, so that graph_s counts it
    tm = idx.timings
    rest_s = tm["faiss_s"] + tm["bm25_s"] + tm["graph_s"]
    # per-query, non-model work
    parts = {"dense": [], "bm25": [], "wrrf": [], "bfs": [], "total": []}
    pool, hyb = [], []
    for views, v in zip(queries, qv):
        texts, weights = [t for t, _ in views], [w for _, w in views]
        t0 = time.perf_counter(); dense = idx.dense_by_vector(v, 10)
        t1 = time.perf_counter(); sparse = idx.sparse(texts, 10)
        t2 = time.perf_counter()
        runs = [([d for d, _ in hits], w) for w, dh, sh in zip(weights, dense, sparse) for hits in (dh, sh)]
        seeds = [d for d, _ in wrrf(runs, k=60)[:20]][:10]
        t3 = time.perf_counter(); visits = bfs_expand(idx.neighbors, seeds, depth=5, m=3)
        t4 = time.perf_counter()
        hybrid_search(idx, views, top_k=10, n_fused=20, query_vectors=v)   # the same work through the public API
        t5 = time.perf_counter()
        for k, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)): parts[k].append(dt)
        hyb.append(t5 - t4 + t4 - t3)
        pool.append(len(visits))
    ms = lambda xs: 1000 * statistics.fmean(xs)
    med = lambda xs: 1000 * statistics.median(xs)
    p95 = lambda xs: 1000 * float(np.percentile(xs, 95))
    return dict(n=n, index=approximate or "exact", graph_r10=f"{graph_recall(idx):.3f}", embed=f"{embed_note}{embed_s:.1f}",
                faiss=f"{tm['faiss_s']:.2f}", bm25=f"{tm['bm25_s']:.2f}", graph=f"{tm['graph_s']:.2f}", rest=f"{rest_s:.2f}",
                dense_ms=f"{ms(parts['dense']):.2f}", bm25_ms=f"{ms(parts['bm25']):.2f}", wrrf_ms=f"{ms(parts['wrrf']):.2f}",
                bfs_ms=f"{ms(parts['bfs']):.2f}", query_ms=f"{ms(parts['total']):.2f}", med_ms=f"{med(parts['total']):.2f}", api_ms=f"{ms(hyb):.2f}", p95_ms=f"{p95(parts['total']):.2f}",
                pool=f"{statistics.fmean(pool):.0f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2000,20000,200000", help="comma-separated KB sizes")
    ap.add_argument("--queries", type=int, default=50, help="queries (4 views each) per size")
    ap.add_argument("--embedder", default="default", help="'default' (pace.embed), 'hash' (no model) or a pace.embed spec")
    ap.add_argument("--embed-max", type=int, default=20000, help="largest size embedded in full with the real embedder")
    ap.add_argument("--embed-sample", type=int, default=1000, help="facts embedded to extrapolate larger sizes")
    ap.add_argument("--approximate-from", type=int, default=200000, help="sizes from here up use an approximate index")
    ap.add_argument("--approximate-kind", default="ivf", choices=["ivf", "hnsw"], help="which approximate index")
    ap.add_argument("--progress", action="store_true", help="show tqdm bars while building")
    args = ap.parse_args(argv)
    spec = {"default": None, "hash": {"backend": "hash", "model": "hash", "dim": 384}}.get(args.embedder, args.embedder)
    emb = get_embedder(spec, cache=False)   # time the model, not the cache
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for n in sizes:
        print(f"[bench] {n} facts ...", file=sys.stderr, flush=True)
        rows.append(bench_size(n, emb, args))
    cols = list(rows[0])
    w = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print(f"embedder: {emb.model_id} (dim {emb.dim}); {args.queries} queries x 4 views; BFS H=5 M=3 from 10 seeds; knn_k=10; "
          f"FAISS threads: {faiss.omp_get_max_threads()} for builds, 1 for query batches < 32 (pace.index.SMALL_BATCH)")
    print("build seconds: embed | faiss (add) | bm25 (build) | graph (k-NN) | rest = faiss+bm25+graph")
    print("per-query ms (no model calls): dense (4 precomputed vectors) | bm25 (4 views) | wrrf (8 runs) | bfs | query = sum of those (mean), med = its median | api = hybrid_search()+bfs_expand() | p95 of query")
    print("  ".join(c.rjust(w[c]) for c in cols))
    for r in rows: print("  ".join(str(r[c]).rjust(w[c]) for c in cols))
    print("graph_r10 = share of the exact top-10 neighbours found in the k-NN graph (200 sampled rows).")
    if any(n > args.embed_max for n in sizes):
        print(f"~ = extrapolated from embedding {args.embed_sample} facts with the real embedder; those sizes index synthetic vectors "
              f"(a real sample embedding + Gaussian noise, cosine ~0.86 to it), dim {emb.dim}.")
    if any(n >= args.approximate_from for n in sizes):
        print(f"sizes >= {args.approximate_from} use the approximate '{args.approximate_kind}' index for dense search and for the k-NN graph "
              "(ivf: ~4*sqrt(n) lists, 16 probed; hnsw: M=32, efConstruction=80, efSearch=128).")


if __name__ == "__main__":
    main()
