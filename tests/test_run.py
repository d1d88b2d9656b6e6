"`pace run`: resume gives the same file, cache makes reruns free, CLI, and an end-to-end run with the small local model."
import json, re
import pytest
from pace.llm import FakeChat
from pace.run import run_experiment, cli_main, select_queries
from pace.evaluate import read_jsonl

TINY = "tests/fixtures/tiny"

def respond(messages, schema):
    "A deterministic fake LLM behind the real ChatModel machinery (cache, parsing, accounts)."
    props = (schema or {}).get("properties", {})
    user = messages[-1]["content"]
    if "directions" in props: return json.dumps({"directions": [{"dimension": "timing", "key_anchors": [user.split()[1]]}]})
    if "counter" in props: return json.dumps({"counter": ["commitments on the requested day", "people involved"]})
    if "selected_doc_ids" in props:
        ids = re.findall(r"^\[([^\]]+)\]", user, re.M)
        return json.dumps({"selected_doc_ids": ids[::-1][:props["selected_doc_ids"]["maxItems"]]})
    if "decision" in props: return json.dumps({"decision": "decline", "rationale": "same_core_reason", "reason": "ok"})
    return "I will not do that. " + messages[0]["content"].splitlines()[-1]

def kw(tmp_path, **k):
    return dict(dataset=TINY, methods=["oracle", "bm25", "hybrid", "pacemaker"], embedder="hash:hash", out_dir=tmp_path,
                limit=0, progress=False) | k

def test_resumed_run_gives_the_same_results_file(tmp_path):
    a = run_experiment(chat=FakeChat(respond, cache=False), name="a", cache=False, **kw(tmp_path))
    assert a["n_rows"] == 16
    b1 = run_experiment(chat=FakeChat(respond, cache=False), name="b", cache=False, max_pairs=5, **kw(tmp_path))
    assert b1["n_new"] == 5 and not json.loads((b1["run_dir"] / "run.json").read_text())["complete"]
    with open(b1["results"], "a") as f: f.write('{"query_id": "tiny-q4", "method": "pacem')   # killed mid-line
    b = run_experiment(chat=FakeChat(respond, cache=False), name="b", cache=False, **kw(tmp_path))
    assert b["n_new"] == 11
    assert a["results"].read_text() == b["results"].read_text()
    assert len(read_jsonl(b["timings"])) == 16
    assert json.loads((b["run_dir"] / "run.json").read_text())["complete"]
    rows = read_jsonl(a["results"])
    assert [(r["query_id"], r["method"]) for r in rows] == sorted((r["query_id"], r["method"]) for r in rows)
    pm = [r for r in rows if r["method"] == "pacemaker"]
    assert all({s: u["calls"] for s, u in r["usage"].items()} == dict(planner=1, views=1, prehop=1, posthop=1, answer=1) for r in pm)
    assert all(r["judge_usage"]["judge"]["calls"] == 1 for r in rows)
    assert "seconds" not in json.dumps(rows)

def test_rerun_hits_the_cache_only(tmp_path):
    cache = tmp_path / "c.sqlite"
    first = FakeChat(respond, cache=cache)
    run_experiment(chat=first, name="x", cache=cache, **kw(tmp_path, methods=["bm25", "pacemaker"]))
    assert first.n_calls > 0
    again = FakeChat(respond, cache=cache)
    r = run_experiment(chat=again, name="y", cache=cache, **kw(tmp_path, methods=["bm25", "pacemaker"]))
    assert again.n_calls == 0 and r["n_new"] == 8
    assert (tmp_path / "x" / "results.jsonl").read_text() == (tmp_path / "y" / "results.jsonl").read_text()

def test_settings_change_is_refused(tmp_path):
    run_experiment(chat=FakeChat(respond, cache=False), name="s", cache=False, **kw(tmp_path, methods=["bm25"]))
    with pytest.raises(ValueError, match="other settings"):
        run_experiment(chat=FakeChat(respond, cache=False), name="s", cache=False, config={"hops": 2}, **kw(tmp_path, methods=["bm25"]))

def test_bad_method_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown"):
        run_experiment(chat=FakeChat(respond, cache=False), methods=["bm99"], embedder="hash:hash", out_dir=tmp_path, progress=False)

def test_stratified_default_subset_of_mini():
    from pace.data import load_pace_dataset
    from pace.run import DEFAULT_LIMIT
    ds = load_pace_dataset("data/mini")
    sel = select_queries(ds.queries, DEFAULT_LIMIT)
    assert {q.label for q in sel} == {"conflict", "non_conflict"}
    assert {q.situation_type for q in sel} == {"temporal", "personal", "state"}

def test_cli_runs_and_prints_tables(tmp_path, capsys, monkeypatch):
    import pace.run
    monkeypatch.setattr(pace.run, "_chat", lambda spec, cache: FakeChat(respond, cache=False))
    assert cli_main(["--data", TINY, "--methods", "bm25,dense", "--embedder", "hash:hash", "--out", str(tmp_path),
                     "--name", "cli", "--limit", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "4 result rows" in out and "Table 2" in out

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
    assert (res["run_dir"] / "table2.md").exists()
    assert cm.accounts.by_stage()["answer"]["calls"] == 2
