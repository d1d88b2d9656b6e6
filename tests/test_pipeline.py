"PaceMaker on the tiny dataset: a complete trace with the paper's defaults, and the real index end to end. The stages, ablations and fallbacks are tested in nbs/21_pipeline."
import pytest
from pace.testing import ScriptedChat
from pace.methods.pipeline import PaceMaker, PaceMakerConfig, Trace
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
    assert sum(s['calls'] for s in tr.stages.values()) == 5 and len(tr.final_ids) == 10
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

@pytest.mark.parametrize("name,cfg", [('pacemaker', dict()), ('pacemaker-no_planning', dict()),
                                      ('pacemaker-no_traversal', dict(no_traversal_evidence='seeds'))])
def test_stage_batching_gives_the_per_query_traces(ds, name, cfg):
    from pace.runfolder import split_volatile
    qs = ds.queries[:8]; insts = [ds.instances[q.instance_id] for q in qs]; kbs = [ds.facts(q.instance_id) for q in qs]
    s = {st: per_query for st in ('planner', 'views', 'prehop', 'posthop')} | {'answer': lambda ms: "No." if len(ms[-1]['content']) % 3 else RuntimeError("down")}
    store = {q.instance_id: ToyIndex(ds.facts(q.instance_id)) for q in qs}
    idx = lambda iid, kb: store[iid]
    from pace.methods.pipeline import pipeline
    conf = pipeline(name, PaceMakerConfig(**cfg))
    one, many = BatchLog(s, context_window=900), BatchLog(s, context_window=900)   # a small window: post-hop tournaments of several rounds
    singles = [PaceMaker(one, idx, conf).run(q, i, kb) for q, i, kb in zip(qs, insts, kbs)]
    batched = PaceMaker(many, idx, conf).run_batch(qs, insts, kbs)
    assert [split_volatile(t.model_dump())[0] for t in batched] == [split_volatile(t.model_dump())[0] for t in singles]
    assert many.log == one.log or sorted(map(str, many.log)) == sorted(map(str, one.log))   # the same requests
    assert set(one.sizes) == {1} and max(many.sizes) == len(qs) and len(many.sizes) < len(one.sizes) / 3
    calls = [c for t in batched for c in t.calls]
    if name == 'pacemaker': assert any(c.error and 'server busy' in c.error for c in calls) and any(c.error and ('structured' in c.error or 'schema' in c.error) for c in calls)
    if name == 'pacemaker': assert max(t.selection['posthop'].rounds for t in batched) >= 2


# --- the anchors are the Hybrid baseline's list, whatever PaceMaker's own settings

class Crossed:
    "An index whose dense and BM25 rankings run in opposite directions, so the depth of each list changes the fused top 10."
    def __init__(self, n=30): self.ids = [f"c{i:02d}" for i in range(n)]
    def text(self, i): return f"fact {i} about Friday"
    def dense(self, qs, k): return [[(d, 1.0 - j / 100) for j, d in enumerate(self.ids[:k])] for _ in qs]
    def sparse(self, qs, k): return [[(d, 10.0 - j / 10) for j, d in enumerate(self.ids[::-1][:k])] for _ in qs]
    def neighbors(self, i):
        p = self.ids.index(i); return [(self.ids[(p + j) % len(self.ids)], 0.9) for j in (1, 2, 3)]

def crossed_run(base, **script_kw):
    from types import SimpleNamespace as NS
    from pace.methods.pipeline import pipeline
    from pace.methods.baselines import make_method
    idx = Crossed(); kb = [NS(doc_id=i, text=idx.text(i)) for i in idx.ids]
    q = NS(query_id='q', query='Book the Old Duke on Friday', ref_date='2026-04-14'); inst = NS(instance_id='x', ego={'name': 'Maya'})
    last = lambda ms: {'selected_doc_ids': ids_in(ms, 50)[::-1][:5]}    # disagrees with the order shown
    s = script() | {'planner': {'directions': [{'dimension': 'Friday plans', 'key_anchors': ['Friday']}]}, 'prehop': last, 'posthop': last}
    tr = PaceMaker(ScriptedChat(s | script_kw), idx, pipeline('pacemaker-small', base)).run(q, inst, kb=kb)
    hybrid = make_method('hybrid', None, idx, base).run(q, inst, kb, answer=False)
    return idx, tr, hybrid

