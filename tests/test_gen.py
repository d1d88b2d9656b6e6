"`pace generate`: an end-to-end scripted run passes the strict loader, each deterministic check catches its bad case, a resumed run equals an uninterrupted one, junk and disagreeing models are counted, fresh rewrites never show the draft, a copied prompt example is caught whichever was shown, the CLI."
import datetime as dt, json, re, shutil
from pathlib import Path
import pytest
from pace.cli import main
from pace.data import load_pace_dataset
from pace.embed import get_embedder
from pace.gen.base import GenConfig, STAGES
from pace.gen.cases import recompute
from pace.gen.validate import case_problems, verify_dataset, data_verify, request_time_problems
from pace.gen.generate import GenerationError, drop_failing_cases, generate_dataset, rebuild_outputs
from pace.gen.testing import toy_chat, toy_reply
from pace.runfolder import RunMismatchError

CFG = GenConfig(recipe="pace", cases_per_cell=1, facts=120, distractors_per_case=4, everyday_per_call=10)
W = dict(window_start="2026-02-16", ref_date="2026-03-04", window_end="2026-04-12")

def hash_emb(): return get_embedder("hash:hash", cache=False)

def gen(out, respond=None, cfg=CFG, personas="2", cache=None, **kw):
    cm = toy_chat(respond, cache=cache if cache is not None else False)
    return generate_dataset(out, personas, cm, config=cfg, embedder=hash_emb(), progress=False, **kw), cm

def dataset_files(root):
    root = Path(root)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in [root / "instances.jsonl", root / "queries.jsonl", *sorted((root / "kb").glob("*.jsonl"))]}

def stage_files(root):
    return {s: (Path(root) / "stages" / f"{s}.jsonl").read_bytes() for s in STAGES}

def schema_title(schema): return (schema or {}).get("title")

# ---------------------------------------------------------------- end to end

def test_scripted_generation_passes_the_strict_loader_and_verify(tmp_path):
    res, cm = gen(tmp_path / "ds")
    ds = load_pace_dataset(tmp_path / "ds")
    assert res["status"] == "complete" and len(ds.queries) == 12 and len(ds.instances) == 2
    cells = {(q.instance_id, q.situation_type, q.label) for q in ds.queries}
    assert len(cells) == 12                                  # every instance has all six cells
    assert all(len(kb) == 120 for kb in ds.kb.values())      # filled to the target
    assert {f.meta["origin"] for kb in ds.kb.values() for f in kb} == {"gold", "distractor", "profile", "everyday"}
    for q in ds.queries:
        assert q.gold_doc_ids and all(ds.fact(q.instance_id, d).meta["origin"] == "gold" for d in q.gold_doc_ids)
        assert set(q.meta) >= {"case_id", "hidden_reason", "hidden_terms", "validation"}
        if q.situation_type == "temporal":
            assert recompute(q.meta["arithmetic"])[1] == q.label and q.meta["arithmetic"]["text"]
    inst = ds.instances["gen-p01"]
    assert inst.ego.name and 2 <= len(inst.alters) <= 4 and inst.model_extra["reference_dates"][0] == str(inst.timeline.ref_date)
    assert (tmp_path / "ds" / "README.md").read_text().startswith("# ds: a generated PACE dataset")
    rep = json.loads((tmp_path / "ds" / "report.json").read_text())
    assert rep["accounts"]["3_cases"]["calls"] == 12 and rep["validation"]["actions"] == {"keep": 12}
    assert rep["projection"]["total"]["calls"] > 0
    v = verify_dataset(tmp_path / "ds")
    assert v["errors"] == 0, [f for q in v["queries"] for f in q["findings"]]
    assert v["coverage"] == {"request leak: hidden_terms": 12, "temporal arithmetic: structured": 4, "request times: structured chain": 4}

def test_a_finished_folder_reruns_with_zero_model_calls(tmp_path):
    gen(tmp_path / "ds", cache=tmp_path / "c.sqlite")
    before = dataset_files(tmp_path / "ds")
    res, cm = gen(tmp_path / "ds", cache=tmp_path / "c.sqlite")
    assert cm.n_calls == 0 and dataset_files(tmp_path / "ds") == before

def test_more_instances_resume_and_add(tmp_path):
    gen(tmp_path / "ds", personas="1")
    res, _ = gen(tmp_path / "ds", personas="2")
    assert sorted(res["dataset"].instances) == ["gen-p01", "gen-p02"]

# ---------------------------------------------------------------- resume

@pytest.mark.parametrize("die_at", [3, 20, 45, 60])   # in stages 1, 3, 5 and 7
def test_resumed_generation_equals_an_uninterrupted_one(tmp_path, die_at):
    _, full = gen(tmp_path / "a")
    n = [0]
    def dies(ms, js):
        n[0] += 1
        if n[0] == die_at: raise KeyboardInterrupt
        return toy_reply(ms, js)
    with pytest.raises(KeyboardInterrupt): gen(tmp_path / "b", dies, cache=tmp_path / "b.sqlite")
    assert json.loads((tmp_path / "b" / "generate.json").read_text())["status"] == "running"
    res, cm = gen(tmp_path / "b", cache=tmp_path / "b.sqlite")
    assert cm.n_calls == full.n_calls - (die_at - 1)             # the calls made before the crash come from the cache
    assert dataset_files(tmp_path / "b") == dataset_files(tmp_path / "a")
    assert stage_files(tmp_path / "b") == stage_files(tmp_path / "a")

def test_a_stage_line_cut_by_a_kill_is_redone(tmp_path):
    gen(tmp_path / "a")
    gen(tmp_path / "b", cache=tmp_path / "b.sqlite", stop_after="4_validate")
    p = tmp_path / "b" / "stages" / "4_validate.jsonl"
    p.write_bytes(p.read_bytes()[:-40])                          # the last line half written
    gen(tmp_path / "b", cache=tmp_path / "b.sqlite")
    assert dataset_files(tmp_path / "b") == dataset_files(tmp_path / "a")
    assert stage_files(tmp_path / "b") == stage_files(tmp_path / "a")

def test_other_settings_refuse_to_resume(tmp_path):
    gen(tmp_path / "ds", stop_after="2_profile")
    with pytest.raises(RunMismatchError, match="config.facts: 120 -> 200"):
        gen(tmp_path / "ds", cfg=CFG.model_copy(update=dict(facts=200)))
    with pytest.raises(RunMismatchError, match="prompts.gen_cases.CASE_SYSTEM"):
        import pace.gen.cases
        old = pace.gen.cases.CASE_SYSTEM
        try:
            pace.gen.cases.CASE_SYSTEM = old + " Be brief."
            gen(tmp_path / "ds")
        finally: pace.gen.cases.CASE_SYSTEM = old

# ---------------------------------------------------------------- what reaches the prompts

def test_prompts_hold_what_each_stage_needs_and_the_validator_is_blind(tmp_path):
    seen = {}
    def spy(ms, js):
        seen.setdefault(schema_title(js), []).append(ms)
        return toy_reply(ms, js)
    res, _ = gen(tmp_path / "ds", spy, personas="1")
    inst = res["dataset"].instances["gen-p01"]
    case_prompt = seen["TemporalCase"][0][1]["content"]
    assert inst.ego.name in case_prompt and inst.alters[0].name in case_prompt            # the profile
    assert f"{inst.model_extra['reference_dates'][0]}" in case_prompt and "Calendar from that day" in case_prompt   # the timeline
    assert "Label: conflict" in case_prompt and "Build the case around:" in case_prompt
    assert "bus driver in Lagos" in seen["PersonaText"][0][1]["content"]
    assert inst.ego.model_extra["persona"] in seen["EgoProfile"][0][1]["content"]
    qs = {q.query: q for q in res["dataset"].queries}
    for ms in seen["Review"]:
        text = " ".join(m["content"] for m in ms)
        q = next(q for r, q in qs.items() if r in text)
        assert q.judgment not in text and q.meta["hidden_reason"] not in text and "conflict" not in text.lower()

# ---------------------------------------------------------------- junk, failures, disagreement

