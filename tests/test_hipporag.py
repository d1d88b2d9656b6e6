"""HippoRAG 2 (pace.methods.hipporag): graph construction on hand-built triples, PPR against independent computations, the recognition filter
(the official DSPyFilter's five kept triples and nearest-candidate mapping) and its dense fallback, resumable extraction, the official
OpenIE format, the index store and its cost."""
import difflib, hashlib, json
import numpy as np
import pytest
from types import SimpleNamespace as NS
from pace.embed import CachedEmbedder
from pace.llm import Cached
from pace.testing import FakeChat
from pace.testing import ScriptedChat
from pace.embed import HashEmbedder
from pace.methods.hipporag import (HippoGraph, HippoRAG2, HippoRAGConfig, personalized_pagerank, link_facts, recognition_filter, graph_ranking,
                           dense_ranking, extract_openie, read_openie, to_official_openie, from_official_openie, text_processing, _embed)

igraph = pytest.importorskip("igraph", reason="HippoRAG 2 needs python-igraph (a core dependency)")

class TableEmbedder:
    "Hand-set unit vectors for known texts; a fixed far vector otherwise."
    dim, model_id = 4, "table"
    def __init__(self, table): self.table = {k: np.asarray(v, float) for k, v in table.items()}
    def fingerprint(self): return {"backend": "table", "model_id": self.model_id, "dim": self.dim}
    def embed(self, texts, stage="embed", show_progress=False):
        v = np.stack([self.table.get(t, np.array([0.0, 0.0, -1.0, 0.2])) for t in texts]).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

S = np.sqrt(1 - 0.85 ** 2)
TABLE = {"anna": [1, 0, 0, 0], "anna berg": [0.85, S, 0, 0], "yoga": [0, 0, 1, 0], "monday": [0, 0, 0, 1], "studio": [0.1, 0.1, 0.6, 0.6],
         "('anna berg', 'teaches', 'yoga')": [0.6, 0.3, 0.7, 0], "('yoga', 'is on', 'monday')": [0, 0, 0.7, 0.7],
         "('anna', 'owns', 'studio')": [0.8, 0, 0.4, 0.4], "q": [0, 0, 0.5, 1],
         "Anna Berg teaches yoga.": [0.5, 0.5, 0.5, 0], "Yoga is on Monday.": [0, 0, 0.6, 0.8], "Anna owns the studio.": [0.9, 0, 0.1, 0.1],
         "Nothing here.": [0, 1, 0, 0]}
ROWS = [dict(doc_id="a", passage="Anna Berg teaches yoga.", extracted_triples=[["Anna Berg", "teaches", "yoga"]]),
        dict(doc_id="b", passage="Yoga is on Monday.", extracted_triples=[["Yoga", "is on", "Monday"], ["Yoga", "is on", "Monday"]]),
        dict(doc_id="c", passage="Anna owns the studio.", extracted_triples=[["Anna", "owns", "studio"], ["x", "bad"]]),
        dict(doc_id="d", passage="Nothing here.", extracted_triples=[])]

@pytest.fixture(scope="module")
def g(): return HippoGraph.build(ROWS, TableEmbedder(TABLE))

def test_graph_counts_and_weights(g):
    assert g.entities == ["anna", "anna berg", "monday", "studio", "yoga"]
    assert g.passages == ["a", "b", "c", "d"] and len(g.facts) == 3
    # 3 triples x 2 directions; passage edges a:2, b:2, c:2; synonymy anna <-> anna berg (0.85 >= 0.8), nothing else above 0.8
    assert g.stats() == dict(phrase_nodes=5, passage_nodes=4, triples=3, passage_edges=6, synonymy_edges=2, triple_edges=6, edges=14)
    assert g.edges[("e:yoga", "e:monday")] == 1.0                     # a duplicate triple inside one fact counts once
    assert g.edges[("p:b", "e:yoga")] == 1.0
    assert abs(g.edges[("e:anna", "e:anna berg")] - 0.85) < 1e-6 and abs(g.edges[("e:anna berg", "e:anna")] - 0.85) < 1e-6
    assert g.ent_docs == {"anna": ["c"], "anna berg": ["a"], "monday": ["b"], "studio": ["c"], "yoga": ["a", "b"]}
    G = g.graph
    assert (G.vcount(), G.ecount(), G.is_directed()) == (9, 14, False)
    assert G.vs["name"][:5] == [f"e:{e}" for e in g.entities] and G.vs["name"][5:] == ["p:a", "p:b", "p:c", "p:d"]

