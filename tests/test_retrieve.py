"Tests for pace.retrieve (WRRF, hybrid search) and pace.traverse (BFS) on hand-built examples."
import random
import pytest

from pace.index import InstanceIndex
from pace.retrieve import wrrf, hybrid_search, HybridResult
from pace.traverse import bfs_expand, Visit
from retrieval_helpers import Fact, HashEmbedder, synthetic_facts


# ---- WRRF ----
def test_wrrf_hand_computed():
    r = dict(wrrf([(["a", "b", "c"], 1.0), (["c", "a"], 1.2)], k=60))
    assert r["a"] == pytest.approx(1 / 61 + 1.2 / 62)
    assert r["b"] == pytest.approx(1 / 62)
    assert r["c"] == pytest.approx(1 / 63 + 1.2 / 61)


def test_wrrf_weights_change_order():
    runs = lambda w: [(["orig"], 1.0), (["counter"], w)]
    assert [d for d, _ in wrrf(runs(1.2))] == ["counter", "orig"]
    assert [d for d, _ in wrrf(runs(0.8))] == ["orig", "counter"]
    assert [d for d, _ in wrrf(runs(1.0))] == ["orig", "counter"]      # tie -> first seen


def test_wrrf_ties_first_seen_then_stable():
    # b and d tie exactly (1/61 + 1/62 each, summed in different orders); b is seen first
    out = wrrf([(["b", "d"], 1.0), (["d", "b"], 1.0)])
    assert out[0][1] == out[1][1] and [d for d, _ in out] == ["b", "d"]
    out = wrrf([(["x", "z"], 1.0), (["y"], 1.0)])    # x and y tie at 1/61, z lower
    assert [d for d, _ in out] == ["x", "y", "z"]
    # three-way float ties are exact thanks to fsum
    runs = [(["a", "b", "c"], 0.1), (["b", "c", "a"], 0.1), (["c", "a", "b"], 0.1)]
    out = wrrf(runs)
    assert len({s for _, s in out}) == 1 and [d for d, _ in out] == ["a", "b", "c"]


def test_wrrf_duplicates_and_errors():
    assert wrrf([(["a", "b", "a"], 1.0)]) == [("a", 1 / 61), ("b", 1 / 62)]
    assert wrrf([]) == []
    for bad in ([(["a"], -1)], [(["a"], float("nan"))], [("ab", 1.0)], [(["a"],)]):
        with pytest.raises(ValueError): wrrf(bad)
    with pytest.raises(ValueError): wrrf([(["a"], 1.0)], k=0)


# ---- hybrid search ----
@pytest.fixture(scope="module")
def idx():
    facts = synthetic_facts(200, seed=3) + [Fact("gold", "Mina is allergic to peanuts and carries an epipen.")]
    return InstanceIndex.build(facts, HashEmbedder(), knn_k=10)


def test_hybrid_search_runs_and_fusion(idx):
    views = [("book dinner at a Thai restaurant", 1.0), ("peanut allergy epipen", 1.2), ("dinner schedule", 1.2)]
    calls = idx.embedder.calls
    res = hybrid_search(idx, views, top_k=10)
    assert idx.embedder.calls - calls == 1              # all views embedded in one call
    assert isinstance(res, HybridResult) and [v.text for v in res.per_view] == [t for t, _ in views]
    assert all(len(v.dense) == 10 and len(v.sparse) <= 10 for v in res.per_view)
    runs = []
    for v in res.per_view:
        runs += [([d for d, _ in v.dense], v.weight), ([d for d, _ in v.sparse], v.weight)]
    assert res.fused == wrrf(runs, k=60)
    assert res.per_view[1].sparse[0][0] == "gold" and "gold" in res.ids()
    assert len(hybrid_search(idx, views, top_k=10, n_fused=20).fused) == 20
    d = res.to_dict()
    assert d["per_view"][1]["weight"] == 1.2 and [tuple(x) for x in d["fused"]] == res.fused


