"Log-probabilities through pace.llm (`top_logprobs=k`): cached and replayed, asked of OpenAI-compatible servers, computed by llama.cpp in process; pacemaker-score's fallbacks."
import math, types
import pytest
from pace.llm import Cached
import pace.llm
from pace.cache import request_key
from pace.llm import Completion, get_chat_model
from pace.testing import FakeChat
from pace.backends.openai import OpenAIChat
from pace.backends.llamacpp import LlamaCppChat
from tests.test_llm import FakeCompletions, FakeClient, msgs

pytestmark = pytest.mark.usefixtures("models_dir_in_tmp")   # see conftest.py


def test_logprobs_are_cached_and_replayed_and_keys_without_them_do_not_change(tmp_path):
    top = [{"Yes": math.log(.7), "No": math.log(.3)}]
    seen = []
    def answer(m, js): seen.append(m); return Completion(text="Yes", top_logprobs=top)
    path = tmp_path / "c.sqlite"
    live = Cached(FakeChat(answer), path).chat(msgs("fact"), max_tokens=1, top_logprobs=2, stage="score")
    assert live.ok and live.top_logprobs == top and not live.cached
    again = Cached(FakeChat(answer), path).chat(msgs("fact"), max_tokens=1, top_logprobs=2, stage="score")
    assert again.cached and again.top_logprobs == top and len(seen) == 1
    rep = get_chat_model("fake:fake", cache=path, replay=True).chat(msgs("fact"), max_tokens=1, top_logprobs=2, stage="score")
    assert rep.cached and rep.top_logprobs == top
    plain = Cached(FakeChat(answer), path).chat(msgs("fact"), max_tokens=1, stage="score")   # not asked: another request
    assert not plain.cached and len(seen) == 2
    fp = Cached(FakeChat(), False).fingerprint()   # a request without log-probabilities has the key it had before they existed
    old = request_key("chat", {"fingerprint": fp, "messages": msgs("x"), "schema": None, "temperature": 0.0, "max_tokens": 5, "seed": 0})
    assert Cached(FakeChat(), False).chat(msgs("x"), max_tokens=5).key == old


class LogprobCompletions(FakeCompletions):
    "An OpenAI-compatible server that returns log-probabilities when asked (or never, with `give=False`)."
    def __init__(self, give=True): super().__init__(); self.give = give
    def create(self, **kw):
        resp = super().create(**kw)
        if self.give and kw.get("logprobs"):
            alt = [types.SimpleNamespace(token=t, logprob=v) for t, v in (("Yes", -0.2), ("No", -1.7))][:kw["top_logprobs"]]
            tok = types.SimpleNamespace(token="Yes", logprob=-0.2, top_logprobs=alt)
            resp.choices[0].logprobs = types.SimpleNamespace(content=[tok])
        return resp


def test_openai_compatible_servers_are_asked_for_logprobs_and_a_server_without_them_gives_none(tmp_path):
    comp = LogprobCompletions()
    m = Cached(OpenAIChat("qwen", client=FakeClient(comp)), False)
    r = m.chat(msgs("fact"), max_tokens=1, top_logprobs=2)
    assert comp.calls[-1]["logprobs"] is True and comp.calls[-1]["top_logprobs"] == 2
    assert r.top_logprobs == [{"Yes": -0.2, "No": -1.7}]
    m.chat(msgs("other"), max_tokens=1)
    assert "logprobs" not in comp.calls[-1] and "top_logprobs" not in comp.calls[-1]
    none = Cached(OpenAIChat("qwen", client=FakeClient(LogprobCompletions(give=False))), False).chat(msgs("fact"), max_tokens=1, top_logprobs=2)
    assert none.ok and none.top_logprobs is None


def test_pacemaker_score_falls_back_to_the_reply_when_a_backend_gives_no_logprobs(tmp_path):
    "A server without log-probabilities: plain yes/no replies are scores 1.0 and 0.0, anything else no score."
    from pace.calls import run_steps
    from pace.methods.pacemaker_score import score_steps
    comp = LogprobCompletions(give=False)
    replies = iter(["Yes", "no, it is not", "The fact is unrelated"])
    comp.create = (lambda create: lambda **kw: (setattr(r := create(**kw), "choices", r.choices) or
                   setattr(r.choices[0].message, "content", next(replies)) or r))(comp.create)
    m = Cached(OpenAIChat("qwen", client=FakeClient(comp), concurrency=1), False)
    scores, rec = run_steps(m, score_steps("Book it.", "2026-03-04", [], [("a", "x"), ("b", "y"), ("c", "z")]))
    assert scores == {"a": 1.0, "b": 0.0, "c": None}
    assert rec.notes == dict(n_candidates=3, logprob=0, text=2, junk=1, failed=0) and rec.fallback


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    try: return Cached(LlamaCppChat("qwen2.5-0.5b", n_ctx=2048), False)
    except pace.llm.ModelNotFoundError as e: pytest.skip(str(e))


def test_llamacpp_logprobs_reuse_the_prefix_and_agree_with_a_fresh_context_and_with_generation(qwen):
    """In-process llama.cpp: the next token's distribution after a shared prefix is the one a fresh context computes, up to the
    rounding of quantised kernels over other batch shapes (about 0.01 in P(yes) here; a run's cache makes it exact on replay)."""
    from pace.methods.pacemaker_score import yes_probability
    sys_ = {"role": "system", "content": "Answer with one word: Yes or No."}
    ask = lambda f: [sys_, {"role": "user", "content": f"Is this about food? {f}"}]
    facts = ["Rice and dal for lunch.", "A train timetable.", "Apples and pears."]
    warm = [qwen.chat(ask(f), max_tokens=1, top_logprobs=5) for f in facts]   # each call reuses the previous call's prefix
    assert all(r.ok and len(r.top_logprobs) == 1 and len(r.top_logprobs[0]) <= 5 for r in warm)
    assert all(r.text == max(r.top_logprobs[0], key=r.top_logprobs[0].get) for r in warm)
    fresh = Cached(LlamaCppChat("qwen2.5-0.5b", n_ctx=2048, check=False), False)
    cold = [fresh.chat(ask(f), max_tokens=1, top_logprobs=5) for f in reversed(facts)][::-1]
    for w, c in zip(warm, cold):
        assert w.text == c.text and set(w.top_logprobs[0]) == set(c.top_logprobs[0])
        assert all(abs(w.top_logprobs[0][t] - c.top_logprobs[0][t]) < 0.1 for t in w.top_logprobs[0])
        assert abs(yes_probability(w.top_logprobs[0]) - yes_probability(c.top_logprobs[0])) < 0.03
    gen = qwen.chat(ask(facts[0]), max_tokens=1)                       # greedy generation picks the likeliest token
    assert gen.ok and gen.text == warm[0].text and gen.top_logprobs is None
    assert sum(math.exp(v) for v in warm[0].top_logprobs[0].values()) <= 1 + 1e-6
    bad = qwen.chat(ask(facts[0]), max_tokens=4, top_logprobs=5)
    assert not bad.ok and "max_tokens=1" in bad.error
