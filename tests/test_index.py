"Tests for pace.index: build, search edge cases, incremental add, save/load staleness, IndexStore."
import json, shutil
import numpy as np
import pytest

from pace.embed import CachedEmbedder
from pace.index import InstanceIndex, IndexStore, facts_sha256, check_facts, embedder_fingerprint, FORMAT_VERSION
import pace.embed
from retrieval_helpers import Fact, HashEmbedder, hash_embedder, random_embedder, synthetic_facts


@pytest.fixture(scope="module")
def kb():
    return synthetic_facts(300, seed=1)


@pytest.fixture(scope="module")
def full(kb):
    return InstanceIndex.build(kb, random_embedder(48), knn_k=10)


def test_graph_is_exact_knn(full):
    v = full.vectors
    sims = v @ v.T
    np.fill_diagonal(sims, -np.inf)
    want = np.argsort(-sims, axis=1, kind="stable")[:, :10]
    assert full.graph_ids.tolist() == want.tolist()
    np.testing.assert_allclose(full.graph_scores, np.take_along_axis(sims, want, 1), atol=1e-5)
    row = full.neighbors("d7")
    assert len(row) == 10 and "d7" not in [d for d, _ in row]
    assert [s for _, s in row] == sorted((s for _, s in row), reverse=True)


def test_add_equals_full_rebuild(kb, full):
    emb = random_embedder(48)
    part = InstanceIndex.build(kb[:100], emb, knn_k=10)
    part.add(kb[100:101]); part.add(kb[101:250]); part.add(kb[250:])
    assert emb.n_texts == len(kb)                    # every fact embedded exactly once
    assert part.doc_ids == full.doc_ids
    assert part.graph_ids.tolist() == full.graph_ids.tolist()
    np.testing.assert_allclose(part.graph_scores, full.graph_scores, atol=1e-5)
    q = ["dentist appointment", "passport flight hotel"]
    assert part.sparse(q, 10) == full.sparse(q, 10)
    assert [[d for d, _ in r] for r in part.dense(q, 10)] == [[d for d, _ in r] for r in full.dense(q, 10)]
    assert part.timings["n_embedded"] == len(kb) and part.timings["embed_s"] > 0


def test_add_rejects_existing_ids(full):
    with pytest.raises(ValueError, match="already indexed"):
        full.add([Fact("d0", "new text")])


def test_bad_facts():
    emb = hash_embedder()
    with pytest.raises(ValueError, match="empty list"): InstanceIndex.build([], emb)
    with pytest.raises(ValueError, match="duplicate"): InstanceIndex.build([Fact("a", "x y"), Fact("a", "z")], emb)
    with pytest.raises(ValueError, match="text"): InstanceIndex.build([Fact("a", "")], emb)
    with pytest.raises(ValueError, match="doc_id"): InstanceIndex.build([Fact(None, "text")], emb)


def test_embedder_shape_checked():
    class Bad(HashEmbedder):
        def embed(self, texts, **kw): return super().embed(texts)[:, :10]
    with pytest.raises(ValueError, match="shape"):
        InstanceIndex.build(synthetic_facts(5), Bad("hash", 64))   # a bare backend: its own `embed`


def test_search_edge_cases():
    facts = [Fact("a", "Mina is allergic to peanuts."), Fact("b", "The pool closes at nine."),
             Fact("c", "Peanut sauce is used in most dishes.")]
    idx = InstanceIndex.build(facts, hash_embedder(), knn_k=10)
    assert len(idx.neighbors("a")) == 2                      # fewer than k other docs
    assert len(idx.dense(["peanuts"], 50)[0]) == 3           # k > corpus size
    s = idx.sparse(["peanuts", "", "the of and", "unknownword"], 50)
    assert sorted(d for d, _ in s[0]) == ["a", "c"]          # only docs sharing a term (stemmed)
    assert s[1:] == [[], [], []]                             # empty / stopword-only / OOV queries
    assert idx.dense([], 3) == [] and idx.sparse([], 3) == []
    with pytest.raises(ValueError): idx.dense(["x"], 0)
    with pytest.raises(KeyError, match="unknown doc_id"): idx.neighbors("zz")


