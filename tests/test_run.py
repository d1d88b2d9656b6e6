"`pace run`: resume gives the same file, cache makes reruns free, run integrity, retry, retrieval-only, CLI errors, end to end."
import json, re, shutil
import pytest
from pace.llm import Cached
from pace.testing import FakeChat
from pace.testing import schema_reply
from pace.eval.run import run_experiment, select_queries, RunMismatchError
from pace.cli import UsageError, main
from pace.eval.evaluate import read_jsonl

TINY = "tests/fixtures/tiny"

respond = schema_reply   # a deterministic fake LLM behind the real Cached machinery (cache, parsing, accounts)

def kw(tmp_path, **k):
    return dict(dataset=TINY, methods=["oracle", "bm25", "hybrid", "pacemaker"], embedder="hash:hash", out_dir=tmp_path,
                limit=0, progress=False) | k

def fake(**k): return Cached(FakeChat(respond, **k), False)

def test_resumed_run_gives_the_same_results_file(tmp_path):
    a = run_experiment(chat=fake(), name="a", cache=False, **kw(tmp_path))
    assert a["n_rows"] == 16
    b1 = run_experiment(chat=fake(), name="b", cache=False, max_pairs=5, **kw(tmp_path))
    man = json.loads((b1["run_dir"] / "run.json").read_text())
    assert b1["n_new"] == 5 and man["status"] == "partial"
    with open(b1["results"], "a") as f: f.write('{"query_id": "tiny-q4", "method": "pacem')   # killed mid-line
    b = run_experiment(chat=fake(), name="b", cache=False, **kw(tmp_path))
    assert b["n_new"] == 11
    assert a["results"].read_text() == b["results"].read_text()
    assert len(read_jsonl(b["timings"])) == 16
    assert json.loads((b["run_dir"] / "run.json").read_text())["status"] == "complete"
    rows = read_jsonl(a["results"])
    assert [(r["query_id"], r["method"]) for r in rows] == sorted((r["query_id"], r["method"]) for r in rows)
    pm = [r for r in rows if r["method"] == "pacemaker"]
    assert all({s: u["calls"] for s, u in r["usage"].items()} == dict(planner=1, views=1, prehop=1, posthop=1, answer=1) for r in pm)
    assert all(r["judge_usage"]["judge_decision"]["calls"] == 1 for r in rows)
    # the fake judge reads every reply as a decline: step 2 runs for conflict queries only (right decision)
    assert all(("judge_rationale" in r["judge_usage"]) == (r["label"] == "conflict") for r in rows)
    assert all(set(r["funnel"]) >= {"final", "answer"} for r in rows)
    assert "seconds" not in json.dumps(rows)

def test_run_json_is_written_before_the_first_pair(tmp_path):
    seen = {}
    def spy(messages, schema):
        if "run" not in seen: seen["run"] = json.loads((tmp_path / "w" / "run.json").read_text())
        return respond(messages, schema)
    run_experiment(chat=Cached(FakeChat(spy), False), name="w", cache=False, **kw(tmp_path, methods=["bm25"], limit=1))
    s = seen["run"]
    assert s["status"] == "running" and len(s["settings"]["dataset"]["sha256"]) == 64
    assert s["settings"]["judge_is_agent"] and s["settings"]["judge_mode"] == "blind"
    assert {"agents.ANSWER_SYSTEM", "agents.FILTER_SYSTEM"} <= set(s["settings"]["prompts"]) and s["settings"]["pace_version"]
    assert s["settings"]["chat"]["model_id"] == "fake" and s["settings"]["embedder"]

def test_rerun_hits_the_cache_only(tmp_path):
    cache = tmp_path / "c.sqlite"
    first = Cached(FakeChat(respond), cache)
    run_experiment(chat=first, name="x", cache=cache, **kw(tmp_path, methods=["bm25", "pacemaker"]))
    assert first.n_calls > 0
    again = Cached(FakeChat(respond), cache)
    r = run_experiment(chat=again, name="y", cache=cache, **kw(tmp_path, methods=["bm25", "pacemaker"]))
    assert again.n_calls == 0 and r["n_new"] == 8
    assert (tmp_path / "x" / "results.jsonl").read_text() == (tmp_path / "y" / "results.jsonl").read_text()

def test_resume_is_refused_on_a_changed_config_dataset_prompt_or_judge(tmp_path, monkeypatch):
    data = tmp_path / "data"; shutil.copytree(TINY, data)
    k = kw(tmp_path, dataset=data, methods=["bm25"], limit=2)
    run_experiment(chat=fake(), name="s", cache=False, **k)
    with pytest.raises(RunMismatchError, match="pacemaker.hops"):
        run_experiment(chat=fake(), name="s", cache=False, config={"hops": 2}, **k)
    with pytest.raises(RunMismatchError, match="graphrag: null -> "):
        run_experiment(chat=fake(), name="s", cache=False, graphrag_config={"extract_max_tokens": 384}, **k)
    # GraphRAG's settings at their defaults are recorded as null, the value of runs made before the option: those resume
    assert json.loads((tmp_path / "s" / "run.json").read_text())["settings"]["graphrag"] is None
    assert run_experiment(chat=fake(), name="s", cache=False, graphrag_config={"max_tokens": 1024}, **k)["n_new"] == 0
    with pytest.raises(RunMismatchError, match="judge_mode"):
        run_experiment(chat=fake(), name="s", cache=False, judge_mode="paper", **k)
    with pytest.raises(RunMismatchError, match="judge.model_id"):
        run_experiment(chat=fake(), judge=Cached(FakeChat(respond, model="another-judge"), False), name="s", cache=False, **k)
    import pace.methods.agents
    monkeypatch.setattr(pace.methods.agents, "ANSWER_SYSTEM", pace.methods.agents.ANSWER_SYSTEM + " Be brief.")
    with pytest.raises(RunMismatchError, match="prompts.agents.ANSWER_SYSTEM"):
        run_experiment(chat=fake(), name="s", cache=False, **k)
    monkeypatch.undo()
    kb = next((data / "kb").glob("*.jsonl"))
    kb.write_text(kb.read_text().replace("Maya", "Mya", 1))      # same folder name, other content
    with pytest.raises(RunMismatchError, match="dataset.sha256"):
        run_experiment(chat=fake(), name="s", cache=False, **k)
    shutil.copytree(TINY, data, dirs_exist_ok=True)
    assert run_experiment(chat=fake(), name="s", cache=False, **k)["n_new"] == 0   # back to the same settings: resumes

