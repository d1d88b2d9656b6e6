"""A whole `pace run` against llama.cpp's OpenAI-compatible server: the path a vLLM user takes.

`LlamaServer` serves the bundled Qwen2.5-Coder-0.5B on 127.0.0.1 (a free port, n_ctx 8192, the in-process default).
`pace run --chat <openai spec> --judge <openai spec>` (JSON specs with `base_url`; the judge is its own model object,
so `judge_is_agent` is false) runs PaceMaker and BM25 on two queries of data/mini under `--preset paper`, with the
paper's judge; then the same command runs with the llamacpp backend in process. Token budgets are cut to keep the
test short (about 2-4 minutes on 2 cores); the settings are otherwise the preset's.

What must be equal, and is asserted: the (query, method) pairs, the row schema (every key of every row and of the
judge verdicts), the stage names of the calls in order, the settings of run.json apart from the models' fingerprints,
valid labels (the paper protocol grades every reply that comes back: PASS / WRONG_RATIONALE / FAIL, never a missing
label), and the stages that call no model: BM25's retrieved ids, the fused ranking of PaceMaker wherever the two runs
searched with the same views, and the BFS pool wherever the seeds agree. The planner, view and filter calls carry
their JSON schema over HTTP too (read back from the run's cache), and no stage of this run asks for
log-probabilities (only pacemaker-score does; `tests/test_logprobs.py` covers them over both backends).

What may differ, and why: the model's texts (plans, counter queries, filter choices, answers, the judge's labels).
Both runs decode greedily (temperature 0, seed 0) from the same GGUF file, but the server (1) applies the chat
template of the GGUF through llama-cpp-python's server, where the in-process backend formats the prompt itself,
(2) receives the schema as `response_format` (`json_object` with a schema: llama.cpp's server refuses the
`json_schema` type, and the backend steps down by itself), which the server turns into its own grammar, where the
in-process backend builds the grammar from the schema directly, and (3) evaluates the prompt in its own batches and
threads, whose float sums can tip a near-tie between two tokens. Any one token that differs changes the rest of that
reply, and every stage after it. The test prints how many texts agreed.
"""
import json, os
from pathlib import Path
import pytest
from pace.cli import main
from pace.cache import Cache, export_cache
from pace.backends.llamacpp import LlamaServer
from pace.methods.pipeline import PaceMakerConfig
from pace.eval.judge import LABELS

pytestmark = pytest.mark.slow
MODEL = os.environ.get("PACE_SERVER_RUN_MODEL", "qwen2.5-0.5b")   # e.g. smollm2-135m for a quicker check
ARGS = ["--data", "data/mini", "--methods", "pacemaker,bm25", "--limit", "2", "--preset", "paper", "--no-progress",
        "--config", "planner_max_tokens=120,views_max_tokens=96,filter_max_tokens=160,answer_max_tokens=96",
        "--judge-max-tokens", "8"]
SCHEMA_STAGES = ("planner", "views", "prehop", "posthop")   # the stages whose calls send a JSON schema


def rows(d: Path) -> list[dict]: return [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines()]


def settings(d: Path) -> dict: return json.loads((d / "run.json").read_text())["settings"]


def requests(d: Path, tmp: Path) -> list[dict]:
    "The chat requests a run made, read back from its cache."
    export_cache(Cache(d / "cache.sqlite"), tmp / f"{d.name}.jsonl")
    return [e for e in map(json.loads, (tmp / f"{d.name}.jsonl").read_text().splitlines()) if e["kind"] == "chat"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, models_dir_in_tmp):
    out = tmp_path_factory.mktemp("runs")
    with LlamaServer(MODEL, n_ctx=8192, startup_timeout=180) as srv:
        spec = lambda mid: json.dumps(dict(backend="openai", model=srv.alias, base_url=srv.base_url, model_id=mid,
                                           context_window=8192, concurrency=1, timeout=300))
        assert main(["run", *ARGS, "--chat", spec("qwen-agent"), "--judge", spec("qwen-judge"), "--out", str(out),
                     "--name", "server"]) == 0
    local = lambda mid: json.dumps(dict(backend="llamacpp", model=MODEL, model_id=mid))
    assert main(["run", *ARGS, "--chat", local("qwen-agent"), "--judge", local("qwen-judge"), "--out", str(out),
                 "--name", "inproc"]) == 0
    return out / "server", out / "inproc"