def test_save_load_and_staleness(tmp_path, kb, caplog):
    emb = random_embedder(48)
    p = tmp_path / "inst"
    idx = InstanceIndex.build(kb[:50], emb, knn_k=5)
    idx.save(p)
    man = json.loads((p / "manifest.json").read_text())
    assert man["embedder"] == emb.fingerprint() == {"backend": "random", "model_id": "random-48", "dim": 48}
    assert man["facts_sha256"] == facts_sha256(check_facts(kb[:50]))
    assert man["params"]["knn_k"] == 5 and man["format_version"] == FORMAT_VERSION == 4

    n = emb.n_texts
    ok = InstanceIndex.load(p, kb[:50], emb, knn_k=5)
    assert ok.status == "loaded" and emb.n_texts == n        # nothing re-embedded
    assert ok.graph_ids.tolist() == idx.graph_ids.tolist()
    assert ok.sparse(["dentist"], 5) == idx.sparse(["dentist"], 5)

    changed = kb[:49] + [Fact(kb[49].doc_id, "A completely different sentence about zebras.")]
    r = InstanceIndex.load(p, changed, emb, knn_k=5)
    assert r.status == "rebuilt" and "facts changed" in r.stale_reason
    assert r.text(kb[49].doc_id).endswith("zebras.") and r.sparse(["zebras"], 3)[0][0][0] == kb[49].doc_id
    assert "stale" in caplog.text
    assert InstanceIndex.load(p, changed, emb, knn_k=5).status == "loaded"      # re-saved
    assert InstanceIndex.load(p, changed, random_embedder(32), knn_k=5).status == "rebuilt"
    assert InstanceIndex.load(p, changed, random_embedder(32, "other"), knn_k=5).stale_reason.startswith("embedder")
    assert InstanceIndex.load(p, changed, random_embedder(32, "other"), knn_k=6).stale_reason.startswith("parameters")


def test_manifest_holds_the_embedder_fingerprint(tmp_path):
    "A pace.embed embedder: the manifest stores its whole fingerprint, and a changed setting rebuilds the index."
    class Truncating(pace.embed.HashEmbedder):
        "A hash embedder with a setting that changes vectors (as max_length does for real models)."
        def __init__(self, max_words=50, **kw): super().__init__("h", dim=32, **kw); self.max_words = max_words
        def _embed(self, texts): return super()._embed([" ".join(t.split()[:self.max_words]) for t in texts])
        def fingerprint(self): return {**super().fingerprint(), "max_words": self.max_words}
    facts, p = synthetic_facts(20), tmp_path / "i"
    emb = Truncating()
    InstanceIndex.build(facts, emb, knn_k=3).save(p)
    man = json.loads((p / "manifest.json").read_text())
    assert man["embedder"] == emb.fingerprint() == {"backend": "hash", "model_id": "h-32", "dim": 32, "max_words": 50}
    assert man["embedder"] == embedder_fingerprint(emb)
    assert InstanceIndex.load(p, facts, Truncating(), knn_k=3).status == "loaded"
    short = Truncating(max_words=3)   # same model id and size
    assert (short.model_id, short.dim) == (emb.model_id, emb.dim)
    r = InstanceIndex.load(p, facts, short, knn_k=3)
    assert (r.status, r.stale_reason) == ("rebuilt", "embedder changed (max_words)")
    assert json.loads((p / "manifest.json").read_text())["embedder"]["max_words"] == 3   # re-saved with the new settings
    other = CachedEmbedder(pace.embed.HashEmbedder("h", dim=32), False)   # no max_words at all
    assert InstanceIndex.load(p, facts, other, knn_k=3).stale_reason == "embedder changed (max_words)"
    # an index written before fingerprints (format 1) is rebuilt once
    old = json.loads((p / "manifest.json").read_text()); old["format_version"] = 1
    (p / "manifest.json").write_text(json.dumps(old))
    assert InstanceIndex.load(p, facts, other, knn_k=3).stale_reason == f"format version 1 != {FORMAT_VERSION}"


def test_load_damaged_files_rebuild(tmp_path):
    facts, emb = synthetic_facts(20), hash_embedder()
    p = tmp_path / "x"
    InstanceIndex.build(facts, emb, knn_k=3).save(p)
    np.save(p / "vectors.npy", np.zeros((3, 64), np.float32))
    assert InstanceIndex.load(p, facts, emb, knn_k=3).status == "rebuilt"
    shutil.rmtree(p / "bm25")
    r = InstanceIndex.load(p, facts, emb, knn_k=3)
    assert r.status == "rebuilt" and r.stale_reason.startswith("damaged") and (p / "bm25").is_dir()
    (p / "manifest.json").write_text("{not json")
    assert InstanceIndex.load(p, facts, emb, knn_k=3).status == "rebuilt"
    (p / "manifest.json").unlink()
    assert InstanceIndex.load(p, facts, emb, knn_k=3, save=False).status == "rebuilt"