def test_synonymy_threshold_and_short_phrases():
    hi = HippoGraph.build(ROWS, TableEmbedder(TABLE), HippoRAGConfig(synonymy_threshold=0.9))
    assert hi.stats()["synonymy_edges"] == 0
    rows = [dict(doc_id="a", passage="p", extracted_triples=[["ab", "r", "anna"]])]
    g2 = HippoGraph.build(rows, TableEmbedder({"ab": [1, 0, 0, 0], "anna": [1, 0, 0, 0]}))
    assert ("e:anna", "e:ab") in g2._syn and ("e:ab", "e:anna") not in g2._syn   # "ab" has too few characters to start one
    assert g2.edges[("e:ab", "e:anna")] == 1.0 and g2.edges[("e:anna", "e:ab")] == 1.0   # synonymy score 1.0 overwrote the count

def power_iteration(n, edges, weights, reset, d=0.5, iters=1000):
    W = np.zeros((n, n))
    for (u, v), w in zip(edges, weights): W[u, v] += w; W[v, u] += w
    r = np.asarray(reset, float) / np.sum(reset)
    deg = W.sum(1, keepdims=True)
    P = np.where(deg > 0, W / np.where(deg > 0, deg, 1), r[None, :])
    p = r.copy()
    for _ in range(iters): p = (1 - d) * r + d * P.T @ p
    return p

def test_ppr_hand_computed():
    G = igraph.Graph(n=3, edges=[(0, 1), (1, 2)]); G.es["weight"] = [1.0, 1.0]
    # path a-b-c, reset on a, d=0.5: pa = .5 + .5*pb/2, pb = .5*(pa + pc), pc = .5*pb/2  ->  pb = 4/7 pa, pa = 7/12, pb = 1/3, pc = 1/12
    assert np.allclose(personalized_pagerank(G, np.array([1.0, 0, 0]), 0.5), [7 / 12, 1 / 3, 1 / 12], atol=1e-9)

def test_ppr_matches_power_iteration(g):
    pos = {n: i for i, n in enumerate(g.names)}
    rng = np.random.default_rng(0)
    for _ in range(3):
        reset = rng.random(g.n_nodes) * (rng.random(g.n_nodes) > 0.4)
        reset[0] += 0.1
        ref = power_iteration(g.n_nodes, [(pos[a], pos[b]) for a, b in g.edges], list(g.edges.values()), reset)
        assert np.allclose(personalized_pagerank(g.graph, reset, 0.5), ref, atol=1e-6)

def chat(reply):
    def respond(ms, js):
        r = reply(ms) if callable(reply) else reply
        if isinstance(r, Exception): raise r
        return r if isinstance(r, str) else json.dumps(r)
    return Cached(FakeChat(respond), False, max_parse_retries=0)

def test_filter_changes_the_ranking(g):
    q = TableEmbedder(TABLE).embed(["q"])[0]
    fs, top = link_facts(g, q, 5)
    cands = [g.facts[i] for i in top]
    assert cands[0] == ("yoga", "is on", "monday")                     # the query is closest to the Monday triple...
    keep_anna = {"fact": [["anna", "owns", "studio"]]}                 # ...but the filter keeps only the studio one
    kept, rec = recognition_filter(chat(keep_anna), "q", cands)
    assert rec.ok and [cands[i] for i in kept] == [("anna", "owns", "studio")]
    ranking, det = graph_ranking(g, q, [top[i] for i in kept], fs)
    assert ranking[0][0] == "c" and dense_ranking(g, q)[0][0] == "b"
    assert set(det["seed_phrases"]) == {"anna", "studio"}

