"Judge label rules and evaluation tables on hand-made rows with hand-computed values."
import json, math
import pytest
from pace.agents import ScriptedChat
from pace.judge import judge_answer, derive_label, JudgeOutput
from pace.evaluate import results_frame, table2, table3, pass_by, coverage, cost, write_tables

def jo(d, r): return JudgeOutput(decision=d, rationale=r, reason='.')

@pytest.mark.parametrize("gold,decision,rationale,label", [
    ("conflict", "decline", "same_core_reason", "PASS"),
    ("conflict", "decline", "partial_or_weak", "WRONG_RATIONALE"),
    ("conflict", "decline", "wrong_reason", "FAIL"),
    ("conflict", "carry_out", "same_core_reason", "FAIL"),
    ("conflict", "ambiguous", "same_core_reason", "FAIL"),
    ("non_conflict", "carry_out", "same_core_reason", "PASS"),
    ("non_conflict", "decline", "same_core_reason", "FAIL")])
def test_decision_first_then_rationale(gold, decision, rationale, label):
    assert derive_label(jo(decision, rationale), gold) == label

def test_judge_gets_gold_label_and_judgment_and_never_raises():
    cm = ScriptedChat({'judge': {'decision': 'carry_out', 'rationale': 'partial_or_weak', 'reason': 'misses the vegan menu'}})
    v, rec = judge_answer(cm, "Book Harbour Kitchen", "Sure, I'll book it.", "non_conflict", "Harbour Kitchen has a vegan menu.")
    assert v.label == "WRONG_RATIONALE" and v.reason == 'misses the vegan menu'
    user = cm.log[0]['messages'][1]['content']
    assert "non_conflict" in user and "Harbour Kitchen has a vegan menu." in user
    v, rec = judge_answer(ScriptedChat({'judge': RuntimeError('down')}), "q", "a", "conflict", "j")
    assert v.label is None and 'down' in v.error

def row(q, m, label, typ, gold, ret, jl, ranked=True, usage=None):
    return dict(query_id=q, method=m, label=label, situation_type=typ, gold_doc_ids=gold, ranked=ranked, retrieved_ids=ret,
                judge=dict(label=jl), usage=usage or {'answer': dict(calls=1, prompt_tokens=50, completion_tokens=20)},
                judge_usage={'judge': dict(calls=1, prompt_tokens=10, completion_tokens=5)})

PM = {s: dict(calls=1, prompt_tokens=100, completion_tokens=10) for s in ('planner', 'views', 'prehop', 'posthop', 'answer')}
ROWS = [
    # dense: q1 gold {a,b}: a at 1, b at 7 -> R@5 .5, R@10 1, H@5 1, G@5 0, G@10 1, MRR 1
    row('q1', 'dense', 'conflict', 'temporal', ['a', 'b'], ['a', 'x1', 'x2', 'x3', 'x4', 'x5', 'b'], 'PASS'),
    # q2 gold {c}: c at 3 -> R@5 1, G@5 1, MRR 1/3
    row('q2', 'dense', 'conflict', 'personal', ['c'], ['y', 'z', 'c'], 'FAIL'),
    # q3 gold {d,e}: only d at 11 -> nothing in top 10, MRR 0
    row('q3', 'dense', 'non_conflict', 'state', ['d', 'e'], [f'n{i}' for i in range(10)] + ['d'], 'WRONG_RATIONALE'),
    # q4 gold {f,g}: f at 2 only -> partial coverage
    row('q4', 'dense', 'conflict', 'state', ['f', 'g'], ['w', 'f'], 'PASS'),
    row('q1', 'pacemaker', 'conflict', 'temporal', ['a', 'b'], ['b', 'a'], 'PASS', usage=PM),
    row('q2', 'pacemaker', 'conflict', 'personal', ['c'], ['c'], 'PASS', usage=PM),
    row('q3', 'pacemaker', 'non_conflict', 'state', ['d', 'e'], ['e'], 'FAIL', usage=PM),
    row('q4', 'pacemaker', 'conflict', 'state', ['f', 'g'], [], None, usage=PM),
    row('q1', 'oracle', 'conflict', 'temporal', ['a', 'b'], ['a', 'b'], 'PASS', ranked=False),
]

