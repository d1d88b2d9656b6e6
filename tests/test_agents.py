"Agents: prompts, schemas, validation and fallbacks (no model needed)."
import json
import pytest
from pace.testing import ScriptedChat
from pace.methods.agents import (Planner, ViewGenerator, EvidenceFilter, AnswerGenerator, clean_selection,
                                 selection_schema)

Q = "Reserve two seats for Dad and me at the Old Duke jazz night next Friday."

def test_planner_keeps_only_verbatim_anchors_and_at_most_max_directions():
    d = lambda n, a: {'dimension': n, 'key_anchors': a}
    cm = ScriptedChat({'planner': {'directions': [d('Dad mobility', ['Dad', 'father']), d('venue access', ['Old Duke']),
                                                  d('date', ['next Friday'])]}})
    plan, rec = Planner()(cm, Q, "2026-04-14")
    assert [x.key_anchors for x in plan.directions] == [['Dad'], ['Old Duke'], ['next Friday']]
    assert rec.notes['dropped_anchors'] == ['father'] and rec.ok
    assert [x.key_anchors for x in Planner(max_directions=2)(cm, Q, "2026-04-14")[0].directions] == [['Dad'], ['Old Duke']]
    assert "2026-04-14" in Planner().messages(Q, "2026-04-14")[1]['content']
    four = ScriptedChat({'planner': {'directions': [d('x', ['Dad'])] * 4}})   # the schema sent caps the plan at three
    plan, rec = Planner()(four, Q, "2026-04-14")
    assert plan is None and rec.fallback == 'no plan' and "at most 3" in rec.error

def test_planner_failure_is_recorded_not_raised():
    plan, rec = Planner()(ScriptedChat({'planner': "I think you should check the calendar."}), Q, "2026-04-14")
    assert plan is None and not rec.ok and rec.fallback == 'no plan' and rec.error

def test_views_resolve_dates_via_calendar_and_are_cleaned():
    cm = ScriptedChat({'views': {'counter': ['Tunde stairs limit 2026-04-24', Q, 'Old Duke room floor']}})
    cs, rec = ViewGenerator(max_counter=3)(cm, Q, "2026-04-14", None)
    assert cs == ['Tunde stairs limit 2026-04-24', 'Old Duke room floor']   # the copy of the request is dropped
    user = cm.log[0]['messages'][1]['content']
    assert 'today = Tuesday 2026-04-14' in user and 'Fri 2026-04-24' in user
    assert cm.log[0]['schema']['properties']['counter']['maxItems'] == 3
    four = ScriptedChat({'views': {'counter': ['a b', 'c d', 'e f', 'g h']}})   # more than the schema admits: a failed call
    assert ViewGenerator(max_counter=3)(four, Q, "2026-04-14", None)[1].fallback == 'original query only'

def test_filter_schema_only_admits_candidate_ids():
    s = selection_schema(['m01', 'm02', 'm03'], 2)
    assert s['properties']['selected_doc_ids']['items']['enum'] == ['m01', 'm02', 'm03']
    assert s['properties']['selected_doc_ids']['maxItems'] == 2

def test_filter_drops_repeats_and_counts_the_padding():
    cands = [(f"m{i:02d}", f"fact {i}") for i in range(12)]
    cm = ScriptedChat({'prehop': {'selected_doc_ids': ['m05', 'm05', 'm07']}})
    got, recs, rep = EvidenceFilter()(cm, Q, "2026-04-14", cands, 4, stage='prehop')
    assert got == ['m05', 'm07', 'm00', 'm01']
    assert recs[0].notes['invalid_ids'] == [] and recs[0].notes['duplicates'] == 1 and recs[0].notes['n_chosen'] == 2
    assert (rep.n_chosen, rep.n_padded, rep.n_invalid, rep.n_out) == (2, 2, 0, 4)
    got, _, rep = EvidenceFilter(pad=False)(cm, Q, "2026-04-14", cands, 4, stage='prehop')
    assert got == ['m05', 'm07'] and rep.n_padded == 0

def test_filter_reply_with_an_id_not_shown_fails_validation_and_falls_back():
    "The schema lists the candidate ids, so a reply naming another id is a failed call: nothing it picked is trusted."
    cands = [(f"m{i:02d}", f"fact {i}") for i in range(12)]
    got, recs, rep = EvidenceFilter()(ScriptedChat({'prehop': {'selected_doc_ids': ['m05', 'bogus']}}), Q, "2026-04-14", cands, 4, stage='prehop')
    assert got == ['m00', 'm01', 'm02', 'm03'] and not recs[0].ok and "bogus" in recs[0].error
    assert (rep.n_failed_calls, rep.n_fallback, rep.n_chosen, rep.n_invalid) == (1, 4, 0, 0)