@pytest.mark.parametrize("reply,why", [({"fact": []}, "filter kept no triple"), (ConnectionError("down"), "filter call failed")])
def test_fallback_to_dense(tmp_path, reply, why):
    kb = [NS(doc_id=r["doc_id"], text=r["passage"]) for r in ROWS]
    triples = {r["passage"]: r["extracted_triples"] for r in ROWS}
    def respond(ms):
        s, note = ms[0]["content"], ms[-1]["content"].split("Note: ", 1)[-1].split("\nNamed entities:")[0]
        if s.startswith("You read one short note"): return {"named_entities": []}
        if s.startswith("You turn one short note"): return {"triples": [t for t in triples[note] if len(t) == 3]}
        if s.startswith("You help a personal assistant recall"): return reply
        return "I will go ahead."
    emb = TableEmbedder(TABLE | {"Book yoga on Monday": TABLE["q"]})
    m = HippoRAG2(chat(respond), embedder=emb, root=tmp_path)
    qry = NS(query_id="q", query="Book yoga on Monday", ref_date="2026-04-13")
    r = m.run(qry, NS(instance_id="i", ego={"name": "Anna"}), kb)
    assert r.trace["details"]["fallback"] == why
    g = m.store.get("i", kb).graph
    assert r.retrieved_ids == [d for d, _ in dense_ranking(g, emb.embed(["Book yoga on Monday"])[0])]
    assert r.answer == "I will go ahead."

# Six facts, one triple each, so that the filter sees linking_top_k = 5 candidates (the official rerank_facts / DSPyFilter setting).
SIX = {"Anna teaches yoga at the studio.": ["Anna", "teaches", "yoga"], "The yoga class is on Monday.": ["yoga class", "is on", "Monday"],
       "Ben runs the bakery.": ["Ben", "runs", "bakery"], "The bakery opens at 7.": ["bakery", "opens at", "7"],
       "Anna visits Ben on Friday.": ["Anna", "visits", "Ben"], "Cara swims on Tuesday.": ["Cara", "swims on", "Tuesday"]}
KB6 = [NS(doc_id=f"f{i}", text=t) for i, t in enumerate(SIX)]
Q6 = NS(query_id="q6", query="Book yoga with Anna on Monday", ref_date="2026-04-13")

def shown(ms) -> list[list[str]]:
    "The candidate triples the filter prompt shows."
    return json.loads(ms[-1]["content"].split("Candidate facts: ", 1)[1].split("\n")[0])["fact"]

def run6(tmp_path, filter_reply, config=None):
    "HippoRAG 2 over the six facts with a scripted model: (result, the model, the filter's candidates as shown, the dense order)."
    note = lambda ms: ms[-1]["content"].split("Note: ", 1)[1].split("\nNamed entities:")[0]
    cm = ScriptedChat({"hippo_ner": {"named_entities": []}, "hippo_triples": lambda ms: {"triples": [SIX[note(ms)]]},
                       "hippo_filter": filter_reply, "answer": "Yes."})
    emb = CachedEmbedder(HashEmbedder(dim=64), False)
    m = HippoRAG2(cm, embedder=emb, root=tmp_path, config=config)
    r = m.run(Q6, NS(instance_id="i6", ego={"name": "Anna"}), KB6)
    calls = cm.calls("hippo_filter")
    dense = [d for d, _ in dense_ranking(m.store.get("i6", KB6).graph, _embed(emb, [Q6.query], "q")[0])]
    return r, cm, (shown(calls[0]["messages"]) if calls else None), dense

