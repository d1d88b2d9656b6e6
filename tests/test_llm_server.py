"""End-to-end tests of the `openai` backend against llama.cpp's OpenAI-compatible server (SmolLM2-135M, 127.0.0.1,
a free port). A small counting proxy sits between client and server: it counts the requests that reach the server,
can answer with an unusable reply, and can kill the server part-way through a run."""
import http.client, json, threading, time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import pytest
from pydantic import BaseModel
from pace.llm import Cached
from pace.cache import Cache
from pace.llm import get_chat_model
from pace.backends.llamacpp import LlamaServer
from pace.backends.openai import OpenAIChat

CHAT = "/v1/chat/completions"


class Verdict(BaseModel):
    conflict: bool
    reason: str


def msgs(t): return [{"role": "user", "content": t}]


class CountingProxy:
    "HTTP proxy to an upstream server that counts requests per path; modes: 'pass', 'garbage' (a non-JSON chat reply)."
    def __init__(self, upstream_port):
        self.counts, self.mode, self.upstream_port, self.after_response = Counter(), "pass", upstream_port, None
        self.bodies = []   # the chat requests' bodies, as sent
        self._lock, self.responses, self.inflight, self.max_inflight = threading.Lock(), 0, 0, 0
        proxy = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *a): pass
            def _handle(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy._lock:
                    proxy.counts[self.path] += 1; proxy.inflight += 1; proxy.max_inflight = max(proxy.max_inflight, proxy.inflight)
                    if self.path == CHAT: proxy.bodies.append(json.loads(body or b"{}"))
                try: self._answer(body)
                finally:
                    with proxy._lock: proxy.inflight -= 1
            def _answer(self, body):
                if proxy.mode == "slow": time.sleep(3)
                if proxy.mode == "garbage" and self.path == CHAT:
                    status, data = 200, json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Sorry, no JSON today."}}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}).encode()
                else:
                    try:
                        conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=120)
                        conn.request(self.command, self.path, body or None, headers={"Content-Type": "application/json"})
                        r = conn.getresponse(); status, data = r.status, r.read(); conn.close()
                    except OSError as e:
                        status, data = 502, json.dumps({"error": {"message": f"upstream unavailable: {e}"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(data)))
                self.end_headers(); self.wfile.write(data)
                if self.path == CHAT and status == 200:
                    with proxy._lock: proxy.responses += 1; n = proxy.responses
                    if proxy.after_response: proxy.after_response(n)
            do_GET = do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self): self.httpd.shutdown(); self.httpd.server_close()


@pytest.fixture(scope="module")
def server():
    with LlamaServer("smollm2-135m", n_ctx=2048, startup_timeout=120) as srv:
        proxy = CountingProxy(srv.port)
        try: yield srv, proxy
        finally: proxy.close()
    assert srv.proc.poll() is not None  # stopped


def test_text_and_schema_json(server, tmp_path):
    srv, proxy = server
    m = get_chat_model({"backend": "openai", "model": srv.alias, "base_url": proxy.base_url}, cache=tmp_path / "c.sqlite")
    r = m.chat(msgs("Write one short sentence about the sea."), max_tokens=24)
    assert r.ok, r.error
    assert r.text.strip() and 0 < r.usage.completion_tokens <= 24 and r.usage.prompt_tokens > 0
    r = m.chat(msgs("Do a 9am meeting and a 9am dentist visit conflict? JSON; the reason is one word."), schema=Verdict, max_tokens=48)
    assert r.ok, r.error
    assert isinstance(r.parsed, Verdict)
    assert m._modes[0] == "json_object_schema"  # llama.cpp's server refuses the json_schema type: the backend stepped down


def test_release_decoding_sends_no_temperature_nor_seed_and_gets_a_json_object(server, tmp_path):
    "The release's decoding (issue 43): no temperature, no seed, JSON mode without a schema; the server's grammar gives an object."
    srv, proxy = server
    m = get_chat_model({"backend": "openai", "model": srv.alias, "base_url": proxy.base_url}, cache=tmp_path / "c.sqlite")
    r = m.chat(msgs("Give a JSON object with a key 'sea' and a short string value."), temperature=None, seed=None,
               response_format="json_object", max_tokens=48)
    body = proxy.bodies[-1]
    assert "temperature" not in body and "seed" not in body and body["response_format"] == {"type": "json_object"}
    assert r.ok and r.notes == [], (r.error, r.notes)
    assert r.text.lstrip().startswith("{") or r.truncated, r.text   # the grammar starts an object (a cut reply may not close)