def test_a_smaller_scope_keeps_the_folder_whole(tmp_path):
    "Issue 22: fewer --methods or a smaller --limit on a finished folder made run.json and the tables describe a part of the file."
    run_experiment(chat=fake(), name="p", cache=False, **kw(tmp_path, methods=["bm25", "dense"]))
    r = run_experiment(chat=fake(), name="p", cache=False, **kw(tmp_path, methods=["bm25"], limit=2))
    man = json.loads((tmp_path / "p" / "run.json").read_text())
    assert r["n_new"] == 0 and r["n_rows"] == 8 == len(read_jsonl(r["results"])) == man["n_pairs"]
    assert man["methods"] == ["bm25", "dense"] and len(man["query_ids"]) == 4 and man["status"] == "complete" and man["limit"] == 0
    assert list(r["tables"]["table2"].index) == ["bm25", "dense"] and (r["tables"]["table2"]["n"] == 4).all()
    # a new method on two queries only: the folder's scope grows to 3 methods x 4 queries, partial until the rest runs
    r = run_experiment(chat=fake(), name="p", cache=False, **kw(tmp_path, methods=["hybrid"], limit=2))
    man = json.loads((tmp_path / "p" / "run.json").read_text())
    assert (r["n_new"], r["n_rows"], r["n_scope"], man["status"], man["n_pairs"]) == (2, 10, 12, "partial", 10)
    assert man["methods"] == ["bm25", "dense", "hybrid"] and r["tables"]["table2"].loc["hybrid", "n"] == 2
    r = run_experiment(chat=fake(), name="p", cache=False, **kw(tmp_path, methods=["hybrid"]))
    assert (r["n_new"], r["n_rows"], r["status"]) == (2, 12, "complete")

def test_rows_without_run_json_are_never_adopted(tmp_path):
    "Issue 22: a folder whose run.json was deleted adopted rows made with another embedder and labelled them with the new one."
    run_experiment(chat=fake(), name="f", cache=False, **kw(tmp_path, methods=["bm25", "dense"], limit=2))
    before = (tmp_path / "f" / "results.jsonl").read_bytes()
    (tmp_path / "f" / "run.json").unlink()
    for emb in ("hash:other", "hash:hash"):   # other settings, and even the same ones: nothing can tell what made the rows
        with pytest.raises(RunMismatchError, match="holds result rows but no run.json"):
            run_experiment(chat=fake(), name="f", cache=False, **kw(tmp_path, methods=["bm25", "dense"], limit=2, embedder=emb))
    assert not (tmp_path / "f" / "run.json").exists() and (tmp_path / "f" / "results.jsonl").read_bytes() == before
    assert "Embedder: hash-256" in (tmp_path / "f" / "tables.md").read_text()

def test_retry_failed_rejudges_failed_judge_calls_without_rerunning_the_method(tmp_path):
    def down(messages, schema):
        if "decision" in (schema or {}).get("properties", {}): raise RuntimeError("judge server down")
        return respond(messages, schema)
    k = kw(tmp_path, methods=["bm25", "pacemaker"], limit=2)
    first = run_experiment(chat=Cached(FakeChat(down), False), name="r", cache=False, **k)
    rows = read_jsonl(first["results"])
    assert first["n_failed"] == 4 and all(r["judge"]["label"] is None and r["failed"]["judge"] for r in rows)
    assert "judge call(s) failed" in (first["run_dir"] / "tables.md").read_text()
    assert first["tables"]["table2"].loc["bm25", "judge_errors"] == 2 and first["tables"]["table2"].loc["bm25", "pass"] == 0.0
    cm = fake()
    again = run_experiment(chat=cm, name="r", cache=False, retry_failed=True, **k)
    assert again["n_rejudged"] == 4 and again["n_failed"] == 0
    assert set(cm.accounts.by_stage()) == {"judge_decision", "judge_rationale"}      # the methods did not run again
    rows2 = read_jsonl(again["results"])
    assert len(rows2) == 4 and all(r["judge"]["label"] == "PASS" for r in rows2)
    assert [r["answer"] for r in rows2] == [r["answer"] for r in rows]