def test_filter_keeps_all_five(tmp_path):
    import jsonschema
    r, cm, cands, dense = run6(tmp_path, lambda ms: {"fact": shown(ms)[::-1]})   # all five, against the similarity order
    det, call = r.trace["details"], cm.calls("hippo_filter")[0]
    assert len(cands) == 5 and det["candidate_facts"] == cands
    assert det["kept_facts"] == cands[::-1] and det["fallback"] is None    # all five kept: PPR, not the dense fallback
    assert "Keep at most 5;" in call["messages"][0]["content"] and call["max_tokens"] == 512
    jsonschema.validate({"fact": cands}, call["schema"])                  # the schema the model sees admits five
    assert r.trace["calls"][0]["notes"] == dict(n_candidates=5, n_returned=5, n_kept=5, n_unknown=0)
    assert det["filter"] == dict(max_kept=5, matching="nearest")

def test_filter_near_miss_maps_to_its_candidate(tmp_path):
    def reply(ms):
        c = shown(ms)[3]                                                   # the fourth by similarity (the last scores 0), misspelt
        return {"fact": [[c[0] + "s", c[1], c[2][:-1]]]}
    r, cm, cands, dense = run6(tmp_path, reply)
    det = r.trace["details"]
    assert det["kept_facts"] == [cands[3]] and det["fallback"] is None
    assert r.trace["calls"][0]["notes"]["n_unknown"] == 1
    assert r.retrieved_ids != dense[:10]                                   # PPR from that triple's phrases
    assert set(det["seed_phrases"]) == {cands[3][0], cands[3][2]}

def official_nearest(fact, cands):
    "What difflib.get_close_matches(str(fact), [str(tuple(c))...], n=1, cutoff=0.0) picks: best ratio, ties to the larger string."
    return max(cands, key=lambda c: (difflib.SequenceMatcher(None, str(tuple(c)), str(fact)).ratio(), str(tuple(c))))

def test_filter_junk(tmp_path):
    "Junk that parses is still mapped to a candidate (the official cutoff is 0); junk that does not, or nothing, gives dense retrieval."
    for n, (reply, why) in enumerate([({"fact": [["qqq", "zzz", "xx on"]]}, None), ({"fact": [["x"]]}, None),
                                      ("Sure: the yoga ones.", "filter call failed"), ({"fact": "all of them"}, "filter call failed"),
                                      ({"fact": []}, "filter kept no triple")]):
        r, cm, cands, dense = run6(tmp_path / str(n), reply)
        det = r.trace["details"]
        assert det["fallback"] == why, reply
        if why is None:
            assert det["kept_facts"] == [list(official_nearest(reply["fact"][0], [tuple(c) for c in cands]))]
            assert det["kept_facts"] != cands[:1] and r.retrieved_ids != dense[:10]     # not the top candidate; PPR, not dense
        else: assert det["kept_facts"] == [] and r.retrieved_ids == dense[:10]

def test_filter_more_than_five(tmp_path):
    def reply(ms):
        c = shown(ms)
        near1 = [c[1][0], c[1][1] + "x", c[1][2]]
        return {"fact": [c[1], near1, c[0], c[3], c[2], c[4], c[0]]}    # seven: a duplicate and a near miss of c[1]
    r, cm, cands, dense = run6(tmp_path, reply)
    det = r.trace["details"]
    assert det["kept_facts"] == [cands[1], cands[1], cands[0], cands[3], cands[2]] and det["fallback"] is None   # first five, mapped
    assert r.trace["calls"][0]["notes"] == dict(n_candidates=5, n_returned=7, n_kept=5, n_unknown=1)

def test_exact_matching_is_the_earlier_filter(tmp_path):
    cfg = HippoRAGConfig(max_kept_facts=4, fact_matching="exact", filter_max_tokens=256)
    near = lambda ms: {"fact": [[shown(ms)[0][0] + "s"] + shown(ms)[0][1:]]}
    r, cm, cands, dense = run6(tmp_path, near, cfg)
    call = cm.calls("hippo_filter")[0]
    assert call["schema"] == {"type": "object", "required": ["fact"],
                              "properties": {"fact": {"type": "array", "maxItems": 4, "items": {"enum": cands}}}}
    assert "Keep at most 4;" in call["messages"][0]["content"] and call["max_tokens"] == 256
    assert r.trace["details"]["fallback"] == "filter call failed" and r.retrieved_ids == dense[:10]
    r2, *_ = run6(tmp_path, lambda ms: {"fact": shown(ms)[2:0:-1] * 2}, cfg)   # candidates, repeated: kept once each
    assert r2.trace["details"]["kept_facts"] == [cands[2], cands[1]]

