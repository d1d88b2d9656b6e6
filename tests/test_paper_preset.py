"""`--preset paper`: each rule of the prompts in the authors' released code (p2chp2t/PACEMAKER: `graph_agent.py`'s
planner and filter, `query_module.py`'s view generator, `answer_module.py`, `judge_module.py`), listed here with the
phrase or field of the preset's prompt (this project's words) that carries it; the project's default prompts
untouched; and the preset's behaviour against scripted models that return invalid ids, repeats, too few ids, junk
and a failed post-hop call, next to the default behaviour on the same replies."""
import json, re
from pathlib import Path
import pytest
from pace.llm import Cached
from pace.testing import ScriptedChat, ToyIndex
from pace.methods.agents import (RELEASE_PROMPTS, ReleasePlan, Planner, ViewGenerator, EvidenceFilter,
                                 AnswerGenerator)
from pace.methods.pipeline import PaceMaker, PaceMakerConfig, RELEASE_SETTINGS
from pace.eval.judge import PAPER_PROMPTS, bare_label_messages, judge_answer
from pace.eval.run import RunConfig, prompt_hashes

Q, DATE = "Book me a table at Harbour Kitchen with Priya this Friday evening.", "2026-04-14"
PLAN = ReleasePlan(conflict_dimensions=[dict(dimension="Priya's diet", description="Priya may not eat there.",
                                             key_anchors=["Priya"])], risk_summary="Check Priya's food needs.")
CANDS = [(f"d{i}", f"fact {i} about Priya") for i in range(12)]

def text(ms): return "\n".join(m["content"] for m in ms)

