"Evaluation tables on hand-made rows with hand-computed values: rates over all pairs, intervals, funnel, failures, warnings."
import json, math
import numpy as np
import pytest
from pace.evaluate import (results_frame, table2, table3, rate_by, coverage, funnel_table, failures, cost, warnings, write_tables,
                           to_markdown)
from pace.metrics import bootstrap_ci

def V(label, dc): return dict(label=label, mode="blind", decision="decline" if dc else "carry_out", decision_correct=dc)

def row(q, m, label, typ, gold, ret, verdict, ranked=True, usage=None, evidence=None, calls=(), judge_calls=(), selection=None):
    return dict(query_id=q, method=m, label=label, situation_type=typ, gold_doc_ids=gold, ranked=ranked, retrieved_ids=ret,
                answer="reply", judge=verdict, evidence=evidence or {"final": ret, "answer": ret},
                usage=usage or {'answer': dict(calls=1, prompt_tokens=50, completion_tokens=20)},
                judge_usage={'judge_decision': dict(calls=1, prompt_tokens=10, completion_tokens=5)},
                trace=dict(calls=list(calls), selection=selection or {}), judge_calls=list(judge_calls))

PM = {s: dict(calls=1, prompt_tokens=100, completion_tokens=10) for s in ('planner', 'views', 'prehop', 'posthop', 'answer')}
ok = lambda st: dict(stage=st, ok=True, fallback=None)
bad = lambda st, fb: dict(stage=st, ok=False, fallback=fb)
ROWS = [
    # dense: q1 gold {a,b}: a at 1, b at 7 -> R@5 .5, R@10 1, H@5 1, G@5 0, G@10 1, MRR@10 1
    row('q1', 'dense', 'conflict', 'temporal', ['a', 'b'], ['a', 'x1', 'x2', 'x3', 'x4', 'x5', 'b'], V('PASS', True)),
    # q2 gold {c}: c at 3 -> R@5 1, G@5 1, MRR 1/3
    row('q2', 'dense', 'conflict', 'personal', ['c'], ['y', 'z', 'c'], V('FAIL', False)),
    # q3 gold {d,e}: only d at 11 -> nothing in the top 10, MRR 0
    row('q3', 'dense', 'non_conflict', 'state', ['d', 'e'], [f'n{i}' for i in range(10)] + ['d'], V('WRONG_RATIONALE', True)),
    # q4 gold {f,g}: f at 2 only -> partial coverage
    row('q4', 'dense', 'conflict', 'state', ['f', 'g'], ['w', 'f'], V('PASS', True)),
    row('q1', 'pacemaker', 'conflict', 'temporal', ['a', 'b'], ['b', 'a'], V('PASS', True), usage=PM,
        evidence=dict(fused=['a', 'q'], prehop=['a'], pool=['a', 'b'], final=['b', 'a'], answer=['b', 'a']),
        calls=[ok('planner'), ok('views'), ok('prehop'), ok('posthop'), ok('answer')],
        selection=dict(posthop=dict(n_chosen=1, n_padded=1, n_fallback=0, n_unseen_dropped=0))),
    row('q2', 'pacemaker', 'conflict', 'personal', ['c'], ['c'], V('PASS', True), usage=PM,
        calls=[bad('planner', 'no plan'), ok('views'), ok('prehop'), ok('posthop'), ok('answer')]),
    row('q3', 'pacemaker', 'non_conflict', 'state', ['d', 'e'], ['e'], V('FAIL', False), usage=PM),
    # q4: the judge's step 2 failed after a right decision
    row('q4', 'pacemaker', 'conflict', 'state', ['f', 'g'], [], dict(label=None, mode="blind", decision="decline", decision_correct=True),
        usage=PM, judge_calls=[ok('judge_decision'), bad('judge_rationale', 'no label')]),
    row('q1', 'oracle', 'conflict', 'temporal', ['a', 'b'], ['a', 'b'], V('WRONG_RATIONALE', True), ranked=False),
]

def test_table2_hand_computed():
    t = table2(results_frame(ROWS))
    d = t.loc['dense']
    assert math.isclose(d['recall@5'], 100 * (0.5 + 1 + 0 + 0.5) / 4)
    assert math.isclose(d['recall@10'], 100 * (1 + 1 + 0 + 0.5) / 4)
    assert math.isclose(d['hit@5'], 75.0) and math.isclose(d['gold@5'], 25.0) and math.isclose(d['gold@10'], 50.0)
    assert math.isclose(d['mrr@10'], 100 * (1 + 1 / 3 + 0 + 1 / 2) / 4)
    assert (d['pass'], d['wrong_rationale'], d['fail'], d['decision_acc']) == (50.0, 25.0, 25.0, 75.0)
    p = t.loc['pacemaker']
    assert math.isclose(p['recall@10'], 100 * (1 + 1 + 0.5 + 0) / 4) and math.isclose(p['mrr@10'], 100 * (1 + 1 + 1 + 0) / 4)
    # the failed judge call stays in the denominator: 2 PASS of 4, not of 3
    assert p['pass'] == 50.0 and p['judge_errors'] == 1 and p['decision_acc'] == 75.0
    assert math.isnan(t.loc['oracle', 'recall@5']) and t.loc['oracle', 'wrong_rationale'] == 100.0
    assert list(t.index) == ['oracle', 'dense', 'pacemaker']