def test_extraction_resumes_and_round_trips(tmp_path):
    kb = [NS(doc_id=f"d{i}", text=f"Person{i} visits Place{i}.") for i in range(5)]
    def respond(ms, js):
        note = ms[-1]["content"].split("Note: ", 1)[1].split("\nNamed entities:")[0]
        w = note.rstrip(".").split()
        return json.dumps({"named_entities": [w[0], w[2]]} if "named entities in it" in ms[0]["content"] else {"triples": [[w[0], w[1], w[2]]]})
    p = tmp_path / "openie.jsonl"
    fc = Cached(FakeChat(respond), False)
    rows = extract_openie(fc, kb[:3], p, config=HippoRAGConfig(openie_batch=2))
    assert fc.n_calls == 6 and len(read_openie(p)) == 3
    with open(p, "a") as f: f.write('{"doc_id": "d3", "pass')                 # a kill mid-line
    fc2 = Cached(FakeChat(respond), False)
    rows = extract_openie(fc2, kb, p, config=HippoRAGConfig(openie_batch=2))
    assert fc2.n_calls == 4 and [r["extracted_triples"] for r in rows][4] == [["Person4", "visits", "Place4"]]
    assert all(json.loads(l) for l in p.read_text().splitlines())            # the broken line was cut before appending
    off = json.loads(json.dumps(to_official_openie(rows)))
    assert off["docs"][0]["idx"] == "chunk-" + hashlib.md5(kb[0].text.encode()).hexdigest() and off["avg_ent_words"] == 1
    assert [r["extracted_triples"] for r in from_official_openie(off, kb)] == [r["extracted_triples"] for r in rows]

def test_store_cost_and_reload(tmp_path):
    kb = [NS(doc_id=f"d{i}", text=f"Person{i} visits Place{i}.") for i in range(4)]
    def respond(ms, js):
        if ms[0]["content"].startswith("You help"): return json.dumps({"fact": []})
        note = ms[-1]["content"].split("Note: ", 1)[1].split("\nNamed entities:")[0]; w = note.rstrip(".").split()
        return json.dumps({"named_entities": [w[0]]} if "named entities in it" in ms[0]["content"] else {"triples": [[w[0], w[1], w[2]]]})
    fc, emb = Cached(FakeChat(respond), tmp_path / "c.sqlite"), CachedEmbedder(HashEmbedder(), tmp_path / "c.sqlite")
    m = HippoRAG2(fc, embedder=emb, root=tmp_path / "idx")
    r = m.run(NS(query_id="q", query="Who visits Place2?", ref_date="2026-01-01"), NS(instance_id="i", ego={}), kb, answer=False)
    assert "hippo_ner" not in r.trace["stages"] and set(r.trace["stages"]) == {"hippo_filter"}
    idx = m.store.get("i", kb)
    c = idx.cost
    assert (c["n_facts"], c["llm_calls"], c["llm_failures"], c["model_calls_now"]) == (4, 8, 0, 8)
    assert c["prompt_tokens"] > 0 and c["embed_texts"] > 0
    man = json.loads((m.store.path("i") / "manifest.json").read_text())
    assert man["stats"]["passage_nodes"] == 4 and man["cost"] == c
    fc2 = Cached(FakeChat(respond), tmp_path / "c.sqlite")
    assert HippoRAG2(fc2, embedder=emb, root=tmp_path / "idx").store.get("i", kb).status == "loaded" and fc2.n_calls == 0
    other = Cached(FakeChat(respond, model="other-model"), False)                # another model: rebuilt, old extraction set aside
    i2 = HippoRAG2(other, embedder=emb, root=tmp_path / "idx").store.get("i", kb)
    assert i2.status == "built" and other.n_calls == 8
    assert any(p.name.startswith("openie.stale-") for p in m.store.path("i").iterdir())

