"Tests of pace.cache: keys, concurrent writers (threads and processes), crash safety, stats/clear, accounts."
import json, multiprocessing as mp, os, re, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import pytest
from pace.cache import Cache, Entry, Accounts, request_key, as_cache, CACHE_VERSION
from pace.cli import main

def cache_cli(argv): return main(["cache", *argv])
import pace.cache as pc


def _entry(key, stage="s", model="m", kind="chat", resp=None, **kw):
    return Entry(key=key, kind=kind, model=model, stage=stage, request={"k": key}, response=resp if resp is not None else {"text": key}, **kw)


def test_key_is_canonical_and_versioned(monkeypatch):
    a = request_key("chat", {"model": "m", "messages": [{"role": "user", "content": "é"}], "seed": 0})
    b = request_key("chat", {"seed": 0, "messages": [{"content": "é", "role": "user"}], "model": "m"})
    assert a == b
    monkeypatch.setattr(pc, "CACHE_VERSION", CACHE_VERSION + 1)
    assert pc.request_key("chat", {"model": "m", "messages": [{"role": "user", "content": "é"}], "seed": 0}) != a


def test_roundtrip_first_value_wins(tmp_path):
    c = Cache(tmp_path / "c.sqlite")
    assert c.put(_entry("k1", prompt_tokens=3, completion_tokens=4, seconds=1.5))
    assert not c.put(_entry("k1", resp={"text": "later"}))
    e = c.get("k1")
    assert (e.response, e.prompt_tokens, e.completion_tokens, e.seconds) == ({"text": "k1"}, 3, 4, 1.5)
    assert c.get("missing") is None
    # a second Cache object on the same file (another "process") sees it
    assert Cache(tmp_path / "c.sqlite").get("k1").response == {"text": "k1"}
    assert c.integrity() == "ok"


def test_default_path_and_as_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PACE_CACHE", str(tmp_path / "env.sqlite"))
    assert as_cache(None).path == tmp_path / "env.sqlite"
    assert as_cache(False) is None
    with pytest.raises(TypeError):
        as_cache(1.5)


def _writer(path, wid, n, shared):
    c = Cache(path)
    for i in range(n):
        c.put(_entry(f"w{wid}-{i}", stage=f"st{wid % 2}", resp={"text": f"w{wid}-{i}", "blob": "x" * 200}))
        c.put(_entry(f"shared-{i % shared}", resp={"text": f"shared-{i % shared}"}))  # contended keys
        if i % 10 == 0: assert c.get(f"w{wid}-{i}") is not None


def test_concurrent_process_writers(tmp_path):
    path = tmp_path / "c.sqlite"
    Cache(path)  # create the schema once
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=_writer, args=(path, w, 150, 20)) for w in range(4)]
    for p in ps: p.start()
    for p in ps: p.join(120)
    assert [p.exitcode for p in ps] == [0] * 4
    c = Cache(path)
    keys = [f"w{w}-{i}" for w in range(4) for i in range(150)] + [f"shared-{i}" for i in range(20)]
    got = c.get_many(keys)
    assert len(got) == len(keys)
    assert all(got[k].response["text"] == k for k in keys)
    assert c.stats()["entries"] == len(keys)
    assert c.integrity() == "ok"


