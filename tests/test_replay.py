"""Replaying recorded runs without the models: a run recorded with a scripted model, exported (compact), imported into a
fresh cache and replayed under PACE_REPLAY=1 gives the same results with no model call; what a replay refuses, in one line."""
import hashlib, json
import pytest
from pace.embed import CachedEmbedder
from pace.llm import Cached
from pace.cache import (Cache, export_cache, import_cache, read_call_log, read_export, read_store, ReplayError, ReplayMissError)
from pace.cli import main
from pace.data import load_pace_dataset
from pace.embed import HashEmbedder, get_embedder
from pace.index import IndexStore
from pace.llm import get_chat_model
from pace.testing import FakeChat
from pace.methods.pipeline import PaceMaker, PaceMakerConfig
from pace.eval.run import run_experiment, split_volatile
from pace.testing import schema_reply

TINY = "tests/fixtures/tiny"
WINDOW = 900    # a small context window: the filters split their candidates into several calls
CHAT_SPEC = json.dumps({"backend": "fake", "model": "fake", "context_window": WINDOW})
METHODS = "bm25,hybrid,pacemaker"


def scripted(messages, schema):
    "`schema_reply` (it picks candidates against the order shown), but a transport error or junk for some prompts."
    h = hashlib.sha256(messages[-1]["content"].encode()).digest()[0]
    if schema and h % 5 == 0: raise TimeoutError("no answer in time")
    if schema and h % 5 == 1: return "Sure! Here are the ids you asked for."
    return schema_reply(messages, schema)


def boom(*a, **k): raise AssertionError("a model was called during a replay")


@pytest.fixture
def no_models(monkeypatch):
    "Any backend call, any raw token count or embedding, fails the test."
    for cls, hook in ((FakeChat, "_complete"), (FakeChat, "_count_tokens"), (HashEmbedder, "_embed")): monkeypatch.setattr(cls, hook, boom)


def record_run(tmp_path, name="rec", methods=METHODS, limit=0):
    "A `pace run` of the scripted model on the tiny dataset, with its own cache; (results file, cache path)."
    cache = tmp_path / f"{name}.sqlite"
    r = run_experiment(TINY, methods.split(","), chat=Cached(FakeChat(scripted, context_window=WINDOW), cache), embedder="hash:hash",
                       out_dir=tmp_path / "out", name=name, limit=limit, cache=cache, progress=False)
    return r["results"], cache


def replay_cli(tmp_path, cache, name="rep", methods=METHODS, limit=0):
    return main(["run", "--data", TINY, "--methods", methods, "--chat", CHAT_SPEC, "--embedder", "hash:hash", "--cache", str(cache),
                 "--out", str(tmp_path / "out"), "--name", name, "--no-progress"] + (["--all"] if not limit else ["--limit", str(limit)]))


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    "A recorded run, its call log, and its compact export imported into a fresh cache: (results file, recording cache, fresh cache)."
    monkeypatch.setenv("PACE_CALL_LOG", str(tmp_path / "record.log"))
    res, rec = record_run(tmp_path)
    monkeypatch.delenv("PACE_CALL_LOG")
    assert main(["cache", "export", str(tmp_path / "calls.jsonl.gz"), "--embeddings", str(tmp_path / "store"), "--cache", str(rec)]) == 0
    assert main(["cache", "import", str(tmp_path / "calls.jsonl.gz"), "--embeddings", str(tmp_path / "store"),
                 "--cache", str(tmp_path / "fresh.sqlite")]) == 0
    return res, rec, tmp_path / "fresh.sqlite"


def test_pace_run_replays_the_same_results_file_with_no_model_call(tmp_path, recorded, monkeypatch, capsys, no_models):
    res, rec, fresh = recorded
    rows = [json.loads(l) for l in res.read_text().splitlines()]
    logged = read_call_log(tmp_path / "record.log")
    assert {c["kind"] for c in logged} == {"chat", "tokens", "embed"}              # the recording computed all three
    n_failed = Cache(rec)._con().execute("SELECT COUNT(*) FROM entries WHERE kind='failure'").fetchone()[0]
    assert n_failed and any("no answer in time" in json.dumps(r) for r in rows)            # the recording holds failed calls
    monkeypatch.setenv("PACE_REPLAY", "1"); monkeypatch.setenv("PACE_CALL_LOG", str(tmp_path / "replay.log"))
    capsys.readouterr()
    assert replay_cli(tmp_path, fresh) == 0
    assert (tmp_path / "out" / "rep" / "results.jsonl").read_bytes() == res.read_bytes()
    assert read_call_log(tmp_path / "replay.log") == []                                  # not one model call
    man = json.loads((tmp_path / "out" / "rep" / "run.json").read_text())
    assert man["settings"]["chat"] == json.loads((tmp_path / "out" / "rec" / "run.json").read_text())["settings"]["chat"]