def test_text_processing_is_the_official_one():
    assert text_processing("Café O'Neil, 7pm!") == "caf  o neil  7pm"

def openie_from_words(ms, js):
    "A scripted model for `pace run`: capitalised words are entities, (first, verb, last) the triple; the filter keeps the first triple."
    s = ms[0]["content"]
    if s.startswith("You help a personal assistant recall"):
        c = json.loads(ms[1]["content"].split("Candidate facts: ")[1].split("\n")[0])["fact"]
        return json.dumps({"fact": c[-1:]})                            # the least similar candidate: the filter disagrees with the order
    note = ms[-1]["content"].split("Note: ", 1)[-1].split("\nNamed entities:")[0]
    w = [x.strip(".,'") for x in note.split()]
    if s.startswith("You read one short note"): return json.dumps({"named_entities": [x for x in w if x[:1].isupper()][:5]})
    return json.dumps({"triples": [[w[0], w[1], w[-1]]] if len(w) >= 3 else []})

def test_pace_run_wiring_and_index_cost(tmp_path):
    from pace.eval.run import METHODS, build_method as make_method
    from pace.index import IndexStore
    from pace.eval.run import run_experiment
    assert "hipporag2" in METHODS
    st = IndexStore(tmp_path / "idx", CachedEmbedder(HashEmbedder(), False))
    m = make_method("hipporag2", Cached(FakeChat(), False), st)
    assert m.store.root == tmp_path / "idx" / "@hipporag2" and m.embedder is st.embedder
    run_experiment("tests/fixtures/tiny", ["bm25", "hipporag2"], chat=Cached(FakeChat(openie_from_words), False), embedder="hash:hash",
                         out_dir=tmp_path, name="r", limit=0, cache=False, retrieval_only=True, progress=False)
    rows = [json.loads(l) for l in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    hr = [r for r in rows if r["method"] == "hipporag2"]
    assert len(hr) == 4 and all(r["ranked"] and len(r["retrieved_ids"]) == 10 for r in hr)
    assert all(set(r["usage"]) == {"hippo_filter"} for r in hr)                 # indexing is not in any query's cost
    assert all(r["trace"]["details"]["fallback"] is None for r in hr)
    cost = (tmp_path / "r" / "index_cost.csv").read_text()
    assert "hipporag2,tiny-maya,40," in cost and ",80," in cost                 # 40 facts, 2 LLM calls each
    assert "## Indexing cost" in (tmp_path / "r" / "tables.md").read_text()


def test_a_run_resumed_in_a_new_process_writes_the_same_rows(tmp_path):
    "The second sitting loads the index the first built: that is kept in timings.jsonl, not in the result rows."
    from pace.eval.run import run_experiment
    from pace.eval.evaluate import read_jsonl
    kw = dict(dataset="tests/fixtures/tiny", methods=["hipporag2"], embedder="hash:hash", out_dir=tmp_path, limit=0,
              cache=False, retrieval_only=True, progress=False)
    whole = run_experiment(chat=Cached(FakeChat(openie_from_words), False), name="whole", **kw)
    first = run_experiment(chat=Cached(FakeChat(openie_from_words), False), name="split", max_pairs=1, **kw)
    assert first["n_new"] == 1
    rest = run_experiment(chat=Cached(FakeChat(openie_from_words), False), name="split", **kw)
    assert rest["n_new"] == 3
    assert whole["results"].read_bytes() == rest["results"].read_bytes()
    status = [t["volatile"]["trace"]["details"]["index_status"] for t in read_jsonl(rest["timings"])]
    assert status == ["built", "loaded", "loaded", "loaded"]
    assert "index_status" not in whole["results"].read_text() and '"triples"' in whole["results"].read_text()