def test_load_extends_appended_facts(tmp_path, kb, full):
    emb = random_embedder(48)
    InstanceIndex.build(kb[:200], emb, knn_k=10).save(tmp_path / "i")
    n = emb.n_texts
    e = InstanceIndex.load(tmp_path / "i", kb, emb, knn_k=10)
    assert e.status == "extended" and emb.n_texts - n == 100   # only the appended facts embedded
    assert e.graph_ids.tolist() == full.graph_ids.tolist()
    assert InstanceIndex.load(tmp_path / "i", kb, emb, knn_k=10).status == "loaded"


def test_index_store(tmp_path):
    emb = hash_embedder()
    facts = synthetic_facts(30)
    st = IndexStore(tmp_path, emb, knn_k=4)
    a = st.get("ego 1", facts)
    assert a.status == "built" and st.get("ego 1", facts) is a
    assert st.path("ego 1") != st.path("ego_1") and st.path("ego_1").name == "ego_1"
    assert IndexStore(tmp_path, emb, knn_k=4).get("ego 1", facts).status == "loaded"
    b = st.get("ego 1", facts + [Fact("new", "A new fact about yoga.")])
    assert b.status == "extended" and "new" in b.doc_ids
    with pytest.raises(ValueError): st.path("")


@pytest.mark.parametrize("kind", [True, "ivf", "hnsw"])
def test_approximate_index(kb, full, kind):
    ap = InstanceIndex.build(kb, random_embedder(48), knn_k=10, approximate=kind)
    assert ap.approximate == ("hnsw" if kind == "hnsw" else "ivf")
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ap.graph_ids, full.graph_ids)])
    assert overlap > 0.9
    assert ap.dense_by_vector(full.vectors[:5], 1) == [[(d, pytest.approx(1.0, abs=1e-4))] for d in full.doc_ids[:5]]
    ap.add([Fact("extra", "Fact extra: a brand new sentence.")])
    assert ap.neighbors("extra") and ap.dense(["Fact extra: a brand new sentence."], 1)[0][0][0] == "extra"


def test_approximate_bad_option():
    with pytest.raises(ValueError, match="approximate"):
        InstanceIndex.build(synthetic_facts(5), hash_embedder(), approximate="lsh")


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_save_load(tmp_path, kind):
    facts, emb = synthetic_facts(120), hash_embedder()
    ap = InstanceIndex.build(facts, emb, knn_k=3, approximate=kind)
    ap.save(tmp_path / "a")
    l = InstanceIndex.load(tmp_path / "a", facts, emb, knn_k=3, approximate=kind)
    assert l.status == "loaded" and l.faiss.ntotal == 120 and type(l.faiss) is type(ap.faiss)
    assert l.dense(["dentist"], 5) == ap.dense(["dentist"], 5)
    assert InstanceIndex.load(tmp_path / "a", facts, emb, knn_k=3).status == "rebuilt"   # exact != approximate


# ---- bm25='release': the authors' BM25 (rank_bm25's BM25Okapi over their tokens), through bm25s ----
def _okapi_ranking(okapi, tokens):
    "The authors' ranking of every document: scores sorted best first by Python's stable sort (ties in KB order)."
    scores = okapi.get_scores(tokens)
    return [i for i, _ in sorted(enumerate(scores), key=lambda x: x[1], reverse=True)], scores


def test_release_bm25_equals_rank_bm25_on_every_mini_query(tmp_path):
    from rank_bm25 import BM25Okapi   # test-only dependency (the `dev` extra)
    from pace.data import load_pace_dataset
    from pace.index import release_tokens
    ds = load_pace_dataset("data/mini")
    n_q = n_floor = 0
    for inst in sorted(ds.instances):
        facts = ds.facts(inst)
        okapi = BM25Okapi(release_tokens([f.text for f in facts]))
        assert (okapi.k1, okapi.b, okapi.epsilon) == (1.5, 0.75, 0.25)
        n_floor += sum(v == okapi.epsilon * okapi.average_idf for v in okapi.idf.values())
        built = InstanceIndex.build(facts, hash_embedder(), knn_k=3, bm25="release")
        built.save(tmp_path / inst)
        idx = InstanceIndex.load(tmp_path / inst, facts, hash_embedder(), knn_k=3, bm25="release")
        assert idx.status == "loaded"                     # the floor survives bm25s' save and load
        ids = [f.doc_id for f in facts]
        for q in (q for q in ds.queries if q.instance_id == inst):
            order, scores = _okapi_ranking(okapi, release_tokens([q.query])[0])
            for k in (10, len(facts)):
                got = idx.sparse([q.query], k)[0]
                assert [d for d, _ in got] == [ids[i] for i in order[:k]], (q.query_id, k)
                np.testing.assert_allclose([s for _, s in got], scores[order[:k]], rtol=0, atol=1e-9)
            n_q += 1
    assert n_q == 72 and n_floor > 0      # every query, and terms in more than half the facts were floored