def test_thread_writers_share_one_object(tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    c = Cache(tmp_path / "c.sqlite")
    with ThreadPoolExecutor(8) as ex:
        assert sum(ex.map(lambda i: c.put(_entry(f"t{i}")), range(400))) == 400
    assert len(c.get_many([f"t{i}" for i in range(400)])) == 400


_CRASH_WRITER = r"""
import sys
from pace.cache import Cache, Entry
c = Cache(sys.argv[1]); b = 0
print("ready", flush=True)
while True:  # batches of 50 in one transaction each, forever
    c.put_many([Entry(key=f"b{b}-{i}", kind="embed", model="m", stage="s", request={"i": i}, response={"v": "y" * 500}) for i in range(50)])
    b += 1
"""


def test_killed_writer_leaves_a_sound_file(tmp_path):
    "SIGKILL mid-write: the file passes integrity_check and holds only whole transactions."
    path = tmp_path / "c.sqlite"
    p = subprocess.Popen([sys.executable, "-c", _CRASH_WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(1.5)
    finally:
        p.send_signal(signal.SIGKILL); p.wait(10)
    c = Cache(path)
    assert c.integrity() == "ok"
    n = c.stats()["entries"]
    assert n > 0 and n % 50 == 0  # no half transaction survived
    rows = sqlite3.connect(path).execute("SELECT response FROM entries").fetchall()
    assert all(json.loads(r[0]) == {"v": "y" * 500} for r in rows)
    c.put(_entry("after-crash"))  # still writable
    assert c.get("after-crash") is not None


def test_stats_and_clear(tmp_path, capsys):
    c = Cache(tmp_path / "c.sqlite")
    c.put_many([_entry(f"a{i}", stage="planner", model="qwen", prompt_tokens=10) for i in range(3)]
               + [_entry(f"b{i}", stage="judge", model="qwen") for i in range(2)]
               + [_entry(f"e{i}", stage="index", model="minilm", kind="embed") for i in range(4)])
    s = c.stats()
    assert s["entries"] == 9
    g = {(x["kind"], x["model"], x["stage"]): x for x in s["groups"]}
    assert g[("chat", "qwen", "planner")]["entries"] == 3 and g[("chat", "qwen", "planner")]["prompt_tokens"] == 30
    assert c.clear(stage="judge") == 2
    assert c.clear(model="minilm") == 4
    assert c.clear(stage="planner", model="other") == 0
    assert c.stats()["entries"] == 3
    assert cache_cli(["stats", "--cache", str(c.path)]) == 0
    assert "planner" in capsys.readouterr().out
    assert cache_cli(["stats", "--json", "--cache", str(c.path)]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 3
    assert cache_cli(["clear", "--cache", str(c.path)]) == 2  # refuses to clear all without --all
    assert cache_cli(["clear", "--all", "--cache", str(c.path)]) == 0
    assert c.stats()["entries"] == 0


def test_stats_count_distinct_fingerprints(tmp_path):
    "Two different models under one model id (two files both named model.gguf) are visible in stats."
    c = Cache(tmp_path / "c.sqlite")
    fps = [{"backend": "llamacpp", "model_id": "model", "gguf": {"size": 64, "sha256": h * 64}} for h in "ab"]
    c.put_many([Entry(key=f"k{i}", kind="chat", model="model", stage="s", request={"fingerprint": fps[i % 2], "messages": []},
                      response={"text": ""}) for i in range(6)] + [_entry("old")])  # an entry without a fingerprint
    g = {x["model"]: x for x in c.stats()["groups"]}
    assert (g["model"]["entries"], g["model"]["fingerprints"]) == (6, 2)
    assert g["m"]["fingerprints"] == 0
    assert CACHE_VERSION >= 2  # keys made before fingerprints (version 1) no longer match


def test_accounts_threads_and_diff():
    from concurrent.futures import ThreadPoolExecutor
    a = Accounts()
    snap = a.snapshot()
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda i: a.record("gen", cached=i % 2 == 0, prompt_tokens=2, completion_tokens=1, seconds=0.1), range(1000)))
    a.record("judge", ok=False)
    d = a.since(snap)
    assert d["gen"]["calls"] == 1000 and d["gen"]["cache_hits"] == 500 and d["gen"]["prompt_tokens"] == 2000
    assert d["judge"]["failures"] == 1
    assert a.total()["calls"] == 1001
    assert a.by_stage()["gen"]["seconds"] == pytest.approx(100.0)


def test_add_cli_hook_on_a_parent_parser(tmp_path, capsys):
    "How the `pace` console script registers the sub-command."
    import argparse
    from pace.cache import add_cli
    c = Cache(tmp_path / "c.sqlite")
    c.put_many([_entry("a", stage="planner", model="qwen"), _entry("b", stage="judge", model="qwen")])
    ap = argparse.ArgumentParser(prog="pace")
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_cli(sub)
    args = ap.parse_args(["cache", "clear", "--stage", "judge", "--model", "qwen", "--cache", str(c.path)])
    assert args.func(args) == 0
    assert "deleted 1 entries" in capsys.readouterr().out
    assert c.get("a") is not None and c.get("b") is None
    with pytest.raises(SystemExit):
        ap.parse_args(["cache", "clear", "--kind", "images"])


def test_a_path_that_cannot_be_a_cache_is_refused_and_left_untouched(tmp_path):
    "Issue 22: --cache a folder or a file that is not SQLite ended in a sqlite3 traceback; another program's database got our table."
    from pace.cache import CacheFileError
    (tmp_path / "notes.txt").write_text("hello\n"); (tmp_path / "dir").mkdir()
    other = sqlite3.connect(tmp_path / "other.db"); other.execute("CREATE TABLE t(x)"); other.commit(); other.close()
    for p, msg in (("dir", "is a folder"), ("notes.txt", "not a SQLite file"), ("other.db", "of something else"),
                   ("notes.txt/c.sqlite", "cannot make the folder")):
        with pytest.raises(CacheFileError, match=msg): Cache(tmp_path / p)
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
    assert [r[0] for r in sqlite3.connect(tmp_path / "other.db").execute("SELECT name FROM sqlite_master")] == ["t"]
    assert Cache(tmp_path / "empty.sqlite").stats()["entries"] == 0      # a new file is a new cache


def test_import_checks_every_line_before_adding_any(tmp_path):
    from pace.cache import export_cache, import_cache, CacheImportError
    req = {"fingerprint": {"backend": "x", "model_id": "m"}, "text": "t"}
    src = Cache(tmp_path / "src.sqlite"); src.put(Entry(key=request_key("embed", req), kind="embed", model="m", stage="s", request=req, response={"f32": "AACAPw=="}))
    export_cache(src, tmp_path / "e.jsonl")
    with open(tmp_path / "e.jsonl", "a") as f: f.write('{"key": "k2", "kind": \n')
    dst = Cache(tmp_path / "dst.sqlite")
    with pytest.raises(CacheImportError, match=r"e\.jsonl:2: invalid JSON"): import_cache(dst, tmp_path / "e.jsonl")
    assert dst.stats()["entries"] == 0                                  # the good first line was not added either


# ---------- compact exports: gzip and the shared store of vectors ----------

def _vec(fp, text, v, stage="index", seconds=0.25):
    "An embedding entry as `pace.embed` stores one: float32 bytes as base64."
    import base64, numpy as np
    req = {"fingerprint": fp, "text": text}
    return Entry(key=request_key("embed", req), kind="embed", model=fp["model_id"], stage=stage, request=req,
                 response={"f32": base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()}, prompt_tokens=len(text), seconds=seconds)


def test_store_keeps_every_bit_merges_by_key_and_writes_the_same_bytes(tmp_path):
    import numpy as np, zipfile
    from pace.cache import export_cache, import_cache, read_store, store_path, read_export
    fp = {"backend": "onnx", "model_id": "all-MiniLM-L6-v2@int8-onnx", "dim": 6, "onnx": {"sha256": "ab" * 32, "size": 1}}
    rng = np.random.default_rng(0)
    odd = np.array([-0.0, np.float32(1e-45), np.inf, -np.inf, np.nan, np.float32(1) / 3], dtype=np.float32)   # -0, a denormal, inf, NaN
    vs = {f"fact {i}": (odd if i == 0 else rng.standard_normal(6)).astype(np.float32) for i in range(40)}
    a, b = Cache(tmp_path / "a.sqlite"), Cache(tmp_path / "b.sqlite")
    a.put_many([_vec(fp, t, v) for t, v in list(vs.items())[:30]])
    b.put_many([_vec(fp, t, v, stage="query", seconds=9.0) for t, v in list(vs.items())[20:]])   # 10 shared with a
    b.put(Entry(key=request_key("chat", {"q": 1}), kind="chat", model="m", stage="answer", request={"q": 1}, response={"text": "ok"}))
    assert export_cache(a, tmp_path / "a.jsonl.gz", embeddings=tmp_path / "s1") == 30
    assert export_cache(b, tmp_path / "b.jsonl.gz", embeddings=tmp_path / "s1") == 21
    export_cache(b, tmp_path / "b.jsonl.gz", embeddings=tmp_path / "s2"); export_cache(a, tmp_path / "a.jsonl.gz", embeddings=tmp_path / "s2")
    p1 = store_path(tmp_path / "s1", fp)
    assert [x.name for x in (tmp_path / "s1").iterdir()] == [p1.name] and p1.name.startswith("all-MiniLM-L6-v2-int8-onnx-")
    stored = read_store(tmp_path / "s1")
    assert len(stored) == 39 and [e.key for e in stored] == sorted(e.key for e in stored)   # the NaN/inf vector is not stored
    finite = {t: v for t, v in vs.items() if t != "fact 0"}
    assert {e.key: e for e in stored} == {e.key: e for e in [*b.get_many([_vec(fp, t, v).key for t, v in finite.items()]).values(),
                                                                 *a.get_many([_vec(fp, t, v).key for t, v in finite.items()]).values()]}
    assert len(read_export(tmp_path / "b.jsonl.gz")) == 1                                   # only the chat entry left in the JSONL
    assert [e.request["text"] for e in read_export(tmp_path / "a.jsonl.gz")] == ["fact 0"]  # kept, exact, in the JSONL
    # the same union in another order: the first export of a key wins, so only those entries differ; the vectors never do
    s1, s2 = {e.key: e for e in stored}, {e.key: e for e in read_store(tmp_path / "s2")}
    assert {k: e.response for k, e in s1.items()} == {k: e.response for k, e in s2.items()}
    before = p1.read_bytes()
    for c in (a, b): export_cache(c, tmp_path / "again.jsonl.gz", embeddings=tmp_path / "s1")
    assert p1.read_bytes() == before                                                        # nothing new: the same bytes
    with zipfile.ZipFile(p1) as z:
        assert {i.date_time for i in z.infolist()} == {(1980, 1, 1, 0, 0, 0)} and z.namelist() == ["store.json", "entries.jsonl", "vectors.f32"]
    back = Cache(tmp_path / "back.sqlite")
    assert import_cache(back, tmp_path / "b.jsonl.gz", embeddings=tmp_path / "s1") == dict(read=40, added=40, skipped=0)
    assert import_cache(back, tmp_path / "a.jsonl.gz") == dict(read=1, added=1, skipped=0)
    got = {t: np.frombuffer(__import__("base64").b64decode(back.get(_vec(fp, t, v).key).response["f32"]), "<f4") for t, v in vs.items()}
    assert all(got[t].tobytes() == v.tobytes() for t, v in vs.items())                    # bit for bit, NaN and -0 included


def test_gzip_export_has_no_clock_and_is_read_like_text(tmp_path):
    from pace.cache import export_cache, import_cache, read_export, CacheImportError
    c = Cache(tmp_path / "c.sqlite"); c.put_many([_entry(f"k{i}") for i in range(5)])
    export_cache(c, tmp_path / "x.jsonl.gz"); first = (tmp_path / "x.jsonl.gz").read_bytes()
    time.sleep(1.1); export_cache(c, tmp_path / "y.jsonl.gz")
    assert (tmp_path / "y.jsonl.gz").read_bytes() == first and first[4:8] == b"\0\0\0\0"   # no timestamp, no file name
    export_cache(c, tmp_path / "x.jsonl")
    assert read_export(tmp_path / "x.jsonl.gz") == read_export(tmp_path / "x.jsonl")
    import gzip
    (tmp_path / "bad.jsonl.gz").write_bytes(gzip.compress((tmp_path / "x.jsonl").read_bytes() + b"{oops\n", mtime=0))
    with pytest.raises(CacheImportError, match=r"bad\.jsonl\.gz:6: invalid JSON"): import_cache(Cache(tmp_path / "d.sqlite"), tmp_path / "bad.jsonl.gz")


def test_cli_export_and_import_with_a_store_and_a_broken_store_in_one_line(tmp_path, capsys):
    fp = {"backend": "hash", "model_id": "hash-4", "dim": 4}
    c = Cache(tmp_path / "c.sqlite"); c.put_many([_vec(fp, f"t{i}", [i, 1, 0, 0]) for i in range(3)] + [_entry("k")])
    assert main(["cache", "export", str(tmp_path / "e.jsonl.gz"), "--embeddings", str(tmp_path / "store"), "--cache", str(c.path)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 1 entries to {tmp_path / 'e.jsonl.gz'}; 3 vectors to {tmp_path / 'store'} (3 new, 1 files)"
    assert main(["cache", "import", str(tmp_path / "e.jsonl.gz"), "--embeddings", str(tmp_path / "store"), "--cache", str(tmp_path / "d.sqlite")]) == 0
    assert "read 4 entries" in capsys.readouterr().out and Cache(tmp_path / "d.sqlite").stats()["entries"] == 3   # "k" is not its request's key
    (tmp_path / "broken").mkdir(); (tmp_path / "broken" / "x.zip").write_bytes(b"PK\x03\x04 cut short")
    assert main(["cache", "import", str(tmp_path / "e.jsonl.gz"), "--embeddings", str(tmp_path / "broken"), "--cache", str(tmp_path / "n.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "x.zip: not a store file of vectors" in err and not (tmp_path / "n.sqlite").exists()
    assert main(["cache", "clear", "--kind", "tokens", "--cache", str(c.path)]) == 0     # the new kinds are filters too


def test_a_failure_entry_keeps_its_newest_outcome(tmp_path):
    c = Cache(tmp_path / "c.sqlite")
    old, new = _entry("f"), _entry("f")
    old.kind = new.kind = "failure"; old.response, new.response = {"error": "timeout"}, {"error": "schema"}
    assert c.put_many([old]) == 1 and c.put_many([new]) == 0 and c.get("f").response == {"error": "timeout"}
    assert c.put_many([new], replace=True) == 1 and c.get("f").response == {"error": "schema"}


def _log_lines(path, i):
    os.environ["PACE_CALL_LOG"] = str(path)
    from pace.cache import log_calls
    for j in range(50): log_calls("chat", f"m{i}", "planner", j + 1)


def test_call_log_lines_stay_whole_across_processes_and_threads(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor
    from pace.cache import log_calls, read_call_log
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=_log_lines, args=(tmp_path / "calls.log", i)) for i in range(3)]
    for p in ps: p.start()
    monkeypatch.setenv("PACE_CALL_LOG", str(tmp_path / "calls.log"))
    with ThreadPoolExecutor(8) as ex: list(ex.map(lambda j: log_calls("embed", "e", "index", j + 1), range(100)))
    for p in ps: p.join(60); assert p.exitcode == 0
    lines = read_call_log(tmp_path / "calls.log")
    assert len(lines) == 250 and sum(x["n"] for x in lines if x["kind"] == "chat") == 3 * sum(range(1, 51))
    assert sorted(x["n"] for x in lines if x["kind"] == "embed") == list(range(1, 101))
    monkeypatch.delenv("PACE_CALL_LOG"); log_calls("chat", "m", "s", 3)
    assert len(read_call_log(tmp_path / "calls.log")) == 250                              # unset: nothing written


def _rezip(p, **members):
    "The store file `p` zipped again with some members replaced (valid CRCs: damage the zip check cannot see)."
    import zipfile
    from pace.cache import _zip
    with zipfile.ZipFile(p) as z: old = {n: z.read(n) for n in z.namelist()}
    p.write_bytes(_zip({**old, **members}))


def test_a_store_with_damaged_vectors_is_refused_naming_the_store(tmp_path):
    "Issue 30, item 8: vectors damaged and zipped again (sizes kept) imported as NaN vectors; now refused in one line."
    import json, zipfile, numpy as np
    from pace.cache import CacheImportError, export_cache, import_cache, read_store, store_path, _planes, _unplanes
    fp = {"backend": "hash", "model_id": "hash-4", "dim": 4}
    rng = np.random.default_rng(1)
    vs = [rng.standard_normal(4).astype(np.float32) for _ in range(5)]
    c = Cache(tmp_path / "c.sqlite"); c.put_many([_vec(fp, f"t{i}", v / np.linalg.norm(v)) for i, v in enumerate(vs)])
    export_cache(c, tmp_path / "e.jsonl", embeddings=tmp_path / "store")
    p = store_path(tmp_path / "store", fp)
    with zipfile.ZipFile(p) as z: head, vec = json.loads(z.read("store.json")), bytearray(_unplanes(z.read("vectors.f32")))
    assert len(read_store(tmp_path / "store")) == 5
    # a file without the sha256 (as the stores written before it): a NaN is found by the finiteness check
    vec[36:40] = np.float32(np.nan).tobytes()   # float 1 of vector 2 (4 floats of 4 bytes each)
    _rezip(p, **{"store.json": json.dumps({k: v for k, v in head.items() if k != "vectors_sha256"}).encode(),
                 "vectors.f32": _planes(bytes(vec))})
    with pytest.raises(CacheImportError, match=rf"^{re.escape(str(p))}: entry 3: its vector holds NaN or infinity"):
        import_cache(Cache(tmp_path / "d.sqlite"), tmp_path / "e.jsonl", embeddings=tmp_path / "store")
    # with the sha256: any changed byte, even one that keeps the value finite
    vec[36:40] = np.float32(0.5).tobytes()
    _rezip(p, **{"store.json": json.dumps(head).encode(), "vectors.f32": _planes(bytes(vec))})
    with pytest.raises(CacheImportError, match=r"vectors\.f32 does not match the sha256 in store\.json"):
        read_store(tmp_path / "store")
    assert not (tmp_path / "d.sqlite").exists() or Cache(tmp_path / "d.sqlite").stats()["entries"] == 0


def test_the_committed_stores_pass_the_checks():
    from pace.cache import read_store
    assert len(read_store(Path(__file__).resolve().parent.parent / "results" / "_embeddings")) > 1000


# ---------- issue 42: embedding entries checked on import; a read-only cache can still be read ----------

def _embed_entry(text, response, dim=4):
    import base64
    import numpy as np
    req = {"fingerprint": {"backend": "hash", "model_id": f"hash-{dim}", "dim": dim}, "text": text}
    if isinstance(response, np.ndarray): response = {"f32": base64.b64encode(response.astype("<f4").tobytes()).decode()}
    return Entry(key=request_key("embed", req), kind="embed", model=f"hash-{dim}", stage="embed", request=req, response=response)


@pytest.mark.parametrize("response,why", [
    ("not a vector", r"its response is not a vector"),
    ({"f32": "@@@"}, r"its vector is not base64"),
    ("3floats", r"its vector has 3 floats, its embedder's size \(dim\) is 4"),
])
def test_import_refuses_an_embedding_entry_that_is_not_a_vector_of_its_size(tmp_path, capsys, response, why):
    "Issue 42: `pace cache import` took them, and the next run crashed."
    import numpy as np
    from dataclasses import asdict
    from pace.cache import canonical_json
    bad = np.ones(3) if response == "3floats" else response
    good, e = _embed_entry("a", np.ones(4)), _embed_entry("b", bad)
    (tmp_path / "x.jsonl").write_text("".join(canonical_json(asdict(x)) + "\n" for x in (good, e)))
    assert main(["cache", "import", str(tmp_path / "x.jsonl"), "--cache", str(tmp_path / "c.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(rf"x\.jsonl:2: embedding entry {e.key[:12]} of hash-4: {why}", err), err
    assert Cache(tmp_path / "c.sqlite").stats()["entries"] == 0      # nothing added, the good line neither


def _read_only(folder: Path, argv: list) -> subprocess.CompletedProcess:
    "`pace ARGV` with `folder` on a read-only file system (a read-only bind mount; chmod where not root)."
    cmd = [sys.executable, "-m", "pace.cli", *map(str, argv)]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try: return subprocess.run(cmd, capture_output=True, text=True, env=env)
        finally: folder.chmod(0o755)
    import shlex
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode: pytest.skip("no read-only mount here (unshare --mount refused)")
    sh = f"mount --bind -o ro {shlex.quote(str(folder))} {shlex.quote(str(folder))} && {shlex.join(cmd)}"
    return subprocess.run(["unshare", "--mount", "sh", "-c", sh], capture_output=True, text=True, env=env)


def test_a_cache_on_a_read_only_file_system_can_be_read_and_exported(tmp_path):
    "Issue 42: `cache stats` and `cache export` could not even open it."
    ro = tmp_path / "ro"; ro.mkdir()
    c = Cache(ro / "c.sqlite"); req = {"messages": []}
    c.put(Entry(key=request_key("chat", req), kind="chat", model="m", stage="s", request=req, response={"text": "x"}))
    c._con().close()   # the last connection: SQLite folds the WAL in and removes it, as at a process's exit
    before = sorted(p.name for p in ro.iterdir())
    assert before == ["c.sqlite"]
    r = _read_only(ro, ["cache", "stats", "--cache", ro / "c.sqlite"])
    assert r.returncode == 0 and "1 entries" in r.stdout, r.stderr
    r = _read_only(ro, ["cache", "export", tmp_path / "out.jsonl", "--cache", ro / "c.sqlite"])
    assert r.returncode == 0 and "wrote 1 entries" in r.stdout, r.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text())["response"] == {"text": "x"}
    assert sorted(p.name for p in ro.iterdir()) == before