def test_intervals_are_bootstrap_over_queries():
    t = table2(results_frame(ROWS))
    assert (t.loc['dense', 'pass_lo'], t.loc['dense', 'pass_hi']) == tuple(100 * v for v in bootstrap_ci([1, 0, 0, 1]))
    assert t.loc['dense', 'pass_lo'] == 0.0 and t.loc['dense', 'pass_hi'] == 100.0
    assert math.isnan(t.loc['oracle', 'pass_lo'])          # one pair: no interval

def test_rates_by_label_and_type_carry_n():
    df = results_frame(ROWS)
    t3 = table3(df)
    assert math.isclose(t3.loc[('dense', 'conflict'), 'value'], 200 / 3) and t3.loc[('dense', 'conflict'), 'n'] == 3
    assert t3.loc[('dense', 'non_conflict'), 'value'] == 0.0
    assert math.isclose(t3.loc[('pacemaker', 'conflict'), 'value'], 200 / 3)   # q4's judge error counts as not PASS
    ty = rate_by(df, 'situation_type', 'decision_correct')
    assert ty.loc[('dense', 'state'), 'value'] == 100.0 and ty.loc[('dense', 'personal'), 'value'] == 0.0
    assert ty.loc[('oracle', 'state'), 'n'] == 0

def test_coverage_is_on_what_the_answerer_saw():
    rows = ROWS + [row('q5', 'dense', 'conflict', 'temporal', ['h', 'i'], ['h', 'i'], V('PASS', True), evidence=dict(final=['h', 'i'], answer=['h']))]
    cv = coverage(results_frame(rows))
    # dense conflict: q1 full, q2 full, q4 partial, q5 partial (final had both, the prompt only 'h')
    assert [cv.loc[('dense', c), 'n'] for c in ('none', 'partial', 'full')] == [0, 2, 2]
    assert cv.loc[('pacemaker', 'none'), 'n'] == 1 and cv.loc[('oracle', 'full'), 'n'] == 1

def test_funnel_table():
    ft = funnel_table(results_frame(ROWS))
    assert (ft.loc['pacemaker', 'fused'], ft.loc['pacemaker', 'prehop'], ft.loc['pacemaker', 'pool']) == (50.0, 50.0, 100.0)
    assert ft.loc['pacemaker', 'fused_docs'] == 2.0 and math.isnan(ft.loc['dense', 'pool'])

def test_failures_per_stage():
    fl = failures(ROWS)
    assert fl.loc[('pacemaker', 'planner'), 'calls'] == 2 and fl.loc[('pacemaker', 'planner'), 'failed'] == 50.0
    assert fl.loc[('pacemaker', 'planner'), 'fallback'] == 50.0 and fl.loc[('pacemaker', 'views'), 'failed'] == 0.0
    assert fl.loc[('pacemaker', 'judge_rationale'), 'failed'] == 100.0
    assert fl.loc[('pacemaker', 'posthop'), 'padded_per_query'] == 1.0

def test_warnings_name_an_oracle_below_a_retriever():
    df = results_frame(ROWS)
    w = warnings(df, failures(ROWS))
    assert any("Oracle's PASS (0.0%) is below dense (50.0%), pacemaker (50.0%)" in l for l in w), w
    assert any("1 judge call(s) failed" in l for l in w) and any("pacemaker/planner" in l for l in w)
    fine = [r for r in ROWS if r['method'] != 'oracle'] + [row('q1', 'oracle', 'conflict', 'temporal', ['a', 'b'], ['a', 'b'], V('PASS', True), ranked=False)]
    assert not any("Oracle" in l for l in warnings(results_frame(fine)))

def test_cost():
    c = cost(results_frame(ROWS))
    assert c.loc['pacemaker', 'llm_calls'] == 5 and c.loc['dense', 'llm_calls'] == 1
    assert c.loc['pacemaker', 'prompt_tokens'] == 500 and c.loc['pacemaker', 'judge_calls'] == 1
    assert c.loc['pacemaker', 'calls:prehop'] == 1 and c.loc['dense', 'calls:prehop'] == 0

def test_markdown_shows_na_and_intervals():
    md = to_markdown(table2(results_frame(ROWS)))
    oracle = [l for l in md.splitlines() if l.startswith('| oracle')][0]
    assert 'n/a' in oracle and 'nan' not in md and '[0.0, 100.0]' in md and 'MRR@10' in md

def test_write_tables(tmp_path):
    p = tmp_path / 'results.jsonl'
    p.write_text(''.join(json.dumps(r) + '\n' for r in ROWS))
    (tmp_path / 'timings.jsonl').write_text(''.join(json.dumps(dict(query_id=r['query_id'], method=r['method'], seconds=3.0,
                                                                   judge_seconds=1.0, cache_hits=0)) + '\n' for r in ROWS))
    tabs = write_tables(p)
    for n in ('table2', 'table3_pass_by_label', 'pass_by_situation_type', 'decision_by_label', 'evidence_coverage', 'funnel',
              'failures', 'cost_per_query'):
        assert (tmp_path / f'{n}.csv').exists() and (tmp_path / f'{n}.md').exists(), n
    assert tabs['cost_per_query'].loc['dense', 'seconds'] == 3.0
    md = (tmp_path / 'tables.md').read_text()
    assert '| pacemaker' in md and 'WARNING' in md and 'n=' in md