def test_a_pacemaker_query_replays_the_same_trace_with_no_model_call(tmp_path, monkeypatch):
    ds = load_pace_dataset(TINY)
    q = ds.queries[0]; inst, kb = ds.instances[q.instance_id], ds.facts(q.instance_id)
    rec = Cache(tmp_path / "rec.sqlite")
    tr = PaceMaker(Cached(FakeChat(scripted, context_window=WINDOW), rec), IndexStore(tmp_path / "idx1", CachedEmbedder(HashEmbedder(), rec)),
                   PaceMakerConfig()).run(q, inst, kb=kb)
    assert max(r.rounds for r in tr.selection.values()) >= 1 and any(not c.ok for c in tr.calls)   # tournaments and a failed call
    export_cache(rec, tmp_path / "calls.jsonl.gz", embeddings=tmp_path / "store")
    fresh = Cache(tmp_path / "fresh.sqlite"); import_cache(fresh, tmp_path / "calls.jsonl.gz", embeddings=tmp_path / "store")
    for cls, hook in ((FakeChat, "_complete"), (FakeChat, "_count_tokens"), (HashEmbedder, "_embed")): monkeypatch.setattr(cls, hook, boom)
    monkeypatch.setenv("PACE_REPLAY", "1"); monkeypatch.setenv("PACE_CALL_LOG", str(tmp_path / "replay.log"))
    cm, emb = get_chat_model(CHAT_SPEC, cache=fresh), get_embedder("hash:hash", cache=fresh)
    assert cm.replay and emb.replay and cm.context_window == WINDOW
    again = PaceMaker(cm, IndexStore(tmp_path / "idx2", emb), PaceMakerConfig()).run(q, inst, kb=kb)
    assert split_volatile(again.model_dump())[0] == split_volatile(tr.model_dump())[0]
    assert read_call_log(tmp_path / "replay.log") == []


def test_token_counts_come_from_the_cache_in_a_replay(tmp_path):
    class Odd(FakeChat):   # a tokenizer no estimate would match
        def _count_tokens(self, text): return 7 * len(text.split()) + 3
    texts = ["Maya has parents' evening on Thursday.", "The Old Duke closes at 22:00.", "[f3] Sam is allergic to nuts."]
    rec = Cached(Odd(), tmp_path / "c.sqlite")
    counts = rec.count_tokens_many(texts, stage="posthop")
    rep = get_chat_model("fake:fake", cache=tmp_path / "c.sqlite", replay=True)
    assert rep.count_tokens_many(texts[::-1], stage="posthop") == counts[::-1] == [7 * len(t.split()) + 3 for t in texts][::-1]
    assert rep.count_tokens(texts[0]) == counts[0]
    with pytest.raises(ReplayMissError, match=r"no cached token count for an 'answer' call of fake \(key [0-9a-f]{8}\.\.\.\)"):
        rep.count_tokens("a text nobody counted", stage="answer")


def _one_entry(cache_path, kind, stage=None):
    "The key and stage of one entry of `kind` (and `stage`) in a cache."
    q = "SELECT key, stage FROM entries WHERE kind=?" + (" AND stage=?" if stage else "") + " ORDER BY key LIMIT 1"
    return Cache(cache_path)._con().execute(q, [kind] + ([stage] if stage else [])).fetchone()


@pytest.mark.parametrize("kind,stage,what", [("chat", "posthop", "reply"), ("chat", "judge_decision", "reply"), ("tokens", None, "token count"),
                                             ("embed", None, "embedding"), ("failure", None, "reply")])