def test_retry_failed_reruns_pairs_whose_agent_calls_failed(tmp_path):
    def no_plan(messages, schema):
        if "directions" in (schema or {}).get("properties", {}): return "not json"
        return respond(messages, schema)
    k = kw(tmp_path, methods=["bm25", "pacemaker"], limit=2)
    first = run_experiment(chat=Cached(FakeChat(no_plan), False), name="a", cache=False, **k)
    assert first["n_failed"] == 2 and "pacemaker/planner: 100%" in (first["run_dir"] / "tables.md").read_text()
    cm = fake()
    again = run_experiment(chat=cm, name="a", cache=False, retry_failed=True, **k)
    assert again["n_failed"] == 0 and cm.accounts.by_stage()["planner"]["calls"] == 2 and "answer" in cm.accounts.by_stage()
    assert again["n_new"] == 2       # only the two failed pacemaker pairs

def test_rows_that_share_a_failed_request_saw_the_same_reply(tmp_path):
    """PaceMaker's variants share the planner call. Recorded over two sittings with a model that plans only in the
    second, both rows hold the first sitting's failure (what a replay gives back); --retry-failed asks again once."""
    cache, asked = tmp_path / "c.sqlite", []
    def planner(works):
        def reply(messages, schema):
            if "directions" in (schema or {}).get("properties", {}):
                asked.append(works)
                if not works: return "not json"
            return respond(messages, schema)
        return reply
    k = kw(tmp_path, methods=["pacemaker", "pacemaker-no_traversal"], limit=1, cache=cache, name="s")
    first = run_experiment(chat=Cached(FakeChat(planner(False)), cache), max_pairs=1, **k)
    assert first["n_new"] == 1 and asked == [False] * 3               # three attempts, then a recorded failure
    second = run_experiment(chat=Cached(FakeChat(planner(True)), cache), **k)
    assert second["n_new"] == 1 and asked == [False] * 3              # the recorded failure, not a new plan
    rows = read_jsonl(second["results"])
    assert [r["method"] for r in rows] == ["pacemaker", "pacemaker-no_traversal"]
    assert all((r["failed"] or {}).get("agent") for r in rows)
    plans = [next(c for c in r["trace"]["calls"] if c["stage"] == "planner") for r in rows]
    assert plans[0] == plans[1] and not plans[0]["ok"]
    asked.clear()
    third = run_experiment(chat=Cached(FakeChat(planner(False)), cache), retry_failed=True, **k)
    assert third["n_new"] == 2 and asked == [False] * 3               # asked again once for the two pairs
    asked.clear()
    fourth = run_experiment(chat=Cached(FakeChat(planner(True)), cache), retry_failed=True, **k)
    assert asked == [True] and fourth["n_failed"] == 0                # the plan, then read from the cache


def test_retrieval_only_makes_no_answer_or_judge_call(tmp_path):
    cm = fake()
    r = run_experiment(chat=cm, name="ro", cache=False, retrieval_only=True, **kw(tmp_path, methods=["bm25", "hybrid", "pacemaker"]))
    stages = set(cm.accounts.by_stage())
    assert stages == {"planner", "views", "prehop", "posthop"}
    rows = read_jsonl(r["results"])
    assert all(r_["answer"] is None and r_["judge"] is None and "answer" not in r_["funnel"] for r_ in rows)
    t2 = r["tables"]["table2"]
    assert "recall@10" in t2 and "pass" not in t2 and "funnel" in r["tables"]
    assert "Retrieval-only run" in (r["run_dir"] / "tables.md").read_text()

def test_retrieval_only_llm_free_methods_build_no_chat_model(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False); monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    r = run_experiment(chat="openai:gpt-4.1-mini", name="free", cache=False, retrieval_only=True, **kw(tmp_path, methods=["bm25", "dense"]))
    assert r["n_rows"] == 8 and r["accounts"]["chat"] == {}
    with pytest.raises(UsageError, match="retrieve nothing"):
        run_experiment(chat=fake(), retrieval_only=True, **kw(tmp_path, methods=["oracle", "bm25"]))

def test_a_copycat_judge_cannot_pass_a_reply_that_goes_ahead(tmp_path):
    "The reference run's bug: the judge was told the expected decision and copied it. Blind, it has to read the reply."
    def yes_man(messages, schema):
        props = (schema or {}).get("properties", {})
        text = " ".join(m["content"] for m in messages)
        if "decision" in props:   # copies the answer key if the prompt holds one, else reads the reply
            if re.search(r"\bconflict\b", text): return json.dumps({"decision": "decline", "reason": "the gold says so"})
            return json.dumps({"decision": "carry_out" if "I will carry out" in text else "decline", "reason": "read"})
        if "rationale" in props: return json.dumps({"rationale": "same_core_reason", "reason": "ok"})
        if props: return respond(messages, schema)
        return "I will carry out your request right away."
    r = run_experiment(chat=Cached(FakeChat(yes_man), False), name="yes", cache=False, **kw(tmp_path, methods=["oracle", "bm25"]))
    rows = read_jsonl(r["results"])
    conflict = [x for x in rows if x["label"] == "conflict"]
    assert conflict and all(x["judge"]["label"] == "FAIL" and x["judge"]["decision"] == "carry_out" for x in conflict)
    assert r["tables"]["table3_pass_by_label"].loc[("bm25", "conflict"), "value"] == 0.0

def test_bad_method_is_refused(tmp_path):
    with pytest.raises(UsageError, match="unknown"):
        run_experiment(chat=fake(), methods=["bm99"], embedder="hash:hash", out_dir=tmp_path, progress=False)