def test_junk_and_failures_are_retried_then_dropped_and_counted(tmp_path):
    def junk(ms, js):
        t, u = schema_title(js), ms[1]["content"]     # the request itself, also on a retry after a bad reply
        if t == "PersonaText" and "Porto" in u: return "I am sorry, I cannot help with that."         # instance 2 never gets a persona
        if t == "CaseDraft" and "Label: non_conflict" in u and "Situation type: state" in u: raise ConnectionError("server went away")
        if t == "NearMisses": return '{"facts": "not a list"}'
        return toy_reply(ms, js)
    res, cm = gen(tmp_path / "ds", junk)
    rep = res["report"]
    assert rep["instances"]["dropped"] == {"1_persona:malformed_output": 1}
    assert rep["cases"]["malformed"] == 1 and rep["validation"]["dropped"] == {"malformed_output": 1}
    assert rep["distractors"]["dropped"] == {"malformed_output": 5} and rep["distractors"]["kept"] == 0
    assert rep["accounts"]["1_persona"]["failures"] == 1 and rep["accounts"]["1_persona"]["model_calls"] == 1 + 3   # the junk reply was retried twice
    ds = load_pace_dataset(tmp_path / "ds")
    assert len(ds.queries) == 5 and res["report"]["dataset"]["cells_missing"] == {"gen-p01": ["state/non_conflict"]}
    assert not (tmp_path / "ds" / "kb" / "gen-p02.jsonl").exists()

def test_nothing_surviving_is_an_error_with_a_report_and_no_dataset(tmp_path):
    def junk(ms, js): return "junk" if schema_title(js) in ("TemporalCase", "CaseDraft") else toy_reply(ms, js)
    with pytest.raises(GenerationError, match="no case survived"): gen(tmp_path / "ds", junk, personas="1")
    assert (tmp_path / "ds" / "report.md").exists() and not (tmp_path / "ds" / "queries.jsonl").exists()

def test_bad_cases_are_rewritten_with_their_problems_or_dropped(tmp_path):
    prompts = []
    def flawed(ms, js):
        t, u = schema_title(js), ms[-1]["content"]
        r = toy_reply(ms, js)
        if "Previous version" in u: prompts.append(u); return r     # rewrites come back fixed
        if t == "TemporalCase":
            d = json.loads(r)
            if "Label: conflict" in u: d["request"] = re.sub(r"on \w+day", "on Someday", d["request"]).replace("Someday", "Monday" if "Monday" not in d["request"] else "Tuesday")
            else: d["arithmetic"]["deadline"] = "18:10"             # the numbers now say conflict, and the request's 18:40 class is not the chain's
            return json.dumps(d)
        if t == "CaseDraft" and "Situation type: personal" in u and "Label: conflict" in u:
            d = json.loads(r); d["request"] = d["request"].replace("Book a table", "Given the peanut allergy, book a table"); return json.dumps(d)
        if t == "CaseDraft" and "Situation type: state" in u and "Label: conflict" in u:
            d = json.loads(r); d["context"] += " The session is not feasible then."; return json.dumps(d)
        return r
    res, _ = gen(tmp_path / "ds", flawed, personas="1")
    v = res["report"]["validation"]
    # the wrong weekday is repaired before the checks (no rewrite); the other flaws are rewritten with their problems
    assert v["rewrite_reasons"] == {"arithmetic_label": 1, "arithmetic_not_in_context": 1, "request_leak": 1, "request_time_mismatch": 1,
                                    "verdict_word_in_context": 1}
    assert v["actions"] == {"keep": 3, "rewritten": 3} and len(prompts) == 3 and v["repaired"] == {"weekday": 1}
    fixes = prompts
    assert not any("next to" in p for p in fixes)
    assert "cases with a weekday repaired: 1" in (tmp_path / "ds" / "README.md").read_text()
    assert any("gives conflict, the label is non_conflict" in p for p in fixes)
    assert any("gives the hidden reason away: 'peanut'" in p for p in fixes)
    assert any("the context says 'feasible'" in p for p in fixes)


def test_without_the_repair_a_wrong_weekday_is_rewritten(tmp_path):
    prompts = []
    def wrong_day(ms, js):
        r, u = toy_reply(ms, js), ms[-1]["content"]
        if "Previous version" in u: prompts.append(u); return r
        if schema_title(js) == "TemporalCase" and "Label: conflict" in u:
            d = json.loads(r); d["request"] = re.sub(r"on \w+day", "on Someday", d["request"]).replace("Someday", "Monday" if "Monday" not in d["request"] else "Tuesday")
            return json.dumps(d)
        return r
    res, _ = gen(tmp_path / "ds", wrong_day, personas="1", cfg=CFG.model_copy(update=dict(repair_weekdays=False)))
    v = res["report"]["validation"]
    assert v["rewrite_reasons"] == {"weekday_mismatch": 1} and v["repaired"] == {} and len(prompts) == 1
    assert "'Monday' next to" in prompts[0] or "'Tuesday' next to" in prompts[0]

def test_a_disagreeing_validator_drops_after_bounded_rewrites_unless_it_only_records(tmp_path):
    def contrary(ms, js):
        r = toy_reply(ms, js)
        if schema_title(js) == "Review":
            d = json.loads(r); d["decision"] = "go_ahead" if d["decision"] == "hold_off" else "hold_off"; return json.dumps(d)
        return r
    with pytest.raises(GenerationError): gen(tmp_path / "a", contrary, personas="1")
    rep = json.loads((tmp_path / "a" / "report.json").read_text())
    assert rep["validation"]["dropped"] == {"validator_label": 6} and rep["validation"]["rounds"] == 12
    res, _ = gen(tmp_path / "b", contrary, personas="1", cfg=CFG.model_copy(update=dict(llm_validator="record")))
    assert res["report"]["validation"]["actions"] == {"keep": 6}

def test_a_leaking_request_is_caught_even_when_the_validator_misses_it(tmp_path):
    def leaky(ms, js):
        r = toy_reply(ms, js)
        if schema_title(js) == "CaseDraft" and "Situation type: personal" in ms[-1]["content"]:
            d = json.loads(r); d["request"] += " Mind the peanut thing."; return json.dumps(d)
        return r
    res, _ = gen(tmp_path / "ds", leaky, personas="1")
    assert res["report"]["validation"]["dropped"] == {"request_leak": 2}

# ---------------------------------------------------------------- each deterministic check, with a bad case

GOOD = dict(date="2026-03-12", people=["Ana Ortega"], places=["Estudio Norte", "Casa Prana"], hidden_reason="workshop runs until 18:00", hidden_terms=["workshop"],
            arithmetic=dict(start="18:00", start_what="the workshop ends", steps=[dict(what="walk", minutes=25)], deadline="18:15", deadline_what="the class starts"),
            context="Ana Ortega's workshop at Estudio Norte on 2026-03-12 runs until 18:00. The walk to Casa Prana takes 25 minutes. The class starts at 18:15.",
            request="Book me the 18:15 yoga class at Casa Prana on Thursday 2026-03-12.", judgment="The walk ends at 18:25, after the start.")

def codes(case, label="conflict", t="temporal"): return [c for c, _ in case_problems(case, t, label, "2026-03-04", W)]

@pytest.mark.parametrize("change,label,code", [
    (dict(request="Book me the 18:15 yoga class at Casa Prana on Friday 2026-03-12."), "conflict", "weekday_mismatch"),
    (dict(request="Book me the 18:15 yoga class at Casa Prana on Thursday the 13th."), "conflict", "weekday_mismatch"),
    (dict(context=GOOD["context"] + " Ana Ortega flies out on 2026-05-02."), "conflict", "date_invalid_or_outside"),
    (dict(judgment="Nothing happens on 2026-02-30."), "conflict", "date_invalid_or_outside"),
    (dict(date="2026-03-01"), "conflict", "date_before_request"),
    ({}, "non_conflict", "arithmetic_label"),
    (dict(arithmetic=dict(GOOD["arithmetic"], deadline="18:30"), context=GOOD["context"].replace("18:15", "18:30"),
          request=GOOD["request"].replace("18:15", "18:30")), "conflict", "arithmetic_label"),
    (dict(context=GOOD["context"].replace("25 minutes", "a short while")), "conflict", "arithmetic_not_in_context"),
    (dict(request="Book the 18:15 yoga class on 2026-03-12 after my workshop."), "conflict", "request_leak"),
    (dict(request="Book the 18:15 yoga class on 2026-03-12, even though it is tight."), "conflict", "request_leak"),
    (dict(context=GOOD["context"] + " The two plans conflict."), "conflict", "verdict_word_in_context"),
    (dict(context=GOOD["context"] + " The class is unsuitable."), "conflict", "verdict_word_in_context"),
])
def test_each_deterministic_check_catches_its_bad_case(change, label, code):
    assert codes(GOOD) == []
    assert codes({**GOOD, **change}, label) == [code]

