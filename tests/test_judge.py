"The judge: no answer key in the decision step, labels from the two steps, failures, paper mode; calibration loading, its second pass, figures, rescoring and CLI."
import json, math, re
from pathlib import Path
import pandas as pd
import pytest
from pace.llm import Cached
from pace.testing import ScriptedChat
from pace.cli import main
from pace.data import DatasetError, load_pace_dataset
from pace.testing import FakeChat
import pace.llm
from pace.eval.judge import (JUDGE_MODES, LABELS, Verdict, expected_decision, judge_answer, decision_messages, rationale_messages,
                        paper_messages, load_calibration, calibrate, confusion, cohen_kappa, wilson, select_items, run_calibration,
                        calibration_markdown, agreement, pass_agreement, rescore_calibration, SECOND_PASS)

TINY = Path("tests/fixtures/tiny")
FIX = Path("tests/fixtures/judge_calibration/tiny.jsonl")
Q, GOLD = "Book me a ticket for Rear Window at the Watershed this Thursday evening.", "Parents' evening until 19:30 overlaps the 18:45 screening."
BOOKED = "I will carry out your request: I have booked one ticket for Rear Window at 18:45 on Thursday."

def text_of(messages): return " ".join(m["content"] for m in messages)

def copycat(messages):
    "Agrees with the answer key when the prompt holds one; reads the reply only when it does not."
    if re.search(r"\b(non_)?conflict\b", text_of(messages)):   # paper_json answers in JSON, paper with a bare label
        return {"label": "PASS", "reason": "as the gold says"} if "JSON" in text_of(messages) else "PASS"
    reply = messages[-1]["content"].split("The assistant's reply:\n")[-1]
    return {"decision": "carry_out" if re.search(r"\bI (will|have)\b", reply) else "decline", "reason": "from the reply"}

def steps(decision, rationale="same_core_reason"):
    return ScriptedChat({"judge_decision": {"decision": decision, "reason": "r"}, "judge_rationale": {"rationale": rationale, "reason": "why"}})

# ---- the decision step holds no answer key

def test_decision_prompt_holds_no_gold():
    for gold, j in (("conflict", GOLD), ("non_conflict", "Nothing else is planned on Thursday evening.")):
        cm = steps("decline")
        judge_answer(cm, Q, BOOKED, gold, j)
        step1 = cm.calls("judge_decision")[0]["messages"]
        low = text_of(step1).lower()
        for w in ("conflict", "non_conflict", "gold", "expected", "should decline", "should carry"): assert w not in low, w
        assert j not in text_of(step1) and "19:30" not in text_of(step1)
        assert step1 == decision_messages(Q, BOOKED)   # built from the request and the reply only

def test_copycat_cannot_pass_a_booking_of_a_clash():
    lazy = ScriptedChat({"judge": copycat, "judge_decision": copycat, "judge_rationale": {"rationale": "same_core_reason", "reason": "same"}})
    v, recs = judge_answer(lazy, Q, BOOKED, "conflict", GOLD)
    assert (v.label, v.decision, v.decision_correct, v.rationale) == ("FAIL", "carry_out", False, None)
    assert [r.stage for r in recs] == ["judge_decision"] and not lazy.calls("judge_rationale")
    p, _ = judge_answer(lazy, Q, BOOKED, "conflict", GOLD, mode="paper")
    assert p.label == "PASS" and p.mode == "paper" and p.decision is None   # the paper judge is shown the key and copies it
    sent = text_of(lazy.calls("judge")[0]["messages"])
    assert "Gold label:\nconflict" in sent and GOLD in sent and Q not in sent
    assert judge_answer(lazy, Q, BOOKED, "conflict", GOLD, mode="paper_json")[0].label == "PASS"

# ---- labels from the two steps

@pytest.mark.parametrize("gold,decision,rationale,label", [
    ("conflict", "decline", "same_core_reason", "PASS"),
    ("conflict", "decline", "partial_or_weak", "WRONG_RATIONALE"),
    ("conflict", "decline", "wrong_reason", "FAIL"),
    ("conflict", "carry_out", "same_core_reason", "FAIL"),
    ("conflict", "ambiguous", "same_core_reason", "FAIL"),
    ("non_conflict", "carry_out", "same_core_reason", "PASS"),
    ("non_conflict", "carry_out", "partial_or_weak", "WRONG_RATIONALE"),
    ("non_conflict", "decline", "same_core_reason", "FAIL"),
    ("non_conflict", "ambiguous", "same_core_reason", "FAIL")])
def test_decision_first_then_rationale(gold, decision, rationale, label):
    cm = steps(decision, rationale)
    v, recs = judge_answer(cm, Q, "some reply", gold, GOLD)
    assert v.label == label and v.decision == decision and v.mode == "blind"
    right = decision == expected_decision(gold)
    assert v.decision_correct is right and len(cm.calls("judge_rationale")) == int(right) and len(recs) == 1 + right
    assert v.rationale == (rationale if right else None)

