"PaceMaker on the tiny dataset: a complete trace with the paper's defaults, and the real index end to end. The stages, ablations and fallbacks are tested in nbs/21_pipeline."
import pytest
from pace.testing import ScriptedChat
from pace.pipeline import PaceMaker, PaceMakerConfig, Trace
from pace.testing import ToyIndex
from pace.data import load_pace_dataset

TINY = "tests/fixtures/tiny"

def ids_in(ms, n):
    return [l.split(']')[0][1:] for l in ms[1]['content'].splitlines() if l.startswith('[')][:n]

def script():
    return {'planner': {'directions': [{'dimension': 'evening plans', 'key_anchors': ['this Thursday evening']}]},
            'views': {'counter': ["Maya commitments 2026-04-16 evening", "parents' evening 2026-04-16"]},
            'prehop': lambda ms: {'selected_doc_ids': ids_in(ms, 10)},
            'posthop': lambda ms: {'selected_doc_ids': ids_in(ms, 10)},
            'answer': "I won't book it, Maya: parents' evening runs until 19:30 on Thursday."}

@pytest.fixture(scope="module")
def ds(): return load_pace_dataset(TINY)

def run(ds, index=None, **kw):
    q = ds.queries[0]; inst = ds.instances[q.instance_id]; kb = ds.facts(q.instance_id)
    cm = ScriptedChat(script())
    tr = PaceMaker(cm, index or ToyIndex(kb), PaceMakerConfig(**kw)).run(q, inst, kb=kb)
    return cm, tr

def test_full_trace_is_complete(ds):
    cm, tr = run(ds)
    assert tr.method == 'pacemaker' and tr.plan is not None and len(tr.views) == 3
    assert [v.kind for v in tr.views] == ['original', 'counter', 'counter'] and tr.views[1].weight == 1.2
    assert len(tr.candidates) == 3 and all(len(c.dense) <= 10 and len(c.sparse) <= 10 for c in tr.candidates)
    assert len(tr.seed_candidates) == min(20, len(tr.fused)) and len(tr.seeds) == 10 and set(tr.seeds) <= set(tr.seed_candidates)
    assert [p.doc_id for p in tr.pool if p.hop == 0] == tr.seeds and max(p.hop for p in tr.pool) >= 1
    assert all(p.parent is not None for p in tr.pool if p.hop > 0)
    assert len(tr.final_ids) == 10 and set(tr.final_ids) <= {p.doc_id for p in tr.pool}
    assert tr.answer and tr.ranking_rule and len(tr.calls) == 5
    assert set(tr.timings) >= {'retrieval', 'traversal', 'total'}
    assert list(tr.evidence) == ['fused', 'prehop', 'pool', 'final', 'answer'] and tr.evidence['final'] == tr.final_ids
    assert Trace.model_validate_json(tr.model_dump_json()) == tr

def test_real_index_end_to_end_with_scripted_model(ds, tmp_path):
    from pace.embed import get_embedder
    from pace.index import IndexStore
    store = IndexStore(tmp_path / "idx", get_embedder(cache=False))
    cm, tr = run(ds, index=store)
    assert tr.n_llm_calls == 5 and len(tr.final_ids) == 10
    # the gold facts of this query share words with the views: the dense+sparse fusion must surface at least one
    assert set(ds.queries[0].gold_doc_ids) & set(i for i, _ in tr.fused[:20])