def test_release_bm25_zero_scores_fill_in_kb_order():
    from rank_bm25 import BM25Okapi
    from pace.index import release_tokens
    facts = [Fact(f"d{i}", t) for i, t in enumerate(["Joon cooks.", "Mina swims on 2026-03-14.", "The pool opens.",
                                                     "Mina's check-in is at 7:30.", "Rain later."])]
    idx = InstanceIndex.build(facts, hash_embedder(), knn_k=2, bm25="release")
    for q in ("mina check-in", "zebra", "", "2026-03-14 at 7:30"):
        order, _ = _okapi_ranking(BM25Okapi(release_tokens([f.text for f in facts])), release_tokens([q])[0])
        assert [d for d, _ in idx.sparse([q], 4)[0]] == [f"d{i}" for i in order[:4]], q
    assert [d for d, _ in idx.sparse(["zebra"], 3)[0]] == ["d0", "d1", "d2"]
    # the project's BM25 returns only documents sharing a stemmed, non-stopword term
    assert [d for d, _ in InstanceIndex.build(facts, hash_embedder(), knn_k=2).sparse(["zebra"], 3)[0]] == []
    assert idx.params()["bm25"]["tokens"] == "release" and "stemmer" in InstanceIndex(hash_embedder()).params()["bm25"]


def test_release_and_pace_indexes_do_not_mix(tmp_path, caplog):
    kb = synthetic_facts(20, seed=3)
    InstanceIndex.build(kb, hash_embedder(), knn_k=3).save(tmp_path / "i")
    r = InstanceIndex.load(tmp_path / "i", kb, hash_embedder(), knn_k=3, bm25="release")
    assert (r.status, r.bm25_mode) == ("rebuilt", "release") and r.stale_reason.startswith("parameters changed")
    a, b = IndexStore(tmp_path / "s", hash_embedder(), knn_k=3), IndexStore(tmp_path / "s", hash_embedder(), knn_k=3,
                                                                            bm25="release")
    assert a.path("x") != b.path("x") and b.path("x").parent.name == "@bm25-release"
    assert a.get("x", kb).status == "built" and b.get("x", kb).status == "built"
    assert IndexStore(tmp_path / "s", hash_embedder(), knn_k=3).get("x", kb).status == "loaded"
    assert IndexStore(tmp_path / "s", hash_embedder(), knn_k=3, bm25="release").get("x", kb).status == "loaded"


class _OtherCPU:
    """A FAISS index as another CPU's SIMD might answer: the same candidates, scores off in the 7th digit, tied ones in
    another order."""
    def __init__(self, inner, seed=0): self.inner, self.rng = inner, np.random.default_rng(seed)
    def __getattr__(self, name): return getattr(self.inner, name)
    def search(self, q, k):
        D, I = self.inner.search(q, k)
        D = D + self.rng.uniform(-2e-7, 2e-7, D.shape).astype(np.float32)
        order = np.argsort(-D, axis=1, kind="stable")
        return np.take_along_axis(D, order, 1), np.take_along_axis(I, order, 1)


def test_dense_search_and_graph_do_not_depend_on_faiss_arithmetic(kb):
    "What FAISS computes only proposes candidates: noisy scores and reshuffled ties give the same bits out."
    emb = random_embedder(48)
    a = InstanceIndex.build(kb, emb, knn_k=10)
    b = InstanceIndex.build(kb[:150], emb, knn_k=10)
    b.faiss = _OtherCPU(b.faiss, seed=3)
    b.add(kb[150:])                                   # new graph rows come through the noisy index too
    assert b.graph_ids.tolist() == a.graph_ids.tolist()
    assert b.graph_scores.tobytes() == a.graph_scores.tobytes()
    qs = ["dentist appointment", "passport flight hotel", "zzz"]
    assert b.dense(qs, 10) == a.dense(qs, 10)         # ids and float scores, exactly
    v = a.vectors
    for row, ids in zip(a.graph_ids[:5], range(5)):
        want = [float(np.float32(pace.embed.inner_products(v[j], v[ids]))) for j in row]
        assert [float(x) for x in a.graph_scores[ids]] == want