# (rule of the authors' prompt, the phrases of the preset's prompt that carry it)
PLANNER_RULES = [
    ("identify retrieval directions that uncover evidence for later conflict reasoning", ["directions of search", "decide whether the request can go ahead"]),
    ("directions: schedules, timing, routines, prior commitments", ["schedules, timing, recurring routines or earlier commitments"]),
    ("directions: people, relationships, coordination, availability", ["the people involved, their relationships, their availability"]),
    ("directions: locations, transportation, access, travel", ["places, travel, transport or access"]),
    ("directions: preferences, sensitivities, habits, behavioural tendencies", ["preferences, sensitivities, habits or typical behaviour"]),
    ("directions: physical state, health, mobility, energy", ["health, mobility, energy or other physical limits"]),
    ("directions: resources, reservations, permissions, preparation", ["resources, bookings, permissions or preparation"]),
    ("directions: information that interprets ambiguous parts of the request", ["makes a vague or unstated part of the request concrete"]),
    ("useful directions need not imply a conflict; indirect evidence counts", ["does not have to predict a problem", "partial or indirect evidence"]),
    ("be selective; avoid generic directions", ["Be selective", "leave out generic ones"]),
    ("select only 1 to 3 directions, one if only one applies", ["Give 1 to 3 directions", "give one"]),
    ("each direction grounded in something specific from the request", ["Ground every direction in something specific"]),
    ("no speculative directions", ["Leave out speculative directions"]),
    ("include directions that support feasibility as well as constraints", ["confirm the request is feasible"]),
    ("key_anchors: exact terms from the request, not paraphrases", ["key_anchors: the exact words of the request", "not paraphrases"]),
    ("JSON only, no explanation, no markdown fences", ["Answer with JSON only, no explanation and no code fence"]),
    ("output: conflict_dimensions [dimension, description, key_anchors], risk_summary",
     ['"conflict_dimensions"', '"dimension"', '"description"', '"key_anchors"', '"risk_summary"']),
    ("the description is one concrete sentence on why the direction helps", ["one concrete sentence on why this direction helps"]),
    ("the request and the reference date are given", [f"Request: {Q}", f"Reference date: {DATE}"]),
]
VIEWS_RULES = [
    ("system: a reformulation assistant that returns JSON with key 'counter'", ['JSON only, holding the one key "counter"']),
    ("return JSON with exactly one field 'counter'", ['exactly one field, "counter"']),
    ("the reference date is given", [f"The reference date is {DATE}."]),
    ("relative temporal expressions are read from the reference date", ["Read relative dates in the request", "this Wednesday, next Friday, this weekend"]),
    ("no explanation of the temporal resolution", ["do not explain how you read them"]),
    ("the conflict analysis: each dimension with its description and anchors", ["[Priya's diet] Priya may not eat there. (key anchors: Priya)"]),
    ("the risk summary", ["Risk summary: Check Priya's food needs."]),
    ("counter queries find information that could block, constrain or conflict", ["could block, limit or clash with the request"]),
    ("not simple paraphrases of the request", ["They are not paraphrases of the request"]),
    ("conflict-bearing factors: schedule, availability, timing, commitments, access, coordination",
     ["schedules, availability, timing, commitments, access limits, coordination needs"]),
    ("target the analysis's dimensions and anchors, each query distinct", ["aim the queries at its directions and anchors", "one distinct, targeted query each"]),
    ("avoid near-duplicate counter queries", ["Do not write near-duplicate queries"]),
    ("valid JSON only, no explanations", ["JSON only, no explanation."]),
    ("'counter': a list of exactly 3 strings", ['"counter": a list of exactly 3 strings']),
    ("the request", [f"Request: {Q}"]),
]
FILTER_RULES = [
    ("an evidence selection agent for conflict-aware personal assistant retrieval", ["You select evidence for a personal assistant"]),
    ("the candidates come from retrieval and graph expansion", ["found by retrieval and by following links between documents"]),
    ("not the final decision: select what helps decide whether the request can be carried out", ["You do not decide the request", "can or cannot be carried out"]),
    ("a document may be useful without an explicit conflict, partial, habits..., only when combined",
     ["states no conflict", "gives only part of the picture", "habits, routines, preferences, schedules, relationships, places or behaviour", "only together with other documents"]),
    ("keep documents that may become evidence later", ["Keep what may turn out to be evidence later"]),
    ("output: {'selected_doc_ids': [...]}", ['{"selected_doc_ids": ["doc_id_1", "doc_id_2", ...]}']),
    ("priority 1: constraints, commitments, obligations, availability, schedules, routines, resources", ["1. constraints, commitments, obligations, availability, schedules, routines or limited resources"]),
    ("priority 2: preferences, behavioural tendencies, habits, sensitivities, compatibility", ["2. preferences, habits, sensitivities, typical behaviour or compatibility"]),
    ("priority 3: people, places, timing, recurring activities, dependencies, relationships", ["3. documents that make the people, places, times, recurring activities, dependencies or relationships"]),
    ("priority 4: bridge evidence", ["4. bridge documents"]),
    ("select exactly N doc_ids if at least N candidates are provided", ["Select exactly 10 doc_ids when at least 10 candidates are given"]),
    ("order from most to least useful", ["Order them from most to least useful"]),
    ("prefer person-, time-, place- or state-specific documents", ["Prefer concrete documents about a specific person, time, place or state"]),
    ("prefer decision-relevant evidence over topical similarity", ["Prefer evidence that could decide the request over documents that are merely on the same topic"]),
    ("do not require proof of feasibility or conflict", ["does not have to prove feasibility or a conflict"]),
    ("avoid purely topical documents", ["Leave out documents that are only topical"]),
    ("only doc_ids from the provided list", ["Use only doc_ids from the list below"]),
    ("JSON only, no explanation, no markdown fences", ["JSON only, no explanation, no code fence"]),
    ("the request, then the candidates numbered with their doc_id and the total", [f"Request:\n{Q}", "(12 in all)", "[1] (doc_id=d0)\nfact 0 about Priya", "[12] (doc_id=d11)"]),
    ("closing: select the top N most useful as evidence", ["Select the 10 doc_ids most useful as evidence"]),
]
ANSWER_RULES = [
    ("the assistant of the persona, by name", ["You are the personal assistant of Priya Shah."]),
    ("today's date", [f"Today is {DATE}."]),
    ("the facts are things already known about the persona and their world", ["things you already know about Priya Shah and the world they live in"]),
    ("act in that world, coordinate with people and systems, speak to the persona", ["You can act in that world, deal with the people and systems in it"]),
    ("decide whether the request should be carried out", ["decide whether the request should be carried out"]),
    ("2 to 4 sentences that state can/cannot and why from the facts", ["Write 2 to 4 sentences", "can or cannot be carried out, and why"]),
    ("explain only from the facts and the query", ["Give the reason from the facts and the request alone"]),
    ("speak directly as the assistant", ["Speak to Priya Shah directly"]),
    ("do not mention context, provided information, dataset", ['Never mention "context", "provided information" or "dataset"']),
    ("do not refuse for lack of permission", ["Never decline because you lack permission", "you can take any action"]),
    ("no bullet points, JSON or labels", ["No bullet points, no JSON, no labels"]),
    ("keep to 2-4 sentences", ["Keep to 2 to 4 sentences"]),
    ("the facts one per line, then the request", ["Facts:\nPriya is vegan.\nHarbour Kitchen is closed on Fridays.\n\nRequest:\n" + Q]),
]
JUDGE_RULES = [
    ("system: an evaluation judge that outputs one label only", ["one label and nothing else: PASS, WRONG_RATIONALE or FAIL"]),
    ("the reply is free text stating whether the request can be carried out and why", ["The reply is free text", "whether the user's request can be carried out, and why"]),
    ("two steps in order: decision, then rationale", ["Grade it in two steps, in this order", "Step 1: the decision", "Step 2: the reason (only when the decision is right)"]),
    ("non_conflict: proceed/agree/allow", ['Gold label "non_conflict": a right reply goes ahead, agrees, allows it']),
    ("conflict: refuse/warn/block", ['Gold label "conflict": a right reply refuses, warns, blocks it']),
    ("wrong decision is FAIL; ambiguous decision is FAIL", ["A reply with the wrong decision is FAIL", "leaves unclear whether it goes ahead or refuses is FAIL"]),
    ("compare with the gold rationale; same core reason, wording may differ", ["Compare the reply with the gold rationale", "the core reason must be the same"]),
    ("PASS: right decision, same core reason; minor wording and helpful extras are fine", ["PASS: the decision is right", "extra helpful detail that does not change or bend that reason"]),
    ("WRONG_RATIONALE: misses key evidence, vague, secondary reason, weak, unsupported details",
     ["misses key evidence", "too vague", "secondary reason", "irrelevant or weak", "unsupported details"]),
    ("FAIL: wrong or ambiguous decision, or opposite/unsupported/substantially wrong reason", ["FAIL: the decision is wrong, or unclear", "opposite of the gold rationale, unsupported, or substantially wrong"]),
    ("decision correctness has priority", ["The decision comes first"]),
    ("no exact wording required; no penalty for tone or suggestions", ["Do not ask for exact wording", "conversational tone or helpful suggestions"]),
    ("only one label, no explanation", ["Give one label only", "Give no explanation"]),
    ("sections: gold label, gold rationale, model response, label", ["Gold label:\nconflict", "Gold rationale:\nShe is vegan.", "Reply to grade:\nSure, booked.", "Label:"]),
]

