#!/usr/bin/env python
"""Speed of two llama-cpp-python builds on one GGUF model: prompt and generation tokens per second.

The project installs llama.cpp portably (`CMAKE_ARGS="-DGGML_NATIVE=OFF"`: AVX2, FMA, F16C on x86-64), because
llama.cpp's native default dies of SIGILL on other CPUs and on VMs that advertise AMX they do not allow. This script
measures what the portable build costs against a native one, on a machine where both run. Each interpreter given with
--python runs the measurement in its own process (a build is tied to its environment); rounds alternate between the
builds so that other load on the machine falls on both alike. Not a test: the numbers depend on the machine.

    # a native build beside the project's portable one
    python3 -m venv /tmp/venv-native
    CMAKE_ARGS="-DGGML_NATIVE=ON" /tmp/venv-native/bin/pip install --no-cache-dir llama-cpp-python==0.3.36
    .venv/bin/python scripts/bench_llama_build.py --python .venv/bin/python /tmp/venv-native/bin/python
"""
import argparse, json, os, statistics, subprocess, sys

CHILD = r"""
import json, sys, time
import llama_cpp
from llama_cpp import Llama
path, threads, prompt_words, gen_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = Llama(model_path=path, n_ctx=4096, n_threads=threads, seed=0, verbose=False)
features = llama_cpp.llama_print_system_info().decode()
words = ("the assistant reads every fact in the knowledge base before it books anything for the user " * 200).split()
long_prompt = " ".join(words[:prompt_words])
llm.create_completion("warm up", max_tokens=2, temperature=0.0)
llm.reset()
t = time.perf_counter(); out = llm.create_completion(long_prompt, max_tokens=1, temperature=0.0)
prompt_s = time.perf_counter() - t; n_prompt = out["usage"]["prompt_tokens"]
llm.reset()
t = time.perf_counter(); short = llm.create_completion("Count:", max_tokens=1, temperature=0.0); first_s = time.perf_counter() - t
llm.reset()
t = time.perf_counter()
out = llm.create_completion("Count:", max_tokens=gen_tokens, temperature=0.0, stop=[],
                            logit_bias={llm.token_eos(): -100.0})   # never stop early: time gen_tokens tokens
gen_s = time.perf_counter() - t - first_s
n_gen = out["usage"]["completion_tokens"] - 1
print(json.dumps(dict(prompt_tokens=n_prompt, prompt_tok_s=n_prompt / prompt_s, gen_tokens=n_gen,
                      gen_tok_s=n_gen / gen_s if gen_s > 0 else float("nan"), features=features,
                      version=llama_cpp.__version__)))
"""


def measure(python, path, threads, prompt_words, gen_tokens):
    p = subprocess.run([python, "-c", CHILD, path, str(threads), str(prompt_words), str(gen_tokens)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or [""])[-1]
        return {"error": f"exit status {p.returncode} {tail}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", nargs="+", required=True, help="interpreters, each with its own llama-cpp-python build")
    ap.add_argument("--model", default="qwen2.5-0.5b", help="name in pace.backends.llamacpp.KNOWN_GGUF or a .gguf path")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prompt-words", type=int, default=400)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    from pace.backends.llamacpp import resolve_gguf
    path = str(resolve_gguf(a.model))
    runs = {py: [] for py in a.python}
    for r in range(a.rounds):
        for py in a.python:
            m = measure(py, path, a.threads, a.prompt_words, a.gen_tokens)
            runs[py].append(m)
            print(f"round {r + 1} {py}: " + (m.get("error") or f"prompt {m['prompt_tok_s']:.1f} tok/s, "
                                             f"generation {m['gen_tok_s']:.1f} tok/s"), flush=True)
    print(f"\nmodel {os.path.basename(path)}, {a.threads} threads, {a.rounds} rounds, medians\n")
    print("| build (interpreter) | CPU features the library uses | prompt tok/s | generation tok/s |")
    print("|---|---|---|---|")
    for py, ms in runs.items():
        ok = [m for m in ms if "error" not in m]
        if not ok: print(f"| {py} | {ms[0]['error']} | - | - |"); continue
        flags = ok[0]["features"].replace("CPU :", "").split("|")
        feats = " ".join(f.split("=")[0].strip() for f in flags if f.strip().endswith("= 1"))
        print(f"| {py} | {feats} | {statistics.median(m['prompt_tok_s'] for m in ok):.1f} "
              f"| {statistics.median(m['gen_tok_s'] for m in ok):.1f} |")


if __name__ == "__main__":
    sys.exit(main())