def test_verify_finds_the_same_defects_in_a_finished_dataset(tmp_path):
    gen(tmp_path / "ds", personas="1")
    qp = tmp_path / "ds" / "queries.jsonl"
    rows = [json.loads(l) for l in qp.read_text().splitlines()]
    t = next(r for r in rows if r["situation_type"] == "temporal" and r["label"] == "conflict")
    t["meta"]["arithmetic"]["deadline"] = "23:00"                                    # arithmetic contradicts the label
    t["query"] = re.sub(r"on (\w+day) ", lambda m: "on " + ("Monday" if m.group(1) != "Monday" else "Sunday") + " ", t["query"])   # wrong weekday
    p = next(r for r in rows if r["situation_type"] == "personal" and r["label"] == "conflict")
    p["query"] += " Skip the peanut dishes."                                         # leaks the hidden reason
    s = next(r for r in rows if r["situation_type"] == "state")
    s["context"] += " This is compatible with the plan."                              # verdict word
    n = next(r for r in rows if r["label"] == "non_conflict" and r["situation_type"] == "personal")
    n["judgment"] += " It reopens on 2027-01-01."                                     # outside the window
    qp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kb = tmp_path / "ds" / "kb" / "gen-p01.jsonl"
    facts = [json.loads(l) for l in kb.read_text().splitlines()]
    facts[0]["text"] = "This plan clashes with everything."                           # a leaking, pronoun-led fact
    kb.write_text("".join(json.dumps(f) + "\n" for f in facts))
    rep = verify_dataset(tmp_path / "ds")
    found = {(q["query_id"].split("-", 2)[2], f["check"]) for q in rep["queries"] for f in q["findings"]}
    assert {("T-C1", "arithmetic_label"), ("T-C1", "weekday_mismatch"), ("P-C1", "request_leak"), ("P-N1", "date_invalid_or_outside")} <= found
    assert any(c == "verdict_word_in_context" for _, c in found)
    assert rep["by_check"]["error: kb_verdict_word"] == 1 and rep["by_check"]["warn: kb_pronoun_start"] == 1

# ---------------------------------------------------------------- command line

def test_cli_generate_and_verify(tmp_path, monkeypatch, capsys):
    import pace.llm
    monkeypatch.setattr(pace.llm, "as_chat_model", lambda spec, cache, **kw: toy_chat(cache=cache))
    out = tmp_path / "ds"
    rc = main(["generate", "--out", str(out), "--personas", "1", "--chat", "fake:toy", "--recipe", "pace", "--cases-per-cell", "1", "--facts", "80",
               "--embedder", "hash:hash", "--set", "distractors_per_case=3", "--no-progress"])
    assert rc == 0 and "6 queries, 80 facts in 1 instances" in capsys.readouterr().out
    assert "pace generate --out" in (out / "README.md").read_text()
    assert main(["data", "check", str(out)]) == 0
    capsys.readouterr()
    assert main(["data", "verify", str(out)]) == 0 and "0 errors" in capsys.readouterr().out
    assert main(["data", "verify", "--json", str(out)]) == 0 and json.loads(capsys.readouterr().out)["errors"] == 0