def _rendered():
    return dict(
        planner=text(Planner(prompts="release").messages(Q, DATE)),
        views=text(ViewGenerator(prompts="release", max_counter=3, exact=True).messages(Q, DATE, PLAN)),
        prehop=text(EvidenceFilter(prompts="release").messages(Q, DATE, CANDS, 10)),
        answer=text(AnswerGenerator(prompts="release").messages(Q, DATE, "Priya Shah", ["Priya is vegan.", "Harbour Kitchen is closed on Fridays."])),
        judge=text(bare_label_messages("Sure, booked.", "conflict", "She is vegan.")))

RULES = [("planner", r, p) for r, p in PLANNER_RULES] + [("views", r, p) for r, p in VIEWS_RULES] + \
        [("prehop", r, p) for r, p in FILTER_RULES] + [("answer", r, p) for r, p in ANSWER_RULES] + \
        [("judge", r, p) for r, p in JUDGE_RULES]

@pytest.mark.parametrize("agent,rule,phrases", RULES, ids=[f"{a}: {r[:50]}" for a, r, _ in RULES])
def test_preset_prompt_carries_the_rule(agent, rule, phrases):
    t = _rendered()[agent]
    for p in phrases: assert p in t, f"{agent}: rule {rule!r} needs {p!r}"

def test_posthop_filter_is_the_same_prompt_over_the_whole_pool():
    "The release's post-hop filter is the pre-hop agent again, shown the whole pool in one call and asked for n_final."
    pool = [(f"p{i}", f"pool fact {i}") for i in range(150)]
    cm = ScriptedChat({"posthop": lambda ms: {"selected_doc_ids": ["p149", "p3"]}}, context_window=2048)
    flt = EvidenceFilter(prompts="release", constrained_ids=False, dedupe=False, pad=False)
    got, recs, rep = flt(cm, Q, DATE, pool, 10, stage="posthop", chunked=False)
    sent = cm.calls("posthop")
    assert len(sent) == 1 and "(150 in all)" in sent[0]["messages"][0]["content"] and "[150] (doc_id=p149)" in sent[0]["messages"][0]["content"]
    assert text(sent[0]["messages"]) == text(EvidenceFilter(prompts="release").messages(Q, DATE, pool, 10))
    assert got == ["p149", "p3"] and rep.n_padded == 0

def test_the_release_planner_and_views_without_the_projects_cleaning():
    "No anchor check, no de-duplication of counter queries: as the release."
    rel = {"conflict_dimensions": [{"dimension": "d", "description": "why", "key_anchors": ["Saturday"]}], "risk_summary": "r"}
    plan, _ = Planner(prompts="release", check_anchors=False)(ScriptedChat({"planner": rel}), Q, DATE)
    assert plan.directions[0].key_anchors == ["Saturday"]              # not in the request, kept
    assert Planner(prompts="release")(ScriptedChat({"planner": rel}), Q, DATE)[0] is None   # the check drops it
    reply = {"counter": ["Priya Friday", "priya friday?", Q]}
    assert ViewGenerator(prompts="release", clean=False)(ScriptedChat({"views": reply}), Q, DATE, plan)[0] == ["Priya Friday", "priya friday?", Q]
    assert ViewGenerator()(ScriptedChat({"views": reply}), Q, DATE, plan)[0] == ["Priya Friday"]   # the default cleans