def test_same_pairs_schema_stages_and_settings(runs):
    a, b = map(rows, runs)
    key = lambda r: (r["query_id"], r["method"])
    assert [key(r) for r in a] == [key(r) for r in b] and len(a) == 4
    for x, y in zip(a, b):
        assert sorted(x) == sorted(y) and sorted(x["judge"]) == sorted(y["judge"])
        # the same stages in order, the post-hop filter aside: it calls the model only when the pool is larger
        # than n_final, and the pool grows from the seeds the model picked, which may differ between the runs
        calls = lambda r: [c["stage"] for c in r["trace"]["calls"] if c["stage"] != "posthop"]
        assert calls(x) == calls(y)
        assert sorted(x["trace"]) == sorted(y["trace"])
    for r in a:   # PaceMaker's calls in stage order (the post-hop filter has no call when the pool fits n_final)
        st = [c["stage"] for c in r["trace"]["calls"]]
        want = ["planner", "views", "prehop", "posthop", "answer"] if r["method"] == "pacemaker" else ["answer"]
        assert [s for s in want if s in st] == st and st[-1] == "answer" and st[:2] == want[:2]
    sa, sb = map(settings, runs)
    for r in a + b:   # no post-hop call only where the pool fits the final list
        if r["method"] == "pacemaker" and "posthop" not in [c["stage"] for c in r["trace"]["calls"]]:
            assert len(r["trace"]["pool"]) <= PaceMakerConfig(**sa["pacemaker"]).n_final, len(r["trace"]["pool"])
    diff = {k for k in sa if sa[k] != sb.get(k)}
    assert diff <= {"chat", "judge"}, diff   # only the models' fingerprints (backend, endpoint) differ
    assert (sa["preset"], sa["judge_mode"], sa["judge_is_agent"], sa["pacemaker"]["posthop"]) == ("paper", "paper", False, "one_call")


def test_labels_are_valid_and_the_judge_never_saw_the_request(runs, tmp_path):
    for d in runs:
        rs = rows(d)
        for r in rs:
            assert r["judge"]["mode"] == "paper" and r["judge"]["label"] in LABELS, r["judge"]
            assert not r["failed"]["judge"]
            # one bare-label call; an empty answer is FAIL without a call
            assert [c["stage"] for c in r["judge_calls"]] == (["judge"] if r["answer"].strip() else [])
        queries = {r["query"] for r in rs}
        judged = [e for e in requests(d, tmp_path) if e["stage"] == "judge"]
        assert len(judged) == sum(bool(r["judge_calls"]) for r in rs)
        for e in judged:
            text = " ".join(m["content"] for m in e["request"]["messages"])
            assert "Gold label:" in text and not any(q in text for q in queries)
            assert e["request"].get("schema") is None   # a bare label, as the authors' judge


def test_schema_calls_over_http_and_no_logprobs(runs, tmp_path):
    for d in runs:
        reqs = requests(d, tmp_path)
        for st in SCHEMA_STAGES:
            mine = [e for e in reqs if e["stage"] == st]
            assert all(e["request"].get("schema") for e in mine), (d.name, st)
        assert {e["stage"] for e in reqs} >= {"planner", "views", "prehop", "answer", "judge"}
        filt = [e for e in reqs if e["stage"] in ("prehop", "posthop")]
        assert all("enum" not in e["request"]["schema"]["properties"]["selected_doc_ids"]["items"] for e in filt)
        assert not any(e["request"].get("top_logprobs") for e in reqs)


def test_stages_without_a_model_agree(runs):
    a, b = map(rows, runs)
    same = dict(views=0, seeds=0, answers=0, labels=0)
    for x, y in zip(a, b):
        if x["method"] == "bm25": assert x["retrieved_ids"] == y["retrieved_ids"]   # no model before the answer
        else:
            tx, ty = x["trace"], y["trace"]
            if [v["text"] for v in tx["views"]] == [v["text"] for v in ty["views"]]:
                same["views"] += 1
                assert tx["fused"] == ty["fused"] and x["evidence"]["fused"] == y["evidence"]["fused"]
            if tx["seeds"] == ty["seeds"]:
                same["seeds"] += 1
                assert tx["pool"] == ty["pool"]   # BFS over the same graph from the same seeds
        same["answers"] += x["answer"] == y["answer"]
        same["labels"] += x["judge"]["label"] == y["judge"]["label"]
    print(f"server vs in process, of {len(a)} rows ({len(a) // 2} PaceMaker): equal {same}")