def test_rationale_step_sees_the_gold_rationale_and_is_not_asked_to_decide():
    cm = steps("decline", "partial_or_weak")
    v, _ = judge_answer(cm, Q, "No, you have parents' evening.", "conflict", GOLD)
    ms = cm.calls("judge_rationale")[0]["messages"]
    assert ms == rationale_messages(Q, "No, you have parents' evening.", GOLD)
    assert GOLD in ms[1]["content"] and Q in ms[1]["content"] and "already been checked" in ms[0]["content"]
    assert set(cm.calls("judge_rationale")[0]["schema"]["properties"]) == {"rationale", "reason"}
    assert v.reason == "why"

def test_reason_is_capped_in_every_schema():
    cm = steps("decline")
    judge_answer(cm, Q, "No.", "conflict", GOLD)
    judge_answer(ScriptedChat({"judge": {"label": "FAIL", "reason": "r"}}), Q, "No.", "conflict", GOLD, mode="paper_json")
    assert all(c["schema"]["properties"]["reason"]["maxLength"] == 200 for c in cm.log)

# ---- failures never raise and never guess

@pytest.mark.parametrize("bad", [RuntimeError("server down"), "not json", {"decision": "maybe", "reason": "r"}, {"reason": "no decision"}])
def test_failed_step1_gives_no_label(bad):
    v, recs = judge_answer(ScriptedChat({"judge_decision": bad, "judge_rationale": {"rationale": "same_core_reason", "reason": "r"}}),
                           Q, "reply", "conflict", GOLD)
    assert (v.label, v.failed_stage, v.decision, v.decision_correct) == (None, "judge_decision", None, None)
    assert v.error and recs[0].fallback == "no label" and len(recs) == 1

def test_failed_step2_keeps_the_decision():
    cm = ScriptedChat({"judge_decision": {"decision": "carry_out", "reason": "r"}, "judge_rationale": "{broken"})
    v, recs = judge_answer(cm, Q, "Sure.", "non_conflict", GOLD)
    assert (v.label, v.failed_stage, v.decision, v.decision_correct) == (None, "judge_rationale", "carry_out", True)
    assert [r.ok for r in recs] == [True, False] and recs[1].fallback == "no label"

def test_paper_json_mode_failure_and_label():
    v, _ = judge_answer(ScriptedChat({"judge": {"label": "OK", "reason": "r"}}), Q, "No.", "conflict", GOLD, mode="paper_json")
    assert (v.label, v.failed_stage, v.mode) == (None, "judge", "paper_json")
    v, recs = judge_answer(ScriptedChat({"judge": {"label": "WRONG_RATIONALE", "reason": " vague "}}), Q, "No.", "conflict", GOLD, mode="paper_json")
    assert (v.label, v.reason, v.decision, v.decision_correct, [r.stage for r in recs]) == ("WRONG_RATIONALE", "vague", None, None, ["judge"])
    assert paper_messages("No.", "conflict", GOLD)[1]["content"].startswith("Gold label: conflict")

# ---- the paper protocol, as the authors' released code runs it

@pytest.mark.parametrize("reply,label", [("PASS", "PASS"), ("WRONG_RATIONALE", "WRONG_RATIONALE"), ("FAIL", "FAIL"),
    ("  PASS\n", "PASS"), ("pass", "PASS"), ("Wrong_Rationale", "WRONG_RATIONALE"),   # stripped and upper-cased, as their code does
    ("PASS.", "FAIL"), ("Label: PASS", "FAIL"), ("**PASS**", "FAIL"), ("PASS - same reason", "FAIL"),
    ('{"label": "PASS", "reason": "r"}', "FAIL"), ("WRONG RATIONALE", "FAIL"), ("", "FAIL")])
def test_paper_protocol_reads_a_bare_label(reply, label):
    cm = ScriptedChat({"judge": reply})
    v, recs = judge_answer(cm, Q, BOOKED, "conflict", GOLD, mode="paper")
    assert (v.label, v.mode, v.decision, v.failed_stage, [r.stage for r in recs]) == (label, "paper", None, None, ["judge"])
    sent = cm.calls("judge")[0]
    assert sent["schema"] is None and [m["role"] for m in sent["messages"]] == ["system", "user"]

def test_paper_protocol_sees_the_key_and_the_reply_but_never_the_request():
    for gold, j in (("conflict", GOLD), ("non_conflict", "Nothing else is planned on Thursday evening.")):
        cm = ScriptedChat({"judge": "PASS"})
        judge_answer(cm, Q, BOOKED, gold, j, mode="paper")
        sent = text_of(cm.calls("judge")[0]["messages"])
        assert f"Gold label:\n{gold}" in sent and j in sent and BOOKED in sent
        assert Q not in sent and "Rear Window at the Watershed" not in sent   # the request's words, none of them
    assert "PASS, WRONG_RATIONALE or FAIL" in text_of(cm.calls("judge")[0]["messages"][:1])

def test_paper_protocol_failed_call_is_a_judge_error_not_a_fail():
    v, recs = judge_answer(ScriptedChat({"judge": RuntimeError("server down")}), Q, BOOKED, "conflict", GOLD, mode="paper")
    assert (v.label, v.failed_stage) == (None, "judge") and recs[0].fallback == "no label"