def test_a_deleted_entry_stops_the_replay_in_one_line_naming_the_call(tmp_path, recorded, monkeypatch, capsys, no_models, kind, stage, what):
    res, rec, fresh = recorded
    key, st = _one_entry(fresh, kind, stage)
    Cache(fresh)._con().execute("DELETE FROM entries WHERE key=?", [key])
    monkeypatch.setenv("PACE_REPLAY", "1"); monkeypatch.setenv("PACE_CALL_LOG", str(tmp_path / "replay.log"))
    capsys.readouterr()
    assert replay_cli(tmp_path, fresh) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"pace: error: replay: no cached {what} for a")
    assert f"{st!r} call of " in err
    if kind != "failure": assert f"(key {key[:8]}..." in err   # a failure is named by its request's key
    assert [c["kind"] for c in read_call_log(tmp_path / "replay.log")] == ["miss"]      # no model was called in its place
    assert json.loads((tmp_path / "out" / "rep" / "run.json").read_text())["status"] != "complete"


def test_two_recorded_versions_of_one_spec_or_none_is_a_clear_error(tmp_path, monkeypatch, capsys):
    class Requantised(FakeChat):
        def fingerprint(self): return {**super().fingerprint(), "weights": "q8_0"}
    path = tmp_path / "c.sqlite"
    for cls in (FakeChat, Requantised): Cached(cls(schema_reply), path).chat([{"role": "user", "content": "hi"}])
    monkeypatch.setenv("PACE_REPLAY", "1")
    capsys.readouterr()
    assert main(["run", "--data", TINY, "--methods", "bm25", "--chat", "fake:fake", "--embedder", "hash:hash", "--cache", str(path),
                 "--out", str(tmp_path / "out"), "--limit", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 recorded versions of chat model fake:fake that differ in weights" in err
    with pytest.raises(ReplayError, match="holds no chat model fake:other"): get_chat_model("fake:other", cache=path)
    with pytest.raises(ReplayError, match="holds no embedder hash:hash-256"): get_embedder("hash:hash", cache=path)


def test_export_bytes_are_the_same_when_written_twice(tmp_path, recorded):
    res, rec, fresh = recorded
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b): export_cache(Cache(rec), d / "calls.jsonl.gz", embeddings=d / "store")
    assert (a / "calls.jsonl.gz").read_bytes() == (b / "calls.jsonl.gz").read_bytes()
    files = sorted(p.name for p in (a / "store").iterdir())
    assert len(files) == 1 and all((a / "store" / f).read_bytes() == (b / "store" / f).read_bytes() for f in files)
    export_cache(Cache(fresh), b / "again.jsonl.gz", embeddings=b / "store")        # the imported cache exports the same bytes
    assert (b / "again.jsonl.gz").read_bytes() == (a / "calls.jsonl.gz").read_bytes()
    assert all((a / "store" / f).read_bytes() == (b / "store" / f).read_bytes() for f in files)


def test_two_runs_sharing_an_embedder_store_each_vector_once(tmp_path):
    _, c1 = record_run(tmp_path, "one", methods="bm25,hybrid", limit=2)
    _, c2 = record_run(tmp_path, "two", methods="hybrid", limit=0)
    store = tmp_path / "store"
    export_cache(Cache(c1), tmp_path / "one.jsonl.gz", embeddings=store)
    export_cache(Cache(c2), tmp_path / "two.jsonl.gz", embeddings=store)
    vecs = lambda c: {e.key: e for e in Cache(c).get_many([r[0] for r in Cache(c)._con().execute("SELECT key FROM entries WHERE kind='embed'")]).values()}
    v1, v2 = vecs(c1), vecs(c2)
    assert set(v1) & set(v2) and set(v2) - set(v1)                                      # shared vectors, and new ones
    stored = read_store(store)
    assert len(stored) == len({**v1, **v2}) < len(v1) + len(v2) and len(list(store.iterdir())) == 1
    assert {e.key: e for e in stored} == {**v2, **v1}                                    # bit for bit
    assert not any(e.kind == "embed" for e in read_export(tmp_path / "one.jsonl.gz") + read_export(tmp_path / "two.jsonl.gz"))
    back = Cache(tmp_path / "back.sqlite")
    assert import_cache(back, tmp_path / "two.jsonl.gz", embeddings=store)["skipped"] == 0
    assert back.get_many(list({**v1, **v2})) == {**v2, **v1}                          # a shared vector keeps the first export's entry
    assert {k: e.response for k, e in back.get_many(list(v2)).items()} == {k: e.response for k, e in v2.items()}   # the same bits