def test_table2_hand_computed():
    t = table2(results_frame(ROWS))
    d = t.loc['dense']
    assert math.isclose(d['recall@5'], 100 * (0.5 + 1 + 0 + 0.5) / 4)
    assert math.isclose(d['recall@10'], 100 * (1 + 1 + 0 + 0.5) / 4)
    assert math.isclose(d['hit@5'], 75.0) and math.isclose(d['gold@5'], 25.0) and math.isclose(d['gold@10'], 50.0)
    assert math.isclose(d['mrr'], 100 * (1 + 1 / 3 + 0 + 1 / 2) / 4)
    assert math.isclose(d['pass_rate'], 50.0) and math.isclose(d['wrong_rationale'], 25.0) and math.isclose(d['fail'], 25.0)
    p = t.loc['pacemaker']
    assert math.isclose(p['recall@10'], 100 * (1 + 1 + 0.5 + 0) / 4) and math.isclose(p['mrr'], 100 * (1 + 1 + 1 + 0) / 4)
    assert p['n_judged'] == 3 and p['n_judge_errors'] == 1 and math.isclose(p['pass_rate'], 200 / 3)
    assert math.isnan(t.loc['oracle', 'recall@5']) and t.loc['oracle', 'pass_rate'] == 100.0
    assert list(t.index) == ['oracle', 'dense', 'pacemaker']

def test_pass_by_label_and_type():
    df = results_frame(ROWS)
    t3 = table3(df)
    assert math.isclose(t3.loc['dense', 'conflict'], 200 / 3) and t3.loc['dense', 'non_conflict'] == 0.0
    assert t3.loc['pacemaker', 'conflict'] == 100.0   # q4 not judged: left out of the denominator
    ty = pass_by(df, 'situation_type')
    assert ty.loc['dense', 'state'] == 50.0 and ty.loc['dense', 'personal'] == 0.0

def test_evidence_coverage_split():
    cv = coverage(results_frame(ROWS))
    # dense conflict queries: q1 full (G@10), q2 full, q4 partial (hit, not all gold)
    assert [cv.loc[('dense', c), 'n'] for c in ('none', 'partial', 'full')] == [0, 1, 2]
    assert cv.loc[('dense', 'full'), 'pass_rate'] == 50.0 and cv.loc[('dense', 'partial'), 'pass_rate'] == 100.0
    # pacemaker q4 retrieved nothing: 'none'
    assert cv.loc[('pacemaker', 'none'), 'n'] == 1 and 'oracle' not in cv.index.get_level_values(0)

def test_cost_per_query_reads_the_usage():
    c = cost(results_frame(ROWS))
    assert c.loc['pacemaker', 'llm_calls'] == 5 and c.loc['dense', 'llm_calls'] == 1
    assert c.loc['pacemaker', 'prompt_tokens'] == 500 and c.loc['pacemaker', 'judge_calls'] == 1
    assert c.loc['pacemaker', 'calls:prehop'] == 1 and c.loc['dense', 'calls:prehop'] == 0

def test_write_tables(tmp_path):
    p = tmp_path / 'results.jsonl'
    p.write_text(''.join(json.dumps(r) + '\n' for r in ROWS))
    (tmp_path / 'timings.jsonl').write_text(''.join(json.dumps(dict(query_id=r['query_id'], method=r['method'], seconds=3.0,
                                                                   judge_seconds=1.0, cache_hits=0)) + '\n' for r in ROWS))
    tabs = write_tables(p)
    for n in ('table2', 'table3_pass_by_label', 'pass_by_situation_type', 'evidence_coverage', 'cost_per_query'):
        assert (tmp_path / f'{n}.csv').exists() and (tmp_path / f'{n}.md').exists()
    assert tabs['cost_per_query'].loc['dense', 'seconds'] == 3.0
    assert '| pacemaker' in (tmp_path / 'tables.md').read_text()
