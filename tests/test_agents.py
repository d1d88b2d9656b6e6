"Agents: prompts, schemas, validation and fallbacks (no model needed)."
import json
from pace.testing import ScriptedChat
from pace.agents import (plan_conflicts, generate_views, select_evidence, generate_answer, clean_selection,
                         selection_schema, date_hints, planner_messages, answer_messages)

Q = "Reserve two seats for Dad and me at the Old Duke jazz night next Friday."

def test_planner_keeps_only_verbatim_anchors_and_at_most_max_directions():
    d = lambda n, a: {'dimension': n, 'key_anchors': a}
    cm = ScriptedChat({'planner': {'directions': [d('Dad mobility', ['Dad', 'father']), d('venue access', ['Old Duke']),
                                                  d('date', ['next Friday'])]}})
    plan, rec = plan_conflicts(cm, Q, "2026-04-14")
    assert [x.key_anchors for x in plan.directions] == [['Dad'], ['Old Duke'], ['next Friday']]
    assert rec.notes['dropped_anchors'] == ['father'] and rec.ok
    assert [x.key_anchors for x in plan_conflicts(cm, Q, "2026-04-14", max_directions=2)[0].directions] == [['Dad'], ['Old Duke']]
    assert "2026-04-14" in planner_messages(Q, "2026-04-14")[1]['content']
    four = ScriptedChat({'planner': {'directions': [d('x', ['Dad'])] * 4}})   # the schema sent caps the plan at three
    plan, rec = plan_conflicts(four, Q, "2026-04-14")
    assert plan is None and rec.fallback == 'no plan' and "at most 3" in rec.error

def test_planner_failure_is_recorded_not_raised():
    plan, rec = plan_conflicts(ScriptedChat({'planner': "I think you should check the calendar."}), Q, "2026-04-14")
    assert plan is None and not rec.ok and rec.fallback == 'no plan' and rec.error

def test_views_resolve_dates_via_calendar_and_are_cleaned():
    cm = ScriptedChat({'views': {'counter': ['Tunde stairs limit 2026-04-24', Q, 'Old Duke room floor']}})
    cs, rec = generate_views(cm, Q, "2026-04-14", None, max_counter=3)
    assert cs == ['Tunde stairs limit 2026-04-24', 'Old Duke room floor']   # the copy of the request is dropped
    user = cm.log[0]['messages'][1]['content']
    assert 'today = Tuesday 2026-04-14' in user and 'Fri 2026-04-24' in user
    assert cm.log[0]['schema']['properties']['counter']['maxItems'] == 3
    four = ScriptedChat({'views': {'counter': ['a b', 'c d', 'e f', 'g h']}})   # more than the schema admits: a failed call
    assert generate_views(four, Q, "2026-04-14", None, max_counter=3) [1].fallback == 'original query only'

def test_filter_schema_only_admits_candidate_ids():
    s = selection_schema(['m01', 'm02', 'm03'], 2)
    assert s['properties']['selected_doc_ids']['items']['enum'] == ['m01', 'm02', 'm03']
    assert s['properties']['selected_doc_ids']['maxItems'] == 2

def test_filter_drops_repeats_and_counts_the_padding():
    cands = [(f"m{i:02d}", f"fact {i}") for i in range(12)]
    cm = ScriptedChat({'prehop': {'selected_doc_ids': ['m05', 'm05', 'm07']}})
    got, recs, rep = select_evidence(cm, Q, "2026-04-14", cands, 4, stage='prehop')
    assert got == ['m05', 'm07', 'm00', 'm01']
    assert recs[0].notes['invalid_ids'] == [] and recs[0].notes['duplicates'] == 1 and recs[0].notes['n_chosen'] == 2
    assert (rep.n_chosen, rep.n_padded, rep.n_invalid, rep.n_final) == (2, 2, 0, 4)
    got, _, rep = select_evidence(cm, Q, "2026-04-14", cands, 4, stage='prehop', pad=False)
    assert got == ['m05', 'm07'] and rep.n_padded == 0

def test_filter_reply_with_an_id_not_shown_fails_validation_and_falls_back():
    "The schema lists the candidate ids, so a reply naming another id is a failed call: nothing it picked is trusted."
    cands = [(f"m{i:02d}", f"fact {i}") for i in range(12)]
    got, recs, rep = select_evidence(ScriptedChat({'prehop': {'selected_doc_ids': ['m05', 'bogus']}}), Q, "2026-04-14", cands, 4, stage='prehop')
    assert got == ['m00', 'm01', 'm02', 'm03'] and not recs[0].ok and "bogus" in recs[0].error
    assert (rep.n_failed_calls, rep.n_fallback, rep.n_chosen, rep.n_invalid) == (1, 4, 0, 0)