def test_default_prompts_are_untouched():
    "The project's prompts hash as in the committed runs' run.json, and the release's prompts are not among them."
    committed = json.loads(Path("results/main_results/mini-qwen2.5-0.5b-n6/run.json").read_text())["settings"]["prompts"]
    assert prompt_hashes() == committed
    assert set(RELEASE_PROMPTS) and not any(v in committed for v in RELEASE_PROMPTS)
    assert Planner().messages(Q, DATE) != Planner(prompts="release").messages(Q, DATE)
    assert [m["role"] for m in AnswerGenerator().messages(Q, DATE, "P", ["f"])] == ["system", "user"]

# ---- behaviour under the preset, against scripted models, next to the defaults

def ids_shown(ms):
    "Doc ids of a filter prompt, in either listing ('[id] text' or '[k] (doc_id=id)')."
    t = ms[-1]["content"]
    return re.findall(r"\(doc_id=([^)]+)\)", t) or [l.split("]")[0][1:] for l in t.splitlines() if l.startswith("[")]

FILTER_CASES = {   # name -> (reply, what the release keeps, what the defaults keep)
    "invalid ids": (lambda ms: {"selected_doc_ids": ["zz1", ids_shown(ms)[-1], "zz2"]}, ["d11"], ["d0", "d1", "d2"]),
    "repeats": (lambda ms: {"selected_doc_ids": [ids_shown(ms)[-1]] * 3}, ["d11", "d11", "d11"], ["d11", "d0", "d1"]),
    "too few": (lambda ms: {"selected_doc_ids": [ids_shown(ms)[-1]]}, ["d11"], ["d11", "d0", "d1"]),
    "junk": (lambda ms: "Here are the ids: d3 and d5", ["d0", "d1", "d2"], ["d0", "d1", "d2"]),
    "no id shown": (lambda ms: {"selected_doc_ids": ["zz1"]}, ["d0", "d1", "d2"], ["d0", "d1", "d2"]),
    "failed call": (RuntimeError("server down"), ["d0", "d1", "d2"], ["d0", "d1", "d2"]),
}
RELEASE = dict(prompts="release", constrained_ids=False, dedupe=False, pad=False)   # the filter's settings; chunked=False per call

@pytest.mark.parametrize("case", FILTER_CASES)
def test_filter_replies_under_the_preset_and_the_defaults(case):
    reply, want_release, want_default = FILTER_CASES[case]
    got, _, rep = EvidenceFilter(**RELEASE)(ScriptedChat({"prehop": reply}), Q, DATE, CANDS, 3, stage="prehop", chunked=False)
    assert got == want_release and rep.n_padded == 0
    got, _, rep = EvidenceFilter()(ScriptedChat({"prehop": reply}), Q, DATE, CANDS, 3, stage="prehop")
    assert got == want_default

def test_pipeline_under_the_preset_failed_posthop_keeps_the_first_of_the_pool():
    facts = [type("F", (), dict(doc_id=f"f{i:02d}", text=t)) for i, t in enumerate(
        ["Priya is vegan", "Harbour Kitchen closes on Fridays", "Priya works late on Fridays", "Harbour Kitchen has a vegan menu",
         "Priya cycles", "the harbour is busy on Fridays", "Priya's sister visits on Friday", "Friday evening rain",
         "Harbour Kitchen takes bookings by phone", "Priya likes jazz"])]
    toy = ToyIndex(facts)
    inst = type("I", (), dict(instance_id="toy", ego={"name": "Priya"}, alters=[]))()
    qry = type("Q", (), dict(query_id="q1", query=Q, ref_date=DATE))()
    script = {"planner": {"conflict_dimensions": [{"dimension": "d", "description": "w", "key_anchors": ["Priya"]}], "risk_summary": "r"},
              "views": {"counter": ["Priya Friday"]},
              "prehop": lambda ms: {"selected_doc_ids": [ids_shown(ms)[1], "nope", ids_shown(ms)[1]]},
              "posthop": RuntimeError("context overflow"), "answer": "I can't. I can't."}
    base = PaceMakerConfig(n_seed=6, n_filter=3, hops=2, m=2, n_final=2)
    cm = ScriptedChat(script)
    tr = PaceMaker(cm, toy, base.model_copy(update=RELEASE_SETTINGS)).run(qry, inst)
    second = tr.seed_candidates[1]
    assert tr.seeds == [second, second]                                  # invalid dropped, repeat kept, no padding
    assert len(tr.pool) > 2 and tr.final_ids == [p.doc_id for p in tr.pool][:2]   # the failed one call: the pool's first n_final
    assert len(cm.calls("posthop")) == 1 and tr.answer == "I can't. I can't."
    dflt = PaceMaker(ScriptedChat(script), toy, base).run(qry, inst)
    assert dflt.seeds == dflt.seed_candidates[:3] and dflt.answer == "I can't."   # schema failure: fallback; tidied