def test_anchors_follow_the_hybrid_baseline_not_pacemakers_top_k():
    "With --config top_k=20 the old anchors came from depth-20 lists, not Hybrid's depth 10; now they are Hybrid's list."
    idx, tr, hybrid = crossed_run(PaceMakerConfig(top_k=20))
    assert len(tr.candidates[0].dense) == 20                          # top_k still sets PaceMaker's own depth
    assert tr.anchors == hybrid.retrieved_ids
    from pace.methods.pipeline import hybrid_ranking
    assert tr.anchors == [d for d, _ in hybrid_ranking(idx, tr.query)]
    assert tr.final_ids[:10] == tr.seeds[:10] == hybrid.retrieved_ids and len(tr.final_ids) == 15
    deep = [d for d, _ in hybrid_ranking(idx, tr.query, 20)][:10]
    assert deep != hybrid.retrieved_ids                                 # with this index the depth matters
    idx, tr5, hybrid5 = crossed_run(PaceMakerConfig(top_k=20, k_rrf=5))   # a setting that changes Hybrid changes both alike
    assert tr5.anchors == hybrid5.retrieved_ids

def test_anchors_above_hybrids_size_are_the_sized_hybrid_list():
    from pace.methods.baselines import make_method
    from types import SimpleNamespace as NS
    idx, tr, _ = crossed_run(PaceMakerConfig(anchor_keep=12, n_filter=15, n_final=15))
    kb = [NS(doc_id=i, text=idx.text(i)) for i in idx.ids]
    h12 = make_method('hybrid@12', None, idx).run(NS(query_id='q', query=tr.query, ref_date='2026-04-14'), NS(instance_id='x'), kb, answer=False)
    assert tr.anchors == h12.retrieved_ids and h12.trace['method'] == 'hybrid@12' and len(h12.retrieved_ids) == 12


# --- the answer format reaches PaceMaker and the baselines; the default trace is as before

def test_answer_format_reaches_pacemaker_and_the_baselines(ds):
    from pace.methods.baselines import make_method
    q = ds.queries[0]; inst = ds.instances[q.instance_id]; kb = ds.facts(q.instance_id)
    cfg = PaceMakerConfig(answer_format='structured')
    for name in ('pacemaker', 'pacemaker-small', 'hybrid', 'hybrid@15', 'oracle', 'full_kb'):
        cm = ScriptedChat(script() | {'answer': {'decision': 'carry_out', 'reply': "I won't book it, Maya."}})
        r = make_method(name, cm, ToyIndex(kb), cfg).run(q, inst, kb)
        sent = cm.calls('answer')[0]
        assert sent['schema']['properties']['decision']['enum'] == ['carry_out', 'decline', 'ambiguous'], name
        assert '"decision"' in sent['messages'][0]['content'] and 'no JSON' not in sent['messages'][0]['content'], name
        assert r.answer == "I won't book it, Maya." and r.trace['calls'][-1]['notes']['decision'] == 'carry_out', name   # as stated
    cm = ScriptedChat(script())
    r = make_method('pacemaker', cm, ToyIndex(kb), PaceMakerConfig()).run(q, inst, kb)
    assert cm.calls('answer')[0]['schema'] is None and 'decision' not in r.trace['calls'][-1]['notes']
    assert r.trace['config'] == {}   # the defaults: nothing recorded

def test_the_recorded_settings_are_what_differs_from_the_defaults_and_read_back():
    "A trace records the settings that differ from their defaults; read back, they give the same settings (a new setting with a default changes no record)."
    from pace.methods.pipeline import pipeline
    p = pipeline('pacemaker-small-no_anchors', PaceMakerConfig(answer_format='structured', hops=5))
    rec = p.settings.changed()
    assert rec == dict(n_filter=15, n_final=15, max_pool_candidates=40, counter_weighting='overlap', answer_format='structured')
    assert PaceMakerConfig(**rec) == p.settings

def test_a_format_1_run_folder_is_refused_with_its_format_named(tmp_path):
    "A run folder written before run format 2 (the reference run of tests/fixtures) is not resumed: the error names the format."
    import shutil
    from pathlib import Path
    from pace.eval.run import run_experiment
    from pace.runfolder import RunMismatchError
    ref = Path(__file__).parents[1] / "tests/fixtures/old-run/mini-qwen2.5-0.5b-n6"
    shutil.copytree(ref, tmp_path / "old")
    with pytest.raises(RunMismatchError, match="run format 1"):
        run_experiment(dataset=str(Path(__file__).parents[1] / "data/mini"), out_dir=tmp_path, name="old", chat=None, judge=None,
                       embedder="hash:hash", methods=["bm25"], limit=1, retrieval_only=True, cache=False, progress=False)


