"The judge: no answer key in the decision step, labels from the two steps, failures, paper mode; calibration loading, figures and CLI."
import json, math, re
from pathlib import Path
import pandas as pd
import pytest
from pace.testing import ScriptedChat
from pace.cli import main
from pace.data import DatasetError, load_pace_dataset
from pace.llm import FakeChat
import pace.llm
from pace.judge import (JUDGE_MODES, LABELS, Verdict, expected_decision, judge_answer, decision_messages, rationale_messages,
                        paper_messages, load_calibration, calibrate, confusion, cohen_kappa, wilson, select_items, run_calibration,
                        calibration_markdown)

TINY = Path("tests/fixtures/tiny")
FIX = Path("tests/fixtures/judge_calibration/tiny.jsonl")
Q, GOLD = "Book me a ticket for Rear Window at the Watershed this Thursday evening.", "Parents' evening until 19:30 overlaps the 18:45 screening."
BOOKED = "I will carry out your request: I have booked one ticket for Rear Window at 18:45 on Thursday."

def text_of(messages): return " ".join(m["content"] for m in messages)

def copycat(messages):
    "Agrees with the answer key when the prompt holds one; reads the reply only when it does not."
    if re.search(r"\b(non_)?conflict\b", text_of(messages)): return {"label": "PASS", "reason": "as the gold says"}
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
    assert "Gold label: conflict" in sent and GOLD in sent

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
    judge_answer(ScriptedChat({"judge": {"label": "FAIL", "reason": "r"}}), Q, "No.", "conflict", GOLD, mode="paper")
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

def test_paper_mode_failure_and_label():
    v, _ = judge_answer(ScriptedChat({"judge": {"label": "OK", "reason": "r"}}), Q, "No.", "conflict", GOLD, mode="paper")
    assert (v.label, v.failed_stage, v.mode) == (None, "judge", "paper")
    v, recs = judge_answer(ScriptedChat({"judge": {"label": "WRONG_RATIONALE", "reason": " vague "}}), Q, "No.", "conflict", GOLD, mode="paper")
    assert (v.label, v.reason, v.decision, v.decision_correct, [r.stage for r in recs]) == ("WRONG_RATIONALE", "vague", None, None, ["judge"])
    assert paper_messages("No.", "conflict", GOLD)[1]["content"].startswith("Gold label: conflict")

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
    "FakeChat runs the real ChatModel path: schema validation (the capped reason), retries and the cache."
    def respond(messages, schema):
        props = schema["properties"]
        if "decision" in props: return json.dumps({"decision": "decline", "reason": "says no"})
        long = any("LONG" in m["content"] for m in messages) or (messages[-1]["role"] == "user" and "TWICE" in messages[-1]["content"])
        return json.dumps({"rationale": "same_core_reason", "reason": "x" * 500 if long else "same"})
    cm = FakeChat(respond, cache=tmp_path / "c.sqlite")
    v, _ = judge_answer(cm, Q, "No, parents' evening.", "conflict", GOLD)
    assert v.label == "PASS" and cm.n_calls == 2
    v, _ = judge_answer(cm, Q, "No, TWICE.", "conflict", GOLD)   # a reason over the cap fails validation and is asked again
    assert v.label == "PASS" and cm.n_calls == 2 + 1 + 2
    v, _ = judge_answer(cm, Q, "No, LONG.", "conflict", GOLD)    # ... and given up after the retries: no label
    assert v.label is None and v.failed_stage == "judge_rationale" and v.decision == "decline" and "no valid structured reply" in v.error
    assert cm.n_calls == 5 + 1 + 3
    again = FakeChat(respond, cache=tmp_path / "c.sqlite")
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

# A scripted judge reading its answers from a table, wrong on purpose on some items (see nbs/23_judge.ipynb).
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
def human_respond(messages, schema):
    it = next(v for r, v in ITEMS.items() if r in messages[-1]["content"])
    if "decision" in schema["properties"]: return json.dumps({"decision": it["decision"], "reason": "human"})
    return json.dumps({"rationale": STEP2[it["verdict"]], "reason": "human"})

def test_calibrate_figures_hand_computed():
    items = load_calibration(FIX, TINY)
    rep = calibrate(FakeChat(table_respond, model="table", cache=False), items, judge2=FakeChat(human_respond, model="human-like", cache=False),
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
    r = rep["rates"]
    assert r.loc[("table", "conflict"), ["PASS", "WRONG_RATIONALE", "FAIL", "n", "errors"]].tolist() == [40.0, 20.0, 40.0, 5, 1]
    assert r.loc[("table", "non_conflict"), ["PASS", "WRONG_RATIONALE", "FAIL"]].tolist() == [50.0, 50.0, 0.0]
    assert r.loc[("human", "overall")].tolist() == r.loc[("human-like", "overall")].tolist() == [37.5, 12.5, 50.0, 8, 0]
    v = rep["verdicts"][6]
    assert v["item_id"] == "tiny-q4/pass" and v["judge"]["failed_stage"] == "judge_rationale" and v["judge2"]["label"] == "PASS"
    assert v["reply"].startswith("I wouldn't plan your usual route") and v["note"].startswith("Declines for the gold reason")
    md = calibration_markdown(rep)
    assert "| table" in md and "agreement 57.1%, kappa 0.364, over the 7 replies" in md
    assert re.search(r"\| table +\| +8 \| +50\.0 \| 21\.5-78\.5 +\| +0\.289 \| +1 \| +87\.5 \|", md), md

def test_calibrate_paper_mode_has_no_decision_figures():
    items = load_calibration(FIX, TINY)
    rep = calibrate(ScriptedChat({"judge": {"label": "PASS", "reason": "fine"}}), items, mode="paper", progress=False)
    f = rep["judges"]["judge"]
    assert "decision" not in f and f["correct"] == 3 and math.isclose(f["kappa"], 0.0)
    with pytest.raises(ValueError, match="judge mode"): calibrate(ScriptedChat({}), items, mode="x", progress=False)

# ---- the command line

class TableChat(FakeChat):
    "Backend 'table' for the CLI: the scripted judge above behind the real ChatModel machinery."
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
    rc, out, _ = run_cli(capsys, "--judge", "table:a", "--judge2", "table:b", "--mode", "paper", "--set", fix,
                         "--data", tiny, "--limit", "5", "--no-progress")
    d = tmp_path / "results" / "judge_calibration" / "a-vs-b-paper"   # the default output folder
    s = json.loads((d / "summary.json").read_text())
    assert rc == 0 and s["n_items"] == 5 and s["mode"] == "paper" and set(s["judges"]) == {"judge", "judge2"}
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
    assert e.value.code == 2 and "at least 1" in capsys.readouterr().err

def test_run_calibration_accepts_model_objects(tmp_path):
    rep = run_calibration(FakeChat(human_respond, model="h", cache=False), FIX, TINY, limit=3, out=tmp_path / "r", progress=False)
    assert rep["out_dir"] == tmp_path / "r" and rep["n_items"] == 3 and rep["judges"]["judge"]["accuracy"] == 1.0