def test_filter_junk_and_failures_fall_back_visibly():
    cands = [(f"m{i:02d}", f"fact {i}") for i in range(12)]
    for reply in ("no json at all", {'selected_doc_ids': 'm01'}, {'wrong_key': ['m01']}, RuntimeError('server down')):
        got, recs, rep = EvidenceFilter()(ScriptedChat({'prehop': reply}), Q, "2026-04-14", cands, 4, stage='prehop')
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
    got, recs, rep = EvidenceFilter(max_tokens=200)(cm, Q, "2026-04-14", cands, 5, stage='posthop')
    assert len(recs) > 2 and max(seen_sizes) <= 1200 - 200
    assert len(got) == 5 and set(got) <= {i for i, _ in cands}
    assert recs[-1].notes['n_chunks'] == 1          # the last round sees all winners at once
    shown = {l.split(']')[0][1:] for c in cm.log for l in c['messages'][1]['content'].splitlines() if l.startswith('[')}
    assert shown == {i for i, _ in cands} and rep.n_shown == 120 and rep.n_unseen_dropped == 0   # nobody dropped unseen
    assert got == ['d115', 'd116', 'd117', 'd118', 'd119'] and rep.n_chosen == 5
    got2, recs2, rep2 = EvidenceFilter(max_tokens=200)(cm, Q, "2026-04-14", cands, 5, stage='posthop', max_candidates=20)
    assert all(i in {c for c, _ in cands[:20]} for i in got2) and rep2.n_unseen_dropped == 100 and 'cut' in rep2.note

def test_filter_never_drops_unseen_when_chunks_are_barely_larger_than_top_n():
    "The old tournament cut the list in half without a call when chunking could not shrink it; now every candidate is shown."
    cands = [(f"d{i:03d}", "word " * 30) for i in range(40)]
    cm = ScriptedChat({'posthop': lambda ms: {'selected_doc_ids': [l.split(']')[0][1:] for l in ms[1]['content'].splitlines() if l.startswith('[')][-3:]}},
                      context_window=520)
    got, recs, rep = EvidenceFilter(max_tokens=100)(cm, Q, "2026-04-14", cands, 3, stage='posthop')
    shown = {l.split(']')[0][1:] for c in cm.log for l in c['messages'][1]['content'].splitlines() if l.startswith('[')}
    assert shown == {i for i, _ in cands}
    assert rep.n_unseen_dropped == 0 and rep.n_cut_unjudged == 0 and len(got) == 3 and 'd039' in got and rep.rounds > 3

def test_filter_reports_a_context_too_small_to_select():
    cands = [(f"d{i:03d}", "word " * 60) for i in range(10)]
    got, recs, rep = EvidenceFilter(max_tokens=50)(ScriptedChat({}, context_window=300), Q, "2026-04-14", cands, 3, stage='posthop')
    assert recs == [] and 'no selection possible' in rep.note and len(got) == 3 and rep.n_unseen_dropped == 7

def test_answer_uses_only_given_facts_and_falls_back_to_empty():
    cm = ScriptedChat({'answer': "I can't book the Old Duke, Maya."})
    a, rec = AnswerGenerator()(cm, Q, "2026-04-14", "Maya Okafor", ["The Old Duke music room is upstairs."])
    sys_msg = cm.log[0]['messages'][0]['content']
    assert "The Old Duke music room is upstairs." in sys_msg and "2 to 4 sentences" in sys_msg and "Maya Okafor" in sys_msg
    assert a.startswith("I can't") and rec.ok
    a, rec = AnswerGenerator()(ScriptedChat({'answer': RuntimeError('timeout')}), Q, "2026-04-14", "Maya", [])
    assert a == "" and rec.fallback == 'empty answer' and 'timeout' in rec.error

def test_clean_selection_cuts_to_top_n_and_never_pads():
    assert clean_selection(['c', 'a', 'b'], ['a', 'b', 'c'], 2)[0] == ['c', 'a']
    assert clean_selection(['zz'], ['a', 'b', 'c'], 2) == ([], dict(n_returned=1, invalid_ids=['zz'], n_invalid=1, duplicates=0, n_chosen=0))


# --- filter counters: what a model read, what passed without a call, and first-occurrence order

