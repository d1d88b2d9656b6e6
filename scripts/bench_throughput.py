#!/usr/bin/env python
"""Throughput of `pace run`: pairs at once against a server, stage batching against a server that batches, and PaceMaker's non-model time per query at scale.

(a) `pace run --workers N` (run_experiment(workers=N)) against a loopback OpenAI-compatible fake server that this
    script starts itself and that answers every request after a fixed latency (--latency, default 0.5 s): pairs per
    second for 1, 2, 4, 8, 16 workers and the speed-up over 1 worker. Methods bm25 and pacemaker (5 agent calls, an
    answer, 1-2 judge calls per pair), --queries queries of data/mini, no cache (every call reaches the server).
(b) `pace run --batch N` (run_experiment(batch=N), PaceMaker's stage batching) of method pacemaker against a loopback
    server that batches: the requests arriving within --window (20 ms) of a batch's first one, at most --max-server-batch,
    are answered together after one --latency, as a server with continuous batching would. Batch 1, 4, 8, 16 with the
    openai backend's concurrency set in the spec to --concurrency (default 4 x the largest batch, so that a stage's
    requests are in flight together), and one more row at the largest batch with the backend's default concurrency (4).
    Pairs per second, requests (of them judge calls: `--batch` does not batch the judge), server batches and their mean
    and largest size, and whether every run's results.jsonl has batch 1's rows apart from volatile fields.
(c) PaceMaker's non-model time per pair as `pace run` spends it (`pace.eval.run._run_pair`: the KB's public facts, the
    index store, hybrid search of every view, WRRF, BFS, the filters' bookkeeping, the funnel) with a scripted chat
    model that answers at once, on synthetic KBs of 2K, 20K and 200K facts (hash embedder, dim 64, flat FAISS), for
    this tree ("after") and for the package at --before-rev ("before", extracted with `git archive` into a temp folder;
    skipped when git or the revision is not there). The k-NN graph of the 200K KB is built with an IVF index to save
    minutes (search is flat).

    .venv/bin/python scripts/bench_throughput.py            # about 8-11 minutes on 2 busy cores
    .venv/bin/python scripts/bench_throughput.py --quick    # about 2 minutes: 0.1 s latency, 8 queries, batches 1-8, 2K/20K
"""
import argparse, json, os, subprocess, sys, tempfile, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEFORE_REV = "ad889f6af139b98095b8e326a402d144ad6d79b3"   # the commit before pairs at once and the non-model speed-ups


# --- (a) a loopback OpenAI-compatible server with a fixed latency -----------------------------------------------------

from pace.testing import schema_reply
reply_for = schema_reply   # the same deterministic, schema-following reply as the tests' fake model