def test_judge_bare_labels_and_no_request():
    for reply, label in (("PASS.", "FAIL"), ("Label: PASS", "FAIL"), ("pass", "PASS"), ("WRONG_RATIONALE", "WRONG_RATIONALE")):
        cm = ScriptedChat({"judge": reply})
        v, _ = judge_answer(cm, Q, "Sure, booked.", "conflict", "She is vegan.", mode=RunConfig(preset="paper").judge.mode)
        assert v.label == label, reply
        assert Q not in text(cm.calls("judge")[0]["messages"]) and "Harbour Kitchen" not in text(cm.calls("judge")[0]["messages"])
    assert PAPER_PROMPTS["system"].strip().endswith("PASS, WRONG_RATIONALE or FAIL.")

# ---- the envelope around each call: caps, re-asks, answer facts, repeats (issue 43)

from pace.testing import FakeChat
from pace.eval.run import run_experiment
from pace.eval.evaluate import read_jsonl

def release_script(junk_planner=True):
    "A model that answers the release's prompts; its planner writes prose instead of JSON (`junk_planner`)."
    def reply(ms, js):
        t = ms[-1]["content"]
        if "conflict_dimensions" in json.dumps(js or {}) or "directions" in json.dumps(js or {}):
            return "I think the schedule matters here." if junk_planner else json.dumps(
                {"directions": [{"dimension": "d", "key_anchors": [t.split()[0]]}]})
        if js and "counter" in json.dumps(js): return json.dumps({"counter": ["evening plans"]})
        if js and "selected_doc_ids" in json.dumps(js):
            ids = ids_shown(ms)
            return json.dumps({"selected_doc_ids": [ids[0], ids[0]] + ids[1:4]})   # a repeat
        if js and "decision" in json.dumps(js): return json.dumps({"decision": "decline", "reason": "r"})
        if js and "rationale" in json.dumps(js): return json.dumps({"rationale": "same_core_reason", "reason": "r"})
        return "PASS" if "rationale" in t.lower() or "label" in t.lower() else "I would not book that."
    return reply

class Logged(FakeChat):
    "A `FakeChat` that logs (stage, max_tokens, schema given) of every request that reaches it."
    def __init__(self, respond): super().__init__(respond); self.seen = []
    def reply(self, r):
        self.seen.append((r["stage"], r["max_tokens"], r["schema"] is not None, r.get("parse_retries")))
        return super().reply(r)

def run_tiny(tmp_path, name, **kw):
    cm = Logged(release_script())
    out = run_experiment(dataset="tests/fixtures/tiny", methods=["oracle", "pacemaker"], embedder="hash:hash",
                         out_dir=tmp_path, limit=2, progress=False, chat=cm, name=name, cache=False, **kw)
    return cm, out, read_jsonl(out["results"]), json.loads((out["run_dir"] / "run.json").read_text())["settings"]

def test_preset_sends_no_caps_and_never_asks_again(tmp_path):
    cm, out, rows, s = run_tiny(tmp_path, "paper", preset="paper")
    caps = {st: {mt for x, mt, *_ in cm.seen if x == st} for st, *_ in cm.seen}
    assert caps and all(v == {None} for v in caps.values()), caps          # no stage sends a cap, judge included
    planner = [x for x in cm.seen if x[0] == "planner"]
    assert len(planner) == 2 and all(x[3] == 0 for x in planner)           # one attempt per query, no correction
    pm = [r for r in rows if r["method"] == "pacemaker"]
    assert all(c["fallback"] == "no plan" for r in pm for c in r["trace"]["calls"] if c["stage"] == "planner")
    assert s["model_calls"] == {"parse_retries": 0, "grow_context": True} and s["judge_max_tokens"] is None
    assert s["pacemaker"]["answer_max_facts"] == 10 and s["pacemaker"]["pool_repeats"] is True

def test_defaults_keep_their_caps_and_reasks(tmp_path):
    cm, out, rows, s = run_tiny(tmp_path, "pace")
    planner = [x for x in cm.seen if x[0] == "planner"]
    assert len(planner) == 2 * 3 and all(x[1] == 200 and x[3] is None for x in planner)   # asked again twice
    assert {mt for st, mt, *_ in cm.seen if st in ("prehop", "posthop")} == {160}
    assert "model_calls" not in s and s["judge_max_tokens"] == 160

