"""Time HippoRAG 2's OpenIE (one NER and one triple call per fact) with a local model and no cache, so the seconds are
this machine's now and not those of cached calls made on a busier machine. Prints seconds, calls and tokens per fact and
the projection to a 2,000-fact KB.
    .venv/bin/python scripts/bench_openie.py [--facts 10] [--chat qwen2.5-0.5b] [--data data/mini] [--instance mini-01]"""
import argparse, time
from pace.llm import Cached
from pace.data import load_pace_dataset
from pace.methods.hipporag import extract_openie
from pace.backends.llamacpp import LlamaCppChat

ap = argparse.ArgumentParser()
ap.add_argument("--facts", type=int, default=10); ap.add_argument("--chat", default="qwen2.5-0.5b")
ap.add_argument("--data", default="data/mini"); ap.add_argument("--instance", default="mini-01")
a = ap.parse_args()
facts = load_pace_dataset(a.data).facts(a.instance)[:a.facts]
cm = Cached(LlamaCppChat(a.chat), False)   # every call made now: a cache would replay an earlier run's seconds
cm.chat([dict(role="user", content="Say OK.")], max_tokens=2, stage="warmup")   # loads the model; not timed
t0 = time.perf_counter()
rows = extract_openie(cm, facts)
sec = time.perf_counter() - t0
tok = {k: sum(r["usage"][s][k] for r in rows for s in ("ner", "triples")) for k in ("prompt_tokens", "completion_tokens")}
n = len(rows)
print(f"{cm.model_id}: {n} facts of {a.instance}, {2 * n} calls, {sec:.1f} s ({sec / n:.2f} s per fact), "
      f"{tok['prompt_tokens'] / n:.0f} prompt + {tok['completion_tokens'] / n:.0f} completion tokens per fact, "
      f"{sum(len(r['extracted_triples']) for r in rows) / n:.1f} triples per fact")
print(f"projected to 2,000 facts: {2 * 2000} calls, {sec / n * 2000 / 3600:.2f} hours")
