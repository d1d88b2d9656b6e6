"Retrieval on a 200-fact index: hybrid search and BFS over the real k-NN graph. WRRF, hybrid search and BFS themselves are tested in nbs/11_retrieve and nbs/12_traverse."
import pytest

from pace.index import InstanceIndex
from pace.retrieve import hybrid_search
from pace.traverse import bfs_expand, Visit
from retrieval_helpers import Fact, hash_embedder, synthetic_facts


@pytest.fixture(scope="module")
def idx():
    facts = synthetic_facts(200, seed=3) + [Fact("gold", "Mina is allergic to peanuts and carries an epipen.")]
    return InstanceIndex.build(facts, hash_embedder(), knn_k=10)


def test_hybrid_search_finds_the_counter_views_fact_among_200(idx):
    views = [("book dinner at a Thai restaurant", 1.0), ("peanut allergy epipen", 1.2), ("dinner schedule", 1.2)]
    res = hybrid_search(idx, views, top_k=10)
    assert all(len(v.dense) == 10 and len(v.sparse) <= 10 for v in res.per_view)
    assert res.per_view[1].sparse[0][0] == "gold" and "gold" in res.ids()
    assert len(hybrid_search(idx, views, top_k=10, n_fused=20).fused) == 20


def test_bfs_on_index_graph(idx):
    v = bfs_expand(idx.neighbors, ["gold"], depth=2, m=3)
    assert v[0] == Visit("gold", 0, None)
    assert [x.doc_id for x in v if x.hop == 1] == [d for d, _ in idx.neighbors("gold")[:3]]
    assert all(x.doc_id in [d for d, _ in idx.neighbors(x.parent)[:3]] for x in v if x.parent)