class FakeServer:
    "POST /v1/chat/completions answered after `latency` seconds, every request in its own thread (a server with free capacity)."
    def __init__(self, latency):
        self.latency, self.n, self._lock = latency, 0, threading.Lock()
        outer = self
        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *a): pass
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.wait()
                status, text = outer.respond(body)
                out = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}} if status == 200
                                 else {"error": {"message": text, "type": "rate_limit" if status == 429 else "server_error"}}).encode()
                self.send_response(status); self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
        class S(ThreadingHTTPServer):
            request_queue_size, daemon_threads = 256, True   # many connections may open at once (the default backlog is 5)
        self.server = S(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
    def respond(self, body):
        "(HTTP status, reply text) of a request body: here 200 and the schema-following reply (`reply_for`)."
        rf = body.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else None
        return 200, reply_for(body["messages"], schema)
    def wait(self):
        "Called by every request before it is answered: here one `latency` each."
        time.sleep(self.latency)
        with self._lock: self.n += 1
    def __enter__(self): threading.Thread(target=self.server.serve_forever, daemon=True).start(); return self
    def __exit__(self, *a): self.server.shutdown(); self.server.server_close()


class BatchingFakeServer(FakeServer):
    """`FakeServer` that batches like a server with continuous batching: the requests that arrive within `window` seconds
    of a batch's first one (at most `max_batch`) are answered together, `latency` seconds after the batch closes."""
    def __init__(self, latency, window=0.02, max_batch=64):
        super().__init__(latency)
        self.window, self.max_batch, self.batches, self.largest = window, max_batch, 0, 0
        self._cond, self._open = threading.Condition(self._lock), None
    def wait(self):
        with self._cond:
            b = self._open
            if b is None or b["closed"] is not None:   # open a new batch
                b = self._open = {"opened": time.monotonic(), "closed": None, "n": 0}; self.batches += 1
            b["n"] += 1; self.n += 1; self.largest = max(self.largest, b["n"])
            if b["n"] >= self.max_batch: b["closed"] = time.monotonic(); self._cond.notify_all()
            while b["closed"] is None:
                left = b["opened"] + self.window - time.monotonic()
                if left <= 0: b["closed"] = b["opened"] + self.window; self._cond.notify_all(); break
                self._cond.wait(left)
            done = b["closed"] + self.latency
        time.sleep(max(0.0, done - time.monotonic()))   # the whole batch costs one latency


def bench_workers(args):
    from pace.llm import get_chat_model
    from pace.eval.run import run_experiment
    rows, base = [], None
    with FakeServer(args.latency) as srv, tempfile.TemporaryDirectory() as d:
        spec = {"backend": "openai", "model": "fake", "base_url": srv.url, "json_mode": "json_schema", "max_retries": 0,
                "concurrency": 1}
        def run(w, name, limit):
            return run_experiment(dataset=str(ROOT / "data/mini"), methods=["bm25", "pacemaker"], chat=get_chat_model(spec, cache=False),
                                  embedder={"backend": "hash", "model": "hash"}, out_dir=d, name=name, limit=limit, cache=False, progress=False, workers=w)
        run(1, "warm-up", 1)   # imports, the client and the KB's index: not charged to the first row
        for w in args.workers:
            t0, n0 = time.perf_counter(), srv.n
            r = run(w, f"w{w}", args.queries)
            secs = time.perf_counter() - t0
            rate = r["n_new"] / secs
            base = base or rate
            rows.append(dict(workers=w, pairs=r["n_new"], calls=srv.n - n0, seconds=round(secs, 1), pairs_per_s=round(rate, 2), speedup=round(rate / base, 1)))
            print(f"[bench] workers={w}: {r['n_new']} pairs in {secs:.1f} s", file=sys.stderr, flush=True)
        same = len({(Path(d) / f"w{w}" / "results.jsonl").read_bytes() for w in args.workers}) == 1
    return rows, same


# --- (b) stage batching against a server that batches ---------------------------------------------------------------

def bench_batching(args):
    """`run_experiment(batch=N)` of pacemaker against `BatchingFakeServer`, the openai backend's `concurrency` set in the
    spec to `args.concurrency` for every row; one more row at the largest batch with the backend's default concurrency.
    (rows, whether every run's results.jsonl equals batch 1's apart from VOLATILE fields)."""
    from pace.llm import get_chat_model
    from pace.data import load_done
    from pace.eval.run import run_experiment, split_volatile
    rows, base, runs = [], None, []
    plan = [(b, args.concurrency) for b in args.batches] + [(max(args.batches), None)]
    with BatchingFakeServer(args.latency, args.window, args.max_server_batch) as srv, tempfile.TemporaryDirectory() as d:
        def run(b, conc, name, limit):
            spec = {"backend": "openai", "model": "fake", "base_url": srv.url, "json_mode": "json_schema", "max_retries": 0,
                    **({"concurrency": conc} if conc else {})}
            cm = get_chat_model(spec, cache=False)
            return cm, run_experiment(dataset=str(ROOT / "data/mini"), methods=["pacemaker"], chat=cm, embedder={"backend": "hash", "model": "hash"},
                                      out_dir=d, name=name, limit=limit, cache=False, progress=False, batch=b)
        run(1, args.concurrency, "warm-up", 1)   # imports, the client, the KB's index: not charged to the first row
        for b, conc in plan:
            name = f"b{b}c{conc or 'default'}"
            with srv._lock: n0, k0 = srv.n, srv.batches; srv.largest = 0
            t0 = time.perf_counter()
            cm, r = run(b, conc, name, args.queries)
            secs = time.perf_counter() - t0
            rate, reqs, nb = r["n_new"] / secs, srv.n - n0, srv.batches - k0
            judge = sum(v["model_calls"] for acc in (r["accounts"]["chat"], r["accounts"]["judge"] or {})
                        for k, v in acc.items() if k.startswith("judge"))
            base = base or rate
            rows.append(dict(batch=b, concurrency=f"{cm.concurrency}" + ("" if conc else " (default)"), pairs=r["n_new"], requests=reqs,
                             judge_requests=judge, server_batches=nb, mean_batch=round(reqs / max(1, nb), 1), largest_batch=srv.largest,
                             seconds=round(secs, 1), pairs_per_s=round(rate, 2), speedup=round(rate / base, 1)))
            runs.append([split_volatile(x)[0] for x in load_done(Path(d) / name / "results.jsonl")])
            print(f"[bench] batch={b} concurrency={cm.concurrency}: {r['n_new']} pairs in {secs:.1f} s, {reqs} requests in {nb} server batches",
                  file=sys.stderr, flush=True)
    return rows, all(x == runs[0] for x in runs[1:])


# --- (c) non-model time per pair --------------------------------------------------------------------------------------

def build_kbs(sizes, root):
    "Synthetic KBs saved as pace indexes under root/<n>/index (what `IndexStore` loads), and their facts as JSONL; sizes already there are kept."
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_retrieval import synthetic_facts
    import faiss
    from pace.embed import get_embedder
    from pace.index import InstanceIndex, IndexStore
    emb = get_embedder({"backend": "hash", "model": "hash", "dim": 64}, cache=False)
    for n in sizes:
        if (root / str(n) / "facts.jsonl").exists(): continue   # written last: the KB is complete
        print(f"[bench] building a {n}-fact KB ...", file=sys.stderr, flush=True)
        facts = synthetic_facts(n, seed=n)
        idx = InstanceIndex.build(facts, emb, knn_k=10, approximate="ivf" if n > 50000 else False)
        if idx.approximate:   # the graph came from IVF (minutes saved); search stays flat
            idx.approximate = False; idx.faiss = faiss.IndexFlatIP(emb.dim); idx.faiss.add(idx.vectors)
        idx.save(IndexStore(root / str(n) / "index", emb).path("ego"))
        with open(root / str(n) / "facts.jsonl", "w") as f:
            for x in facts: f.write(json.dumps({"doc_id": x.doc_id, "text": x.text}) + "\n")


MEASURE = r'''
import json, re, sys, time, statistics
from types import SimpleNamespace as NS
from pace.embed import get_embedder
from pace.index import IndexStore
from pace.methods.pipeline import PaceMaker
from pace.testing import ScriptedChat
import pace.eval.run
root, n, nq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
facts = [NS(**json.loads(l)) for l in open(f"{root}/{n}/facts.jsonl")]
ids_in = lambda ms, k: re.findall(r"^\[([^\]]+)\]", ms[-1]["content"], re.M)[:k]
cm = ScriptedChat({"planner": lambda ms: {"directions": [{"dimension": "plans", "key_anchors": [ms[-1]["content"].split()[2]]}]},
                   "views": lambda ms: {"counter": ["commitments on Monday evening", "allergy peanuts dinner", "clinic opening hours"]},
                   "prehop": lambda ms: {"selected_doc_ids": ids_in(ms, 10)[::-1]},
                   "posthop": lambda ms: {"selected_doc_ids": ids_in(ms, 10)[::-1]}, "answer": "I won't book it."})
store = IndexStore(f"{root}/{n}/index", get_embedder({"backend": "hash", "model": "hash", "dim": 64}, cache=False))
class DS:
    instances = {"ego": NS(instance_id="ego", ego={"name": "Ann"})}
    def facts(self, i): return facts
ds = DS()
words = ["quiet", "late", "early", "big", "small", "long", "short", "cheap"]
qs = [NS(query_id=f"q{i}", instance_id="ego", query=f"Book Mina a {words[i % 8]} dinner at the Lotus Thai restaurant on {d}", ref_date="2026-04-16",
         label="conflict", situation_type="temporal", gold_doc_ids=["f0"]) for i, d in enumerate(["Friday", "Monday", "Sunday"] * nq)][:nq]
pm = pace.eval.run.build_method("pacemaker", cm, store)
pace.eval.run._run_pair(pm, "pacemaker", qs[0], ds, cm, False)        # loads the index (not timed)
ts, ids = [], []
for q in qs:
    t = time.perf_counter(); row, _ = pace.eval.run._run_pair(pm, "pacemaker", q, ds, cm, False); ts.append(time.perf_counter() - t)
    ids.append(row["retrieved_ids"])
print(json.dumps(dict(ms=1000 * statistics.median(ts), mean=1000 * statistics.fmean(ts), pool=statistics.fmean(len(r["trace"]["pool"]) for r in [row]), ids=ids)))
'''


def measure(pkg_parent, root, n, nq):
    env = dict(os.environ, PYTHONPATH=str(pkg_parent), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    out = subprocess.run([sys.executable, "-c", MEASURE, str(root), str(n), str(nq)], env=env, capture_output=True, text=True, cwd=pkg_parent)
    if out.returncode: raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def before_tree(rev, dest):
    "The `pace` package at `rev`, extracted under `dest` (None when git or the revision is missing)."
    try:
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "pace"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
        return dest
    except (OSError, subprocess.CalledProcessError): return None


def bench_nonmodel(args):
    rows = []
    with tempfile.TemporaryDirectory() as d:
        root = Path(args.kb_dir) if args.kb_dir else Path(d) / "kbs"; build_kbs(args.sizes, root)
        old = before_tree(args.before_rev, Path(d) / "before") if (Path(d) / "before").mkdir() is None else None
        for n in args.sizes:
            print(f"[bench] non-model time at {n} facts ...", file=sys.stderr, flush=True)
            after = measure(ROOT, root, n, args.nq)
            before = measure(old, root, n, args.nq) if old else None
            rows.append(dict(facts=n, before_ms=round(before["ms"], 1) if before else None, after_ms=round(after["ms"], 1),
                             speedup=round(before["ms"] / after["ms"], 1) if before else None,
                             same_ids=("yes" if before["ids"] == after["ids"] else "NO") if before else "n/a"))
    return rows


def table(rows):
    "A Markdown table of dict rows (tabulate; a missing value prints n/a)."
    from tabulate import tabulate
    return tabulate(rows, headers="keys", tablefmt="github", missingval="n/a")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="0.1 s latency, 8 queries, batches 1,4,8, KBs of 2K and 20K facts")
    ap.add_argument("--latency", type=float, default=None, help="seconds per call of the fake server (default 0.5; --quick 0.1)")
    ap.add_argument("--queries", type=int, default=None, help="queries of data/mini for (a) and (b) (default 16; --quick 8)")
    ap.add_argument("--workers", default="1,2,4,8,16", help="worker counts for (a)")
    ap.add_argument("--batches", default=None, help="--batch values for (b) (default 1,4,8,16; --quick 1,4,8)")
    ap.add_argument("--concurrency", type=int, default=None, help="openai backend concurrency in (b) (default 4 x the largest batch)")
    ap.add_argument("--window", type=float, default=0.02, help="seconds the batching server of (b) waits for a batch to fill")
    ap.add_argument("--max-server-batch", type=int, default=64, help="requests per batch of the batching server of (b)")
    ap.add_argument("--sizes", default=None, help="KB sizes for (c) (default 2000,20000,200000; --quick 2000,20000)")
    ap.add_argument("--nq", type=int, default=30, help="queries per KB size for (c)")
    ap.add_argument("--kb-dir", default=None, help="keep (c)'s synthetic KBs here and reuse them in later runs (default: a temporary folder)")
    ap.add_argument("--before-rev", default=BEFORE_REV, help="git revision whose package is measured as 'before' in (c)")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: a, b, c")
    ap.add_argument("--json", default=None, help="also write the settings and every table to this JSON file")
    a = ap.parse_args(argv)
    a.latency = a.latency if a.latency is not None else (0.1 if a.quick else 0.5)
    a.queries = a.queries or (8 if a.quick else 16)
    a.workers = [int(x) for x in a.workers.split(",")]
    a.batches = [int(x) for x in (a.batches or ("1,4,8" if a.quick else "1,4,8,16")).split(",")]
    a.concurrency = a.concurrency or 4 * max(a.batches)
    a.sizes = [int(x) for x in (a.sizes or ("2000,20000" if a.quick else "2000,20000,200000")).split(",")]
    skip = set(a.skip.split(","))
    print(f"cpu cores: {os.cpu_count()}")
    out = dict(cpu_cores=os.cpu_count(), settings={k: v for k, v in vars(a).items() if k not in ("json", "kb_dir")})
    if "a" not in skip:
        rows, same = bench_workers(a)
        print(f"\n(a) pace run --workers N against a loopback OpenAI-compatible server, {a.latency} s per call; methods bm25, pacemaker; "
              f"{a.queries} queries of data/mini; no cache")
        print(table(rows)); print(f"results.jsonl identical for every worker count: {'yes' if same else 'NO'}")
        out["workers"] = dict(rows=rows, same_results=same)
    if "b" not in skip:
        rows, same = bench_batching(a)
        print(f"\n(b) pace run --batch N (methods pacemaker) against a loopback OpenAI-compatible server that answers the requests "
              f"arriving within {a.window * 1000:.0f} ms (at most {a.max_server_batch}) together after {a.latency} s; {a.queries} queries "
              f"of data/mini; no cache; judge = the same model")
        print(table(rows)); print(f"results.jsonl rows the same as batch 1 apart from volatile fields, every row: {'yes' if same else 'NO'}")
        out["batching"] = dict(rows=rows, same_results=same)
    if "c" not in skip:
        rows = bench_nonmodel(a)
        print(f"\n(c) PaceMaker's non-model time per pair (pace.eval.run._run_pair with a scripted model that answers at once; median of {a.nq} "
              f"queries; hash embedder dim 64, flat FAISS); before = the package at {a.before_rev[:10]}")
        print(table(rows))
        out["nonmodel"] = dict(rows=rows)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