def shown_in(ms):
    return [l.split(']')[0][1:] for l in ms[1]['content'].splitlines() if l.startswith('[')]

def adds_up(rep):
    return rep.n_chosen + rep.n_fallback + rep.n_bye + rep.n_padded + rep.n_passed_uncalled == rep.n_out

def test_filter_call_that_never_reached_a_model_leaves_its_chunk_unseen():
    "A transport error shows nobody the chunk: it counts as unseen (the old report called all 12 shown with the server down)."
    cands = [(f"m{i:02d}", f"fact {i}") for i in range(12)]
    got, recs, rep = EvidenceFilter()(ScriptedChat({'prehop': RuntimeError('server down')}), Q, "2026-04-14", cands, 4, stage='prehop')
    assert got == ['m00', 'm01', 'm02', 'm03'] and rep.n_fallback == 4 and rep.n_failed_calls == 1
    assert (rep.n_shown, rep.n_unseen_dropped) == (0, 8) and adds_up(rep)
    got, recs, rep = EvidenceFilter()(ScriptedChat({'prehop': "no json at all"}), Q, "2026-04-14", cands, 4, stage='prehop')
    assert (rep.n_shown, rep.n_unseen_dropped, rep.n_fallback) == (12, 0, 4) and adds_up(rep)   # junk: the model did read them

def test_filter_counts_only_chunks_a_model_read_over_several_rounds():
    "A tournament whose chunks meet a transport error, junk, or a model that picks from the end of what it reads."
    cands = [(f"d{i:03d}", "a fairly long fact sentence about someone doing something " + str(i)) for i in range(60)]
    read = set()
    def model(ms):
        ids = shown_in(ms)
        if 'd000' in ids: raise RuntimeError("connection reset")   # no model read this chunk
        read.update(ids)
        if 'd030' in ids: return "I would pick the first ones"       # read, but unusable
        return {'selected_doc_ids': ids[::-1][:3]}
    got, recs, rep = EvidenceFilter(max_tokens=100)(ScriptedChat({'posthop': model}, context_window=700), Q, "2026-04-14", cands, 3,
                                                    stage='posthop')
    assert rep.rounds >= 2 and rep.n_failed_calls >= 2 and len(got) == 3 and adds_up(rep)
    assert 0 < len(read) < len(cands) and rep.n_shown == len(read)
    assert rep.n_unseen_dropped == len({i for i, _ in cands} - read - set(got))

def test_filter_counts_ids_passed_on_without_a_call():
    "A context too small to select: the first top_n pass uncalled and are counted as such."
    cands = [(f"d{i:03d}", "word " * 60) for i in range(10)]
    got, recs, rep = EvidenceFilter(max_tokens=50)(ScriptedChat({}, context_window=300), Q, "2026-04-14", cands, 3, stage='posthop')
    assert got == ['d000', 'd001', 'd002'] and recs == [] and rep.n_passed_uncalled == 3 and rep.n_unseen_dropped == 7 and adds_up(rep)
    assert (rep.n_chosen, rep.n_fallback, rep.n_bye, rep.n_padded, rep.n_shown) == (0, 0, 0, 0, 0)

@pytest.mark.parametrize("reply", [RuntimeError("down"), "junk", {'selected_doc_ids': ['m07']}, "last"])
@pytest.mark.parametrize("window", [300, 700, 8192])
def test_filter_counters_add_up(reply, window):
    "chosen + fallback + bye + padded + passed_uncalled == kept, for models that fail, send junk, pick too few or disagree."
    cands = [(f"m{i:02d}", f"fact number {i} " + "word " * (i % 7)) for i in range(30)]
    script = {'prehop': (lambda ms: {'selected_doc_ids': shown_in(ms)[::-1][:4]}) if reply == "last" else reply}
    got, recs, rep = EvidenceFilter(max_tokens=60)(ScriptedChat(script, context_window=window), Q, "2026-04-14", cands, 4, stage='prehop')
    assert adds_up(rep) and rep.n_out == len(got) == 4
    assert rep.n_shown + rep.n_unseen_dropped <= rep.n_candidates

