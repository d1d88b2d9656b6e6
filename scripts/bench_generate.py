#!/usr/bin/env python
"""Throughput of `pace generate --workers N` against a loopback OpenAI-compatible fake server, and a resume after SIGKILL.

The server (scripts/bench_throughput.py's `FakeServer`) answers every request after a fixed latency (--latency, default
0.5 s) with the scripted generator's reply (`pace.gen.testing.toy_reply`); the first request of about one body in
`--every-429` gets a 429 (the openai backend backs off with full jitter and sends it again) and about one body in
`--every-bad` gets a malformed JSON reply (the backend asks again with a correction). Both depend on the request body
only, so every run meets the same faults whatever the order the requests arrive in.

(a) `generate_dataset(workers=N)` on 4 bundled personas (one case per cell, --facts facts per KB) for N = 1, 4, 16, no
    cache (every call reaches the server): seconds, speed-up over 1 worker, requests, and whether the output folder is
    the same as at 1 worker (every file but the cache, the accounts and the report, which hold seconds).
(b) `pace generate --workers 16` in a subprocess, killed with SIGKILL partway, then the same command again: the folder
    equals an uninterrupted run's, and the requests of the killed and the resumed run together against the
    uninterrupted run's (the calls of the instances in flight at the kill are answered from the cache when resumed).

    .venv/bin/python scripts/bench_generate.py            # about 2-3 minutes
    .venv/bin/python scripts/bench_generate.py --quick    # 0.2 s latency
"""
import argparse, hashlib, json, os, re, shutil, signal, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_throughput import FakeServer
from pace.gen.generate import generate_dataset
from pace.gen.testing import toy_reply

CONFIG = dict(recipe="pace", cases_per_cell=1, distractors_per_case=4, everyday_per_call=10)


class GenServer(FakeServer):
    "`FakeServer` answering with the scripted generator, with 429s and malformed replies chosen by the request body."
    def __init__(self, latency, every_429=25, every_bad=20):
        super().__init__(latency)
        self.server.handle_error = lambda *a: None   # a reply to the killed run (b) finds the socket closed
        self.every_429, self.every_bad, self.seen, self.n429, self.nbad = every_429, every_bad, set(), 0, 0
    def respond(self, body):
        rf = body.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else None
        h = int(hashlib.sha256(json.dumps([body["messages"], schema], sort_keys=True).encode()).hexdigest(), 16)
        with self._lock: first = h not in self.seen; self.seen.add(h)
        if first and h % self.every_429 == 0:
            with self._lock: self.n429 += 1
            return 429, "rate limited: slow down"
        if h % self.every_bad == 1:
            with self._lock: self.nbad += 1
            return 200, '{"facts": ["cut short'
        return 200, toy_reply(body["messages"], schema)


def spec(url): return {"backend": "openai", "model": "fake", "base_url": url, "json_mode": "json_schema", "timeout": 60}


def same(root, url):
    """What must not depend on workers: every file but the cache, accounts and report, the folder and the server masked
    and, in the card (README.md), the seconds of its cost table (every number with a decimal point)."""
    skip = ("cache", "accounts.jsonl", "report.", ".lock")
    def text(p):
        b = p.read_bytes().replace(str(root).encode(), b"<out>").replace(url.encode(), b"<url>")
        return re.sub(rb"\d+\.\d+", b"#", b) if p.name == "README.md" else b
    return {str(p.relative_to(root)): text(p) for p in sorted(Path(root).rglob("*"))
            if p.is_file() and not any(s in p.name for s in skip)}


def cli(out, url, facts, workers):
    return [sys.executable, "-m", "pace.cli", "generate", "--out", str(out), "--personas", "4", "--chat", json.dumps(spec(url)),
            "--cases-per-cell", "1", "--facts", str(facts), "--set", "distractors_per_case=4,everyday_per_call=10",
            "--embedder", "hash:hash", "--workers", str(workers), "--no-progress"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--facts", type=int, default=120)
    ap.add_argument("--workers", default="1,4,16")
    ap.add_argument("--every-429", type=int, default=25)
    ap.add_argument("--every-bad", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="0.2 s latency")
    a = ap.parse_args()
    if a.quick: a.latency = 0.2
    tmp = Path(tempfile.mkdtemp(prefix="bench-gen-"))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"(a) pace generate --workers N: 4 personas, {a.facts} facts per KB, latency {a.latency} s, "
          f"429 on the first request of 1 body in {a.every_429}, malformed reply for 1 body in {a.every_bad}\n")
    print("| workers | seconds | speed-up | requests | 429s | malformed | queries | same folder as 1 worker |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    base = t1 = None
    for w in map(int, a.workers.split(",")):
        with GenServer(a.latency, a.every_429, a.every_bad) as srv:
            out = tmp / f"w{w}" / "g"
            t = time.perf_counter()
            r = generate_dataset(out, "4", spec(srv.url), config=dict(CONFIG, facts=a.facts), embedder="hash:hash",
                                 cache=False, progress=False, command="pace generate (bench)", workers=w)
            secs = time.perf_counter() - t
        files = same(out, srv.url)
        base, t1 = (files, secs) if base is None else (base, t1)
        print(f"| {w} | {secs:.1f} | {t1 / secs:.1f}x | {srv.n} | {srv.n429} | {srv.nbad} | {r['n_queries']} | "
              f"{files == base} ({len(files)} files) |", flush=True)

    print("\n(b) SIGKILL during `pace generate --workers 16`, then the same command again\n")
    with GenServer(a.latency, a.every_429, a.every_bad) as srv:
        whole = tmp / "whole" / "g"
        subprocess.run(cli(whole, srv.url, a.facts, 16), env=env, check=True, capture_output=True)
        n_whole, url_whole = srv.n, srv.url
    with GenServer(a.latency, a.every_429, a.every_bad) as srv:
        out = tmp / "killed" / "g"
        p = subprocess.Popen(cli(out, srv.url, a.facts, 16), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        acc = out / "stages" / "accounts.jsonl"
        while p.poll() is None and not (acc.exists() and len(acc.read_text().splitlines()) >= 14): time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL); p.wait()
        n_killed = srv.n
        lines = len(acc.read_text().splitlines()) if acc.exists() else 0
        man = json.loads((out / "generate.json").read_text())
        subprocess.run(cli(out, srv.url, a.facts, 16), env=env, check=True, capture_output=True)
        n_resumed = srv.n - n_killed
        resumed = same(out, srv.url)
    print("| run | requests | note |\n|---|---:|---|")
    print(f"| uninterrupted | {n_whole} | |")
    print(f"| killed | {n_killed} | SIGKILL after {lines} (stage, instance) account lines; generate.json said "
          f"{man['status']!r} |")
    print(f"| resumed | {n_resumed} | killed + resumed = {n_killed + n_resumed} |")
    print(f"\nresumed folder == uninterrupted folder: {resumed == same(whole, url_whole)}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__": main()
