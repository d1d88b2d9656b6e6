"""The OpenAI backend's options as one `OpenAIOptions`: the same model (and cache keys) from options or keywords, spec dicts
through `get_chat_model`, each bad option one line, and the limiter still bounding every retry."""
import types, time
import pytest
from pace.llm import Cached
from pace.backends.openai import OpenAIChat, OpenAIOptions
from pace.llm import get_chat_model


class Completions:
    "A server that refuses the first `refuse` requests with a 429, then answers 'ok'; it records each arrival."
    def __init__(self, refuse=0): self.refuse, self.times = refuse, []
    def create(self, **kw):
        self.times.append(time.monotonic())   # first: the arrival, before anything else takes time
        import httpx, openai
        if len(self.times) <= self.refuse:
            req = httpx.Request("POST", "http://x/v1/chat/completions")
            raise openai.RateLimitError("slow down", response=httpx.Response(429, request=req), body=None)
        msg = types.SimpleNamespace(content="ok")
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=msg, finish_reason="stop")],
                                     usage=types.SimpleNamespace(prompt_tokens=3, completion_tokens=1))

class Client:
    def __init__(self, comp): self.chat = types.SimpleNamespace(completions=comp)
    def with_options(self, **kw): return self

Q = [{"role": "user", "content": "same question"}]


def test_options_and_keywords_build_the_same_model_and_keys(tmp_path):
    o = OpenAIOptions(base_url="http://gpu:8000/v1", json_mode="prompt", send_seed=False, model_id="q")
    a = Cached(OpenAIChat("qwen", o, client=Client(Completions())), tmp_path / "c.sqlite")
    b = Cached(OpenAIChat("qwen", client=Client(Completions()), base_url="http://gpu:8000/v1", json_mode="prompt", send_seed=False, model_id="q"), tmp_path / "c.sqlite")
    assert a.fingerprint() == b.fingerprint() and a.options == b.options and a.model_id == "q"
    ra = a.chat(Q)
    assert b.chat(Q).cached and b.chat(Q).key == ra.key
    c = Cached(OpenAIChat("qwen", o, client=Client(Completions()), json_mode="json_object"), False)   # a keyword wins
    assert (c.json_mode, c.send_seed, c.options.base_url) == ("json_object", False, "http://gpu:8000/v1")
    assert o.json_mode == "prompt"   # the options given are left as they are


def test_a_spec_dict_passes_its_options_as_keywords(tmp_path):
    m = get_chat_model({"backend": "openai", "model": "m", "base_url": "http://h:1/v1", "max_rps": "4",
                        "token_param": "max_completion_tokens"}, cache=False)
    assert isinstance(m.inner, OpenAIChat) and m.limiter.max_rps == 4.0 and m.options.token_param == "max_completion_tokens"
    assert m.fingerprint()["token_param"] == "max_completion_tokens"


@pytest.mark.parametrize("bad, why", [
    (dict(json_mode="xml"), "json_mode: Input should be 'auto'"),
    (dict(max_rps=0), "max_rps: Input should be greater than 0"),
    (dict(timeout=-1), "timeout: Input should be greater than 0"),   # accepted before, then every call failed
    (dict(max_retries=-2), "max_retries: Input should be greater than or equal to 0"),
    (dict(token_param="max_new_tokens"), "token_param: Input should be 'max_tokens' or 'max_completion_tokens'")])
def test_each_bad_option_is_one_line(bad, why):
    for build in (lambda: Cached(OpenAIChat("m", client=Client(Completions()), **bad), False),
                  lambda: Cached(OpenAIChat("m", bad, client=Client(Completions())), False)):
        with pytest.raises(ValueError) as e: build()
        assert str(e.value).startswith("openai options: ") and why in str(e.value) and "\n" not in str(e.value)


def test_a_misspelt_option_in_the_options_dict_is_an_error():
    with pytest.raises(ValueError, match="max_rpss: Extra inputs are not permitted"):
        Cached(OpenAIChat("m", {"max_rpss": 2}, client=Client(Completions())), False)


def test_retries_go_through_the_limiter():
    comp = Completions(refuse=2)
    m = Cached(OpenAIChat("m", OpenAIOptions(max_rps=10, backoff_base=0.0, backoff_cap=0.0), client=Client(comp)), False)
    t0 = time.monotonic()
    r = m.chat(Q)
    # no back-off, yet the three attempts start 1/10 s apart: the third no sooner than 0.2 s after the call
    assert r.ok and len(comp.times) == 3 and comp.times[-1] - t0 >= 0.2