def test_filter_keeps_first_occurrence_order_with_non_adjacent_duplicates():
    "a, b, a, c, d is shown as a, b, c, d (the old code showed b, a, c, d), with the first text of 'a'."
    cands = [("a", "first a"), ("b", "bee"), ("a", "second a"), ("c", "sea"), ("d", "dee")]
    cm = ScriptedChat({'prehop': lambda ms: {'selected_doc_ids': shown_in(ms)[::-1][:2]}})
    got, recs, rep = EvidenceFilter()(cm, Q, "2026-04-14", cands, 2, stage='prehop')
    user = cm.log[0]['messages'][1]['content']
    assert shown_in(cm.log[0]['messages']) == ['a', 'b', 'c', 'd'] and "[a] first a" in user and "second a" not in user
    assert got == ['d', 'c'] and rep.n_candidates == 4
    got, recs, rep = EvidenceFilter()(ScriptedChat({}), Q, "2026-04-14", cands, 5, stage='prehop')   # no call: kept as given
    assert got == ['a', 'b', 'c', 'd'] and rep.n_bye == 4 and adds_up(rep)


# --- the answer format: a structured decision beside the reply (option); the paper's free text by default

def test_default_answer_prompt_is_the_papers_and_structured_adds_a_schema():
    "The default request is the free-text prompt recorded by the reference run, with no schema; the structured one asks for JSON."
    import hashlib
    from pathlib import Path
    from typing import get_args
    from pace.methods.agents import ANSWER_SYSTEM, AnswerWithDecision
    from pace.eval.judge import DECISIONS
    ref = json.loads((Path(__file__).parents[1] / "tests/fixtures/old-run/mini-qwen2.5-0.5b-n6/run.json").read_text())
    assert hashlib.sha256(ANSWER_SYSTEM.encode()).hexdigest()[:16] == ref["settings"]["prompts"]["agents.ANSWER_SYSTEM"]
    facts = ["The Old Duke music room is upstairs.", "Tunde had hip surgery."]
    free, structured = ScriptedChat({'answer': "No."}), ScriptedChat({'answer': {'decision': 'decline', 'reply': "No."}})
    AnswerGenerator()(free, Q, "2026-04-14", "Maya Okafor", facts)
    AnswerGenerator(answer_format="structured")(structured, Q, "2026-04-14", "Maya Okafor", facts)
    sent = free.log[0]
    assert sent['schema'] is None and sent['max_tokens'] == 200
    assert sent['messages'] == [dict(role='system', content=ANSWER_SYSTEM.format(name="Maya Okafor", date="2026-04-14", weekday="Tuesday",
                                                                               facts="- The Old Duke music room is upstairs.\n- Tunde had hip surgery.")),
                                dict(role='user', content=Q)]
    s = structured.log[0]
    assert s['schema']['properties']['decision']['enum'] == list(DECISIONS) == list(get_args(AnswerWithDecision.model_fields['decision'].annotation))
    assert '"decision"' in s['messages'][0]['content'] and "Tunde had hip surgery." in s['messages'][0]['content']

def test_structured_answer_keeps_the_decision_as_stated():
    "A decision that disagrees with its own reply is stored as given; the reply is what goes on to the judge."
    cm = ScriptedChat({'answer': {'decision': 'carry_out', 'reply': "I won't book it, Maya. Tunde cannot manage the stairs."}})
    a, rec = AnswerGenerator(answer_format="structured")(cm, Q, "2026-04-14", "Maya", ["Tunde had hip surgery."])
    assert a == "I won't book it, Maya. Tunde cannot manage the stairs." and rec.ok and rec.fallback is None
    assert rec.notes['decision'] == 'carry_out' and rec.notes['answer_format'] == 'structured' and rec.notes['n_facts_used'] == 1

@pytest.mark.parametrize("reply, answer, decision, fallback", [
    ("Sure, I'll book two seats for Friday.", "Sure, I'll book two seats for Friday.", None, "salvaged: the text as the reply, no decision"),
    ('{"decision": "decline", "reply": "I can\'t book it, Maya: Tunde', "I can't book it, Maya: Tunde", "decline",
     "salvaged: the reply field of output that does not fit the schema"),
    ({'decision': 'maybe', 'reply': "Perhaps."}, "Perhaps.", None, "salvaged: the reply field of output that does not fit the schema"),
    ({'decision': 'decline'}, "", "decline", "empty answer"),
    (RuntimeError("server down"), "", None, "empty answer"),
])
def test_structured_answer_junk_falls_back_visibly(reply, answer, decision, fallback):
    a, rec = AnswerGenerator(answer_format="structured")(ScriptedChat({'answer': reply}), Q, "2026-04-14", "Maya", [])
    assert (a, rec.notes['decision'], rec.fallback) == (answer, decision, fallback) and not rec.ok and rec.error