def test_preset_answers_from_ten_facts_and_keeps_repeated_seeds_in_the_pool():
    facts = [type("F", (), dict(doc_id=f"f{i:02d}", text=f"Priya fact {i} about Friday")) for i in range(30)]
    toy, qry = ToyIndex(facts), type("Q", (), dict(query_id="q1", query=Q, ref_date=DATE))()
    inst = type("I", (), dict(instance_id="toy", ego={"name": "Priya"}, alters=[]))()
    seen = []
    script = {"planner": PLAN.model_dump(), "views": {"counter": ["Priya Friday"]},
              "prehop": lambda ms: {"selected_doc_ids": [ids_shown(ms)[0]] * 2 + ids_shown(ms)[1:9]},
              "posthop": lambda ms: {"selected_doc_ids": ids_shown(ms)[:12]},
              "answer": lambda ms: seen.append(ms[-1]["content"]) or "No."}
    cfg = RunConfig(preset="paper").pacemaker.model_copy(update=dict(n_filter=5))   # 10 fused, 5 seeds
    tr = PaceMaker(ScriptedChat(script), toy, cfg).run(qry, inst)
    pool = [p.doc_id for p in tr.pool]
    assert pool[0] == pool[1] == tr.seeds[0]                      # the repeat stays in the pool
    assert len(tr.final_ids) == 10 and tr.answer_facts_used == 10
    assert sum("Priya fact" in l for l in seen[0].splitlines()) == 10
    dflt = PaceMaker(ScriptedChat(script), toy, PaceMakerConfig(n_filter=5, dedupe_selection=False)).run(qry, inst)
    assert len({p.doc_id for p in dflt.pool}) == len(dflt.pool)  # the project's pool: each fact once

def test_a_reply_recorded_with_reasks_is_not_reused_without_them(tmp_path):
    "A structured reply obtained after corrections must not answer a run that asks once; text replies are shared."
    from pace.cache import Cache
    sch = {"type": "object", "properties": {"counter": {"type": "array", "items": {"type": "string"}}},
           "required": ["counter"]}
    replies = iter(["not json", '{"counter": ["a"]}'])
    cache = Cache(tmp_path / "c.sqlite")
    patient = Cached(FakeChat(lambda m, js: next(replies)), cache, max_parse_retries=2)
    assert patient.chat(msgs := [{"role": "user", "content": "q"}], schema=sch).ok   # right on the second try
    once = Cached(FakeChat(lambda m, js: "not json"), cache, max_parse_retries=0)
    r = once.chat(msgs, schema=sch)
    assert not r.cached and not r.ok and once.n_calls == 1                        # asked itself, once
    text = Cached(FakeChat(lambda m, js: "never called"), cache, max_parse_retries=0)
    Cached(FakeChat(lambda m, js: "hello"), cache, max_parse_retries=2).chat(msgs, max_tokens=50)
    assert text.chat(msgs, max_tokens=50).cached and text.n_calls == 0             # a text reply is shared

# ---- decoding (issue 43): the release's sampling and JSON mode, as an option the preset leaves off

import gzip
from pace.cache import request_key
from pace.llm import _prepare, schema_info
from pace.eval.judge import JUDGE_MODES

PLAN_JSON = json.dumps({"conflict_dimensions": [{"dimension": "diet", "description": "Priya may not eat there.",
                                                  "key_anchors": ["Priya"]}], "risk_summary": "Priya's food."})

def chatty(ms, body):
    "A reply as a sampled model writes it: a think block with braces, prose before and after the JSON."
    return f"<think>The user asks about {{Friday}}; what matters?</think>\nHere you go:\n{json.dumps(body)}\nHope this helps!"

CHATTY = {   # stage -> reply: every JSON wrapped in a think block, prose or a code fence
    "planner": f"<think>Check {{dates}}.</think> Sure! The plan is {PLAN_JSON} -- done.",
    "views": '```json\n{"counter": ["Priya Friday dinner", "Harbour Kitchen hours"]}\n```\nThese target the conflicts.',
    "prehop": lambda ms: chatty(ms, {"selected_doc_ids": ids_shown(ms)[::-1][:3]}),
    "posthop": lambda ms: chatty(ms, {"selected_doc_ids": ids_shown(ms)[:4]}),
    "answer": "I would not book that: Priya is vegan.",
    "judge": "PASS",
    "judge_decision": lambda ms: chatty(ms, {"decision": "decline", "reason": "it declines"}),
    "judge_rationale": lambda ms: chatty(ms, {"rationale": "same_core_reason", "reason": "same"}),
}

def toy_world(n=30):
    facts = [type("F", (), dict(doc_id=f"f{i:02d}", text=f"Priya fact {i} about Friday")) for i in range(n)]
    qry = type("Q", (), dict(query_id="q1", query=Q, ref_date=DATE))()
    inst = type("I", (), dict(instance_id="toy", ego={"name": "Priya"}, alters=[]))()
    return ToyIndex(facts), qry, inst

PRESET_5 = RunConfig(preset="paper").pacemaker.model_copy(update=dict(n_filter=5))   # 10 fused, 5 seeds

