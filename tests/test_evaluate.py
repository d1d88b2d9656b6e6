"Evaluation tables on hand-made rows with hand-computed values: rates over all pairs, intervals, funnel, failures, warnings."
import json, math
import pytest
import numpy as np
from pace.llm import Cached
from pace.eval.evaluate import (results_frame, table2, table3, rate_by, coverage, funnel_table, failures, cost, warnings, write_tables,
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


# --- evidence size: what each method hands the answerer, side by side

def sized(m, n, verdict=None, q='q1'):
    ids = [f'x{i}' for i in range(n)]
    return row(q, m, 'conflict', 'temporal', ['a', 'b'], ['a'] + ids[1:], verdict or V('PASS', True))

def test_evidence_size_in_table2_and_the_funnel_with_a_warning_when_unequal():
    rows = [sized('hybrid', 10), sized('pacemaker-small', 15), sized('hybrid', 10, q='q2'), sized('pacemaker-small', 15, q='q2'),
            row('q1', 'oracle', 'conflict', 'temporal', ['a', 'b'], ['a', 'b'], V('PASS', True), ranked=False)]
    df = results_frame(rows)
    t2, ft = table2(df), funnel_table(df)
    assert (t2.loc['hybrid', 'evidence'], t2.loc['pacemaker-small', 'evidence'], t2.loc['oracle', 'evidence']) == (10, 15, 2)
    assert ft.loc['pacemaker-small', 'evidence'] == 15 and list(t2.columns[:2]) == ['n', 'evidence']
    from pace.eval.evaluate import header, evidence_warning
    w = evidence_warning(df)
    assert w.startswith("WARNING") and "10: hybrid; 15: pacemaker-small" in w and "add hybrid@15" in w and w in header(None, df)
    df2 = results_frame(rows + [sized('hybrid@15', 15), sized('hybrid@15', 15, q='q2')])
    assert list(table2(df2).index) == ['oracle', 'hybrid', 'hybrid@15', 'pacemaker-small']
    assert "15: hybrid@15, pacemaker-small" in evidence_warning(df2) and "add" not in evidence_warning(df2)
    assert evidence_warning(results_frame([r for r in rows if r['method'] != 'hybrid'])) is None   # Oracle differs by design
    md = to_markdown(t2)
    assert 'evidence' in md.splitlines()[0]

def test_write_tables_put_the_evidence_warning_in_the_headers(tmp_path):
    rows = [sized('hybrid', 10), sized('pacemaker-small', 15)]
    p = tmp_path / 'results.jsonl'
    p.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    write_tables(p)
    for f in ('tables.md', 'table2.md', 'funnel.md'):
        assert "different numbers of facts (mean, by size: 10: hybrid; 15: pacemaker-small)" in (tmp_path / f).read_text(), f


# --- decision accuracy from the answer's own decision field

def structured(r, decision):
    calls = [dict(stage='answer', ok=True, fallback=None, notes=dict(n_facts=2, n_facts_used=2, answer_format='structured', decision=decision))]
    return r | dict(trace=dict(calls=calls, selection={}))

def test_decision_accuracy_comes_from_the_decision_field_when_the_answer_has_one():
    "The judge read 'decline' (right) from q1 and 'carry_out' (wrong) from q2; the answers stated the opposite, and q4 stated none."
    rows = [structured(ROWS[0], 'carry_out'), structured(ROWS[1], 'decline'), structured(ROWS[3], None), ROWS[2]]
    df = results_frame(rows)
    d = df.set_index('query_id')
    assert list(d.loc[['q1', 'q2', 'q4', 'q3'], 'decision_correct']) == [0.0, 1.0, 0.0, 1.0]
    assert list(d.loc[['q1', 'q2', 'q4', 'q3'], 'decision_source']) == ['answer', 'answer', 'answer', 'judge']
    assert list(d.loc[['q1', 'q2'], 'judge_decision_correct']) == [1.0, 0.0]        # the judge's reading is kept beside it
    t = table2(df)
    assert t.loc['dense', 'decision_acc'] == 50.0 and t.loc['dense', 'decision_from'] == 'answer field + judge'
    assert t.loc['dense', 'pass'] == 50.0                                            # PASS still comes from the judge
    note = [l for l in warnings(df) if l.startswith("NOTE: dense: decision accuracy is from the answers' decision field")]
    assert note == ["NOTE: dense: decision accuracy is from the answers' decision field; the judge read the same decision from the reply in 0 of 3 pairs."]
    assert table2(results_frame(ROWS)).loc['dense', 'decision_from'] == 'judge'
    assert 'decision from' in to_markdown(t).splitlines()[0]


# --- rows written before these columns existed still read

def test_reference_run_rows_still_read(tmp_path):
    from pathlib import Path
    from pace.eval.evaluate import read_jsonl, evidence_warning
    rows = read_jsonl(Path(__file__).parents[1] / "tests/fixtures/old-run/mini-qwen2.5-0.5b-n6/results.jsonl")
    df = results_frame(rows)
    t = table2(df)
    assert all(t.loc[m, 'evidence'] == 10 for m in ('bm25', 'dense', 'hybrid', 'pacemaker')) and evidence_warning(df) is None
    assert set(t.decision_from) == {'judge'}
    fl = failures(rows)
    assert fl.loc[('pacemaker', 'prehop'), 'chosen_per_query'] >= 0 and np.isnan(fl.loc[('pacemaker', 'prehop'), 'passed_uncalled_per_query'])
    new = dict(rows[0]) | dict(method='pacemaker-new', trace=dict(calls=[dict(stage='posthop', ok=True, fallback=None)],
                                                                  selection=dict(posthop=dict(n_chosen=2, n_passed_uncalled=8))))
    fl2 = failures(rows + [new])   # old and new rows in one table: the old ones read n/a, the new ones their count
    assert fl2.loc[('pacemaker-new', 'posthop'), 'passed_uncalled_per_query'] == 8
    assert np.isnan(fl2.loc[('pacemaker', 'posthop'), 'passed_uncalled_per_query'])
    write_tables(Path(__file__).parents[1] / "tests/fixtures/old-run/mini-qwen2.5-0.5b-n6/results.jsonl", out_dir=tmp_path)
    assert '| evidence' in (tmp_path / 'table2.md').read_text() and 'different numbers of facts' not in (tmp_path / 'tables.md').read_text()


def test_structured_decisions_and_equal_sizes_through_pace_run(tmp_path):
    "End to end: `pace run` with answer_format=structured and hybrid@15 beside pacemaker-small; run.py as it is."
    from statistics import mean
    from pace.testing import FakeChat
    from pace.testing import schema_reply
    from pace.eval.run import run_experiment
    from pace.eval.evaluate import read_jsonl
    def respond(msgs, schema):
        if "reply" in (schema or {}).get("properties", {}):   # the structured answer states carry_out, whatever its reply says
            return json.dumps({"decision": "carry_out", "reply": "I won't do that: it clashes with your evening."})
        return schema_reply(msgs, schema)                       # the judge reads every reply as declining
    res = run_experiment(dataset="tests/fixtures/tiny", methods=["hybrid", "hybrid@15", "pacemaker-small"], chat=Cached(FakeChat(respond), False),
                         embedder="hash:hash", out_dir=tmp_path, name="s", limit=0, cache=False, progress=False,
                         config=dict(answer_format="structured"))
    rows, t2 = read_jsonl(res["results"]), res["tables"]["table2"]
    right = 100 * mean(r["label"] == "non_conflict" for r in rows if r["method"] == "hybrid")   # carry_out is right for these
    assert all(r["answer"] == "I won't do that: it clashes with your evening." for r in rows)
    assert set(t2.decision_from) == {"answer field"} and all(t2.decision_acc == right)
    assert (t2.loc["hybrid", "evidence"], t2.loc["hybrid@15", "evidence"], t2.loc["pacemaker-small", "evidence"]) == (10, 15, 15)
    md = (res["run_dir"] / "tables.md").read_text()
    assert "by size: 10: hybrid; 15: hybrid@15, pacemaker-small)" in md and "add hybrid@" not in md
    assert "NOTE: hybrid@15: decision accuracy is from the answers' decision field; the judge read the same decision" in md
    assert json.loads((res["run_dir"] / "run.json").read_text())["settings"]["pacemaker"]["answer_format"] == "structured"


# The tables as pandas group-bys: whole frames against hand-built ones, on rows with empty groups, NaN and ties.
import pandas as pd
from pace.eval.evaluate import paper_metrics, label_outcomes, evidence_warning

def _tiny():
    "hybrid: two conflict rows (PASS, FAIL) and one non-conflict (not judged); oracle: one non-conflict PASS."
    return [row('q1', 'hybrid', 'conflict', 'temporal', ['a'], ['a', 'b'], V('PASS', True)),
            row('q2', 'hybrid', 'conflict', 'state', ['c'], ['x', 'c'], V('FAIL', False)),
            row('q3', 'hybrid', 'non_conflict', 'state', ['d'], ['x', 'y', 'z'], None),
            row('q3', 'oracle', 'non_conflict', 'state', ['d'], ['d'], V('PASS', True), ranked=False)]

def test_rate_by_keeps_empty_groups_with_n_0_in_paper_order():
    t = rate_by(results_frame(_tiny()), "label")
    nan = float("nan")
    want = pd.DataFrame({"value": [nan, 100.0, 100.0, 50.0, nan, 50.0],
                         "lo": [nan, nan, nan, 0.0, nan, 0.0], "hi": [nan, nan, nan, 100.0, nan, 100.0],
                         "n": [0, 1, 1, 2, 0, 2]},   # oracle has no conflict row; hybrid's q3 was not judged
                        index=pd.MultiIndex.from_product([["oracle", "hybrid"], ["conflict", "non_conflict", "overall"]],
                                                         names=["method", "label"]))
    pd.testing.assert_frame_equal(t, want)

def test_paper_metrics_and_label_outcomes_leave_nan_where_nothing_applies():
    df = results_frame(_tiny())
    pm = paper_metrics(df)
    assert list(pm.index) == ["oracle", "hybrid"] and pm.loc["oracle", ["R@5", "MRR@10", "Conflict"]].isna().all()
    assert math.isclose(pm.loc["hybrid", "R@10"], 100 * 2 / 3) and pm.loc["hybrid", "MRR@10"] == 100 * 1.5 / 3
    assert pm.loc["hybrid", "PASS"] == 50.0 and pm.loc["hybrid", "Conflict"] == 50.0 and pm.loc["oracle", "PASS"] == 100.0
    lo = label_outcomes(df)
    cols = pd.MultiIndex.from_product([["conflict", "non_conflict"], ["PASS", "WRONG_RATIONALE", "FAIL"]],
                                      names=["label", "outcome"])
    nan = float("nan")
    want = pd.DataFrame([[nan, nan, nan, 100.0, 0.0, 0.0], [50.0, 0.0, 50.0, nan, nan, nan]],
                        index=pd.Index(["oracle", "hybrid"], name="method"), columns=cols)
    pd.testing.assert_frame_equal(lo, want)

def test_coverage_counts_every_class_of_every_method():
    cv = coverage(results_frame(_tiny()))   # hybrid's two conflict rows saw all their gold: full
    want = pd.DataFrame({"n": [0, 0, 2], "share": [0.0, 0.0, 100.0], "pass_rate": [float("nan")] * 2 + [50.0]},
                        index=pd.MultiIndex.from_product([["hybrid"], ["none", "partial", "full"]],
                                                         names=["method", "coverage"]))
    pd.testing.assert_frame_equal(cv, want)

def test_failures_order_stages_and_average_only_the_selection_counts_present():
    rows = [row('q1', 'pacemaker', 'conflict', 'state', ['a'], ['a'], V('PASS', True),
                calls=[ok('zeta'), ok('answer'), bad('planner', 'no plan'), ok('alpha')],
                selection=dict(posthop=dict(n_chosen=2))),
            row('q2', 'pacemaker', 'conflict', 'state', ['a'], ['a'], V('PASS', True),
                calls=[ok('planner'), ok('posthop')], selection=dict(posthop=dict(n_chosen=3, n_padded=1)))]
    f = failures(rows)
    assert list(f.index.get_level_values("stage")) == ["planner", "posthop", "answer", "alpha", "zeta"]
    assert f.loc[("pacemaker", "planner"), ["queries", "calls", "failed", "fallback"]].tolist() == [2, 2, 50.0, 50.0]
    assert f.loc[("pacemaker", "posthop"), "chosen_per_query"] == 2.5 and f.loc[("pacemaker", "posthop"), "padded_per_query"] == 1
    assert f[["fallback_ids_per_query", "unseen_dropped_per_query"]].isna().all().all()
    assert f.loc[("pacemaker", "zeta"), ["truncated", "overflow"]].tolist() == [0.0, 0.0]
    assert f.loc[("pacemaker", "zeta")].iloc[6:].isna().all() and f.calls.dtype == int

def test_evidence_sizes_round_half_to_even_before_grouping():
    rows = [row('q1', 'hybrid', 'conflict', 'state', ['a'], ['a', 'b'], V('PASS', True)),
            row('q2', 'hybrid', 'conflict', 'state', ['a'], ['a', 'b', 'c'], V('PASS', True)),   # mean 2.5 -> 2
            row('q1', 'dense', 'conflict', 'state', ['a'], ['a', 'b'], V('PASS', True)),
            row('q1', 'bm25', 'conflict', 'state', ['a'], ['a', 'b', 'c', 'd'], V('PASS', True))]
    assert evidence_warning(results_frame(rows)).startswith(
        "WARNING: the methods hand the answerer different numbers of facts (mean, by size: 2: dense, hybrid; 4: bm25)")


def _paired_rows(n=12):
    "Hybrid finds the one gold fact at rank 1 on every query, dense never; bm25 ties Hybrid."
    out = []
    for i in range(n):
        for m, ret in (("hybrid", ["g", "x"]), ("bm25", ["g", "y"]), ("dense", ["x", "y"])):
            out.append(row(f"q{i:02d}", m, "conflict", "temporal", ["g"], ret, V("PASS" if m != "dense" else "FAIL", m != "dense")))
    return out


def test_paired_tests_mark_table2_and_the_retrieval_table_and_fill_scores_json(tmp_path):
    p = tmp_path / "run" / "results.jsonl"; p.parent.mkdir()
    p.write_text("".join(json.dumps(r) + "\n" for r in _paired_rows()))
    tabs = write_tables(p)
    t2, ret = (p.parent / "table2.md").read_text(), (p.parent / "retrieval.md").read_text()
    for md in (t2, ret):
        assert "paired randomization test (10,000 sign flips, two-sided), Holm-corrected" in md and "above/below hybrid" in md
    dense2 = next(l for l in t2.splitlines() if l.startswith("| dense"))
    bm25_2 = next(l for l in t2.splitlines() if l.startswith("| bm25"))
    assert dense2.count("▼") >= 5 and "▲" not in dense2 and "▼" not in bm25_2   # recall, hit, gold, MRR, PASS, decision
    assert "0.0▼" in next(l for l in ret.splitlines() if l.startswith("| dense"))
    assert list(tabs["retrieval"].columns) == ["n", "evidence", "depth", "nDCG@10", "R@100", "AP", "P@10", "RR", "Success@10"]
    assert math.isclose(tabs["retrieval"].loc["bm25", "P@10"], 10.0)   # trec_eval's P@10: 1 gold in the top 10 of a 2-fact list
    sc = json.loads((p.parent / "scores.json").read_text())
    d = sc["methods"]["dense"]["metrics"]
    assert sc["reference"] == "hybrid" and d["recall@10"]["vs_reference"]["diff"] == -1.0
    assert d["recall@10"]["vs_reference"]["p_holm"] < 0.01 and sc["methods"]["bm25"]["metrics"]["pass"]["vs_reference"]["p"] == 1.0
    assert d["release_precision@10"]["value"] == 0.0 and sc["methods"]["bm25"]["metrics"]["release_precision@10"]["value"] == 0.5
    assert "vs_reference" not in sc["methods"]["hybrid"]["metrics"]["recall@10"] and sc["settings_sha256"] is None


def test_the_funnel_shows_depth_only_for_a_list_ranked_deeper_than_the_final_one():
    short = [row("q1", "bm25", "conflict", "temporal", ["a"], ["a", "b", "c"], V("PASS", True),
                 evidence={"final": ["a", "b", "c"], "answer": ["a"]})]   # the prompt held 1 of 3: no deeper list
    assert "depth" not in funnel_table(results_frame(short)).columns
    deep = [row("q1", "bm25", "conflict", "temporal", ["a"], ["a", "b"], V("PASS", True),
                evidence={"ranked": ["a", "b", "c", "d"], "final": ["a", "b"], "answer": ["a", "b"]})]
    ft = funnel_table(results_frame(deep))
    assert ft.loc["bm25", "depth"] == 4.0 and ft.loc["bm25", "evidence"] == 2.0


# --- the paper preset is scored as the authors' release scores it: repeats kept, per-case means beside

PAPER = dict(settings=dict(preset="paper"))

def test_retrieval_metrics_keep_repeats_when_asked():
    "x, x, y, y, z, g1, g2 with gold g1, g2, g3: de-duplicated the gold are at ranks 4 and 5; as it stands at 6 and 7."
    from pace.metrics import retrieval_metrics
    ids, gold = ["x", "x", "y", "y", "z", "g1", "g2"], ["g1", "g2", "g3"]
    keep, drop = retrieval_metrics(ids, gold, repeats="keep"), retrieval_metrics(ids, gold)
    assert (keep["recall@5"], keep["hit@5"], keep["gold@5"], keep["release_precision@5"], keep["mrr@5"]) == (0, 0, 0, 0, 0)
    assert math.isclose(keep["mrr"], 1 / 6) and math.isclose(keep["mrr@10"], 1 / 6)
    assert math.isclose(keep["release_precision@10"], 2 / 7) and math.isclose(keep["recall@10"], 2 / 3)
    assert math.isclose(drop["recall@5"], 2 / 3) and math.isclose(drop["mrr"], 1 / 4) and math.isclose(drop["release_precision@5"], 2 / 5)
    assert list(keep) == list(drop)
    assert retrieval_metrics(["g", "g", "x"], ["g", "h"], repeats="keep")["release_precision@5"] == 1 / 3   # 1 gold in 3 slots
    assert retrieval_metrics(["g1"], ["g1"], repeats="keep")["mrr"] == 1.0
    with pytest.raises(ValueError, match="repeats"): retrieval_metrics(ids, gold, repeats="first")

def test_results_frame_keeps_repeats_for_the_paper_preset_only():
    rows = [row('q1', 'pacemaker', 'conflict', 'temporal', ['a', 'b'], ['x', 'x', 'x', 'x', 'x', 'b', 'a'], V('PASS', True))]
    pace, paper = results_frame(rows).iloc[0], results_frame(rows, meta=PAPER).iloc[0]
    assert (pace['recall@5'], pace['mrr']) == (1.0, 0.5)
    assert (paper['recall@5'], paper['hit@5']) == (0.0, 0.0) and math.isclose(paper['mrr'], 1 / 6)
    assert paper['RR'] == pace['RR'] == 0.5 and paper['depth'] == pace['depth'] == 3   # trec_eval: de-duplicated
    assert results_frame(rows, meta=dict(settings=dict(preset="pace")))['mrr'].item() == 0.5
    assert results_frame(rows, meta=PAPER, repeats="drop")['mrr'].item() == 0.5

def _cases():
    "Case A: three queries, each with its gold fact first; case B: one query without it. PASS: a1 and b1."
    def r(q, case, ret, label):
        return row(q, 'hybrid', 'conflict', 'temporal', ['g'], ret, V(label, True)) | dict(instance_id=case)
    return [r('a1', 'A', ['g', 'x'], 'PASS'), r('a2', 'A', ['g', 'x'], 'FAIL'), r('a3', 'A', ['g', 'x'], 'FAIL'),
            r('b1', 'B', ['x', 'y'], 'PASS')]

def test_per_case_means_weigh_cases_equally_while_pass_is_pooled():
    from pace.eval.evaluate import per_case_table
    t = per_case_table(results_frame(_cases()))
    case, query = t.loc[('hybrid', 'per-case mean (release)')], t.loc[('hybrid', 'per-query mean (pace)')]
    assert (case['queries'], case['cases']) == (4, 2)
    assert (case['recall@10'], query['recall@10']) == (50.0, 75.0) and (case['mrr'], query['mrr']) == (50.0, 75.0)
    assert case['pass'] == query['pass'] == 50.0   # pooled: 2 of 4, not the cases' mean of 1/3 and 1
    with pytest.raises(ValueError, match="instance_id"): per_case_table(results_frame(ROWS))

def test_write_tables_of_a_paper_preset_run_add_the_per_case_table(tmp_path):
    rows = _cases() + [row('b2', 'hybrid', 'conflict', 'temporal', ['g'], ['x', 'x', 'x', 'x', 'x', 'g'], V('FAIL', False))
                       | dict(instance_id='B')]
    for name, meta in (("paper", PAPER), ("pace", dict(settings=dict(preset="pace")))):
        d = tmp_path / name; d.mkdir()
        (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        tabs = write_tables(d / "results.jsonl", meta=meta)
        md = (d / "tables.md").read_text()
        if name == "paper":
            assert (d / "per_case.md").exists() and (d / "per_case.csv").exists() and "per_case" in tabs
            assert "## Per-case and per-query means" in md and "the release's aggregate" in md and "pace's tables" in md
            assert "| hybrid   | per-case mean (release) | 5" in (d / "per_case.md").read_text()
            assert math.isclose(tabs["table2"].loc["hybrid", "hit@5"], 100 * 3 / 5)   # b2's gold at 6, as it stands
            assert "as they stand" in (d / "table2.md").read_text() and "de-duplicated" in (d / "retrieval.md").read_text()
        else:
            assert not (d / "per_case.md").exists() and "per_case" not in tabs and "Per-case" not in md
            assert math.isclose(tabs["table2"].loc["hybrid", "hit@5"], 100 * 4 / 5)   # de-duplicated: x, g
            assert "as they stand" not in md


# --- replies cut at max_tokens and prompts over the context window, in the failures table

def test_is_context_overflow_reads_each_backends_words():
    from pace.eval.evaluate import is_context_overflow
    assert is_context_overflow("ValueError: Requested tokens (8561) exceed context window of 8192")
    assert is_context_overflow("BadRequestError: Error code: 400 - {'error': {'message': \"This model's maximum context length is "
                               "4096 tokens. However, you requested 5000 tokens.\", 'code': 'context_length_exceeded'}}")
    assert is_context_overflow("ValueError: The decoder prompt (length 9000) is longer than the maximum model length of 8192.")
    assert is_context_overflow("BadRequestError: Error code: 400 - {'error': {'message': 'the request exceeds the available context "
                               "size, try increasing it', 'type': 'exceed_context_size_error'}}")
    for e in (None, "", "empty answer", "no usable direction", "APIConnectionError: Connection error.",
              "RateLimitError: rate limit exceeded", "no valid structured reply after 3 attempts: reply is not JSON (Unterminated string)"):
        assert not is_context_overflow(e), e

def test_failures_count_truncated_and_overflowed_calls():
    cut = dict(stage='answer', ok=True, fallback=None, notes=dict(truncated=True))
    over = dict(stage='prehop', ok=False, fallback='top ids', error="ValueError: Requested tokens (9031) exceed context window of 8192")
    timeout = dict(stage='prehop', ok=False, fallback='top ids', error="APITimeoutError: Request timed out.")
    rows = [row('q1', 'pacemaker', 'conflict', 'state', ['a'], ['a'], V('PASS', True), calls=[over, cut],
                judge_calls=[dict(stage='judge', ok=True, fallback=None, notes=dict(truncated=True))]),
            row('q2', 'pacemaker', 'conflict', 'state', ['a'], ['a'], V('PASS', True), calls=[timeout, ok('answer')]),
            row('q3', 'pacemaker', 'conflict', 'state', ['a'], ['a'], V('PASS', True), calls=[ok('prehop'), ok('answer')])]
    f = failures(rows)
    assert list(f.columns[:6]) == ["queries", "calls", "failed", "fallback", "truncated", "overflow"]
    assert f.loc[("pacemaker", "prehop"), ["calls", "truncated"]].tolist() == [3, 0.0]
    assert math.isclose(f.loc[("pacemaker", "prehop"), "overflow"], 100 / 3) and math.isclose(f.loc[("pacemaker", "prehop"), "failed"], 200 / 3)
    assert math.isclose(f.loc[("pacemaker", "answer"), "truncated"], 100 / 3) and f.loc[("pacemaker", "answer"), "overflow"] == 0.0
    assert f.loc[("pacemaker", "judge"), "truncated"] == 100.0
    w = warnings(results_frame(rows), f)
    assert ("NOTE: 2 model call(s) stopped before the reply was finished, at max_tokens or (no cap sent) at the end of "
            "the context window: `truncated` in the failures table.") in w
    assert not any("max_tokens" in l for l in warnings(results_frame(ROWS), failures(ROWS)))
    head = [c.strip() for c in to_markdown(f).splitlines()[0].strip("|").split("|")]
    assert head[:8] == ["method", "stage", "queries", "calls", "failed", "fallback", "truncated", "overflow"]