def test_empty_answer_and_bad_arguments():
    cm = ScriptedChat({})
    for mode in JUDGE_MODES:
        v, recs = judge_answer(cm, Q, " \n", "conflict", GOLD, mode=mode)
        assert (v.label, v.decision, v.decision_correct, v.reason, recs) == ("FAIL", "ambiguous", False, "empty answer", [])
    assert cm.log == []
    with pytest.raises(ValueError, match="gold label"): judge_answer(cm, Q, "a", "yes", GOLD)
    with pytest.raises(ValueError, match="judge mode"): judge_answer(cm, Q, "a", "conflict", GOLD, mode="strict")
    with pytest.raises(ValueError): Verdict(label="MAYBE")

def test_through_a_real_chat_model_and_its_cache(tmp_path):
    "FakeChat in Cached runs the real chat path: schema validation (the capped reason), retries and the cache."
    def respond(messages, schema):
        props = schema["properties"]
        if "decision" in props: return json.dumps({"decision": "decline", "reason": "says no"})
        long = any("LONG" in m["content"] for m in messages) or (messages[-1]["role"] == "user" and "TWICE" in messages[-1]["content"])
        return json.dumps({"rationale": "same_core_reason", "reason": "x" * 500 if long else "same"})
    cm = Cached(FakeChat(respond), tmp_path / "c.sqlite")
    v, _ = judge_answer(cm, Q, "No, parents' evening.", "conflict", GOLD)
    assert v.label == "PASS" and cm.n_calls == 2
    v, _ = judge_answer(cm, Q, "No, TWICE.", "conflict", GOLD)   # a reason over the cap fails validation and is asked again
    assert v.label == "PASS" and cm.n_calls == 2 + 1 + 2
    v, _ = judge_answer(cm, Q, "No, LONG.", "conflict", GOLD)    # ... and given up after the retries: no label
    assert v.label is None and v.failed_stage == "judge_rationale" and v.decision == "decline" and "no valid structured reply" in v.error
    assert cm.n_calls == 5 + 1 + 3
    again = Cached(FakeChat(respond), tmp_path / "c.sqlite")
    v, recs = judge_answer(again, Q, "No, parents' evening.", "conflict", GOLD)
    assert v.label == "PASS" and again.n_calls == 0 and all(r.cached for r in recs)

# ---- calibration set

def line(item_id, query_id="tiny-q1", kind="pass", decision="decline", verdict="PASS", reply="A reply.", **kw):
    return json.dumps(dict(item_id=item_id, query_id=query_id, kind=kind, reply=reply, decision=decision, verdict=verdict, **kw))

def test_load_calibration_joins_the_dataset(tmp_path):
    (tmp_path / "a.jsonl").write_text(line("a", note="n", extra_key=1) + "\n\n")
    (tmp_path / "b.jsonl").write_text(line("b", "tiny-q3", "fail_reason", "carry_out", "FAIL") + "\n")
    items = load_calibration(tmp_path, TINY)
    assert [(i.item_id, i.label, i.source) for i in items] == [("a", "conflict", f"{tmp_path}/a.jsonl:1"), ("b", "non_conflict", f"{tmp_path}/b.jsonl:1")]
    ds = load_pace_dataset(TINY)
    assert items[1].query == ds.queries[2].query and items[1].judgment == ds.queries[2].judgment
    assert len(load_calibration(FIX, ds)) == 8

@pytest.mark.parametrize("bad,where", [
    (line("x", "tiny-q9"), "1: field 'query_id': unknown query_id 'tiny-q9'"),
    (line("x", verdict="OK"), "1: field 'verdict': Input should be"),
    (line("x", kind="good"), "1: field 'kind'"),
    (line("x", decision="carry_out"), "1: field 'verdict': PASS needs the right decision (decline for a conflict request)"),
    (line("x", "tiny-q3", "wrong_rationale", "decline", "WRONG_RATIONALE"), "1: field 'verdict': WRONG_RATIONALE needs the right decision (carry_out"),
    (line("x", kind="fail_ambiguous", decision="decline", verdict="FAIL"), "1: field 'kind': kind 'fail_ambiguous' means a ambiguous decision"),
    (line("x", kind="wrong_rationale"), "1: field 'kind': kind 'wrong_rationale' means verdict WRONG_RATIONALE"),
    (line("x", reply=""), "1: field 'reply'"),
    (json.dumps({"item_id": "x"}), "1: field 'query_id': missing required field"),
    ("[1, 2]", "1: expected a JSON object"),
    (line("x") + "\n" + line("x", "tiny-q2"), "2: field 'item_id': duplicate item_id 'x' (first at"),
])
def test_load_calibration_errors_name_file_line_field(tmp_path, bad, where):
    f = tmp_path / "set.jsonl"; f.write_text(bad + "\n")
    with pytest.raises(DatasetError) as e: load_calibration(f, TINY)
    assert f"{f}:{where}" in str(e.value)