def test_hybrid_search_errors(idx):
    with pytest.raises(ValueError): hybrid_search(idx, [])
    with pytest.raises(ValueError): hybrid_search(idx, [("q", -1.0)])
    with pytest.raises(ValueError): hybrid_search(idx, ["no weight"])


# ---- BFS ----
G = {"s": ["a", "b", "c", "d"], "a": ["s", "b", "e"], "b": ["a", "f", "g"], "c": ["h"], "d": [],
     "e": ["i"], "f": [], "g": [], "h": [], "i": ["j"], "j": ["k"], "k": ["l"], "l": ["m"], "m": []}


def test_bfs_m_semantics_skip_visited_not_refilled():
    v = bfs_expand(G.__getitem__, ["s"], depth=2, m=2)
    # hop1: s's first two neighbours a, b. hop2: a's first two are s, b (visited -> nothing);
    # b's first two are a (visited), f.
    assert v == [Visit("s", 0, None), Visit("a", 1, "s"), Visit("b", 1, "s"), Visit("f", 2, "b")]


def test_bfs_fill_takes_first_unvisited():
    v = bfs_expand(G.__getitem__, ["s"], depth=2, m=2, fill=True)
    assert v == [Visit("s", 0, None), Visit("a", 1, "s"), Visit("b", 1, "s"),
                 Visit("e", 2, "a"), Visit("f", 2, "b"), Visit("g", 2, "b")]


def test_bfs_depth_limits_hops():
    chain = lambda n: [Visit(x, h, p) for h, (x, p) in enumerate(zip("eijklm", [None, "e", "i", "j", "k", "l"]))][:n]
    assert bfs_expand(G.__getitem__, ["e"], depth=5, m=3) == chain(6)
    assert bfs_expand(G.__getitem__, ["e"], depth=2, m=3) == chain(3)
    assert bfs_expand(G.__getitem__, ["e"], depth=0) == chain(1)
    assert bfs_expand(G.__getitem__, ["s"], depth=3, m=0) == [Visit("s", 0, None)]


def test_bfs_visited_set_and_seeds():
    v = bfs_expand(G.__getitem__, ["a", "b", "a"], depth=1, m=3)
    assert v == [Visit("a", 0, None), Visit("b", 0, None), Visit("s", 1, "a"), Visit("e", 1, "a"),
                 Visit("f", 1, "b"), Visit("g", 1, "b")]
    assert bfs_expand(G.__getitem__, [], depth=3) == []


def test_bfs_on_random_graph_deterministic_and_consistent():
    rng = random.Random(7)
    R = {str(i): [(str(j), 1 - r / 20) for r, j in enumerate(rng.sample([j for j in range(200) if j != i], 10))] for i in range(200)}
    seeds = [str(i) for i in range(10)]
    a = bfs_expand(R.__getitem__, seeds, depth=5, m=3)
    assert a == bfs_expand(R.__getitem__, seeds, depth=5, m=3)
    assert len(a) == len({x.doc_id for x in a})
    at = {x.doc_id: x for x in a}
    for x in a:
        if x.parent is None: assert x.hop == 0 and x.doc_id in seeds
        else: assert x.hop == at[x.parent].hop + 1 and x.doc_id in [d for d, _ in R[x.parent][:3]] and 1 <= x.hop <= 5
    assert [x.hop for x in a] == sorted(x.hop for x in a)          # breadth-first order
    assert len(bfs_expand(R.__getitem__, seeds, depth=5, m=3, max_visits=25)) == 25


def test_bfs_on_index_graph(idx):
    v = bfs_expand(idx.neighbors, ["gold"], depth=2, m=3)
    assert v[0] == Visit("gold", 0, None)
    assert [x.doc_id for x in v if x.hop == 1] == [d for d, _ in idx.neighbors("gold")[:3]]


def test_bfs_errors():
    with pytest.raises(TypeError): bfs_expand(G.__getitem__, "s")
    with pytest.raises(ValueError): bfs_expand(G.__getitem__, ["s"], depth=-1)
    with pytest.raises(KeyError): bfs_expand(G.__getitem__, ["nope"], depth=1)
