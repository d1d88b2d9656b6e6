"PaceMaker pipeline: call counts per ablation, trace completeness, fallbacks; toy index and the real index."
import pytest
from pace.agents import ScriptedChat
from pace.pipeline import PaceMaker, PaceMakerConfig, ToyIndex, Trace
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
    tr = PaceMaker(cm, index or ToyIndex(kb), PaceMakerConfig(**kw)).run(q, inst, facts=kb)
    return cm, tr

@pytest.mark.parametrize("switch,stages", [
    ({}, ['planner', 'views', 'prehop', 'posthop', 'answer']),
    ({'use_planning': False}, ['prehop', 'posthop', 'answer']),
    ({'use_traversal': False}, ['planner', 'views', 'answer']),
    ({'use_traversal': False, 'no_traversal_evidence': 'seeds'}, ['planner', 'views', 'prehop', 'answer']),
    ({'use_selection': False}, ['planner', 'views', 'prehop', 'answer'])])
def test_ablation_switches_change_the_calls(ds, switch, stages):
    cm, tr = run(ds, n_filter=5, n_final=5, **switch)   # small filters: every filter has something to choose from
    assert [c['stage'] for c in cm.log] == stages
    assert {s: v['calls'] for s, v in tr.stages.items()} == {s: 1 for s in stages}
    assert tr.n_llm_calls == len(stages)

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

def test_without_planning_uses_original_query_only(ds):
    _, tr = run(ds, use_planning=False)
    assert [v.kind for v in tr.views] == ['original'] and tr.plan is None

def test_without_traversal_passes_the_fused_top_or_the_seeds(ds):
    _, tr = run(ds, use_traversal=False)
    assert tr.final_ids == [i for i, _ in tr.fused[:10]] and tr.seeds == [] and tr.pool == []
    _, tr = run(ds, use_traversal=False, no_traversal_evidence='seeds')
    assert tr.final_ids == tr.seeds and len(tr.seeds) == 10 and tr.pool == []

def test_without_selection_passes_whole_pool(ds):
    _, tr = run(ds, use_selection=False)
    assert tr.final_ids == [p.doc_id for p in tr.pool] and len(tr.final_ids) > 10

def test_posthop_filter_sees_bfs_order_and_its_choice_stands(ds):
    "Old bug: the pool was pre-ranked by similarity and padded from it, so the final evidence was the top of that ranking."
    q = ds.queries[0]; inst = ds.instances[q.instance_id]; kb = ds.facts(q.instance_id)
    late = lambda ms: {'selected_doc_ids': ids_in(ms, 1000)[-10:]}   # a filter that likes what traversal found last
    cm = ScriptedChat(script() | {'posthop': late})
    tr = PaceMaker(cm, ToyIndex(kb), PaceMakerConfig()).run(q, inst, facts=kb)
    shown = ids_in(cm.calls('posthop')[0]['messages'], 1000)
    assert shown == [p.doc_id for p in tr.pool] and shown[:10] == tr.seeds
    assert tr.final_ids == shown[-10:] and not set(tr.final_ids) & set(tr.seeds)
    assert all(p.hop > 0 for p in tr.pool if p.doc_id in tr.final_ids)
    assert tr.selection['posthop'].n_chosen == 10 and tr.selection['posthop'].n_padded == 0

def test_posthop_shuffle_is_seeded_by_the_request(ds):
    _, a = run(ds, posthop_order='shuffle')
    _, b = run(ds, posthop_order='shuffle')
    assert a.pool_order == b.pool_order and sorted(a.pool_order) == sorted(p.doc_id for p in a.pool)
    assert a.pool_order != [p.doc_id for p in a.pool]

def test_real_index_end_to_end_with_scripted_model(ds, tmp_path):
    from pace.embed import get_embedder
    from pace.index import IndexStore
    store = IndexStore(tmp_path / "idx", get_embedder(cache=False))
    cm, tr = run(ds, index=store)
    assert tr.n_llm_calls == 5 and len(tr.final_ids) == 10
    # the gold facts of this query share words with the views: the dense+sparse fusion must surface at least one
    assert set(ds.queries[0].gold_doc_ids) & set(i for i, _ in tr.fused[:20])