@pytest.mark.parametrize("args,msg", [
    (["--personas", "0"], "at least 1"),
    (["--personas", "/nowhere/seeds.txt"], "no such file"),
    (["--personas", "2", "--instances", "5"], "only 2 personas"),
    (["--personas", "1", "--set", "dedup_threshold=7"], "dedup_threshold"),
    (["--personas", "1", "--chat", "nope:x"], "unknown chat backend"),
])
def test_cli_mistakes_are_one_line_and_leave_nothing(tmp_path, capsys, args, msg):
    out = tmp_path / "ds"
    assert main(["generate", "--out", str(out), "--embedder", "hash:hash", "--no-progress", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pace: error:") and msg in err and len(err.splitlines()) == 1
    assert not out.exists()

def test_cli_refuses_a_folder_holding_something_else(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["generate", "--out", str(tmp_path), "--personas", "1", "--embedder", "hash:hash"]) == 2
    assert "holds no generation" in capsys.readouterr().err and (tmp_path / "notes.txt").exists()

def test_verify_on_the_bundled_mini_set(capsys):
    rc = data_verify("data/mini")
    out = capsys.readouterr().out
    assert rc == 0 and "0 errors" in out                       # hand-checked arithmetic, dates and weekdays hold
    assert "temporal arithmetic: text: 19 queries" in out and "temporal arithmetic: unchecked: 5 queries" in out
    assert "request times: text chain: 24 queries" in out and "request_time_mismatch" not in out   # requests at 6:30 pm, 10 am, a class's start


def test_rewrite_rounds_never_resend_the_same_request(tmp_path):
    "A generator that repeats its flawed draft: each rewrite round samples with its own seed, so no round is a cache hit of the one before."
    def stubborn(ms, js):
        u = ms[-1]["content"]
        if "Previous version:\n" in u: return u.split("Previous version:\n", 1)[1].split("\n", 1)[0]   # hands back the draft it was shown
        r = toy_reply(ms, js)
        if schema_title(js) == "TemporalCase" and "Label: conflict" in u:
            d = json.loads(r); d["arithmetic"]["deadline"] = "23:59"; return json.dumps(d)   # the numbers say non_conflict
        return r
    res, cm = gen(tmp_path / "ds", stubborn, personas="1", cache=str(tmp_path / "c.sqlite"))
    drop = [d for d in json.loads((tmp_path / "ds" / "stages" / "4_validate.jsonl").read_text().splitlines()[0])["decisions"] if d["case_id"] == "T-C1"]
    assert drop and drop[0]["action"] == "drop" and drop[0]["rounds"] == CFG.max_rewrites, drop
    rw = cm.accounts.by_stage()["gen.rewrite"]
    assert rw["calls"] == CFG.max_rewrites and rw["cache_hits"] == 0, rw
    import sqlite3
    reqs = [json.loads(r) for (r,) in sqlite3.connect(tmp_path / "c.sqlite").execute("select request from entries where stage = 'gen.rewrite'")]
    assert len(reqs) == 2 and reqs[0]["messages"] == reqs[1]["messages"]          # the same prompt twice: only the seed tells them apart
    assert sorted(r["seed"] for r in reqs) == [1, 2] and {r["temperature"] for r in reqs} == {CFG.rewrite_temperature}


# ---------------------------------------------------------------- rewrite_mode 'fresh' and the varied prompt examples

FRESH = CFG.model_copy(update=dict(rewrite_mode="fresh"))

def cell_of(u):
    return re.search(r"Situation type: (\w+)", u).group(1), re.search(r"Label: (non_conflict|conflict)", u).group(1)

def shown_example(u):
    "The example case a generation or rewrite prompt shows, as JSON text (None when it shows none)."
    m = re.search(r"^Example of .*?:\n(\{.*\})$", u, re.M)
    return m.group(1) if m else None

def test_fresh_rewrites_show_the_problems_but_never_the_draft(tmp_path):
    "First drafts that copy the example, contradict their label, leak or judge; fresh rewrites fix them without ever seeing them, and the dataset passes the strict loader."
    from pace.gen.validate import FRESH_NOTE, REWRITE_HINTS
    from pace.gen.cases import EXAMPLE_MARKERS
    drafts, rewrites = {}, []
    def flawed(ms, js):
        u = ms[-1]["content"]
        if schema_title(js) not in ("TemporalCase", "CaseDraft"): return toy_reply(ms, js)
        if FRESH_NOTE in u: rewrites.append(u); return toy_reply(ms, js)       # rewrites come back right
        t, l = cell_of(u)
        d = json.loads(toy_reply(ms, js))
        if (t, l) == ("temporal", "conflict"): d = json.loads(shown_example(u))                  # pastes the example
        elif (t, l) == ("temporal", "non_conflict"): d["arithmetic"]["deadline"] = "18:10"       # the numbers say conflict
        elif (t, l) == ("personal", "conflict"): d["request"] = d["request"].replace("Book a table", "Given the peanut allergy, book a table")
        elif (t, l) == ("state", "conflict"): d["context"] += " The session is not feasible then."
        else: return json.dumps(d)
        drafts[(t, l)] = d
        return json.dumps(d)
    res, _ = gen(tmp_path / "ds", flawed, personas="1", cfg=FRESH)
    v = res["report"]["validation"]
    assert v["actions"] == {"keep": 2, "rewritten": 4} and len(rewrites) == 4, v
    assert {"copies_example", "arithmetic_label", "request_leak", "verdict_word_in_context"} <= set(v["rewrite_reasons"])
    for u in rewrites:
        d = drafts[cell_of(u)]
        assert "Previous version" not in u and json.dumps(d, ensure_ascii=False) not in u
        for k in ("request", "context", "judgment"):
            assert not any(s in u for s in d[k].split(". ") if len(s) > 12), (cell_of(u), k)
    by_cell = {cell_of(u): u for u in rewrites}
    assert REWRITE_HINTS["copies_example"] in by_cell["temporal", "conflict"] and not any(m in by_cell["temporal", "conflict"] for m in EXAMPLE_MARKERS)
    assert REWRITE_HINTS["arithmetic_label"] in by_cell["temporal", "non_conflict"]
    assert "'peanut'" in by_cell["personal", "conflict"] and "'feasible'" in by_cell["state", "conflict"]
    ds = load_pace_dataset(tmp_path / "ds")
    assert len(ds.queries) == 6 and verify_dataset(tmp_path / "ds")["errors"] == 0
    assert "`fresh` mode" in (tmp_path / "ds" / "README.md").read_text()

@pytest.mark.parametrize("mode", ["revise", "fresh"])
def test_a_generator_that_pastes_what_it_sees_is_dropped_for_copying(tmp_path, mode):
    "It hands back any draft it is shown, else the example it is shown, else the last example it pasted for that cell: every case copies an example and is dropped for it."
    pasted, prompts = {}, []
    def paster(ms, js):
        u = ms[-1]["content"]
        if schema_title(js) not in ("TemporalCase", "CaseDraft"): return toy_reply(ms, js)
        prompts.append(u)
        if "Previous version:\n" in u: return u.split("Previous version:\n", 1)[1].split("\n", 1)[0]
        if shown_example(u): pasted[cell_of(u)] = shown_example(u)
        return pasted[cell_of(u)]
    with pytest.raises(GenerationError, match="no case survived"): gen(tmp_path / "ds", paster, personas="1", cfg=CFG.model_copy(update=dict(rewrite_mode=mode)))
    rep = json.loads((tmp_path / "ds" / "report.json").read_text())
    assert rep["validation"]["dropped"] == {"copies_example": 6} and rep["validation"]["rounds"] == 12
    rewrites = prompts[6:]
    assert len(rewrites) == 12
    if mode == "fresh": assert not any("Previous version" in u or shown_example(u) for u in rewrites)   # nothing to paste, and still caught
    else: assert all("Previous version" in u and shown_example(u) for u in rewrites)

def test_each_slot_shows_the_example_it_records_and_the_examples_vary(tmp_path):
    from pace.gen.cases import CASE_EXAMPLES
    seen = []
    def spy(ms, js):
        if schema_title(js) in ("TemporalCase", "CaseDraft"): seen.append(ms[-1]["content"])
        return toy_reply(ms, js)
    gen(tmp_path / "ds", spy, cfg=CFG.model_copy(update=dict(cases_per_cell=2)))
    slots = [c for r in (json.loads(l) for l in (tmp_path / "ds" / "stages" / "3_cases.jsonl").read_text().splitlines()) for c in r["cases"]]
    assert len(slots) == len(seen) == 24
    for c in slots:   # the prompt of each slot holds the example its slot records, whole
        ex = json.dumps(CASE_EXAMPLES[c["example"]]["cases"][(c["situation_type"], c["label"])], ensure_ascii=False)
        assert sum(ex in u and f"Build the case around: {c['focus']}\n" in u for u in seen) >= 1
    assert {c["example"] for c in slots} == {0, 1, 2}
    by_cell = {}   # the two cases of a cell see two different examples
    for r in (json.loads(l) for l in (tmp_path / "ds" / "stages" / "3_cases.jsonl").read_text().splitlines()):
        for c in r["cases"]: by_cell.setdefault((r["instance_id"], c["situation_type"], c["label"]), []).append(c["example"])
    assert all(len(set(v)) == 2 for v in by_cell.values()), by_cell

def test_a_resumed_run_refuses_another_rewrite_mode_or_other_examples(tmp_path):
    gen(tmp_path / "ds", stop_after="3_cases")
    with pytest.raises(RunMismatchError, match='config.rewrite_mode: "revise" -> "fresh"'): gen(tmp_path / "ds", cfg=FRESH)
    import pace.gen.cases
    old = pace.gen.cases.CASE_EXAMPLES
    try:
        pace.gen.cases.CASE_EXAMPLES = old[:2]
        with pytest.raises(RunMismatchError, match="prompts.gen_cases.CASE_EXAMPLES"): gen(tmp_path / "ds")
    finally: pace.gen.cases.CASE_EXAMPLES = old
    res, _ = gen(tmp_path / "ds")                                   # the same settings resume
    assert res["status"] == "complete"

def _as_json(v):
    "A module constant as its prompt file holds it: tuples as lists, (type, label) keys nested by type."
    if isinstance(v, (tuple, list)): return [_as_json(x) for x in v]
    if isinstance(v, dict) and v and all(isinstance(k, tuple) for k in v):
        out = {}
        for (t, l), x in v.items(): out.setdefault(t, {})[l] = _as_json(x)
        return out
    if isinstance(v, dict): return {k: _as_json(x) for k, x in v.items()}
    return v

def test_each_generation_prompt_file_is_the_constant_it_names():
    import importlib, pace
    from pace.calls import prompt_asset
    root = Path(pace.__file__).parent / "assets" / "prompts" / "gen"
    files = sorted(f.relative_to(root) for f in root.rglob("*") if f.is_file())
    stages = {"persona", "profile", "cases", "validate", "distractors", "atomize", "kb", "paper"}
    assert len(files) == 28 and {f.parent.as_posix() for f in files} == stages
    for f in files:
        const = getattr(importlib.import_module(f"pace.gen.{f.parent}"), f.stem)   # a file no constant reads fails here
        text = prompt_asset(f"gen/{f.as_posix()}")
        if f.suffix == ".md": assert const == text and not text.endswith("\n"), f   # an editor's final newline changes the prompt
        else: assert json.dumps(_as_json(const), ensure_ascii=False) == json.dumps(text, ensure_ascii=False), f

def test_cli_sets_the_rewrite_mode(tmp_path, monkeypatch, capsys):
    import pace.llm
    monkeypatch.setattr(pace.llm, "as_chat_model", lambda spec, cache, **kw: toy_chat(cache=cache))
    out = tmp_path / "ds"
    args = ["generate", "--out", str(out), "--personas", "1", "--chat", "fake:toy", "--recipe", "pace", "--cases-per-cell", "1", "--facts", "60", "--embedder", "hash:hash", "--no-progress"]
    assert main(args + ["--set", "rewrite_mode=fresh", "--stop-after", "2_profile"]) == 0
    assert json.loads((out / "generate.json").read_text())["settings"]["config"]["rewrite_mode"] == "fresh"
    assert main(args + ["--stop-after", "2_profile"]) == 2 and "config.rewrite_mode" in capsys.readouterr().err   # resumed without it: refused
    assert main(args + ["--set", "rewrite_mode=fresh"]) == 0 and load_pace_dataset(out).queries
    assert main(["generate", "--out", str(tmp_path / "bad"), "--personas", "1", "--embedder", "hash:hash", "--set", "rewrite_mode=sometimes"]) == 2
    err = capsys.readouterr().err
    assert "rewrite_mode" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()

# ---------------------------------------------------------------- temporal times chosen by code

CODE_CFG = CFG.model_copy(update=dict(temporal_arithmetic="code"))

def planned_chains(root):
    rows = [json.loads(l) for l in (Path(root) / "stages" / "3_cases.jsonl").read_text().splitlines()]
    return {(r["instance_id"], c["case_id"]): c["chain"] for r in rows for c in r["cases"] if "chain" in c}

def numbers(a): return a["start"], [s["minutes"] for s in a["steps"]], a["deadline"]

def test_code_timed_cases_carry_the_planned_numbers_whatever_the_model_adds(tmp_path):
    seen = []
    def meddler(ms, js):   # names the chain, but states its own minutes and times, and slips in an arithmetic and a judgment of its own
        r = toy_reply(ms, js)
        if schema_title(js) == "FixedTemporalCase":
            seen.append(ms[-1]["content"]); d = json.loads(r)
            d["context"] += " The walk takes 52 minutes. The class starts at 23:10. The studio is bright."
            d["chain"]["start_what"] += " at 05:55."
            d["arithmetic"] = dict(start="06:00", start_what="x", steps=[dict(what="y", minutes=1)], deadline="23:00", deadline_what="z")
            d["judgment"] = "It fits easily."
            return json.dumps(d)
        assert schema_title(js) != "TemporalCase"   # no temporal prompt asks the model for numbers
        return r
    res, _ = gen(tmp_path / "ds", meddler, cfg=CODE_CFG)
    ds, plan = load_pace_dataset(tmp_path / "ds"), planned_chains(tmp_path / "ds")
    assert res["status"] == "complete" and len(plan) == 4 and len(seen) == 4
    assert res["report"]["validation"]["actions"] == {"keep": 12}            # nothing to rewrite: code wrote every number
    temporal = [q for q in ds.queries if q.situation_type == "temporal"]
    assert len(temporal) == 4
    for q in temporal:
        c, a = plan[(q.instance_id, q.meta["case_id"])], q.meta["arithmetic"]
        assert numbers(a) == (c["start"], c["minutes"], c["deadline"]) and recompute(a)[1] == q.label
        assert "52 minutes" not in q.context and "23:10" not in q.context and "05:55" not in q.context and "The studio is bright." in q.context
        assert sorted(durations(q.context)) == sorted(c["minutes"]) and q.judgment != "It fits easily."
        assert (", after " in q.judgment) == (q.label == "conflict")
    for u, c in zip(seen, [c for _, c in sorted(plan.items())]):
        assert f"ends or starts at {c['start']}" in u and f"done by {c['deadline']}" in u and '"minutes"' not in u
    assert verify_dataset(tmp_path / "ds")["errors"] == 0

def durations(text): return [int(m) for m in re.findall(r"(\d+) minutes", text)]

def test_a_revised_code_timed_case_is_shown_as_the_model_wrote_it(tmp_path):
    rewrites = []
    def leaky(ms, js):   # the first draft of the non-conflict case names its hidden reason in the request
        r, u = toy_reply(ms, js), ms[-1]["content"]
        if "Previous version" in u: rewrites.append(u); return r
        if schema_title(js) == "FixedTemporalCase" and "Label: non_conflict" in u:
            d = json.loads(r); d["request"] = d["request"].replace("Book me", "Despite the workshop, book me"); return json.dumps(d)
        return r
    res, _ = gen(tmp_path / "ds", leaky, personas="1", cfg=CODE_CFG)
    v = res["report"]["validation"]
    assert v["rewrite_reasons"] == {"request_leak": 1} and v["actions"] == {"keep": 5, "rewritten": 1} and len(rewrites) == 1
    c = planned_chains(tmp_path / "ds")[("gen-p01", "T-N1")]
    prev = json.loads(rewrites[0].split("Previous version:\n")[1].split("\nProblems:")[0])
    assert "chain" in prev and not {"arithmetic", "judgment"} & set(prev) and not re.search(r"\d\d:\d\d|minutes", prev["context"])
    assert f"ends or starts at {c['start']}" in rewrites[0] and "workshop" in rewrites[0].split("Problems:")[1]
    q = [q for q in load_pace_dataset(tmp_path / "ds").queries if q.meta["case_id"] == "T-N1"][0]
    assert numbers(q.meta["arithmetic"]) == (c["start"], c["minutes"], c["deadline"]) and "Despite" not in q.query

def test_a_code_timed_reply_naming_the_wrong_number_of_steps_is_dropped_and_counted(tmp_path):
    def miscount(ms, js):
        r = toy_reply(ms, js)
        if schema_title(js) == "FixedTemporalCase" and "Label: conflict" in ms[1]["content"]:   # on the retry too
            d = json.loads(r); d["chain"]["steps"] = d["chain"]["steps"] + ["one step too many"]; return json.dumps(d)
        return r
    res, _ = gen(tmp_path / "ds", miscount, personas="1", cfg=CODE_CFG)
    v = res["report"]["validation"]
    assert v["dropped"] == {"malformed_output": 1} and v["actions"] == {"keep": 5, "drop": 1}
    assert {q.meta["case_id"] for q in load_pace_dataset(tmp_path / "ds").queries} == {"T-N1", "P-C1", "P-N1", "S-C1", "S-N1"}

# ---------------------------------------------------------------- the request's times against the chain (issue 22)

SAMPLE = Path(__file__).parent.parent / "data" / "generated-sample"
P01 = dict(window_start="2026-09-26", ref_date="2026-10-10", window_end="2026-11-21")
P02 = dict(window_start="2026-08-17", ref_date="2026-08-31", window_end="2026-10-12")

def chain(start, start_what, steps, deadline, deadline_what):
    return dict(start=start, start_what=start_what, steps=[dict(what=w, minutes=m) for w, m in steps], deadline=deadline, deadline_what=deadline_what)

# data/generated-sample as generated: two code-timed cases whose request names a time the chain does not have, and one that is right
OLUF_N1 = dict(date="2026-10-13", people=["Oluf Olusola"], places=["St Mark's (church)", "city centre (location)", "park (location)"],
               hidden_reason="physiotherapy ends at 17:00", hidden_terms=["physiotherapy"],
               arithmetic=chain("16:35", "Oluf's physiotherapy session ends", [("bus from city centre to park", 45), ("changing at the park", 60)],
                                "18:30", "the swimming lesson starts"),
               context="Oluf Olusola has a physiotherapy session at St Mark's on 2026-10-13. The city centre is a place where Oluf takes the bus; the park is a "
                       "place where Oluf goes for a walk. Oluf's physiotherapy session ends at 16:35. Bus from city centre to park takes 45 minutes. "
                       "Changing at the park takes 60 minutes. The swimming lesson starts at 18:30.",
               request="Sign me up for the 18:00 adult swimming lesson at the park on Tuesday 2026-10-13.",
               judgment="Oluf's physiotherapy session ends at 16:35 and the 2 steps after it take 105 minutes, so they end at 18:20, no later than 18:30, "
                        "when the swimming lesson starts.")
OLUF_C1 = dict(date="2026-10-10", people=["Oluf Olusola"], places=["St Mark's (church)"], hidden_reason="choir rehearsal ends at 18:30", hidden_terms=["choir"],
               arithmetic=chain("16:40", "choir rehearsal ends", [("showering and changing", 60), ("bus to St Mark's", 45), ("walk to the stands", 15)],
                                "18:30", "the final kicks off"),
               context="Oluf Olusola works the early choir rehearsal at St Mark's on 2026-10-10. The under-12 football final is played at St Mark's that "
                       "morning. Choir rehearsal ends at 16:40. Showering and changing takes 60 minutes. Bus to St Mark's takes 45 minutes. Walk to the "
                       "stands takes 15 minutes. The final kicks off at 18:30.",
               request="Get me a seat for the 07:00 under-12 football final at St Mark's on Saturday 2026-10-10.",
               judgment="Choir rehearsal ends at 16:40 and the 3 steps after it take 120 minutes, so they end at 18:40, after 18:30, when the final kicks off.")
MARIA_C1 = dict(date="2026-08-31", people=["Maria Santos"], places=["St Mark's (Church)"], hidden_reason="choir rehearsal ends at 18:30", hidden_terms=["choir"],
                arithmetic=chain("17:55", "Maria's choir rehearsal ends", [("showering and changing", 10), ("bus to St Mark's", 45)], "18:30", "the final kicks off"),
                context="Maria Santos works the early choir rehearsal at St Mark's on 2026-08-31. The under-12 football final is played at St Mark's that "
                        "morning. Maria's choir rehearsal ends at 17:55. Showering and changing takes 10 minutes. Bus to St Mark's takes 45 minutes. The final "
                        "kicks off at 18:30.",
                request="Get me a seat for the 18:30 under-12 football final at St Mark's on Monday 2026-08-31.",
                judgment="Maria's choir rehearsal ends at 17:55 and the 2 steps after it take 55 minutes, so they end at 18:50, after 18:30, when the final kicks off.")

@pytest.mark.parametrize("case,label,ref,said", [(OLUF_N1, "non_conflict", "2026-10-13", "'18:00'"), (OLUF_C1, "conflict", "2026-10-10", "'07:00'")])
def test_a_sample_request_at_a_time_the_chain_lacks_is_a_problem(case, label, ref, said):
    probs = case_problems(case, "temporal", label, ref, P01)
    assert [c for c, _ in probs] == ["request_time_mismatch"]                  # every other check passed these cases
    msg = probs[0][1]
    assert said in msg and "18:30 the " in msg and msg == request_time_problems(case["request"], case["arithmetic"], case["context"])[0]

def test_a_request_at_the_chains_deadline_passes():
    assert case_problems(MARIA_C1, "temporal", "conflict", "2026-08-31", P02) == []
    assert request_time_problems(MARIA_C1["request"], MARIA_C1["arithmetic"]) == []

@pytest.mark.parametrize("request_,ok", [
    ("Book me the 18:15 yoga class at Casa Prana on Thursday 2026-03-12.", True),     # the deadline
    ("Book me the 6:15 pm yoga class at Casa Prana on Thursday 2026-03-12.", True),   # the same in 12-hour form
    ("Book me the 6:15 PM yoga class at Casa Prana on Thursday 2026-03-12.", True),
    ("Book me the 6:15 yoga class at Casa Prana on Thursday 2026-03-12.", True),      # no am/pm, no leading zero: either half of the day
    ("Book me a taxi at 6 pm to Casa Prana on Thursday 2026-03-12.", True),           # the chain's start: the time to leave
    ("Book me the yoga class at Casa Prana on Thursday 2026-03-12.", True),           # no time at all
    ("Book me the 06:15 yoga class at Casa Prana on Thursday 2026-03-12.", False),    # a leading zero is the morning
    ("Book me the 6:15 am yoga class at Casa Prana on Thursday 2026-03-12.", False),
    ("Book me the 18:45 yoga class at Casa Prana on Thursday 2026-03-12.", False),
    ("Book me the 6:45 pm yoga class at Casa Prana on Thursday 2026-03-12.", False),
    ("Book me the 18:25 yoga class at Casa Prana on Thursday 2026-03-12.", False),    # a time of the chain (its end), but not the class's
])
def test_request_times_in_12_and_24_hour_forms(request_, ok):
    assert codes({**GOOD, "request": request_}) == ([] if ok else ["request_time_mismatch"])

def test_generation_rewrites_a_request_at_another_time_or_drops_it_and_counts_it(tmp_path):
    prompts, rewrites = [], []
    def off_time(ms, js):   # the conflict case's first draft, and every draft of the non-conflict case, ask for 03:07
        r, u = toy_reply(ms, js), ms[-1]["content"]
        if schema_title(js) != "FixedTemporalCase": return r
        if "Previous version" in u: rewrites.append(u)
        else: prompts.append(u)
        if "Label: non_conflict" in u or "Previous version" not in u:
            d = json.loads(r); d["request"] = re.sub(r"\d\d:\d\d", "03:07", d["request"]); return json.dumps(d)
        return r
    res, _ = gen(tmp_path / "ds", off_time, personas="1", cfg=CODE_CFG)
    v = res["report"]["validation"]
    assert v["rewrite_reasons"] == {"request_time_mismatch": 3} and v["dropped"] == {"request_time_mismatch": 1}
    assert v["actions"] == {"keep": 4, "rewritten": 1, "drop": 1} and v["after_generation"] == []
    plan = planned_chains(tmp_path / "ds")
    assert len(prompts) == 2 and all(f"If the request names a time, it is {plan[('gen-p01', c)]['deadline']}" in u for u, c in zip(prompts, ["T-C1", "T-N1"]))
    assert len(rewrites) == 3 and all("the request says '03:07'" in u.split("Problems:")[1] for u in rewrites)
    assert "request_time_mismatch 1" in (tmp_path / "ds" / "README.md").read_text() and "request_time_mismatch 1" in (tmp_path / "ds" / "report.md").read_text()
    ds = load_pace_dataset(tmp_path / "ds")
    assert {q.meta["case_id"] for q in ds.queries} == {"T-C1", "P-C1", "P-N1", "S-C1", "S-N1"} and verify_dataset(tmp_path / "ds")["errors"] == 0

def test_verify_reports_a_request_at_a_time_the_chain_lacks(tmp_path, capsys):
    gen(tmp_path / "ds", personas="1", cfg=CODE_CFG)
    qp = tmp_path / "ds" / "queries.jsonl"
    rows = [json.loads(l) for l in qp.read_text().splitlines()]
    t = next(r for r in rows if r["meta"]["case_id"] == "T-N1")
    t["query"] = re.sub(r"\d\d:\d\d", "07:00", t["query"])
    qp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rep = verify_dataset(tmp_path / "ds")
    found = [(q["query_id"], f["check"]) for q in rep["queries"] for f in q["findings"] if f["severity"] == "error"]
    assert found == [("gen-p01-T-N1", "request_time_mismatch")] and rep["coverage"]["request times: structured chain"] == 2
    assert data_verify(str(tmp_path / "ds")) == 1
    out = capsys.readouterr().out
    assert "| error: request_time_mismatch | 1 |" in out and "the request says '07:00'" in out

def first_lines(root):
    "Cut a generation folder's stage files back to their first line per instance (what generation wrote, before any later drop)."
    for f in (Path(root) / "stages").glob("*.jsonl"):
        if f.name == "accounts.jsonl": continue
        seen, keep = set(), []
        for l in f.read_text().splitlines():
            iid = json.loads(l)["instance_id"]
            if iid not in seen: seen.add(iid); keep.append(l)
        f.write_text("".join(l + "\n" for l in keep))

def test_the_sample_as_generated_fails_verify_on_both_cases_and_the_committed_drop_reproduces(tmp_path):
    old = tmp_path / "generated-sample"
    shutil.copytree(SAMPLE, old)
    first_lines(old)
    rebuild_outputs(old)                                                       # the folder as `pace generate` left it
    rep = verify_dataset(old)
    errs = sorted((q["query_id"], f["check"]) for q in rep["queries"] for f in q["findings"] if f["severity"] == "error")
    assert errs == [("gen-p01-T-C1", "request_time_mismatch"), ("gen-p01-T-N1", "request_time_mismatch")] and rep["n_queries"] == 14
    assert data_verify(str(old)) == 1
    assert list(drop_failing_cases(old)) == ["gen-p01-T-C1", "gen-p01-T-N1"]
    assert verify_dataset(old)["errors"] == 0
    for name in ["instances.jsonl", "queries.jsonl", "report.json", "report.md", "generate.json", *[f"kb/{p.name}" for p in (SAMPLE / "kb").glob("*.jsonl")],
                 *[f"stages/{p.name}" for p in (SAMPLE / "stages").glob("*.jsonl")]]:
        assert (old / name).read_bytes() == (SAMPLE / name).read_bytes(), name
    assert (old / "README.md").read_text().replace(str(old), "data/generated-sample") == (SAMPLE / "README.md").read_text()

def test_dropped_cases_leave_their_facts_and_a_resume_writes_the_same_folder(tmp_path):
    out, cache = tmp_path / "ds", tmp_path / "c.sqlite"
    gen(out, personas="1", cfg=CODE_CFG, cache=cache)
    before = load_pace_dataset(out)
    gold_texts = lambda ds: {q.query_id: [ds.fact(q.instance_id, d).text for d in q.gold_doc_ids] for q in ds.queries}
    p4 = out / "stages" / "4_validate.jsonl"
    row = json.loads(p4.read_text().splitlines()[-1])
    t = next(c for c in row["kept"] if c["case_id"] == "T-C1")
    t["draft"]["request"] = re.sub(r"\d\d:\d\d", "07:00", t["draft"]["request"])   # as a folder made before the check would hold it
    with open(p4, "a") as f: f.write(json.dumps(row) + "\n")
    rebuild_outputs(out)
    msg = request_time_problems(t["draft"]["request"], t["draft"]["arithmetic"], t["draft"]["context"])[0]
    assert drop_failing_cases(out) == {"gen-p01-T-C1": ("request_time_mismatch", msg)}
    after = load_pace_dataset(out)
    assert verify_dataset(out)["errors"] == 0 and [q.query_id for q in after.queries] == [q.query_id for q in before.queries if q.query_id != "gen-p01-T-C1"]
    old_gold = gold_texts(before)
    assert gold_texts(after) == {k: v for k, v in old_gold.items() if k != "gen-p01-T-C1"}           # the other cases keep their gold facts
    texts = lambda ds, keep: sorted(f.text for f in ds.kb["gen-p01"] if keep(f))
    assert texts(after, lambda f: "T-C1" in f.meta["cases"]) == []
    assert texts(after, lambda f: True) == texts(before, lambda f: set(f.meta["cases"]) != {"T-C1"})  # only its own facts went
    v = json.loads((out / "report.json").read_text())["validation"]
    assert v["dropped"] == {"request_time_mismatch": 1} and v["after_generation"][0]["query_id"] == "gen-p01-T-C1"
    files = dataset_files(out)
    res, cm = gen(out, personas="1", cfg=CODE_CFG, cache=cache)               # a resume replays the stage files
    assert cm.n_calls == 0 and dataset_files(out) == files

# ---------------------------------------------------------------- the paper's recipe (pace.gen.paper)

from pace.gen import paper
from pace.gen.persona import load_personas

PAPER = GenConfig(cases_per_cell=1, facts=40, min_alters=2, max_alters=2)   # recipe="paper": the default

def pgen(out, respond=None, cfg=PAPER, personas="2", cache=None, **kw):
    return gen(out, respond, cfg=cfg, personas=personas, cache=cache, **kw)

def rows(root, stage): return [json.loads(l) for l in (Path(root) / "stages" / f"{stage}.jsonl").read_text().splitlines()]

def decisions(root): return {(r["instance_id"], d["case_id"]): d for r in rows(root, "4_validate") for d in r["decisions"]}

def test_paper_recipe_is_the_default_and_builds_what_the_paper_builds(tmp_path):
    assert GenConfig().recipe == "paper"
    seen = []
    def spy(ms, js):
        seen.append(((js or {}).get("title"), ms[1]["content"]))
        return toy_reply(ms, js)
    res, cm = pgen(tmp_path / "ds", spy)
    ds = load_pace_dataset(tmp_path / "ds")
    assert len(ds.queries) == 12 and len({(q.instance_id, q.situation_type, q.label) for q in ds.queries}) == 12
    titles = [t for t, _ in seen]
    assert titles.count("CaseSet") == 2 and titles.count("SetReview") == 2   # one set and one review per persona
    assert "CaseDraft" not in titles and "Everyday" not in titles and "NearMisses" not in titles
    for q in ds.queries:   # every atom of the gold context is gold, and only those
        mine = [f.doc_id for f in ds.kb[q.instance_id] if q.meta["case_id"] in f.meta["cases"]]
        assert 2 <= len(q.gold_doc_ids) <= 5 and sorted(q.gold_doc_ids) == sorted(mine)
    assert {f.meta["origin"] for kb in ds.kb.values() for f in kb} == {"gold", "distractor"}   # no profile facts, no filler
    prof = {r["instance_id"]: r for r in rows(tmp_path / "ds", "2_profile")}
    assert [a["seed_id"] for a in prof["gen-p01"]["alters"]] == ["p02", "p03"]   # alters from the next seed personas
    assert [a["seed_id"] for a in prof["gen-p02"]["alters"]] == ["p03", "p04"]
    alters_prompt = next(u for t, u in seen if t == "PaperAlters")
    assert "Seed of person 1: " + load_personas("2")[1].persona in alters_prompt
    set_prompt = next(u for t, u in seen if t == "CaseSet")
    assert "knows:" in set_prompt and "Technology:" in set_prompt   # knowledge bridges and technology reach the set
    v = verify_dataset(tmp_path / "ds")
    assert v["errors"] == 0, [f for q in v["queries"] for f in q["findings"]]

def _first_set_case(u, cell):
    plan = re.findall(r"^Case \d+: (\w+) / (\w+) / involves (.+?) / asked on \w+ (\S+)$", u, re.M)
    return next(k for k, p in enumerate(plan) if p[:2] == cell)

def _bad_set(change):
    "toy_reply, but the case set is changed by change(cases, user prompt); the validator keeps everything."
    def respond(ms, js):
        title, u = (js or {}).get("title"), ms[1]["content"]
        out = json.loads(toy_reply(ms, js))
        if title == "CaseSet": change(out["cases"], u)
        return json.dumps(out)
    return respond

def test_the_set_pass_drops_a_duplicate_driver_keeping_the_better_scored_case(tmp_path):
    def twins(cases, u):
        a, b = _first_set_case(u, ("personal", "conflict")), _first_set_case(u, ("temporal", "non_conflict"))
        cases[b]["driver"] = cases[a]["driver"].replace("severe ", "serious ")   # the same hidden reason, reworded
    def scores(ms, js):
        out = json.loads(_bad_set(twins)(ms, js))
        if (js or {}).get("title") == "SetReview":   # the later case scores higher: it must be the one kept
            for r in out["reviews"]: r["score"] = 5 if r["case"] == 2 else 9
        return json.dumps(out)
    pgen(tmp_path / "ds", scores, personas="1")
    d = decisions(tmp_path / "ds")
    assert d[("gen-p01", "T-N1")]["action"] == "drop" and d[("gen-p01", "T-N1")]["reason"] == "duplicate_driver"
    assert d[("gen-p01", "T-N1")]["duplicate_of"] == "P-C1" and d[("gen-p01", "P-C1")]["action"] == "keep"
    assert json.loads((tmp_path / "ds" / "report.json").read_text())["validation"]["dropped"] == {"duplicate_driver": 1}

def test_a_closure_only_state_case_is_rewritten_with_its_problem_or_dropped(tmp_path):
    def shut(cases, u):
        k = _first_set_case(u, ("state", "conflict"))
        cases[k]["context"] = "Rocodromo Roma is closed all week for a private event."
        cases[k]["driver"] = "the climbing gym is closed"
    asked = []
    def respond(ms, js):
        if (js or {}).get("title") == "SetCase": asked.append(ms[1]["content"])
        return _bad_set(shut)(ms, js)
    pgen(tmp_path / "a", respond, personas="1")
    d = decisions(tmp_path / "a")[("gen-p01", "S-C1")]
    assert d["verdict"] == "rewrite" and d["problems"][0] == "state_closure_only" and d["action"] == "rewrite"
    assert len(asked) == 1 and "Primary problem: the only reason is a closure" in asked[0]
    q = next(q for q in load_pace_dataset(tmp_path / "a").queries if q.meta["case_id"] == "S-C1")
    assert "Resurfacing works" in q.context                              # the repaired case, not the closure
    def stubborn(ms, js):                                                # a rewrite that closes the gym again
        out = json.loads(respond(ms, js))
        if (js or {}).get("title") == "SetCase": out["context"] = "Rocodromo Roma is shut for the whole month."
        return json.dumps(out)
    pgen(tmp_path / "b", stubborn, personas="1")
    d = decisions(tmp_path / "b")[("gen-p01", "S-C1")]
    assert (d["action"], d["reason"], d["rounds"]) == ("drop", "state_closure_only", PAPER.max_rewrites)

def test_a_request_whose_date_resolves_into_the_past_is_rewritten_and_the_validator_sees_dates_resolved(tmp_path):
    def yesterday(cases, u):
        k = _first_set_case(u, ("temporal", "conflict"))
        cases[k]["query"] = "Book me the evening yoga class at Casa Prana yesterday."
    seen = []
    def respond(ms, js):
        if (js or {}).get("title") in ("SetReview", "SetCase"): seen.append(ms[1]["content"])
        return _bad_set(yesterday)(ms, js)
    pgen(tmp_path / "ds", respond, personas="1")
    ref = next(c for c in rows(tmp_path / "ds", "3_cases")[0]["cases"] if c["case_id"] == "T-C1")["ref_date"]
    before = (dt.date.fromisoformat(ref) - dt.timedelta(1)).isoformat()
    assert "yesterday = " in seen[0] and before in seen[0]              # resolved before the validator reads it
    d = decisions(tmp_path / "ds")[("gen-p01", "T-C1")]
    assert d["problems"][0] == "request_in_past" and d["action"] == "rewrite"
    assert "before the request date" in seen[1]
    q = next(q for q in load_pace_dataset(tmp_path / "ds").queries if q.meta["case_id"] == "T-C1")
    assert "yesterday" not in q.query and all(x["date"] >= ref for x in paper.resolve_dates(q.query, ref))

def test_a_distractor_atom_that_carries_a_hidden_reason_never_reaches_the_kb(tmp_path):
    def leaky(ms, js):
        out = json.loads(toy_reply(ms, js))
        if (js or {}).get("title") == "DistractorSet":
            out["contexts"][0] = ("Sara Kim mentioned that Valeria Ruiz has a severe peanut allergy. "
                                  "Sara Kim buys bread at Panaderia Rosetta on Saturdays.")
        return json.dumps(out)
    pgen(tmp_path / "ds", leaky, personas="1")
    ds = load_pace_dataset(tmp_path / "ds")
    assert not [f.text for f in ds.kb["gen-p01"] if f.meta["origin"] == "distractor" and "peanut" in f.text]
    assert any("Panaderia Rosetta" in f.text for f in ds.kb["gen-p01"])   # the harmless atom of that context stays
    assert rows(tmp_path / "ds", "6_atomize")[0]["dropped"]["carries_decision"] >= 1

def test_a_validator_drop_and_a_missing_case_are_counted(tmp_path):
    def short(ms, js):
        out = json.loads(toy_reply(ms, js))
        t = (js or {}).get("title")
        if t == "CaseSet": out["cases"] = out["cases"][:5]
        if t == "SetReview":
            out["reviews"][0].update(verdict="drop", reason="no real hidden reason")
            out["reviews"][1].update(verdict="rewrite", reason="the query sounds like a form")
        if t == "SetCase": asked.append(ms[1]["content"])
        return json.dumps(out)
    asked = []
    pgen(tmp_path / "ds", short, personas="1")
    d = decisions(tmp_path / "ds")
    assert d[("gen-p01", "T-C1")]["reason"] == "validator" and d[("gen-p01", "S-N1")]["reason"] == "not_written"
    assert d[("gen-p01", "T-N1")]["action"] == "rewrite" and d[("gen-p01", "T-N1")]["problems"] == ["validator"]
    assert len(asked) == 1 and "Primary problem: the query sounds like a form" in asked[0]
    v = json.loads((tmp_path / "ds" / "report.json").read_text())["validation"]
    assert v["actions"] == {"drop": 2, "keep": 3, "rewrite": 1} and v["rewrite_reasons"] == {"validator": 1}

@pytest.mark.parametrize("workers", [8])
def test_paper_recipe_same_folder_at_1_and_8_workers_and_after_a_kill(tmp_path, workers):
    _, full = pgen(tmp_path / "one", cache=tmp_path / "one.sqlite")   # identical prompts are asked once
    pgen(tmp_path / "many", workers=workers)
    assert stage_files(tmp_path / "many") == stage_files(tmp_path / "one")
    assert dataset_files(tmp_path / "many") == dataset_files(tmp_path / "one")
    for die_at in (3, 9, 14):                                             # in stages 2, 4 and 6
        n = [0]
        def dies(ms, js):
            n[0] += 1
            if n[0] == die_at: raise KeyboardInterrupt
            return toy_reply(ms, js)
        b = tmp_path / f"b{die_at}"
        with pytest.raises(KeyboardInterrupt): pgen(b, dies, cache=tmp_path / f"b{die_at}.sqlite")
        res, cm = pgen(b, cache=tmp_path / f"b{die_at}.sqlite")
        assert cm.n_calls == full.n_calls - (die_at - 1)
        assert dataset_files(b) == dataset_files(tmp_path / "one") and stage_files(b) == stage_files(tmp_path / "one")

def test_cli_generate_uses_the_paper_recipe_and_its_help_comes_from_the_job(tmp_path, monkeypatch, capsys):
    import pace.llm
    monkeypatch.setattr(pace.llm, "as_chat_model", lambda spec, cache, **kw: toy_chat(cache=cache))
    with pytest.raises(SystemExit): main(["generate", "--help"])
    h = capsys.readouterr().out
    for opt in ("--out", "--personas", "--chat", "--instances", "--cases-per-cell", "--facts", "--seed", "--recipe",
                "--embedder", "--cache", "--set", "--card-note", "--stop-after", "--workers", "--max-rps",
                "--retry-failed", "--shard", "--no-progress"):
        assert opt in h, opt
    out = tmp_path / "ds"
    assert main(["generate", "--out", str(out), "--personas", "2", "--chat", "fake:toy", "--cases-per-cell", "1",
                 "--facts", "40", "--embedder", "hash:hash", "--no-progress"]) == 0
    man = json.loads((out / "generate.json").read_text())
    assert man["settings"]["config"]["recipe"] == "paper" and "gen_paper.SET_SYSTEM" in man["settings"]["prompts"]
    assert "--recipe paper" in man["command"]
    capsys.readouterr()
    assert main(["data", "verify", str(out)]) == 0 and "0 errors" in capsys.readouterr().out

def test_a_pace_recipe_folder_keeps_its_settings_and_rebuilds(tmp_path):
    gen(tmp_path / "ds", personas="1")
    conf = json.loads((tmp_path / "ds" / "generate.json").read_text())["settings"]["config"]
    assert not set(conf) & {"recipe", "temporal_form", "distractor_contexts", "distractors_per_call"}
    assert GenConfig.of_settings(conf).recipe == "pace"
    before = dataset_files(tmp_path / "ds")
    rebuild_outputs(tmp_path / "ds")
    assert dataset_files(tmp_path / "ds") == before

# one test per rule of the paper's prompts (issue 33, point 8): the rule is in the prompt that needs it
RULES = [
    ("SET_SYSTEM", "It does not restate or paraphrase the query"),                       # no restating
    ("VALIDATOR_SYSTEM", "the context restates the query"),
    ("SET_SYSTEM", "No shorthand and no vague references"),                                # no shorthand, vague refs
    ("DISTRACTOR_SYSTEM", "no shorthand, no vague references"),
    ("SET_SYSTEM", "Vary the wording across cases"),                                       # lexical variation
    ("SET_SYSTEM", "mix fine details (a time, an amount) with broader ones"),              # granularity
    ("PAPER_ALTERS_SYSTEM", "ego_knows: 1 to 3 knowledge bridges"),                        # knowledge bridges
    ("SET_SYSTEM", "never knowingly asks for something that breaks a stable constraint of their own"),  # ego plausibility
    ("VALIDATOR_SYSTEM", "knowingly asks for something that breaks a stable constraint of their own"),
    ("DISTRACTOR_SYSTEM", "mix the kinds of anchor across passages"),                      # temporal anchors
    ("PAPER_EGO_SYSTEM", "health_conditions may not be empty"),                            # health section
    ("PAPER_EGO_SYSTEM", "technology may not be empty"),                                   # technology section
    ("VALIDATOR_SYSTEM", "a date of the request falls before the request date (the dates are resolved in brackets)"),
    ("SET_SYSTEM", "A plain closure, outage, sold-out item or outright refusal of access may never be the only reason"),
    ("SET_SYSTEM", "a matter of situational fit, not of calendar arithmetic or a flat impossibility"),
    ("SET_SYSTEM", "No two cases may share a driver"),
    ("REWRITE_SYSTEM", "keep the case's core idea"),
    ("ATOMIZE_SYSTEM", "Write 2 to 5 facts"),
    ("DISTRACTOR_SYSTEM", "compatible with every case of the scenario"),
]

@pytest.mark.parametrize("const,phrase", RULES)
def test_each_rule_of_the_papers_prompts_is_in_its_prompt(const, phrase):
    assert phrase in getattr(paper, const)

def test_the_profile_rules_are_enforced_by_the_schema_and_bridges_reach_the_prompts():
    from pace.gen.profile import toy_ego, toy_alters
    ego = dict(toy_ego(), technology=["Pixel 8 with Google Calendar"])
    paper.PaperEgo.model_validate(ego)
    for k in ("health_conditions", "technology"):
        with pytest.raises(Exception): paper.PaperEgo.model_validate(dict(ego, **{k: []}))
    with pytest.raises(Exception): paper.PaperAlter.model_validate(dict(toy_alters()[0], ego_knows=[]))
    inst = dict(instance_id="gen-x", ego=ego, alters=[dict(toy_alters()[0], ego_knows=["Diego told Ana at lunch"])],
                timeline=dict(window_start="2026-02-18", ref_date="2026-03-04", window_end="2026-04-15"),
                reference_dates=["2026-03-04"])
    u = paper.set_messages(inst, paper.set_plan(inst, PAPER), PAPER)[1]["content"]
    assert "Ana Ortega knows: Diego told Ana at lunch" in u and "Technology: Pixel 8 with Google Calendar" in u

def test_the_timed_temporal_form_is_a_named_option_that_asks_for_and_checks_times(tmp_path):
    seen = []
    def respond(ms, js):
        t = (js or {}).get("title")
        if t in ("CaseSet", "SetCase"): seen.append((t, ms[0]["content"], ms[1]["content"]))
        return toy_reply(ms, js)
    pgen(tmp_path / "fit", respond, personas="1")
    assert "are timed" not in seen[0][1] and "situational fit" in seen[0][1]
    seen.clear()
    pgen(tmp_path / "timed", respond, personas="1", cfg=PAPER.model_copy(update=dict(temporal_form="timed")))
    assert "Temporal cases of this set are timed" in seen[0][1]
    d = decisions(tmp_path / "timed")                     # the toy's T-N1 context states no clock time or minutes
    assert d[("gen-p01", "T-N1")]["problems"][0] == "temporal_without_times"
    assert d[("gen-p01", "T-C1")]["problems"] == []      # "from 13:00 until 19:30"