def test_load_calibration_reports_every_problem_and_missing_files(tmp_path):
    (tmp_path / "a.jsonl").write_text(line("x") + "\n")
    (tmp_path / "b.jsonl").write_text(line("x") + "\n" + line("y", "nope") + "\n")
    with pytest.raises(DatasetError) as e: load_calibration(tmp_path, TINY)
    assert len(e.value.problems) == 2 and f"first at {tmp_path}/a.jsonl:1" in str(e.value)
    with pytest.raises(DatasetError, match="no such file"): load_calibration(tmp_path / "none.jsonl", TINY)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no \\*.jsonl"): load_calibration(tmp_path / "empty", TINY)
    (tmp_path / "blank.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="no calibration items"): load_calibration(tmp_path / "blank.jsonl", TINY)

def second_pass_line(item_id, decision="decline", verdict="PASS", **kw):
    return json.dumps(dict(item_id=item_id, decision=decision, verdict=verdict, **kw))

def two_passes(tmp_path, set_lines, second_lines):
    (tmp_path / "set.jsonl").write_text("".join(l + "\n" for l in set_lines))
    (tmp_path / SECOND_PASS).write_text("".join(l + "\n" for l in second_lines))
    return tmp_path / "set.jsonl", tmp_path / SECOND_PASS

def test_second_pass_is_joined_and_compared(tmp_path):
    f, sp = two_passes(tmp_path,
        [line("a"), line("b", "tiny-q3", "fail_reason", "carry_out", "FAIL", first_pass={"decision": "carry_out", "verdict": "WRONG_RATIONALE"},
                          ruling="off topic"),
         line("c", "tiny-q3", "fail_ambiguous", "ambiguous", "FAIL", ruling="hands the choice back")],
        [second_pass_line("c", "decline", "FAIL", why="warns"), second_pass_line("a", why="same reason"),
         second_pass_line("b", "carry_out", "WRONG_RATIONALE")])
    items = load_calibration(tmp_path, TINY)   # the folder: its second pass is read, not taken for a set file
    assert [i.item_id for i in items] == ["a", "b", "c"] and load_calibration(f, TINY)[0].second_pass.why == "same reason"
    assert [(i.first_pass.verdict, i.second_pass.decision) for i in items] == [("PASS", "decline"), ("WRONG_RATIONALE", "carry_out"),
                                                                             ("FAIL", "decline")]
    assert load_calibration(f, TINY, second_pass=False)[0].second_pass is None
    pa = pass_agreement(items)
    # verdicts agree on all 3 (kappa 1); decisions 2 of 3: rows decline 1, carry_out 1, ambiguous 1; cols decline 2, carry_out 1
    assert pa["n"] == 3 and pa["verdict"]["kappa"] == 1.0 and math.isclose(pa["decision"]["agreement"], 2 / 3)
    assert math.isclose(pa["decision"]["kappa"], (2 / 3 - 3 / 9) / (1 - 3 / 9))
    assert pa["rulings"][["item_id", "sided_with"]].values.tolist() == [["b", "neither"], ["c", "first pass"]]

@pytest.mark.parametrize("second,where", [
    (second_pass_line("zz"), f"{SECOND_PASS}:1: field 'item_id': unknown item_id 'zz'"),
    (second_pass_line("a", verdict="GOOD"), f"{SECOND_PASS}:1: field 'verdict': Input should be"),
    (second_pass_line("a", decision="maybe"), f"{SECOND_PASS}:1: field 'decision': Input should be"),
    (second_pass_line("a", label="PASS"), f"{SECOND_PASS}:1: field 'label': unknown field"),
    (second_pass_line("a", "carry_out", "PASS"), f"{SECOND_PASS}:1: field 'verdict': PASS needs the right decision (decline"),
    (second_pass_line("a") + "\n" + second_pass_line("a"), f"{SECOND_PASS}:2: field 'item_id': duplicate item_id 'a'"),
    (json.dumps({"decision": "decline", "verdict": "PASS"}), f"{SECOND_PASS}:1: field 'item_id': missing required field"),
    (second_pass_line("a", "decline", "FAIL"), "set.jsonl:1: field 'ruling': the passes disagree (first decline, PASS; second decline, FAIL)"),
])
def test_second_pass_problems_name_file_line_field(tmp_path, second, where):
    f, _ = two_passes(tmp_path, [line("a")], [second])
    with pytest.raises(DatasetError) as e: load_calibration(f, TINY)   # the set file: its folder's second pass comes with it
    assert f"{tmp_path}/{where}" in str(e.value), str(e.value)

def test_a_reference_departing_from_its_first_pass_needs_a_ruling(tmp_path):
    f = tmp_path / "set.jsonl"
    f.write_text(line("a", first_pass={"decision": "decline", "verdict": "WRONG_RATIONALE"}) + "\n" +
                 line("b", first_pass={"decision": "carry_out", "verdict": "PASS"}, ruling="misread") + "\n")
    with pytest.raises(DatasetError) as e: load_calibration(f, TINY)
    msg = str(e.value)
    assert f"{f}:1: field 'ruling': the reference (decline, PASS) departs from the first pass (decline, WRONG_RATIONALE)" in msg
    assert f"{f}:2: field 'first_pass': PASS needs the right decision" in msg and len(e.value.problems) == 2
    with pytest.raises(DatasetError, match="missing file"): load_calibration(FIX, TINY, second_pass=tmp_path / "none.jsonl")

def test_the_committed_reference_verdicts_and_their_second_pass():
    items = load_calibration("data/judge_calibration", "data/mini")
    assert len(items) == 179 and all(i.second_pass is not None for i in items)
    pa = pass_agreement(items)
    assert (pa["verdict"]["n"], round(pa["verdict"]["agreement"] * 179), round(pa["decision"]["agreement"] * 179)) == (179, 175, 179)
    assert math.isclose(pa["verdict"]["kappa"], 0.9605, abs_tol=1e-4) and pa["decision"]["kappa"] == 1.0
    assert pa["rulings"].sided_with.value_counts().to_dict() == {"second pass": 3, "neither": 2, "first pass": 1}
    by_id = {i.item_id: i for i in items}
    for q in ("mini-01-P-N1", "mini-02-T-N2", "mini-02-P-N2", "mini-02-S-N1", "mini-02-S-N2"):   # a reason unrelated to the gold one
        it = by_id[f"{q}/wrong_rationale"]
        assert (it.verdict, it.kind, it.first_pass.verdict) == ("FAIL", "fail_reason", "WRONG_RATIONALE") and it.ruling
    assert [i.verdict for i in items].count("FAIL") == 109 and [i.kind for i in items].count("wrong_rationale") == 31

def test_select_items_spreads_over_kinds():
    items = load_calibration(FIX, TINY)
    sel = select_items(items, 5)
    assert len(sel) == 5 and {i.kind for i in sel} == {"pass", "wrong_rationale", "fail_decision", "fail_ambiguous", "fail_reason"}
    assert sel == [i for i in items if i in sel] and select_items(items, 5) == sel and select_items(items, None) == items

# ---- figures, on hand-computed cases

def test_kappa_of_two_raters_hand_computed():
    # p_o = 8/10; rows 4,3,3; cols 3,3,4 -> p_e = (12+9+12)/100 = .33; kappa = .47/.67
    t = pd.DataFrame([[3, 1, 0], [0, 2, 1], [0, 0, 3]], index=LABELS, columns=LABELS)
    assert math.isclose(cohen_kappa(t), 0.47 / 0.67)
    assert math.isclose(cohen_kappa(pd.DataFrame([[5, 0], [0, 5]], index=["PASS", "FAIL"], columns=["PASS", "FAIL"])), 1.0)
    assert math.isclose(cohen_kappa(pd.DataFrame([[0, 5], [5, 0]], index=["PASS", "FAIL"], columns=["PASS", "FAIL"])), -1.0)
    assert math.isnan(cohen_kappa(pd.DataFrame([[4]], index=["PASS"], columns=["PASS"])))

def test_confusion_counts_judge_errors_as_wrong():
    c = confusion(["PASS", "PASS", "WRONG_RATIONALE", "FAIL"], ["PASS", None, "WRONG_RATIONALE", "PASS"])
    assert list(c.index) == list(LABELS) and list(c.columns) == [*LABELS, "ERROR"]
    assert c.to_numpy().tolist() == [[1, 0, 0, 1], [0, 1, 0, 0], [1, 0, 0, 0]]
    assert math.isclose(cohen_kappa(c), 3 / 11)   # p_o = 2/4, p_e = (2*2 + 1*1 + 1*0)/16

def test_wilson_interval():
    lo, hi = wilson(5, 10)
    assert math.isclose(lo, 0.23659, abs_tol=1e-4) and math.isclose(hi, 0.76341, abs_tol=1e-4)
    assert wilson(0, 4)[0] == 0.0 and wilson(4, 4)[1] == 1.0

def test_agreement_of_two_raters_hand_computed():
    # the kappa example above as two label lists: p_o = .8, p_e = .33, kappa = .47/.67; se = sqrt(.8*.2/10)/.67
    a = ["PASS"] * 4 + ["WRONG_RATIONALE"] * 3 + ["FAIL"] * 3
    b = ["PASS"] * 3 + ["WRONG_RATIONALE", "WRONG_RATIONALE", "WRONG_RATIONALE", "FAIL"] + ["FAIL"] * 3
    ag = agreement(a + [None, "PASS"], b + ["FAIL", None], names=("first pass", "second pass"))   # unlabelled items are left out
    k, se = 0.47 / 0.67, math.sqrt(0.8 * 0.2 / 10) / 0.67
    assert (ag["n"], ag["agreement"]) == (10, 0.8) and math.isclose(ag["kappa"], k)
    assert math.isclose(ag["kappa_low"], k - 1.96 * se) and ag["kappa_high"] == 1.0   # k + 1.96 se = 1.07, cut at 1
    assert ag["confusion"].to_numpy().tolist() == [[3, 1, 0], [0, 2, 1], [0, 0, 3]]
    assert (ag["confusion"].index.name, ag["confusion"].columns.name) == ("first pass", "second pass")
    d = agreement(["decline", "decline", "ambiguous", "carry_out"], ["decline", "ambiguous", "ambiguous", "carry_out"],
                  ("carry_out", "decline", "ambiguous"))   # p_o = 3/4; rows 1,2,1; cols 1,1,2 -> p_e = 5/16; kappa = 7/11
    assert math.isclose(d["kappa"], 7 / 11)
    assert math.isnan(agreement([None], ["PASS"])["kappa"]) and agreement([None], ["PASS"])["n"] == 0
    with pytest.raises(ValueError, match="not in"): agreement(["PASS"], ["GOOD"])   # never silently dropped
    with pytest.raises(ValueError, match="same items"): agreement(["PASS"], ["PASS", "FAIL"])

# A scripted judge reading its answers from a table, wrong on purpose on some items (see nbs/30_judge.ipynb).
TABLE = {"tiny-q1/pass": ("decline", "same_core_reason"), "tiny-q1/fail_decision": ("carry_out", None),
         "tiny-q2/wrong_rationale": ("decline", "same_core_reason"), "tiny-q2/fail_ambiguous": ("decline", "partial_or_weak"),
         "tiny-q3/pass": ("carry_out", "same_core_reason"), "tiny-q3/fail_reason": ("carry_out", "partial_or_weak"),
         "tiny-q4/pass": ("decline", "FAIL_CALL"), "tiny-q4/fail_decision": ("carry_out", None)}
ITEMS = {json.loads(l)["reply"]: json.loads(l) for l in FIX.read_text().splitlines()}

def table_respond(messages, schema):
    "FakeChat responder: step 1 / step 2 answers from TABLE; raises for the item whose step 2 fails."
    it = next(v for r, v in ITEMS.items() if r in messages[-1]["content"])
    decision, rationale = TABLE[it["item_id"]]
    if "decision" in schema["properties"]: return json.dumps({"decision": decision, "reason": "table"})
    if rationale == "FAIL_CALL": raise ConnectionError("server down")
    return json.dumps({"rationale": rationale, "reason": "table"})

STEP2 = {"PASS": "same_core_reason", "WRONG_RATIONALE": "partial_or_weak", "FAIL": "wrong_reason"}
def reference_respond(messages, schema):
    it = next(v for r, v in ITEMS.items() if r in messages[-1]["content"])
    if "decision" in schema["properties"]: return json.dumps({"decision": it["decision"], "reason": "reference"})
    return json.dumps({"rationale": STEP2[it["verdict"]], "reason": "reference"})

def test_calibrate_figures_hand_computed():
    items = load_calibration(FIX, TINY)
    rep = calibrate(Cached(FakeChat(table_respond, model="table"), False), items, judge2=Cached(FakeChat(reference_respond, model="reference-like"), False),
                    progress=False)
    f = rep["judges"]["judge"]
    assert f["confusion"].to_numpy().tolist() == [[2, 0, 0, 1], [1, 0, 0, 0], [0, 2, 2, 0]]
    assert (f["correct"], f["n"], f["n_errors"], f["accuracy"]) == (4, 8, 1, 0.5)
    assert math.isclose(f["kappa"], 13 / 45)   # p_o = 32/64, p_e = (3*3 + 1*2 + 4*2)/64
    assert (f["decision"]["correct"], f["decision"]["n"]) == (7, 8)
    assert {k: (a["correct"], a["n"]) for k, a in f["by_kind"].items()} == {
        "pass": (2, 3), "wrong_rationale": (0, 1), "fail_decision": (2, 2), "fail_ambiguous": (0, 1), "fail_reason": (0, 1)}
    assert {k: (a["correct"], a["n"]) for k, a in f["by_verdict"].items()} == {"PASS": (2, 3), "WRONG_RATIONALE": (0, 1), "FAIL": (2, 4)}
    assert f["usage"]["judge_decision"]["calls"] == 8 and f["usage"]["judge_rationale"]["calls"] == 6
    assert rep["judges"]["judge2"]["accuracy"] == 1.0 and rep["judges"]["judge2"]["kappa"] == 1.0
    b = rep["between"]   # over the 7 both labelled: p_o = 4/7; rows 3,2,2; cols 2,1,4 -> p_e = 16/49
    assert b["n"] == 7 and math.isclose(b["agreement"], 4 / 7) and math.isclose(b["kappa"], 12 / 33)
    se = math.sqrt(4 / 7 * 3 / 7 / 7) / (33 / 49)   # Cohen's large-sample standard error
    assert math.isclose(b["kappa_low"], 12 / 33 - 1.96 * se) and math.isclose(b["kappa_high"], 12 / 33 + 1.96 * se)
    assert b["confusion"].loc["WRONG_RATIONALE", "FAIL"] == 2 and b["confusion"].to_numpy().sum() == 7
    r = rep["rates"]
    assert r.loc[("table", "conflict"), ["PASS", "WRONG_RATIONALE", "FAIL", "n", "errors"]].tolist() == [40.0, 20.0, 40.0, 5, 1]
    assert r.loc[("table", "non_conflict"), ["PASS", "WRONG_RATIONALE", "FAIL"]].tolist() == [50.0, 50.0, 0.0]
    assert r.loc[("reference", "overall")].tolist() == r.loc[("reference-like", "overall")].tolist() == [37.5, 12.5, 50.0, 8, 0]
    v = rep["verdicts"][6]
    assert v["item_id"] == "tiny-q4/pass" and v["judge"]["failed_stage"] == "judge_rationale" and v["judge2"]["label"] == "PASS"
    assert v["reply"].startswith("I wouldn't plan your usual route") and v["note"].startswith("Declines for the gold reason")
    md = calibration_markdown(rep)
    assert "| table" in md and "agreement 57.1%, kappa 0.364, over the 7 replies both labelled (kappa 95% CI -0.181 to 0.908)" in md
    assert re.search(r"\| table +\| +8 \| +50\.0 \| 21\.5-78\.5 +\| +0\.289 \| +1 \| +87\.5 \|", md), md

def test_calibrate_paper_mode_has_no_decision_figures():
    items = load_calibration(FIX, TINY)
    rep = calibrate(ScriptedChat({"judge": "PASS"}), items, mode="paper", progress=False)
    f = rep["judges"]["judge"]
    assert "decision" not in f and f["correct"] == 3 and math.isclose(f["kappa"], 0.0)
    with pytest.raises(ValueError, match="judge mode"): calibrate(ScriptedChat({}), items, mode="x", progress=False)

def test_reports_say_reference_never_human(tmp_path):
    rep = calibrate(Cached(FakeChat(table_respond, model="table"), False), load_calibration(FIX, TINY),
                    judge2=Cached(FakeChat(reference_respond, model="other"), False), progress=False)
    md = calibration_markdown(rep)
    heads = [l for l in md.splitlines() if l.startswith("#") or l.startswith("| ")]
    assert "human" not in "\n".join(heads).lower() and "rows: reference verdict" in md and "Accuracy by reference verdict" in md
    assert list(rep["verdicts"][0])[6:8] == ["reference_decision", "reference_verdict"] and rep["rates"].index[0] == ("reference", "overall")
    assert rep["judges"]["judge"]["confusion"].index.name == "reference"
    for d in (p.parent for p in Path("results/judge_calibration").glob("*/verdicts.jsonl")):   # the committed reports too
        assert "human" not in "".join(p.read_text() for p in d.iterdir() if p.suffix in (".md", ".json", ".csv", ".jsonl")).lower(), d

def test_rescore_rebuilds_the_figures_from_the_verdicts(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(pace.llm.CHAT_BACKENDS, "table", TableChat)
    run = tmp_path / "run"
    assert main(["judge", "calibrate", "--judge", "table:t", "--set", str(FIX), "--data", str(TINY), "--out", str(run), "--no-progress"]) == 0
    old = json.loads((run / "summary.json").read_text())
    (run / "cache.sqlite").unlink()   # no cache and no model: only the verdicts are read
    moved = tmp_path / "moved.jsonl"   # the reference verdict of the vague-reason reply becomes FAIL
    moved.write_text("".join((l.replace('"wrong_rationale", "reply"', '"fail_reason", "reply"').replace('"WRONG_RATIONALE"', '"FAIL", "ruling": "x"')
                              if "tiny-q2/wrong_rationale" in l else l) + "\n" for l in FIX.read_text().splitlines()))
    capsys.readouterr()
    assert main(["judge", "rescore", str(run), "--set", str(moved), "--data", str(TINY)]) == 0
    assert f"{run}: t accuracy 50.0%, kappa" in capsys.readouterr().out
    new = json.loads((run / "summary.json").read_text())
    j = new["judges"]["judge"]
    assert j["confusion"]["FAIL"] == {"PASS": 1, "WRONG_RATIONALE": 2, "FAIL": 2, "ERROR": 0} and j["confusion"]["WRONG_RATIONALE"]["PASS"] == 0
    assert j["usage"] == old["judges"]["judge"]["usage"] and j["name"] == "t"
    assert "tiny-q2/wrong_rationale" in (run / "verdicts.jsonl").read_text() and '"reference_verdict": "FAIL"' in (run / "verdicts.jsonl").read_text()
    bad = tmp_path / "bad"; bad.mkdir()
    (bad / "verdicts.jsonl").write_text((run / "verdicts.jsonl").read_text().replace('"item_id": "tiny-q3/pass"', '"item_id": "tiny-q3/gone"'))
    with pytest.raises(DatasetError) as e: rescore_calibration(bad, FIX, TINY)
    assert f"{bad / 'verdicts.jsonl'}:5: field 'item_id': unknown item_id 'tiny-q3/gone'" in str(e.value)
    rc = main(["judge", "rescore", str(tmp_path / "nothing"), "--set", str(FIX), "--data", str(TINY)])
    assert rc == 2 and "no verdicts.jsonl in" in capsys.readouterr().err

def test_committed_calibration_reports_are_against_the_adjudicated_reference(tmp_path):
    "Rebuilding each committed run from its verdicts against the committed set changes nothing."
    for d in sorted(p.parent for p in Path("results/judge_calibration").glob("*/verdicts.jsonl")):
        rescore_calibration(d, "data/judge_calibration/mini.jsonl", "data/mini", out=tmp_path / d.name)
        for f in ("report.md", "summary.json", "confusion.csv", "verdicts.jsonl"):
            assert (tmp_path / d.name / f).read_text() == (d / f).read_text(), f"{d / f} is stale: run pace judge rescore {d}"

# ---- the command line

class TableChat(FakeChat):
    "Backend 'table' for the CLI: the scripted judge above behind the real Cached machinery."
    def __init__(self, model="table", **kw): super().__init__(table_respond, model=model, **kw)

def run_cli(capsys, *args):
    rc = main(["judge", "calibrate", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err

def test_cli_writes_the_figures_and_reruns_from_the_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(pace.llm.CHAT_BACKENDS, "table", TableChat)
    calls = []
    monkeypatch.setattr(TableChat, "_complete", lambda self, reqs: calls.append(len(reqs)) or FakeChat._complete(self, reqs))
    args = ["--judge", "table:t1", "--set", FIX, "--data", TINY, "--out", tmp_path / "o", "--no-progress"]
    rc, out, err = run_cli(capsys, *args)
    assert rc == 0 and "## Judge calibration (blind mode, 8 replies)" in out and f"to {tmp_path / 'o'}" in out
    files = sorted(p.name for p in (tmp_path / "o").iterdir() if not p.name.startswith("cache.sqlite-"))   # SQLite's WAL files
    assert files == ["cache.sqlite", "confusion.csv", "report.md", "summary.json", "verdicts.jsonl"]
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    j = s["judges"]["judge"]
    assert (j["model"], j["correct"], j["n_errors"], j["decision"]["correct"]) == ("t1", 4, 1, 7)
    assert math.isclose(j["kappa"], 13 / 45) and j["confusion"]["FAIL"] == {"PASS": 0, "WRONG_RATIONALE": 2, "FAIL": 2, "ERROR": 0}
    c = pd.read_csv(tmp_path / "o" / "confusion.csv", index_col=[0, 1])
    assert c.loc[("t1", "PASS")].tolist() == [2, 0, 0, 1]
    assert [json.loads(l)["item_id"] for l in (tmp_path / "o" / "verdicts.jsonl").read_text().splitlines()][0] == "tiny-q1/pass"
    assert (tmp_path / "o" / "report.md").read_text() in out
    assert sum(calls) == 8 + 6   # 8 decisions, 6 rationales (a transport error is not retried)
    calls.clear()
    rc, out2, _ = run_cli(capsys, *args)
    assert rc == 0 and sum(calls) == 1 and out2 == out   # only the failed call is made again; same figures

def test_cli_two_judges_and_limit(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(pace.llm.CHAT_BACKENDS, "table", TableChat)
    fix, tiny = FIX.resolve(), TINY.resolve()
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run_cli(capsys, "--judge", "table:a", "--judge2", "table:b", "--mode", "paper_json", "--set", fix,
                         "--data", tiny, "--limit", "5", "--no-progress")
    d = tmp_path / "results" / "judge_calibration" / "a-vs-b-paper_json"   # the default output folder
    s = json.loads((d / "summary.json").read_text())
    assert rc == 0 and s["n_items"] == 5 and s["mode"] == "paper_json" and set(s["judges"]) == {"judge", "judge2"}
    assert s["judges"]["judge"]["n_errors"] == 5          # the table judge has no paper-mode answer: every call fails
    assert s["between"]["n"] == 0 and s["between"]["kappa"] is None
    assert "### Between the judges\nno reply was labelled by both judges" in out

@pytest.mark.parametrize("args,msg", [
    (["--judge", "table:x", "--set", "nope.jsonl", "--data", TINY], "no calibration set at nope.jsonl"),
    (["--judge", "table:x", "--set", FIX, "--data", "nodata"], "no dataset folder at nodata"),
    (["--judge", "no-colon", "--set", FIX, "--data", TINY], "backend:model"),
    (["--judge", "bogus:x", "--set", FIX, "--data", TINY], "--judge 'bogus:x': unknown chat backend 'bogus'"),
    (["--judge", "table:x", "--judge2", '{"backend": "table"', "--set", FIX, "--data", TINY], "not valid JSON"),
])
def test_cli_user_errors_end_in_one_line(tmp_path, capsys, monkeypatch, args, msg):
    monkeypatch.setitem(pace.llm.CHAT_BACKENDS, "table", TableChat)
    rc, out, err = run_cli(capsys, *args, "--out", tmp_path / "o", "--no-progress")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and err.startswith("pace: error: ") and msg in err, err
    assert "Traceback" not in err

def test_cli_bad_set_lists_its_problems(tmp_path, capsys):
    f = tmp_path / "bad.jsonl"; f.write_text(line("x", "tiny-q9") + "\n" + line("y", verdict="GOOD") + "\n")
    rc, out, err = run_cli(capsys, "--judge", "fake:x", "--set", f, "--data", TINY, "--out", tmp_path / "o")
    assert rc == 2 and err.startswith("pace: error: ") and f"{f}:1: field 'query_id'" in err and f"{f}:2: field 'verdict'" in err
    assert not (tmp_path / "o").exists()   # nothing is built or written before the set is checked

def test_cli_fake_backend_runs_and_counts_judge_errors(tmp_path, capsys):
    "The 'fake' backend echoes the prompt (not JSON): every call fails, the run still finishes."
    rc, out, err = run_cli(capsys, "--judge", "fake:echo", "--set", FIX, "--data", TINY, "--out", tmp_path / "o", "--no-progress")
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert rc == 0 and s["judges"]["judge"]["n_errors"] == 8 and s["judges"]["judge"]["accuracy"] == 0.0

def test_cli_limit_must_be_positive(capsys):
    with pytest.raises(SystemExit) as e: main(["judge", "calibrate", "--judge", "fake:x", "--limit", "0"])
    assert e.value.code == 2 and "--limit: must be >= 1, got 0" in capsys.readouterr().err

def test_run_calibration_accepts_model_objects(tmp_path):
    rep = run_calibration(Cached(FakeChat(reference_respond, model="h"), False), FIX, TINY, limit=3, out=tmp_path / "r", progress=False)
    assert rep["out_dir"] == tmp_path / "r" and rep["n_items"] == 3 and rep["judges"]["judge"]["accuracy"] == 1.0