def sent(cm):
    "{stage: the set of (temperature, seed, schema sent, response_format)} of the requests that reached `cm`."
    out = {}
    for c in cm.log: out.setdefault(c["stage"], set()).add((c["temperature"], c["seed"], c["schema"] is not None, c["response_format"]))
    return out

def run_all_stages(cm, cfg):
    "PaceMaker with answers under `cfg`, then each judge mode on its answer: the trace."
    toy, qry, inst = toy_world()
    tr = PaceMaker(cm, toy, cfg.model_copy(update=dict(n_filter=5))).run(qry, inst)   # 10 fused, 5 seeds: both filters call
    for mode in JUDGE_MODES: judge_answer(cm, Q, tr.answer, "conflict", "She is vegan.", mode=mode)
    return tr

def test_release_decoding_sends_what_the_release_sends_at_each_stage():
    "No temperature, no seed; JSON mode without a schema for the views and filters; nothing for the planner, answer and judge."
    cm = ScriptedChat(CHATTY); cm.decoding = "release"
    run_all_stages(cm, RunConfig(preset="paper").pacemaker)
    nothing, json_mode = {(None, None, False, None)}, {(None, None, False, "json_object")}
    assert sent(cm) == {"planner": nothing, "views": json_mode, "prehop": json_mode, "posthop": json_mode,
                        "answer": nothing, "judge": json_mode | nothing,   # paper_json asks JSON; the release's judge (paper) nothing
                        "judge_decision": json_mode, "judge_rationale": json_mode}
    assert [c["response_format"] for c in cm.calls("judge")] == [None, "json_object"]   # JUDGE_MODES: blind, paper, paper_json

def test_greedy_decoding_is_todays_at_each_stage():
    "The default (the preset's too): temperature 0, seed 0, the output's schema for every structured call."
    cm = ScriptedChat({**CHATTY, "planner": json.loads(PLAN_JSON), "views": {"counter": ["Priya Friday dinner"]},
                       "prehop": lambda ms: {"selected_doc_ids": ids_shown(ms)[:3]}, "posthop": lambda ms: {"selected_doc_ids": ids_shown(ms)[:4]},
                       "judge_decision": {"decision": "decline", "reason": "r"}, "judge_rationale": {"rationale": "same_core_reason", "reason": "r"}})
    run_all_stages(cm, RunConfig(preset="paper").pacemaker)
    schema, text = {(0.0, 0, True, None)}, {(0.0, 0, False, None)}
    assert sent(cm) == {"planner": schema, "views": schema, "prehop": schema, "posthop": schema, "answer": text,
                        "judge": text | schema, "judge_decision": schema, "judge_rationale": schema}

def test_release_decoding_reads_replies_as_the_release_does():
    "Think blocks, prose and fences around the JSON: the plan, the views and both filters' picks are the model's, no fallback."
    cm = ScriptedChat(CHATTY); cm.decoding = "release"
    toy, qry, inst = toy_world()
    tr = PaceMaker(cm, toy, PRESET_5).run(qry, inst)
    assert tr.plan is not None and tr.plan.directions[0].key_anchors == ["Priya"] and tr.plan.risk_summary == "Priya's food."
    assert [v.text for v in tr.views if v.kind == "counter"] == ["Priya Friday dinner", "Harbour Kitchen hours"]
    assert all(c.ok and c.fallback is None for c in tr.calls), [(c.stage, c.error, c.fallback) for c in tr.calls]
    assert tr.selection["prehop"].n_chosen == 3 and tr.selection["posthop"].n_chosen == 4
    v, _ = judge_answer(cm, Q, tr.answer, "conflict", "She is vegan.", mode="blind")
    assert (v.decision, v.label) == ("decline", "PASS")                 # the JSON judges read the same way
    # the same replies, asked greedy: a reply is parsed whole (a grammar keeps it to the schema), so these fall back
    greedy = PaceMaker(ScriptedChat(CHATTY), toy, PRESET_5).run(qry, inst)
    assert greedy.plan is None and not [v for v in greedy.views if v.kind == "counter"]

def test_release_decoding_a_reply_without_json_takes_the_release_fallbacks():
    cm = ScriptedChat({**CHATTY, "planner": "I think the schedule matters.", "prehop": "<think>{not json}</think> d01, d02",
                       "views": '["a list", "not an object"]'}); cm.decoding = "release"
    toy, qry, inst = toy_world()
    tr = PaceMaker(cm, toy, PRESET_5).run(qry, inst)
    fb = {c.stage: (c.ok, c.fallback) for c in tr.calls}
    assert fb["planner"] == (False, "no plan") and fb["views"] == (False, "original query only")
    assert fb["prehop"][1] == "first candidates of the chunk, in the order shown"
    assert tr.seeds == tr.seed_candidates[:5]                          # the release's filter fallback: the first N