@pytest.mark.parametrize("args,msg", [
    (["--methods", "foo"], "unknown or no methods"),
    (["--config", "hops=abc"], "bad --config: hops"),
    (["--config", "hopz=3"], "hopz"),
    (["--methods", "pacemaker-small", "--config", "anchor_keep=0"], "'pacemaker-small-no_anchors'"),
    (["--config", "{not json"], "not valid JSON"),
    (["--graphrag-config", "extract_max_tokens=0"], "bad --graphrag-config: extract_max_tokens"),
    (["--graphrag-config", "extract_tokens=3"], "extract_tokens"),
    (["--limit", "-3"], "must be >= 0"),
    (["--workers", "0"], "must be >= 1"),
    (["--judge-mode", "lenient"], "invalid choice"),
    (["--chat", "openai:gpt-4.1-mini"], "API key"),
    (["--chat", "nocolon"], "backend:model"),
    (["--data", "tests/fixtures/nowhere"], "not a dataset folder")])
def test_cli_mistakes_give_one_line_exit_2_and_leave_nothing(tmp_path, capsys, monkeypatch, args, msg):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False); monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    base = ["run", "--data", TINY, "--embedder", "hash:hash", "--out", str(tmp_path / "out"), "--no-progress", "--limit", "1"]
    try: code = main(base + args)
    except SystemExit as e: code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and msg in err and "Traceback" not in err, err
    assert len(err.splitlines()) == 1 or "dataset" in msg, err      # a bad dataset lists each problem on its own line
    assert err.startswith("pace: error: ") or err.startswith("pace run: error: "), err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

def test_stratified_default_subset_of_mini():
    from pace.data import load_pace_dataset
    from pace.eval.run import DEFAULT_LIMIT
    ds = load_pace_dataset("data/mini")
    sel = select_queries(ds.queries, DEFAULT_LIMIT)
    assert {q.label for q in sel} == {"conflict", "non_conflict"}
    assert {q.situation_type for q in sel} == {"temporal", "personal", "state"}