def test_filter_junk_and_failures_fall_back_visibly():
    cands = [(f"m{i:02d}", f"fact {i}") for i in range(12)]
    for reply in ("no json at all", {'selected_doc_ids': 'm01'}, {'wrong_key': ['m01']}, RuntimeError('server down')):
        got, recs, rep = select_evidence(ScriptedChat({'prehop': reply}), Q, "2026-04-14", cands, 4, stage='prehop')
        assert got == ['m00', 'm01', 'm02', 'm03'] and not recs[0].ok and recs[0].fallback
        assert (rep.n_failed_calls, rep.n_fallback, rep.n_chosen) == (1, 4, 0)

def test_chunked_post_hop_selection_fits_the_context_and_keeps_ids_valid():
    cands = [(f"d{i:03d}", "a fairly long fact sentence about someone doing something somewhere " + str(i)) for i in range(120)]
    seen_sizes = []
    def pick(ms):
        ids = [l.split(']')[0][1:] for l in ms[1]['content'].splitlines() if l.startswith('[')]
        seen_sizes.append(sum(len(m['content'].split()) for m in ms))
        return {'selected_doc_ids': ids[-5:]}
    cm = ScriptedChat({'posthop': pick}, context_window=1200)
    got, recs, rep = select_evidence(cm, Q, "2026-04-14", cands, 5, stage='posthop', max_tokens=200)
    assert len(recs) > 2 and max(seen_sizes) <= 1200 - 200
    assert len(got) == 5 and set(got) <= {i for i, _ in cands}
    assert recs[-1].notes['n_chunks'] == 1          # the last round sees all winners at once
    shown = {l.split(']')[0][1:] for c in cm.log for l in c['messages'][1]['content'].splitlines() if l.startswith('[')}
    assert shown == {i for i, _ in cands} and rep.n_shown == 120 and rep.n_unseen_dropped == 0   # nobody dropped unseen
    assert got == ['d115', 'd116', 'd117', 'd118', 'd119'] and rep.n_chosen == 5
    got2, recs2, rep2 = select_evidence(cm, Q, "2026-04-14", cands, 5, stage='posthop', max_tokens=200, max_candidates=20)
    assert all(i in {c for c, _ in cands[:20]} for i in got2) and rep2.n_unseen_dropped == 100 and 'cut' in rep2.note

def test_filter_never_drops_unseen_when_chunks_are_barely_larger_than_top_n():
    "The old tournament cut the list in half without a call when chunking could not shrink it; now every candidate is shown."
    cands = [(f"d{i:03d}", "word " * 30) for i in range(40)]
    cm = ScriptedChat({'posthop': lambda ms: {'selected_doc_ids': [l.split(']')[0][1:] for l in ms[1]['content'].splitlines() if l.startswith('[')][-3:]}},
                      context_window=520)
    got, recs, rep = select_evidence(cm, Q, "2026-04-14", cands, 3, stage='posthop', max_tokens=100)
    shown = {l.split(']')[0][1:] for c in cm.log for l in c['messages'][1]['content'].splitlines() if l.startswith('[')}
    assert shown == {i for i, _ in cands}
    assert rep.n_unseen_dropped == 0 and rep.n_cut_unjudged == 0 and len(got) == 3 and 'd039' in got and rep.rounds > 3

def test_filter_reports_a_context_too_small_to_select():
    cands = [(f"d{i:03d}", "word " * 60) for i in range(10)]
    got, recs, rep = select_evidence(ScriptedChat({}, context_window=300), Q, "2026-04-14", cands, 3, stage='posthop', max_tokens=50)
    assert recs == [] and 'no selection possible' in rep.note and len(got) == 3 and rep.n_unseen_dropped == 7

def test_answer_uses_only_given_facts_and_falls_back_to_empty():
    cm = ScriptedChat({'answer': "I can't book the Old Duke, Maya."})
    a, rec = generate_answer(cm, Q, "2026-04-14", "Maya Okafor", ["The Old Duke music room is upstairs."])
    sys_msg = cm.log[0]['messages'][0]['content']
    assert "The Old Duke music room is upstairs." in sys_msg and "2 to 4 sentences" in sys_msg and "Maya Okafor" in sys_msg
    assert a.startswith("I can't") and rec.ok
    a, rec = generate_answer(ScriptedChat({'answer': RuntimeError('timeout')}), Q, "2026-04-14", "Maya", [])
    assert a == "" and rec.fallback == 'empty answer' and 'timeout' in rec.error

def test_clean_selection_cuts_to_top_n_and_never_pads():
    assert clean_selection(['c', 'a', 'b'], ['a', 'b', 'c'], 2)[0] == ['c', 'a']
    assert clean_selection(['zz'], ['a', 'b', 'c'], 2) == ([], dict(n_returned=1, invalid_ids=['zz'], n_invalid=1, duplicates=0, n_chosen=0))