# --- PaceMaker as a declared list of stages

def stage_names(name, base=None):
    from pace.methods.pipeline import pipeline
    return [s.name for s in PaceMaker(None, None, pipeline(name, base)).method.stages]

def test_methods_are_lists_of_stages():
    assert stage_names('pacemaker') == ['plan', 'views', 'retrieve', 'prehop', 'traverse', 'posthop', 'answer']
    assert stage_names('pacemaker-no_traversal') == ['plan', 'views', 'retrieve', 'fused_top', 'answer']
    assert stage_names('pacemaker-no_traversal', PaceMakerConfig(no_traversal_evidence='seeds')) == ['plan', 'views', 'retrieve', 'prehop', 'seeds_final', 'answer']
    assert stage_names('pacemaker-no_planning') == ['retrieve', 'prehop', 'traverse', 'posthop', 'answer']
    assert stage_names('pacemaker-no_selection') == ['plan', 'views', 'retrieve', 'prehop', 'traverse', 'whole_pool', 'answer']
    assert stage_names('pacemaker-small-no_anchors') == stage_names('pacemaker')
    assert stage_names('pacemaker-score') == ['request', 'entities', 'dates', 'pool', 'score', 'fuse', 'answer']
    assert stage_names('pacemaker-score-no_scores-no_dates') == ['request', 'entities', 'pool', 'fuse', 'answer']
    pm, ps = PaceMaker(None, None), PaceMaker(None, None, 'pacemaker-score')
    assert pm.method.stages[-1] is ps.method.stages[-1]           # one answer stage, not a copy

def test_pacemaker_score_resolves_without_registration_by_import():
    "pipeline alone knows pacemaker-score's name (the old code knew it only once pacemaker_score had been imported)."
    import subprocess, sys
    code = ("import sys; from pace.methods import pipeline as p; assert 'pace.methods.pacemaker_score' not in sys.modules\n"
            "before = dict(p.VARIANTS); m = p.pipeline('pacemaker-score-no_dates')\n"
            "print(type(m.settings).__name__, m.name, 'dates' in [s.name for s in m.stages], dict(p.VARIANTS) == before)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ['ScoreConfig', 'pacemaker-score-no_dates', 'False', 'True']

def test_a_stage_of_ones_own_reaches_the_trace(ds):
    "A stage that drops the seeds naming a word, between the pre-hop filter and the traversal: funnel, timings, pool, prompts."
    from pace.methods.pipeline import PACEMAKER_STAGES, StageSpec, insert_after
    q = ds.queries[0]; inst = ds.instances[q.instance_id]; kb = ds.facts(q.instance_id); idx = ToyIndex(kb)
    plain_cm = ScriptedChat(script()); plain = PaceMaker(plain_cm, idx).run(q, inst, kb=kb)
    word = next(w for w in idx.text(plain.seeds[0]).split() if len(w) > 4)   # a word of the first seed
    def no_word(st, c):
        st.tr.seeds = [i for i in st.tr.seeds if word not in st.idx.text(i)]
        return st.tr.seeds
    mine = insert_after(PACEMAKER_STAGES, 'prehop', StageSpec('no_word', no_word, evidence='no_word', timing='no_word'))
    from pace.methods.pipeline import pipeline
    cm = ScriptedChat(script()); tr = PaceMaker(cm, idx, pipeline('pacemaker')._replace(name='pacemaker-no_word', stages=mine)).run(q, inst, kb=kb)
    dropped = [i for i in plain.seeds if word in idx.text(i)]
    assert dropped and tr.evidence['prehop'] == plain.seeds
    assert tr.evidence['no_word'] == [i for i in plain.seeds if i not in dropped]
    assert list(tr.evidence) == ['fused', 'prehop', 'no_word', 'pool', 'final', 'answer']
    assert list(tr.timings) == ['retrieval', 'no_word', 'traversal', 'total'] and tr.timings['no_word'] >= 0
    assert [p.doc_id for p in tr.pool if p.hop == 0] == tr.evidence['no_word'] and tr.pool != plain.pool
    assert [c['stage'] for c in cm.log] == ['planner', 'views', 'prehop', 'posthop', 'answer']
    shown = ids_in(cm.calls('posthop')[0]['messages'], 1000)
    assert shown == tr.pool_order and shown[:len(tr.seeds)] == tr.seeds    # the post-hop filter sees the pool grown from what is left
    assert tr.config == plain.config and (tr.method, plain.method) == ('pacemaker-no_word', 'pacemaker')
