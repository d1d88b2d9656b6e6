"""GraphRAG baseline (pace.methods.graphrag): the loopback OpenAI-compatible proxy (always), and the adapter end to end against the official
package with a scripted model behind the proxy (skipped, with the reason, when the `graphrag` extra is not installed)."""
import json, time
import numpy as np
import pandas as pd
import pytest
from types import SimpleNamespace as NS
from pace.embed import CachedEmbedder
from pace.llm import Cached
from pace.testing import FakeChat
from pace.embed import HashEmbedder
from pace.methods.graphrag import (ModelProxy, GraphRAG, GraphRAGConfig, GraphRAGScript, graphrag_settings, graphrag_missing, source_doc_ids,
                           GRAPHRAG_STAGES)

openai = pytest.importorskip("openai")
MISSING = graphrag_missing()
needs_graphrag = pytest.mark.skipif(MISSING is not None, reason=f"the graphrag extra is not installed ({MISSING})")

def test_proxy_chat_stream_schema_embeddings():
    seen = []
    def respond(ms, js):
        seen.append(js)
        if ms[-1]["content"] == "fail": raise ConnectionError("model down")
        return '{"n": 1}' if js else "echo " + ms[-1]["content"]
    fc, he = Cached(FakeChat(respond), False, max_parse_retries=0), CachedEmbedder(HashEmbedder(dim=16), False)
    with ModelProxy(fc, he) as px:
        cl = openai.OpenAI(base_url=px.base_url("stage_a"), api_key="x", max_retries=0)
        assert cl.chat.completions.create(model="m", messages=[{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}]).choices[0].message.content == "echo hi"
        chunks = list(cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "yo"}], stream=True, stream_options={"include_usage": True}))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "echo yo" and chunks[-1].usage is not None
        sch = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        r = cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "n"}], response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": sch}})
        assert r.choices[0].message.content == '{"n": 1}' and seen[-1] == sch
        r = openai.OpenAI(base_url=px.base_url("stage_b"), api_key="x", max_retries=0).chat.completions.create(model="m", messages=[{"role": "user", "content": "fail"}])
        assert r.choices[0].message.content == "" and px.n_failed == 1          # a model failure is an empty reply, not a retry storm
        e = cl.embeddings.create(model="e", input=["a b c", "d"])
        assert [d.index for d in e.data] == [0, 1] and abs(np.linalg.norm(e.data[1].embedding) - 1) < 1e-5
        with pytest.raises(openai.InternalServerError): cl.embeddings.create(model="e", input=[[1, 2, 3]])
    st = fc.accounts.by_stage()
    assert st["stage_a"]["calls"] == 3 and st["stage_b"]["failures"] == 1 and he.accounts.by_stage()["stage_a"]["calls"] == 2

def test_settings_route_every_workflow_through_the_proxy(tmp_path):
    px = ModelProxy(None, None)
    try: s = graphrag_settings(tmp_path, px, 384)
    finally: px.server.server_close()
    for wf, stage in GRAPHRAG_STAGES.items():
        assert s[wf]["completion_model_id"] == stage and s["completion_models"][stage]["api_base"] == px.base_url(stage)
    assert s["cache"] == {"type": "none"} and s["vector_store"]["vector_size"] == 384
    assert s["input"] == {"type": "jsonl", "id_column": "doc_id", "title_column": "doc_id", "text_column": "text"}

def test_sources_map_to_doc_ids():
    tu = pd.DataFrame({"human_readable_id": [0, 1, 2, 3], "document_id": ["f1", "f2", "f3", "f2"], "text": ["a", "b", "c", "b2"]})
    ctx = {"sources": pd.DataFrame({"id": ["3", "0", "7", "1"], "text": ["b2", "a", "c", "b"]})}
    assert source_doc_ids(ctx, tu) == ["f2", "f1", "f3"]     # '7' is unknown: matched by its text; f2 cited twice, kept once

def test_missing_extra_is_one_clear_error():
    if MISSING is None: pytest.skip("graphrag is installed")
    m = GraphRAG(Cached(FakeChat(), False), embedder=CachedEmbedder(HashEmbedder(), False), root="/tmp/x")   # listing methods never fails...
    with pytest.raises(ModuleNotFoundError, match=r"pip install -e '.\[graphrag\]'"): m.run(QRY, INST, KB)   # ...running says what to install

FACTS = ["Maya Okafor teaches chemistry at Ashton School.", "Maya Okafor has parents evening at Ashton School on Thursday until 19:30.",
         "Tunde Okafor had hip surgery in March.", "Rear Window shows at Watershed Cinema on Thursday at 18:45.",
         "Watershed Cinema is in the Harbour district.", "Tunde Okafor likes jazz concerts at Watershed Cinema."]
KB = [NS(doc_id=f"fact-{i}", text=t) for i, t in enumerate(FACTS)]
INST = NS(instance_id="ego/1", ego={"name": "Maya"}, alters=[])
QRY = NS(query_id="q1", query="Book Rear Window at Watershed Cinema for Maya Okafor on Thursday", ref_date="2026-04-14")
ANSWER = "I will not book it: Maya has parents evening then."