def test_dense_ties_are_cut_by_position():
    "Identical facts score the same: the cut keeps the earliest of them, whatever order FAISS returns them in."
    facts = [Fact(f"d{i}", "the same sentence about dinner") for i in range(30)] + [Fact("z", "a cat")]
    idx = InstanceIndex.build(facts, hash_embedder(), knn_k=3)
    idx.faiss = _OtherCPU(idx.faiss, seed=1)
    got = [d for d, _ in idx.dense(["dinner"], 5)[0]]
    assert got == ["d0", "d1", "d2", "d3", "d4"]


def test_sparse_ties_at_zero_are_the_first_facts():
    "A query with no known term scores 0 everywhere; the release mode's top k is then the first k facts."
    facts = [Fact(f"d{i:03d}", f"fact number {i} about errands") for i in range(561)]   # mini-01's size
    idx = InstanceIndex.build(facts, hash_embedder(), knn_k=3, bm25="release")
    assert [d for d, _ in idx.sparse(["availability"], 10)[0]] == [f"d{i:03d}" for i in range(10)]


def test_l2_normalise_is_a_left_to_right_sum():
    "Normalisation adds squares in order in float64 (the same bits whatever numpy's or BLAS's SIMD does)."
    x = np.random.default_rng(2).normal(size=(4, 384)).astype(np.float32)
    got = pace.embed.l2_normalise(x)
    for row, g in zip(x, got):
        s = 0.0
        for e in row.tolist(): s += e * e
        assert g.tobytes() == (row.astype(np.float64) / np.sqrt(s)).astype(np.float32).tobytes()


# ---------- issue 42: the graph on first use, approximate above GRAPH_EXACT_MAX, digests, index seconds ----------

def test_graph_is_built_on_first_use_and_saved_then(tmp_path, kb, full):
    "BM25/Dense/Hybrid never read the graph: it is not built with the index, but on first use, and then kept on disk."
    p = tmp_path / "i"
    idx = InstanceIndex.load(p, kb, random_embedder(48), knn_k=10)
    assert idx.timings["graph_s"] == 0 and not (p / "graph_ids.npy").exists()
    assert json.loads((p / "manifest.json").read_text())["graph"] is None
    assert idx.neighbors("d7") == full.neighbors("d7")               # built now, the same graph as before
    man = json.loads((p / "manifest.json").read_text())
    assert man["graph"] == "exact" and man["timings"]["graph_s"] > 0 and (p / "graph_ids.npy").exists()
    again = InstanceIndex.load(p, kb, random_embedder(48), knn_k=10)
    assert again.status == "loaded" and again._graph is not None     # loaded, not built again
    assert again.graph_ids.tolist() == full.graph_ids.tolist() and again.timings["graph_s"] == 0


def test_exact_graph_bytes_unchanged(kb, full):
    "Below GRAPH_EXACT_MAX the lazy graph is the one the index built eagerly before (same search, same bytes)."
    import faiss
    from pace.index import _grown_graph
    fi = faiss.IndexFlatIP(full.vectors.shape[1]); fi.add(full.vectors)
    gi, gs = _grown_graph(fi, full.vectors, np.zeros((0, 10), np.int64), np.zeros((0, 10), np.float32), 0, 10)
    assert full.graph_ids.tobytes() == gi.tobytes() and full.graph_scores.tobytes() == gs.tobytes()


def test_approximate_graph_above_the_threshold(monkeypatch, kb, full):
    import pace.index
    monkeypatch.setattr(pace.index, "GRAPH_EXACT_MAX", 100)
    idx = InstanceIndex.build(kb, random_embedder(48), knn_k=10)
    assert idx.graph_ids.shape == full.graph_ids.shape and idx.graph_kind == "ivf"
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(idx.graph_ids.tolist(), full.graph_ids.tolist())])
    assert recall > 0.9
    assert idx.dense(["dentist"], 5) == full.dense(["dentist"], 5)   # dense search stays exact