def test_second_run_makes_zero_requests(server, tmp_path):
    srv, proxy = server
    reqs = [dict(messages=msgs(f"Give one word that rhymes with {w}."), max_tokens=8) for w in ("cat", "sun", "tree")]
    reqs.append(dict(messages=msgs("Is a 5pm gym class compatible with a 5pm flight? JSON; one-word reason."), schema=Verdict, max_tokens=48))
    spec = {"backend": "openai", "model": srv.alias, "base_url": proxy.base_url, "concurrency": 4}
    proxy.max_inflight = 0
    first = get_chat_model(spec, cache=tmp_path / "c.sqlite").chat_batch(reqs, stage="gen")
    assert all(r.ok for r in first), [r.error for r in first]
    assert 2 <= proxy.max_inflight <= 4  # concurrent, and bounded by `concurrency`
    before = proxy.counts[CHAT]
    m2 = get_chat_model(spec, cache=Cache(tmp_path / "c.sqlite"))  # a fresh run of the same work
    second = m2.chat_batch(reqs, stage="gen")
    assert proxy.counts[CHAT] == before  # nothing reached the server
    assert [(r.text, r.parsed, r.usage) for r in second] == [(r.text, r.parsed, r.usage) for r in first]
    assert all(r.cached for r in second)
    acc = m2.accounts.by_stage()["gen"]
    assert (acc["calls"], acc["cache_hits"]) == (4, 4)


def test_unparsable_reply_is_a_recorded_failure(server, tmp_path):
    srv, proxy = server
    m = Cached(OpenAIChat(srv.alias, base_url=proxy.base_url, json_mode="json_object_schema"), tmp_path / "c.sqlite", max_parse_retries=1)
    before = proxy.counts[CHAT]
    proxy.mode = "garbage"
    try: r = m.chat(msgs("Verdict please."), schema=Verdict, stage="judge")
    finally: proxy.mode = "pass"
    assert not r.ok and "not JSON" in r.error and r.attempts == 2
    assert proxy.counts[CHAT] - before == 2  # the first reply and one bounded retry
    chat_entries = lambda c: sum(g["entries"] for g in c.stats()["groups"] if g["kind"] == "chat")
    assert chat_entries(m.cache) == 0   # a failed reply is never cached as an answer (only as a failure record, for replays)
    assert m.accounts.by_stage()["judge"]["failures"] == 1


def test_timeouts_are_retried_then_recorded(server, tmp_path):
    srv, proxy = server
    m = Cached(OpenAIChat(srv.alias, base_url=proxy.base_url, timeout=0.5, max_retries=1), tmp_path / "c.sqlite")
    before = proxy.counts[CHAT]
    proxy.mode = "slow"
    try: r = m.chat(msgs("Hello?"), max_tokens=4)
    finally: proxy.mode = "pass"
    assert not r.ok and "Timeout" in r.error
    assert proxy.counts[CHAT] - before == 2  # first try + 1 retry
    time.sleep(3)  # let the slow handlers finish before other tests use the proxy


def test_server_killed_mid_run(tmp_path):
    "Kill the server after 2 of 6 answers: client retries, then recorded failures; the cache stays sound and complete."
    srv = LlamaServer("smollm2-135m", n_ctx=1024).start()
    proxy = CountingProxy(srv.port)
    proxy.after_response = lambda n: srv.kill() if n == 2 else None
    try:
        m = Cached(OpenAIChat(srv.alias, base_url=proxy.base_url, concurrency=1, max_retries=2, timeout=30), tmp_path / "c.sqlite")
        reqs = [dict(messages=msgs(f"Say the number {i}."), max_tokens=6) for i in range(6)]
        rs = m.chat_batch(reqs, stage="answer")
        assert [r.ok for r in rs] == [True, True, False, False, False, False]
        assert all("502" in r.error or "upstream" in r.error for r in rs[2:])
        assert proxy.counts[CHAT] == 2 + 4 * 3  # each failed request: first try + 2 retries
        assert m.accounts.by_stage()["answer"]["failures"] == 4
        c = Cache(tmp_path / "c.sqlite")
        assert c.integrity() == "ok" and sum(g["entries"] for g in c.stats()["groups"] if g["kind"] == "chat") == 2
        again = Cached(OpenAIChat(srv.alias, base_url=proxy.base_url, concurrency=1, max_retries=0), c).chat_batch(reqs, stage="answer")
        assert [r.cached for r in again] == [True, True, False, False, False, False]
        assert [r.text for r in again[:2]] == [r.text for r in rs[:2]]
    finally:
        proxy.close(); srv.stop()
    assert srv.proc.poll() is not None