def test_release_decoding_filters_drop_unknown_ids_even_with_constrained_ids():
    "No schema is sent under 'release', so no grammar keeps the ids to those shown: they are checked after, as the release does."
    cm = ScriptedChat({"prehop": lambda ms: chatty(ms, {"selected_doc_ids": ["zz9", "zz8"]})}); cm.decoding = "release"
    got, recs, rep = EvidenceFilter(pad=False)(cm, Q, DATE, CANDS, 3, stage="prehop")   # constrained_ids=True, the default
    assert recs[0].ok is False and recs[0].error == "no id from the list" and got == ["d0", "d1", "d2"]

def test_greedy_agent_requests_and_cache_keys_are_those_of_the_old_code():
    "Each request an agent builds under the default is the old request, and its key is the old formula's (no new key, no None)."
    seen = []
    class Recording(ScriptedChat):
        def chat(self, messages, **kw): seen.append(dict(messages=messages, **kw)); return super().chat(messages, **kw)
    cm = Recording({**CHATTY, "planner": json.loads(PLAN_JSON), "views": {"counter": ["x"]},
                    "prehop": lambda ms: {"selected_doc_ids": ids_shown(ms)[:3]}, "posthop": lambda ms: {"selected_doc_ids": ids_shown(ms)[:4]},
                    "judge_decision": {"decision": "decline", "reason": "r"}, "judge_rationale": {"rationale": "same_core_reason", "reason": "r"}})
    for cfg in (PaceMakerConfig(), RunConfig(preset="paper").pacemaker): run_all_stages(cm, cfg)
    fp = {"backend": "scripted", "model_id": "scripted"}
    def old_key(r):   # pace.llm._prepare before decodings existed
        return request_key("chat", {"fingerprint": fp, "messages": [{"role": m["role"], "content": m["content"]} for m in r["messages"]],
                                    "schema": schema_info(r.get("schema"))[0], "temperature": float(r.get("temperature", 0.0)),
                                    "max_tokens": r.get("max_tokens", 512), "seed": int(r.get("seed", 0))})
    assert len(seen) >= 16 and {r["stage"] for r in seen} >= {"planner", "views", "prehop", "posthop", "answer", "judge"}
    for r in seen:
        assert set(r) == {"messages", "schema", "stage", "temperature", "max_tokens", "seed"} and (r["temperature"], r["seed"]) == (0.0, 0)
        assert _prepare(r, "x", fp, retries=0 if r["schema"] is None else 2)["key"] == old_key(r)

def test_every_committed_call_keeps_its_cache_key():
    "Each reply and failure in the committed runs' cache exports is found under the key its request gets now."
    n = 0
    for f in sorted(Path("results").rglob("cache.jsonl.gz")):
        for line in gzip.open(f, "rt"):
            e = json.loads(line)
            if e["kind"] not in ("chat", "failure"): continue
            req = dict(e["request"]); fp = req.pop("fingerprint")
            p = _prepare(req, e["stage"], fp, req.pop("parse_retries", 2))
            key = p["key"] if e["kind"] == "chat" else request_key("failure", {"fingerprint": fp, **p["req"]})
            assert key == e["key"], (f, e["stage"]); n += 1
    assert n > 1000

def test_decoding_is_an_explicit_option_recorded_in_run_json(tmp_path):
    "`--decoding release` reaches every model call of a run, judge included; the preset alone keeps greedy; run.json says which."
    def run(name, **kw):
        cm = ScriptedChat({**CHATTY, "prehop": lambda ms: chatty(ms, {"selected_doc_ids": ids_shown(ms)[:3]}),
                           "posthop": lambda ms: chatty(ms, {"selected_doc_ids": ids_shown(ms)[:3]})})
        out = run_experiment(dataset="tests/fixtures/tiny", methods=["bm25", "pacemaker"], embedder="hash:hash", out_dir=tmp_path,
                             limit=1, progress=False, chat=cm, name=name, cache=False, preset="paper", **kw)
        return cm, json.loads((out["run_dir"] / "run.json").read_text())["settings"]
    cm, s = run("release", decoding="release")
    assert {(c["temperature"], c["seed"]) for c in cm.log} == {(None, None)} and {"planner", "views", "answer", "judge"} <= set(sent(cm))
    assert s["model_calls"] == {"parse_retries": 0, "grow_context": True, "decoding": "release"}
    cm, s = run("greedy")
    assert {(c["temperature"], c["seed"]) for c in cm.log} == {(0.0, 0)} and "decoding" not in s["model_calls"]
    assert RunConfig.from_kwargs(decoding="release").models.decoding == "release"
    from pace.data import UsageError
    with pytest.raises(UsageError, match="decoding"): RunConfig.from_kwargs(decoding="sampled")