def test_changed_index_files_of_the_right_shape_are_never_used(tmp_path, caplog):
    "A resume reused vectors.npy whenever its shape matched (zeroed vectors were used): each file is sha256-checked."
    facts, emb = synthetic_facts(30), hash_embedder()
    p = tmp_path / "x"
    idx = InstanceIndex.build(facts, emb, knn_k=3); idx.graph_ids; idx.save(p)
    for name, bad in (("vectors.npy", np.zeros_like(idx.vectors)), ("graph_ids.npy", np.zeros_like(idx.graph_ids))):
        np.save(p / name, bad)
        r = InstanceIndex.load(p, facts, emb, knn_k=3)
        assert (r.status, r.stale_reason) == ("rebuilt", f"{name} does not match its sha256 in the manifest")
        assert r.vectors.tolist() == idx.vectors.tolist() and r.graph_ids.tolist() == idx.graph_ids.tolist()
        assert f"is stale ({name} does not match its sha256" in caplog.text
    (p / "docs.jsonl").write_text((p / "docs.jsonl").read_text())   # same bytes: still fine
    assert InstanceIndex.load(p, facts, emb, knn_k=3).status == "loaded"
    man = json.loads((p / "manifest.json").read_text()); del man["files"]["vectors.npy"]
    (p / "manifest.json").write_text(json.dumps(man))
    assert InstanceIndex.load(p, facts, emb, knn_k=3).stale_reason == "the manifest lists no sha256 of vectors.npy"


def test_index_work_is_charged_to_the_index_clock(tmp_path):
    import time
    from pace.index import index_seconds
    class Slow(HashEmbedder):
        def _embed(self, texts): time.sleep(0.3); return super()._embed(texts)
    st, facts = IndexStore(tmp_path, CachedEmbedder(Slow("h", 32), False), knn_k=3), tuple(synthetic_facts(20))
    with index_seconds() as clock:
        t = time.perf_counter(); st.get("a", facts); spent = time.perf_counter() - t
    assert 0.3 <= clock.seconds <= spent
    idx = st.get("a", facts)
    with index_seconds() as clock: idx.neighbors("d1")   # the graph on first use
    assert clock.seconds > 0 and idx.timings["graph_s"] == pytest.approx(clock.seconds, abs=0.05)
    with index_seconds() as clock: st.get("a", facts); idx.neighbors("d2")
    assert clock.seconds == 0                             # nothing built: nothing charged


def test_a_run_charges_the_index_build_to_index_cost_not_to_the_first_method(tmp_path):
    "Issue 42: BM25 showed 231.9 s a query (the shared index build) against Dense's 0.1 s."
    import time
    from pace.eval.run import run_experiment
    class Slow(pace.embed.HashEmbedder):
        def _embed(self, texts): time.sleep(1.0 if len(texts) > 1 else 0); return super()._embed(texts)   # documents: slow
    run_experiment("tests/fixtures/tiny", ["bm25", "dense"], embedder=CachedEmbedder(Slow(), False), retrieval_only=True,
                   out_dir=tmp_path, name="r", limit=2, cache=False, progress=False)
    secs = [json.loads(l)["seconds"] for l in (tmp_path / "r" / "timings.jsonl").read_text().splitlines()]
    assert len(secs) == 4 and max(secs) < 0.5
    cost = (tmp_path / "r" / "index_cost.csv").read_text().splitlines()
    assert sum(float(l.split(",")[3]) for l in cost[1:]) >= 1.0   # the build is in the index cost


def test_an_index_keeps_no_hash_vectors_in_the_cache_and_a_replay_computes_them(tmp_path):
    "Issue 42: the hash embedder's vectors of a 200,000-fact KB filled a 415 MB cache; computing them is cheaper."
    from pace.cache import Cache
    from pace.embed import get_embedder
    c, facts = Cache(tmp_path / "c.sqlite"), synthetic_facts(20)
    idx = InstanceIndex.build(facts, CachedEmbedder(pace.embed.HashEmbedder(), c), knn_k=3)
    hits = idx.dense(["dentist appointment"], 3)
    assert c._con().execute("SELECT stage, COUNT(*) FROM entries GROUP BY stage").fetchall() == [("embed_query", 1)]
    rep = get_embedder("hash:hash", cache=c, replay=True)            # a replay: the facts' vectors computed again
    again = InstanceIndex.build(facts, rep, knn_k=3)
    assert again.vectors.tobytes() == idx.vectors.tobytes() and again.dense(["dentist appointment"], 3) == hits