def test_cli_runs_and_prints_tables(tmp_path, capsys, monkeypatch):
    import pace.llm
    monkeypatch.setattr(pace.llm, "as_chat_model", lambda spec, cache, **kw: fake())
    assert main(["run", "--data", TINY, "--methods", "bm25,dense", "--embedder", "hash:hash", "--out", str(tmp_path),
                     "--name", "cli", "--limit", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "4 result rows" in out and "Table 2" in out and "[" in out

def test_end_to_end_with_small_local_model(tmp_path):
    "Real llama.cpp model (SmolLM2-135M) and the real int8 ONNX embedder, one query of the tiny set, small settings."
    pytest.importorskip("llama_cpp")
    try:
        from pace.llm import get_chat_model
        cm = get_chat_model("llamacpp:smollm2-135m", cache=tmp_path / "cache.sqlite")
    except Exception as e: pytest.skip(f"small local model unavailable: {e}")
    cfg = dict(n_seed=8, n_filter=4, hops=1, m=2, n_final=4, filter_max_tokens=64, answer_max_tokens=64)
    res = run_experiment(TINY, ["oracle", "pacemaker"], chat=cm, embedder=None, out_dir=tmp_path, name="e2e", limit=1,
                         cache=tmp_path / "cache.sqlite", config=cfg, judge_max_tokens=64, progress=False)
    rows = read_jsonl(res["results"])
    assert [r["method"] for r in rows] == ["oracle", "pacemaker"]
    pm = rows[1]
    assert pm["usage"]["answer"]["calls"] == 1 and pm["usage"]["planner"]["calls"] == 1
    assert sum(u["calls"] for u in pm["usage"].values()) >= 4       # planner, views, pre-hop, (post-hop,) answer
    assert len(pm["retrieved_ids"]) == 4 and all(r["judge"]["label"] in ("PASS", "WRONG_RATIONALE", "FAIL", None) for r in rows)
    assert all(r["judge"]["decision"] in ("carry_out", "decline", "ambiguous", None) for r in rows)
    assert (res["run_dir"] / "table2.md").exists() and (res["run_dir"] / "funnel.md").exists()
    assert cm.accounts.by_stage()["answer"]["calls"] == 2


# --- pairs at once (`--workers`) -------------------------------------------------------------------------------------

def slow_respond(messages, schema):
    "`respond` after a delay that differs per request, so that concurrent pairs finish out of order."
    import hashlib, time
    time.sleep(hashlib.sha256(messages[-1]["content"].encode()).digest()[0] / 255 * 0.02)
    return respond(messages, schema)

def test_concurrent_run_writes_the_same_files_as_a_sequential_one(tmp_path):
    a = run_experiment(chat=fake(), name="seq", cache=False, **kw(tmp_path))
    b = run_experiment(chat=Cached(FakeChat(slow_respond), False), name="par", cache=tmp_path / "c.sqlite", workers=8, **kw(tmp_path))
    assert b["n_rows"] == 16 and a["results"].read_bytes() == b["results"].read_bytes()
    assert [(t["query_id"], t["method"]) for t in read_jsonl(b["timings"])] == [(t["query_id"], t["method"]) for t in read_jsonl(a["timings"])]
    c = run_experiment(chat=Cached(FakeChat(slow_respond), False), name="par", cache=tmp_path / "c.sqlite", workers=8, **kw(tmp_path))
    assert c["n_new"] == 0 and a["results"].read_bytes() == c["results"].read_bytes()

class Crash(BaseException): "An interruption inside a pair (like Ctrl-C): not caught by the agents."

def test_interrupted_concurrent_run_resumes_without_losing_or_duplicating_pairs(tmp_path):
    import threading
    a = run_experiment(chat=fake(), name="seq", cache=False, **kw(tmp_path))
    n, lock = [0], threading.Lock()
    def crashing(messages, schema):
        with lock: n[0] += 1; k = n[0]
        if k == 40: raise Crash()
        return slow_respond(messages, schema)
    with pytest.raises(Crash): run_experiment(chat=Cached(FakeChat(crashing), False), name="par", cache=False, workers=4, **kw(tmp_path))
    part = read_jsonl(tmp_path / "par" / "results.jsonl")
    assert 0 < len(part) < 16 and len({(r["query_id"], r["method"]) for r in part}) == len(part)
    b = run_experiment(chat=Cached(FakeChat(slow_respond), False), name="par", cache=False, workers=4, **kw(tmp_path))
    assert b["n_new"] == 16 - len(part) and a["results"].read_bytes() == b["results"].read_bytes()
    assert len(read_jsonl(b["timings"])) == 16

def test_workers_fall_back_to_one_for_a_model_served_in_process(tmp_path, capsys):
    from pace.backends.llamacpp import LlamaCppChat
    from pace.backends.openai import OpenAIChat
    assert LlamaCppChat.concurrent is False and OpenAIChat.concurrent is True
    class InProcess(FakeChat): backend, concurrent = "llamacpp", False
    r = run_experiment(chat=Cached(InProcess(respond), False), name="l", cache=False, workers=4, **kw(tmp_path, methods=["bm25"]))
    err = capsys.readouterr().err
    assert r["n_rows"] == 4 and "--workers 4: the llamacpp backend serves one request at a time" in err and "pairs run one at a time" in err

def test_bad_workers_value_is_refused(tmp_path):
    with pytest.raises(UsageError, match="--workers must be"):
        run_experiment(chat=fake(), workers=0, **kw(tmp_path))
    assert not any(tmp_path.iterdir())

def test_stage_batched_run_writes_the_same_results_file(tmp_path):
    class BatchLog(Cached):   # a wrapper that sees each batch (the run keeps its class)
        def __init__(self, *a, **k): super().__init__(*a, **k); self.sizes = []
        def chat_batch(self, reqs, **k): self.sizes.append(len(reqs)); return super().chat_batch(reqs, **k)
    a = run_experiment(chat=fake(), name="seq", cache=False, **kw(tmp_path, methods=["bm25", "pacemaker", "pacemaker-no_planning"]))
    cm = BatchLog(FakeChat(respond), False)
    b = run_experiment(chat=cm, name="bat", cache=False, batch=3, **kw(tmp_path, methods=["bm25", "pacemaker", "pacemaker-no_planning"]))
    assert b["n_rows"] == 12 and a["results"].read_bytes() == b["results"].read_bytes() and max(cm.sizes) == 3
    with pytest.raises(UsageError, match="--batch must be"): run_experiment(chat=fake(), batch=0, **kw(tmp_path, name="x"))

def test_batched_pairs_are_judged_at_once_and_concurrency_fits_the_batch(tmp_path, capsys):
    import threading
    class HTTPLike(FakeChat): backend, concurrent = "openai", True
    class Concurrent(Cached):
        "An HTTP-like model: counts the judge calls in flight at the same time."
        def __init__(self, *a, **k):
            super().__init__(*a, **k); self.concurrency, self.chunk_size, self.cond, self.now, self.peak = 2, 8, threading.Condition(), 0, 0
        def chat(self, messages, **k):
            judging = (k.get("stage") or "").startswith("judge")
            if judging:   # a judge call waits (at most 5 s) until four are in flight: no race with thread start-up
                with self.cond:
                    self.now += 1; self.peak = max(self.peak, self.now); self.cond.notify_all()
                    self.cond.wait_for(lambda: self.peak >= 4, timeout=5)
            try: return super().chat(messages, **k)
            finally:
                if judging:
                    with self.cond: self.now -= 1
    a = run_experiment(chat=fake(), name="seq", cache=False, **kw(tmp_path, methods=["pacemaker"]))
    cm = Concurrent(HTTPLike(respond), False)
    b = run_experiment(chat=cm, name="bat", cache=False, batch=4, **kw(tmp_path, methods=["pacemaker"]))
    assert a["results"].read_bytes() == b["results"].read_bytes()     # per-pair judge usage too: each thread counts its own calls
    assert cm.peak == 4 and cm.concurrency == 4
    assert "--batch 4: the openai model" in capsys.readouterr().err

def test_cli_batch_gives_the_same_results_file(tmp_path, monkeypatch):
    import pace.llm
    monkeypatch.setattr(pace.llm, "as_chat_model", lambda spec, cache, **kw: fake())
    base = ["run", "--data", TINY, "--methods", "bm25,pacemaker", "--embedder", "hash:hash", "--out", str(tmp_path), "--limit", "0", "--no-progress"]
    assert main(base + ["--name", "plain"]) == 0 and main(base + ["--name", "batch", "--batch", "4"]) == 0
    assert (tmp_path / "plain" / "results.jsonl").read_bytes() == (tmp_path / "batch" / "results.jsonl").read_bytes()


# --- run folders that never lose or mislabel a row (issue 22) -------------------------------------------------------

def test_a_second_run_on_a_folder_in_use_is_refused_and_no_row_is_lost(tmp_path, capsys, monkeypatch):
    "Two runs on one folder: the second rewrote results.jsonl at its end and the first's later rows were lost."
    import threading, pace.llm
    from pace.runfolder import RunLocked
    started, go, out = threading.Event(), threading.Event(), {}
    def held(messages, schema):
        started.set(); go.wait(60)
        return respond(messages, schema)
    first = threading.Thread(target=lambda: out.update(r=run_experiment(chat=Cached(FakeChat(held), False), name="busy", cache=False, **kw(tmp_path))))
    first.start()
    try:
        assert started.wait(60)
        with pytest.raises(RunLocked, match="is in use by pid"):
            run_experiment(chat=fake(), name="busy", cache=False, **kw(tmp_path, methods=["bm25"], limit=2))
        monkeypatch.setattr(pace.llm, "as_chat_model", lambda spec, cache, **kw: fake())
        code = main(["run", "--data", TINY, "--methods", "bm25", "--embedder", "hash:hash", "--out", str(tmp_path), "--name", "busy",
                     "--limit", "2", "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and err.startswith("pace: error: ") and "is in use by pid" in err, err
        assert json.loads((tmp_path / "busy" / "run.json").read_text())["status"] == "running"
    finally:
        go.set(); first.join(120)
    r = out["r"]
    assert r["n_rows"] == 16 == len(read_jsonl(r["results"])) and r["status"] == "complete"
    assert not (tmp_path / "busy" / "run.lock").exists()
    again = run_experiment(chat=fake(), name="busy", cache=False, **kw(tmp_path))     # the lock was let go: the folder resumes
    assert again["n_new"] == 0 and again["results"].read_bytes() == r["results"].read_bytes()


def test_kill_9_leaves_a_lock_that_the_resume_takes_over_with_the_same_file(tmp_path, capsys):
    import subprocess, sys, time
    a = run_experiment(chat=fake(), name="whole", cache=False, **kw(tmp_path, methods=["bm25", "pacemaker"]))
    script = (f"import time; from pace.testing import FakeChat; from pace.testing import schema_reply; from pace.eval.run import run_experiment\n"
              f"def slow(m, s): time.sleep(0.2); return schema_reply(m, s)\n"
              f"run_experiment(dataset={str(TINY)!r}, methods=['bm25', 'pacemaker'], chat=FakeChat(slow), embedder='hash:hash', "
              f"out_dir={str(tmp_path)!r}, name='killed', limit=0, cache=False, progress=False)\n")
    p = subprocess.Popen([sys.executable, "-c", script])
    res = tmp_path / "killed" / "results.jsonl"
    t0 = time.time()
    while not (res.exists() and res.read_text().count("\n") >= 2):
        assert p.poll() is None and time.time() - t0 < 120, "the run ended before it was killed"
        time.sleep(0.01)
    p.kill(); p.wait(60)
    lock = json.loads((tmp_path / "killed" / "run.lock").read_text())
    assert lock["pid"] == p.pid and json.loads((tmp_path / "killed" / "run.json").read_text())["status"] == "running"
    capsys.readouterr()
    b = run_experiment(chat=fake(), name="killed", cache=False, **kw(tmp_path, methods=["bm25", "pacemaker"]))
    assert f"left locked by pid {p.pid}" in capsys.readouterr().err
    assert 0 < b["n_new"] < 8 and b["results"].read_bytes() == a["results"].read_bytes() and b["status"] == "complete"
    assert not (tmp_path / "killed" / "run.lock").exists()


def test_ctrl_c_marks_the_folder_partial_and_prints_the_command_that_resumes_it(tmp_path, capsys, monkeypatch):
    import shlex, pace.llm
    whole = run_experiment(chat=fake(), name="whole", cache=False, **kw(tmp_path, methods=["bm25", "pacemaker"]))
    n = [0]
    def interrupted(messages, schema):
        n[0] += 1
        if n[0] == 12: raise KeyboardInterrupt
        return respond(messages, schema)
    monkeypatch.setattr(pace.llm, "as_chat_model", lambda spec, cache, **kw: Cached(FakeChat(interrupted), False))
    argv = ["run", "--data", TINY, "--methods", "bm25,pacemaker", "--embedder", "hash:hash", "--out", str(tmp_path), "--name", "cut",
            "--limit", "0", "--no-progress"]
    assert main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and err.startswith("pace run: interrupted"), err
    cmd = shlex.split(err.split("resume with: ")[1])
    assert cmd == ["pace", *argv]
    man = json.loads((tmp_path / "cut" / "run.json").read_text())
    assert man["status"] == "partial" and man["stopped"].startswith("interrupted") and 0 < man["n_pairs"] < 8
    assert f"{man['n_pairs']} result rows kept" in err and not (tmp_path / "cut" / "run.lock").exists()
    monkeypatch.setattr(pace.llm, "as_chat_model", lambda spec, cache, **kw: fake())
    assert main(cmd[1:]) == 0
    assert (tmp_path / "cut" / "results.jsonl").read_bytes() == whole["results"].read_bytes()
    assert json.loads((tmp_path / "cut" / "run.json").read_text())["status"] == "complete"


def test_a_run_that_fails_midway_is_not_left_running(tmp_path):
    def broken(messages, schema):
        if "directions" in (schema or {}).get("properties", {}): raise Crash("disk gone")   # not caught by the agents
        return respond(messages, schema)
    with pytest.raises(Crash):
        run_experiment(chat=Cached(FakeChat(broken), False), name="m", cache=False, **kw(tmp_path, methods=["bm25", "pacemaker"]))
    man = json.loads((tmp_path / "m" / "run.json").read_text())
    assert man["status"] == "partial" and man["stopped"] == "Crash: disk gone" and not (tmp_path / "m" / "run.lock").exists()


def test_default_names_count_the_queries_selected_and_name_no_unused_model(tmp_path):
    r = run_experiment(chat="llamacpp:qwen2.5-0.5b", retrieval_only=True, cache=False, **kw(tmp_path, methods=["bm25", "dense"], limit=1000))
    assert r["run_dir"].name == "tiny-all-retrieval" and r["n_rows"] == 8     # 4 queries: --limit 1000 selects all of them
    assert json.loads((r["run_dir"] / "run.json").read_text())["limit"] == 0
    r = run_experiment(chat=fake(), retrieval_only=True, cache=False, **kw(tmp_path, methods=["bm25", "pacemaker"], limit=2))
    assert r["run_dir"].name == "tiny-fake-n2-retrieval"                      # PaceMaker uses the chat model
    with pytest.raises(UsageError, match="one folder name"):
        run_experiment(chat=fake(), name="../x", cache=False, **kw(tmp_path, methods=["bm25"]))
    assert not (tmp_path.parent / "x").exists()


def test_a_very_long_fact_is_one_warning_line_and_the_run_goes_on(tmp_path, capsys):
    data = tmp_path / "data"; shutil.copytree(TINY, data)
    kb = sorted((data / "kb").glob("*.jsonl"))[0]
    facts = [json.loads(l) for l in kb.read_text().splitlines()]
    facts[0]["text"] += " and" * 400                                   # over 1,000 characters
    kb.write_text("".join(json.dumps(f) + "\n" for f in facts))
    r = run_experiment(chat=fake(), name="long", cache=False, **kw(tmp_path, dataset=data, methods=["bm25"]))
    warn = [l for l in capsys.readouterr().err.splitlines() if "warning" in l]
    assert r["n_rows"] == 4 and len(warn) == 1 and warn[0].startswith("pace run: warning: ") and f"kb/{kb.name}:1: field 'text'" in warn[0]


def test_any_sized_retriever_runs_without_a_model_and_other_sizes_are_refused(tmp_path, capsys):
    "Equal evidence budgets at any size: 'hybrid@3' and 'bm25@2' are built by pace run; a size on PaceMaker is not."
    base = ["run", "--data", TINY, "--embedder", "hash:hash", "--retrieval-only", "--no-progress", "--limit", "2",
            "--out", str(tmp_path)]
    assert main([*base, "--methods", "hybrid@3,bm25@2", "--name", "sized"]) == 0
    rows = read_jsonl(tmp_path / "sized" / "results.jsonl")
    assert sorted({r["method"] for r in rows}) == ["bm25@2", "hybrid@3"] and len(rows) == 4
    assert {len(r["evidence"]["final"]) for r in rows if r["method"] == "hybrid@3"} == {3}
    capsys.readouterr()
    for bad in ("pacemaker@3", "hybrid@0", "hybrid@x"):
        assert main([*base, "--methods", bad, "--name", "bad"]) == 2
        assert "unknown or no methods" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_hipporag_config_and_prompts_are_part_of_a_runs_settings(tmp_path, monkeypatch):
    "A HippoRAG 2 run made with another filter (prompt or settings) is refused on resume, not silently reused."
    import pace.methods.hipporag
    from pace.eval.run import hipporag_settings, check_settings
    (tmp_path / "run.json").write_text(json.dumps({"settings": {"hipporag": hipporag_settings()}}))
    check_settings(tmp_path, {"hipporag": hipporag_settings()})          # the same settings resume
    monkeypatch.setattr(pace.methods.hipporag, "FILTER_SYSTEM", pace.methods.hipporag.FILTER_SYSTEM + " Keep at most 4.")
    with pytest.raises(RunMismatchError, match="hipporag.prompts.FILTER_SYSTEM"):
        check_settings(tmp_path, {"hipporag": hipporag_settings()})
    monkeypatch.undo()
    old = hipporag_settings(); old["config"] = {**old["config"], "max_kept_facts": 4, "fact_matching": "exact"}
    (tmp_path / "run.json").write_text(json.dumps({"settings": {"hipporag": old}}))
    with pytest.raises(RunMismatchError, match="hipporag.config.fact_matching"):
        check_settings(tmp_path, {"hipporag": hipporag_settings()})


def test_three_shards_merge_into_the_unsharded_folder_and_bad_parts_are_refused(tmp_path, capsys):
    base = ["run", "--data", "data/mini", "--methods", "bm25,hybrid", "--retrieval-only", "--all", "--embedder", "hash:hash",
            "--out", str(tmp_path), "--name", "r", "--no-progress"]
    assert main(base) == 0
    for k in range(3): assert main([*base, "--shard", f"{k}/3"]) == 0
    parts = [str(tmp_path / f"r-shard{k}of3") for k in range(3)]
    assert sum(len(read_jsonl(f"{p}/results.jsonl")) for p in parts) == len(read_jsonl(tmp_path / "r" / "results.jsonl"))
    assert all(read_jsonl(f"{p}/results.jsonl") for p in parts)   # 4 instances dealt out 2, 1, 1: no empty part
    assert main(["merge", str(tmp_path / "m"), *reversed(parts)]) == 0
    for f in ("results.jsonl", "run.json"):
        assert (tmp_path / "m" / f).read_bytes() == (tmp_path / "r" / f).read_bytes(), f
    unshard = json.loads((tmp_path / "r" / "run.json").read_text())
    assert "shard" not in unshard and json.loads((tmp_path / "r-shard1of3" / "run.json").read_text())["shard"]["index"] == 1
    capsys.readouterr()
    for args, msg in [([parts[0], parts[2]], "gap: shard 1/3 missing"), ([*parts, parts[1]], "overlap:"),
                      ([parts[0]], "gap: shard 1/3, 2/3 missing"), ([str(tmp_path / "r")], "is not a shard")]:
        assert main(["merge", str(tmp_path / "bad"), *args]) == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / "bad").exists()
    assert main([*base[:-3], "--name", "s", "--seed", "1", "--no-progress", "--shard", "2/3"]) == 0
    assert main(["merge", str(tmp_path / "bad"), *parts[:2], str(tmp_path / "s-shard2of3")]) == 2
    assert "other settings: seed" in capsys.readouterr().err
    assert main([*base, "--shard", "3/3"]) == 2 and "numbered from 0" in capsys.readouterr().err

def test_max_rps_bounds_the_models_request_starts(tmp_path, capsys):
    "`max_rps` reaches the request limiter of each model served over HTTP (shared by the pairs' threads)."
    import time
    from pace.backends.openai import RequestLimiter
    class Limited(FakeChat):
        "A FakeChat whose calls go through a request limiter, as the openai backend's do."
        backend = "openai"
        def __init__(self, *a, **k): super().__init__(*a, **k); self.limiter, self.starts = RequestLimiter(), []
        def _complete(self, reqs):
            out = []
            for r in reqs:
                with self.limiter.slot(): self.starts.append(time.monotonic()); out += super()._complete([r])
            return out
    cm = Cached(Limited(respond), False)
    run_experiment(chat=cm, name="rps", cache=False, workers=4, max_rps=40, **kw(tmp_path, methods=["bm25"]))
    n, span = len(cm.starts), max(cm.starts) - min(cm.starts)
    assert cm.limiter.max_rps == 40 and n > 3 and span >= (n - 1) / 40 - 0.05, (n, span)   # 1/40 s apart, over the threads
    run_experiment(chat=fake(), name="rps2", cache=False, max_rps=40, **kw(tmp_path, methods=["bm25"]))
    assert "--max-rps: the fake backend is not served over HTTP" in capsys.readouterr().err


def test_bm25_release_is_the_default_reaches_the_index_and_run_json_names_the_other(tmp_path):
    from pace.data import load_pace_dataset
    from pace.index import release_tokens
    from rank_bm25 import BM25Okapi
    base = dict(chat=fake(), cache=False, retrieval_only=True, **kw(tmp_path, methods=["bm25", "hybrid", "pacemaker"]))
    a = run_experiment(name="pace", bm25="pace", **base)
    b = run_experiment(name="release", **base)                   # the default
    man = lambda r: json.loads((r["run_dir"] / "run.json").read_text())["settings"]
    # run.json names what differs from the defaults: the project's BM25, not the default release one
    assert man(a)["index"] == {"bm25": "pace"} and "index" not in man(b)
    assert sorted(p.name for p in (b["run_dir"] / "index").iterdir()) == ["@bm25-release"]
    assert "@bm25-release" not in [p.name for p in (a["run_dir"] / "index").iterdir()]
    assert "(shared index)" in (b["run_dir"] / "index_cost.csv").read_text()
    ds = load_pace_dataset(TINY)
    for r in read_jsonl(b["run_dir"] / "results.jsonl"):   # BM25's rows are the authors' ranking (ties: KB order)
        if r["method"] != "bm25": continue
        facts = ds.facts(r["instance_id"])
        s = BM25Okapi(release_tokens([f.text for f in facts])).get_scores(release_tokens([r["query"]])[0])
        top = [facts[i].doc_id for i, _ in sorted(enumerate(s), key=lambda x: x[1], reverse=True)[:len(r["retrieved_ids"])]]
        assert r["retrieved_ids"] == top
    pm = [r for r in read_jsonl(b["run_dir"] / "results.jsonl") if r["method"] == "pacemaker"]
    assert pm and all(r["retrieved_ids"] for r in pm)            # PaceMaker searches the same release index
    with pytest.raises(RunMismatchError, match=r"index: \{\"bm25\": \"pace\"\} -> null"):   # one folder, one BM25
        run_experiment(name="pace", **base)


def test_no_cache_means_none_for_models_built_from_a_spec(tmp_path, monkeypatch):
    "`cache=False` reaches a model built from a spec as no cache (it used to open the default file, `PACE_CACHE`)."
    default = tmp_path / "default.sqlite"
    monkeypatch.setenv("PACE_CACHE", str(default))
    r = run_experiment(chat="fake:fake", judge="fake:fake", name="nc", cache=False, **kw(tmp_path / "runs", methods=["bm25"]))
    assert r["n_rows"] == 4 and not default.exists() and not (r["run_dir"] / "cache.sqlite").exists()
    r = run_experiment(chat="fake:fake", name="c", **kw(tmp_path / "runs", methods=["bm25"]))
    assert (r["run_dir"] / "cache.sqlite").exists() and not default.exists()