def model(cache, **kw):
    script = GraphRAGScript()
    return Cached(FakeChat(lambda ms, js: ANSWER if ms[0]["content"].startswith("You are the personal assistant") else script(ms, js), **kw), cache)

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if MISSING: pytest.skip(f"the graphrag extra is not installed ({MISSING})")
    d = tmp_path_factory.mktemp("graphrag")
    cm, emb = model(d / "c.sqlite"), CachedEmbedder(HashEmbedder(dim=32), d / "c.sqlite")
    m = GraphRAG(cm, embedder=emb, root=d / "idx")
    return d, cm, emb, m, m.run(QRY, INST, KB)

@needs_graphrag
def test_standard_indexing_one_document_per_fact(built):
    d, cm, emb, m, res = built
    idx = m.store.get("ego/1", KB)
    tu = idx.tables()["text_units"]
    assert sorted(tu["document_id"]) == sorted(f.doc_id for f in KB) and len(tu) == len(KB)
    c = idx.cost
    assert c["stages"]["graphrag_extract"]["calls"] == 2 * len(KB)          # extraction + one gleaning per fact (GraphRAG's default)
    assert c["llm_calls"] == sum(s["calls"] for s in c["stages"].values()) and "graphrag_report" in c["stages"]
    assert c["embed_texts"] > 0 and c["wall_seconds"] > 0
    man = json.loads((m.store.path("ego/1") / "manifest.json").read_text())
    assert man["stats"]["documents"] == len(KB) and man["graphrag"]

@needs_graphrag
def test_local_search_sources_are_the_ranking(built):
    d, cm, emb, m, res = built
    texts = {f.doc_id: f.text for f in KB}
    assert res.ranked and res.retrieved_ids and set(res.retrieved_ids) <= set(texts)
    quoted = res.trace["details"]["response"].split("According to the sources: ", 1)[1]
    assert quoted == texts[res.retrieved_ids[0]]                               # the search saw the first ranked fact first
    assert res.answer == ANSWER and res.evidence == {"final": res.retrieved_ids}
    assert sorted(res.trace["stages"]) == ["answer", "graphrag_search"]        # indexing calls are not in the query's cost

@needs_graphrag
def test_reload_sources_context_and_timeout(built):
    d, cm, emb, m, res = built
    fc = model(False)
    m2 = GraphRAG(fc, embedder=emb, root=d / "idx", config=GraphRAGConfig(answer_context="sources", top_k=2))
    assert m2.store.get("ego/1", KB).status == "loaded"
    r = m2.run(QRY, INST, KB)
    assert r.retrieved_ids == res.retrieved_ids and r.evidence["answer"] == r.retrieved_ids[:2]
    slow = Cached(FakeChat(lambda ms, js: (time.sleep(3), "late")[1] if "---Role---" in ms[0]["content"] else ANSWER), False)
    m3 = GraphRAG(slow, embedder=emb, root=d / "idx", config=GraphRAGConfig(timeout=0.5))
    m3.store._mem["ego/1"] = (m3.store.key(KB), m2.store.get("ego/1", KB))
    r3 = m3.run(QRY, INST, KB)
    assert r3.retrieved_ids == [] and r3.trace["calls"][0]["ok"] is False and "timed out" in r3.trace["calls"][0]["error"]
    # a cap on extraction is part of the index's key: the uncapped index is stale for it, and the default key has no such entry
    m4 = GraphRAG(fc, embedder=emb, root=d / "idx", config=GraphRAGConfig(extract_max_tokens=300))
    assert "extract_max_tokens" not in m.store.key(KB) and m4.store.key(KB)["extract_max_tokens"] == 300
    assert m4.store.load(m4.store.path("ego/1"), m4.store.key(KB)) is None

@needs_graphrag
def test_pace_run_wiring(tmp_path):
    from pace.eval.run import run_experiment
    run_experiment("tests/fixtures/tiny", ["graphrag"], chat=model(False), embedder="hash:hash", out_dir=tmp_path, name="r", limit=1,
                         cache=False, retrieval_only=True, progress=False, graphrag_config={"extract_max_tokens": 300})
    rows = [json.loads(l) for l in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["method"] == "graphrag" and rows[0]["retrieved_ids"]
    assert set(rows[0]["usage"]) == {"graphrag_search"}
    assert "graphrag,tiny-maya,40," in (tmp_path / "r" / "index_cost.csv").read_text()
    assert json.loads((tmp_path / "r" / "run.json").read_text())["settings"]["graphrag"] == {"extract_max_tokens": 300}
    man = json.loads(next((tmp_path / "r" / "index" / "@graphrag").glob("*/manifest.json")).read_text())
    assert man["config"]["extract_max_tokens"] == 300 and man["extract_max_tokens"] == 300
