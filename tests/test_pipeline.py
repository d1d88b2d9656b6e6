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

class BatchLog(ScriptedChat):
    "A ScriptedChat that logs the size of every `chat_batch` call (`chat` goes through it with one request)."
    def __init__(self, *a, **kw): super().__init__(*a, **kw); self.sizes = []
    def chat_batch(self, reqs, **kw): self.sizes.append(len(reqs)); return super().chat_batch(reqs, **kw)

def per_query(ms):
    "A reply computed from the prompt: a transport error for some queries, junk (not JSON, wrong schema) for others."
    import hashlib
    user = ms[-1]['content']; h = hashlib.sha256(user.encode()).digest()[0]
    if h % 7 == 0: raise RuntimeError("server busy")
    if h % 7 == 1: return "sorry, no JSON today"
    if h % 7 == 2: return {'unexpected': True}
    ids = ids_in(ms, 50)
    return {'directions': [{'dimension': 'plans', 'key_anchors': [user.split()[1]]}], 'counter': [f"view {h}", "commitments that day"],
            'selected_doc_ids': ids[h % 3:][::-1][:10]}

@pytest.mark.parametrize("cfg", [dict(), dict(use_planning=False), dict(use_traversal=False, no_traversal_evidence='seeds')])
def test_stage_batching_gives_the_per_query_traces(ds, cfg):
    from pace.run import split_volatile
    qs = ds.queries[:8]; insts = [ds.instances[q.instance_id] for q in qs]; kbs = [ds.facts(q.instance_id) for q in qs]
    s = {st: per_query for st in ('planner', 'views', 'prehop', 'posthop')} | {'answer': lambda ms: "No." if len(ms[-1]['content']) % 3 else RuntimeError("down")}
    store = {q.instance_id: ToyIndex(ds.facts(q.instance_id)) for q in qs}
    idx = lambda iid, kb: store[iid]
    conf = PaceMakerConfig(**cfg)
    one, many = BatchLog(s, context_window=900), BatchLog(s, context_window=900)   # a small window: post-hop tournaments of several rounds
    singles = [PaceMaker(one, idx, conf).run(q, i, kb) for q, i, kb in zip(qs, insts, kbs)]
    batched = PaceMaker(many, idx, conf).run_batch(qs, insts, kbs)
    assert [split_volatile(t.model_dump())[0] for t in batched] == [split_volatile(t.model_dump())[0] for t in singles]
    assert many.log == one.log or sorted(map(str, many.log)) == sorted(map(str, one.log))   # the same requests
    assert set(one.sizes) == {1} and max(many.sizes) == len(qs) and len(many.sizes) < len(one.sizes) / 3
    calls = [c for t in batched for c in t.calls]
    if cfg == {}: assert any(c.error and 'server busy' in c.error for c in calls) and any(c.error and ('structured' in c.error or 'schema' in c.error) for c in calls)
    if cfg == {}: assert max(t.selection['posthop'].rounds for t in batched) >= 2
