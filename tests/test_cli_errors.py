"""Issue 22, part 3: each foreseeable mistake on the command line ends in one line on stderr (`pace: error: ...`), exit
status 2 and no traceback, and leaves no file or folder behind (and changes none that was there). One table of command
lines, run in-process through `pace.cli.main` with the hash embedder and BM25, so no model is needed."""
import json, os, re, shutil, subprocess, sys, time
from pathlib import Path
import pytest
from pace.llm import Cached
from pace.cli import main

PKG_ROOT = Path(sys.modules["pace.cli"].__file__).resolve().parents[1]   # the pace under test, for child processes

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "tiny"
CAL = ROOT / "tests" / "fixtures" / "judge_calibration" / "tiny.jsonl"
RUN = ["run", "--data", str(TINY), "--embedder", "hash:hash", "--retrieval-only", "--methods", "bm25", "--no-progress", "--limit", "2"]


def tree(t: Path) -> dict:
    "Every path under `t`: folders as None, files as their bytes (SQLite files by name only: SQLite may checkpoint them)."
    out = {}
    for p in sorted(t.rglob("*")):
        if p.name.endswith(("-wal", "-shm", "-journal")): continue
        out[p.relative_to(t).as_posix()] = None if p.is_dir() or p.suffix == ".sqlite" else p.read_bytes()
    return out

# --- what a case finds before its command ------------------------------------------------------------------------

def a_file(t):
    (t / "f").write_text("not a folder, not a database\n")

def a_folder(t):
    (t / "cdir").mkdir()

def a_finished_run(t):
    assert main([*RUN, "--out", str(t / "runs"), "--name", "r"]) == 0
    assert len((t / "runs" / "r" / "results.jsonl").read_text().splitlines()) == 2

def a_damaged_middle_line(t):
    a_finished_run(t)
    p = t / "runs" / "r" / "results.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    p.write_text(lines[0][:40] + "\n" + "".join(lines[1:]))

def rows_without_run_json(t):
    a_finished_run(t); (t / "runs" / "r" / "run.json").unlink()

def a_run_in_progress(t):
    from pace.runfolder import RunLock
    a_finished_run(t)
    lock = RunLock(t / "runs" / "r"); lock.acquire()
    return lock.release

def a_lock_from_another_machine(t):
    a_finished_run(t)
    (t / "runs" / "r" / "run.lock").write_text(json.dumps(dict(pid=4242, host="another-machine", since="2026-01-01T00:00:00")))

def a_bad_byte_in_a_fact(t):
    shutil.copytree(TINY, t / "data")
    kb = sorted((t / "data" / "kb").glob("*.jsonl"))[0]
    kb.write_bytes(kb.read_bytes().replace(b'"text": "', b'"text": "\xff', 1))   # the first fact: gold evidence of a query

def export_lines(body: bytes):
    def setup(t): (t / "export.jsonl").write_bytes(body)
    return setup

def a_cache(t):
    from pace.cache import Cache, Entry, request_key
    req = {"fingerprint": {"backend": "hash", "model_id": "h"}, "text": "x"}
    Cache(t / "c.sqlite").put(Entry(key=request_key("embed", req), kind="embed", model="h", stage="index", request=req, response={"f32": "AACAPw=="}))

def a_dataset_with_id(iid: str, kb_at=None):
    "tiny with its one instance renamed `iid` (queries too); its KB moved to `kb_at` (relative to T), or dropped."
    def setup(t):
        d = t / "data"; shutil.copytree(TINY, d)
        kb = d / "kb" / "tiny-maya.jsonl"
        for f in ("instances.jsonl", "queries.jsonl"):
            rows = [json.loads(l) for l in (d / f).read_text().splitlines() if l.strip()]
            (d / f).write_text("".join(json.dumps({**r, "instance_id": iid}) + "\n" for r in rows))
        if kb_at: (t / kb_at).parent.mkdir(parents=True, exist_ok=True); kb.rename(t / kb_at)
        else: kb.unlink()
    return setup

def a_locked_cache(t):
    "A cache whose write lock another process holds (an sqlite3 shell left in BEGIN IMMEDIATE), waited for 0.3 s."
    import pace.cache as pc
    from pace.cache import Cache, export_cache
    a_cache(t); export_cache(Cache(t / "c.sqlite"), t / "export.jsonl")   # an entry whose key matches: it is written
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
                               "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(120)", str(t / "c.sqlite")],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    old = getattr(pc, "LOCK_TIMEOUT", None); pc.LOCK_TIMEOUT = 0.3
    def done():
        holder.kill(); holder.wait(); pc.LOCK_TIMEOUT = old
    return done

def a_seed_file(name: str, body: bytes):
    def setup(t): (t / name).write_bytes(body)
    return setup
def a_full_folder(t):
    (t / "out").mkdir(); (t / "out" / "keep").write_text("x\n")

def the_authors_layout(t):
    "data of the tiny fixture exported as the authors' loader writes it (kb/<case_id>/corpus.json, ...)."
    assert main(["data", "export", str(TINY), str(t / "off")]) == 0

def a_hub_copy_with_a_dangling_gold_id(t):
    import datasets
    from pace.release import pace_to_release
    from pace.data import load_pace_dataset
    tables = pace_to_release(load_pace_dataset(TINY))
    tables["queries"][1]["gold_doc_ids"] = tables["queries"][1]["gold_doc_ids"] + ["zz"]
    (t / "hub" / "data").mkdir(parents=True)
    for c, rows in tables.items(): datasets.Dataset.from_list(rows).to_parquet(str(t / "hub" / "data" / f"{c}.parquet"))

def facts_of_two_types(t):
    shutil.copytree(TINY, t / "data")
    kb = sorted((t / "data" / "kb").glob("*.jsonl"))[0]
    lines = kb.read_text().splitlines()
    facts = [json.loads(l) for l in lines]
    facts[0]["meta"], facts[1]["meta"] = {"n": 1}, {"n": "one"}
    kb.write_text("".join(json.dumps(f) + "\n" for f in facts))

GOOD_LINE = (b'{"completion_tokens": 0, "key": "k", "kind": "chat", "model": "m", "prompt_tokens": 0, "request": {}, '
             b'"response": [1], "seconds": 0.0, "stage": "s"}\n')

CASES = [   # id, what the folder holds first, the command line (T is the test's folder), what the error says
    ("run --out is a file", a_file, [*RUN, "--out", "T/f"], r"--out \S+/f is a file"),
    ("run --out below a file", a_file, [*RUN, "--out", "T/f/sub"], r"cannot make the run folder .*Not a directory"),
    ("run --cache is a folder", a_folder, [*RUN, "--out", "T/runs", "--cache", "T/cdir"], r"--cache \S+cdir: cache \S+ is a folder"),
    ("run --cache is not SQLite", a_file, [*RUN, "--out", "T/runs", "--cache", "T/f"], r"--cache \S+/f: \S+ is not a SQLite file"),
    ("run --embedder no such ONNX model", None, [*RUN, "--out", "T/runs", "--embedder", "onnx:nosuchmodel"],
     r"--embedder onnx:nosuchmodel: .*(no file nosuchmodel/model.onnx|onnxruntime)"),
    ("run --embedder of size 0", None, [*RUN, "--out", "T/runs", "--embedder", '{"backend": "hash", "dim": 0}'],
     r"dim must be a whole number >= 1, got 0"),
    ("run --name ../x", None, [*RUN, "--out", "T/runs", "--name", "../x"], r"--name '\.\./x': a run name is one folder name"),
    ("run --name a/b", None, [*RUN, "--out", "T/runs", "--name", "a/b"], r"a run name is one folder name"),
    ("run on a damaged middle line", a_damaged_middle_line, [*RUN, "--out", "T/runs", "--name", "r"],
     r"results\.jsonl: line 1 is not a valid JSON object \(and is not the last line\)"),
    ("run on rows without run.json", rows_without_run_json, [*RUN, "--out", "T/runs", "--name", "r"], r"holds result rows but no run\.json"),
    ("run on a folder in use", a_run_in_progress, [*RUN, "--out", "T/runs", "--name", "r"], rf"is in use by pid {os.getpid()} on "),
    ("run on a folder locked elsewhere", a_lock_from_another_machine, [*RUN, "--out", "T/runs", "--name", "r"],
     r"locked by pid 4242 on another-machine .*delete \S+run\.lock"),
    ("run on a dataset with a bad byte", a_bad_byte_in_a_fact, [*RUN, "--out", "T/runs", "--data", "T/data"],
     r"kb/\S+\.jsonl:1: not UTF-8 text: byte 0xff at column \d+$"),
    ("generate --out below a file", a_file, ["generate", "--out", "T/f/sub", "--personas", "1"], r"f/sub: Not a directory"),
    ("cache stats of a file that is not SQLite", a_file, ["cache", "stats", "--cache", "T/f"], r"\S+/f is not a SQLite file"),
    ("cache stats of a folder", a_folder, ["cache", "stats", "--cache", "T/cdir"], r"cache \S+cdir is a folder"),
    ("cache import of bad JSON", export_lines(GOOD_LINE + b'{"key": "x", \n'), ["cache", "import", "T/export.jsonl", "--cache", "T/c.sqlite"],
     r"export\.jsonl:2: invalid JSON"),
    ("cache import of a line that is no object", export_lines(GOOD_LINE + b"[1, 2]\n"), ["cache", "import", "T/export.jsonl", "--cache", "T/c.sqlite"],
     r"export\.jsonl:2: expected a JSON object, got list"),
    ("cache import of a byte that is not UTF-8", export_lines(GOOD_LINE + b'{"key": "\xff"}\n'),
     ["cache", "import", "T/export.jsonl", "--cache", "T/c.sqlite"], r"export\.jsonl:2: not UTF-8 text \(byte 0xff at column 10\)"),
    ("cache import of a line that is no entry", export_lines(b'{"key": "x"}\n'), ["cache", "import", "T/export.jsonl", "--cache", "T/c.sqlite"],
     r"export\.jsonl:1: not a cache entry"),
    ("cache import of a missing file", None, ["cache", "import", "T/nowhere.jsonl", "--cache", "T/c.sqlite"], r"nowhere\.jsonl: No such file"),
    ("cache export of a missing cache", None, ["cache", "export", "T/out.jsonl", "--cache", "T/c.sqlite"], r"no cache file at \S+c\.sqlite"),
    ("cache export to a folder", a_cache, ["cache", "export", "T", "--cache", "T/c.sqlite"], r": Is a directory"),
    ("data import into a folder that holds files", a_full_folder, ["data", "import", str(TINY), "T/out"],
     r"\S+/out: exists and is not empty; give a new folder"),
    ("data import of a folder that is not there", None, ["data", "import", "T/nowhere", "T/out"],
     r"nowhere: no such folder, and not a hub dataset id"),
    ("data import of a PACE folder", None, ["data", "import", str(TINY), "T/out"], r"tiny: a PACE folder already"),
    ("data import of the kb/ folder alone", the_authors_layout, ["data", "import", "T/off/kb", "T/out"],
     r"the kb/ folder of the authors' layout: .*`pace data import \S+/off OUT`"),
    ("data import --strict of a dangling gold id", a_hub_copy_with_a_dangling_gold_id, ["data", "import", "T/hub", "T/out", "--strict"],
     r"queries row 1: field 'gold_doc_ids.2': 'zz' is not a doc_id of the corpus of case 'tiny-maya'$"),
    ("data check on the authors' layout", the_authors_layout, ["data", "check", "T/off"],
     r"off: not a PACE folder but the authors' release layout .*`pace data import \S+/off OUT`, then use OUT$"),
    ("run --data on the authors' layout", the_authors_layout, [*RUN, "--data", "T/off", "--out", "T/runs"],
     r"off: not a PACE folder but the authors' release layout .*`pace data import \S+/off OUT`"),
    ("data export into a folder that holds files", a_full_folder, ["data", "export", str(TINY), "T/out"],
     r"exists and is not empty"),
    ("data export --layout hub of a field of two types", facts_of_two_types,
     ["data", "export", "T/data", "T/out", "--layout", "hub"], r"corpus: its rows cannot be one table .*--layout official"),
    ("judge calibrate with a bad judge spec", None,
     ["judge", "calibrate", "--judge", "nocolon", "--set", str(CAL), "--data", str(TINY), "--out", "T/cal/run", "--no-progress"],
     r"--judge 'nocolon': model spec must look like 'backend:model'"),
    ("run --name .", None, [*RUN, "--out", "T/runs", "--name", "."],
     r"--name '\.': a run name is one folder name inside --out; this one starts with '\.'"),
    ("run --name=-x", None, [*RUN, "--out", "T/runs", "--name=-x"], r"this one starts with '-'"),
    ("run --out ''", None, [*RUN, "--out", ""], r"--out '': give a folder"),
    ("run --workers -3", None, [*RUN, "--out", "T/runs", "--workers", "-3"], r"--workers: must be >= 1, got -3"),
    ("run --data is a file", a_file, [*RUN, "--out", "T/runs", "--data", "T/f"], r"^pace: error: \S+/f: not a dataset folder$"),
    ("run on an instance_id with a NUL", a_dataset_with_id("tiny\0maya"), [*RUN, "--out", "T/runs", "--data", "T/data"],
     r"instances\.jsonl:1: field 'instance_id': 'tiny\\x00maya' holds the control character U\+0000 \(NUL\)"),
    ("run on an instance_id that is a path out of the dataset", a_dataset_with_id("../victim", kb_at="victim.jsonl"),
     [*RUN, "--out", "T/runs", "--data", "T/data"], r"'\.\./victim' holds a path separator .*kb/<id>\.jsonl"),
    ("cache import into a cache another process holds", a_locked_cache, ["cache", "import", "T/export.jsonl", "--cache", "T/c.sqlite"],
     r"cache \S+c\.sqlite is locked by another process \(its write lock was held for more than 0\.3 s\)"),
    ("generate with a persona file that is not UTF-8", a_seed_file("p.txt", "Ann keeps bees.\nZo\xeb runs a caf\xe9.\n".encode("latin-1")),
     ["generate", "--out", "T/gen", "--personas", "T/p.txt", "--chat", "fake:echo", "--embedder", "hash:hash"], r"--personas \S+p\.txt:2: not UTF-8 text \(byte 0xeb\)"),
    ("generate with a CSV persona file", a_seed_file("p.csv", b"seed_id,persona\nann,Ann keeps bees.\n"),
     ["generate", "--out", "T/gen", "--personas", "T/p.csv", "--chat", "fake:echo", "--embedder", "hash:hash"], r"a seed file is \.jsonl .*\.json .*\.txt .*not \.csv$"),
    ("generate with a JSON persona file that is no array", a_seed_file("p.json", b'{"persona": "Ann keeps bees."}'),
     ["generate", "--out", "T/gen", "--personas", "T/p.json", "--chat", "fake:echo", "--embedder", "hash:hash"], r"a \.json seed file holds one array of personas, not a dict"),
    ("generate --out ''", None, ["generate", "--out", "", "--personas", "1", "--chat", "fake:echo", "--embedder", "hash:hash"], r"--out '': give a folder"),
    # issue 42: accepted without a word before
    ("run --config with a key twice", None, [*RUN, "--out", "T/runs", "--config", "hops=3,hops=4"], r"argument --config: 'hops' given twice"),
    ("run --config JSON with a key twice", None, [*RUN, "--out", "T/runs", "--config", '{"hops": 3, "hops": 4}'], r"--config: not valid JSON: 'hops' given twice"),
    ("run --config w_counter=inf", None, [*RUN, "--out", "T/runs", "--config", "w_counter=inf"], r"bad --config: w_counter: inf is not a finite number$"),
    ("run --config JSON Infinity", None, [*RUN, "--out", "T/runs", "--config", '{"w_counter": Infinity}'], r"--config: not valid JSON: Infinity is not a finite number"),
    ("run --chat JSON with Infinity", None, [*RUN, "--out", "T/runs", "--chat", '{"backend": "fake", "model": "m", "temperature": Infinity}'],
     r"bad --chat: temperature: inf is not a finite number$"),
    ("run --max-rps inf", None, [*RUN, "--out", "T/runs", "--max-rps", "inf"], r"argument --max-rps: must be a finite number > 0, got inf"),
    ("run --judge-max-tokens 0", None, [*RUN, "--out", "T/runs", "--judge-max-tokens", "0"], r"argument --judge-max-tokens: must be >= 1, got 0"),
    ("run --judge with --retrieval-only", None, [*RUN, "--out", "T/runs", "--judge", "fake:echo"],
     r"--judge with --retrieval-only: a retrieval-only run answers and judges nothing"),
    ("run --shard with a full-width digit", None, [*RUN, "--out", "T/runs", "--shard", "\uff11/2"], r"--shard \uff11/2: use K/N with 0 <= K < N"),
    ("run --shard -1/2", None, [*RUN, "--out", "T/runs", "--shard", "-1/2"], r"--shard -1/2: use K/N with 0 <= K < N"),
    ("run --limit with an Arabic-Indic digit", None, [*RUN, "--out", "T/runs", "--limit", "\u0662"], r"argument --limit: expected a whole number"),
    ("run a plug-in whose __init__ takes two arguments", a_seed_file("own.py", b"from pace.methods.baselines import Retriever\n"
     b"class TwoArgs(Retriever):\n    def __init__(self, chat_model, index): super().__init__(chat_model, index)\n"),
     [*RUN, "--out", "T/runs", "--methods", "T/own.py:TwoArgs"],
     r"--methods \S+own\.py:TwoArgs: pace builds it as TwoArgs\(chat_model, index, answer_max_tokens=\.\.\., .*\) cannot take "
     r"\(got an unexpected keyword argument 'answer_max_tokens'\)"),
]


@pytest.mark.parametrize("setup, argv, msg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_mistake_is_one_line_exit_2_and_leaves_nothing(tmp_path, capsys, monkeypatch, setup, argv, msg):
    monkeypatch.delenv("PACE_DEBUG", raising=False)
    done = setup(tmp_path) if setup else None
    capsys.readouterr()
    before = tree(tmp_path)
    try:
        try: code = main([a.replace("T/", f"{tmp_path}/") if a.startswith("T/") else (str(tmp_path) if a == "T" else a) for a in argv])
        except SystemExit as e: code = e.code
        after = tree(tmp_path)
    finally:
        if done: done()
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert re.match(r"pace( \w+)?: error: ", err) and re.search(msg, err.strip()), err
    assert after == before       # nothing made, nothing changed


def test_read_only_cache_commands_create_nothing(tmp_path, capsys):
    cache = tmp_path / "none" / "c.sqlite"
    assert main(["cache", "stats", "--cache", str(cache)]) == 0
    assert main(["cache", "stats", "--json", "--cache", str(cache)]) == 0
    assert main(["cache", "clear", "--all", "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "no such file (0 entries)" in out and '"entries": 0' in out and "deleted 0 entries" in out
    assert not any(tmp_path.iterdir())


def test_a_closed_stdout_pipe_ends_quietly(tmp_path):
    "`pace data check data/mini | head -1`: the reader goes away; no traceback, no 'Exception ignored', SIGPIPE's status."
    p = subprocess.Popen([sys.executable, "-m", "pace.cli", "data", "check", str(ROOT / "data" / "mini")], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()                       # before the command writes a byte: its first write finds no reader
    err = p.stderr.read().decode(); p.wait(120)
    assert p.returncode == 141 and err == "", err


def test_ctrl_c_outside_a_run_is_one_line_and_130(tmp_path, capsys, monkeypatch):
    import pace.cli
    def interrupted(a): raise KeyboardInterrupt
    monkeypatch.setattr(pace.cli, "data_check", lambda path: interrupted(path))
    assert main(["data", "check", str(TINY)]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "pace data: interrupted"


def test_judge_calibrate_with_a_judge_that_cannot_be_built_leaves_no_default_folder(tmp_path, capsys, monkeypatch):
    "No --out: the default results/judge_calibration/<judge>-blind/ must not be left behind, empty or not."
    monkeypatch.chdir(tmp_path); monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for spec in ("nosuchbackend:m", "openai:gpt-x"):
        code = main(["judge", "calibrate", "--judge", spec, "--set", str(CAL), "--data", str(TINY), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not any(tmp_path.rglob("*")), sorted(tmp_path.rglob("*"))


# --- issue 30: Ctrl-C, a full disk, the torn-line notice ------------------------------------------------------------

def test_ctrl_c_during_a_cache_commit_is_one_line_and_130(tmp_path, capsys, monkeypatch):
    "The Ctrl-C lands while COMMIT runs: the commit stands, no ROLLBACK error hides the interrupt."
    import sqlite3
    from pace.cache import Cache, export_cache
    a_cache(tmp_path); export_cache(Cache(tmp_path / "c.sqlite"), tmp_path / "export.jsonl")

    class InterruptedCommit(sqlite3.Connection):
        def execute(self, sql, *a):
            r = super().execute(sql, *a)
            if sql == "COMMIT": raise KeyboardInterrupt   # SQLite has committed; Python raises right after
            return r
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **kw: connect(*a, **kw, factory=InterruptedCommit))
    assert main(["cache", "import", str(tmp_path / "export.jsonl"), "--cache", str(tmp_path / "d.sqlite")]) == 130
    assert capsys.readouterr().err == "pace cache: interrupted\n"
    monkeypatch.setattr(sqlite3, "connect", connect)
    assert Cache(tmp_path / "d.sqlite").stats()["entries"] == 1          # the committed entry is kept


INTERRUPT_AT_IMPORT = """
import sys
class Interrupt:   # a Ctrl-C while module {mod} is imported
    def find_spec(self, name, path=None, target=None):
        if name == {mod!r}: raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, Interrupt())
from pace.cli import main
sys.exit(main(["data", "check", "nowhere"]))
"""


@pytest.mark.parametrize("mod", ["pace.llm", "pace.eval.run"], ids=["importing pace.cli", "building the parser"])
def test_ctrl_c_while_the_cli_starts_is_one_line_and_130(tmp_path, mod):
    p = subprocess.run([sys.executable, "-c", INTERRUPT_AT_IMPORT.format(mod=mod)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(PKG_ROOT)})
    assert (p.returncode, p.stderr) == (130, "pace: interrupted\n"), p.stderr


SLEEPER = {"cells": [{"cell_type": "markdown", "id": "title", "metadata": {}, "source": ["# A notebook that waits"]},
                     {"cell_type": "code", "id": "params", "metadata": {"tags": ["parameters"]}, "execution_count": None, "outputs": [],
                      "source": ["out_dir = 'out'   # where it would save\n", "marker = 'started'   # made when the wait begins"]},
                     {"cell_type": "code", "id": "wait", "metadata": {}, "execution_count": None, "outputs": [],
                      "source": ["import time, pathlib\n", "pathlib.Path(marker).write_text('x')\n", "time.sleep(120)"]}],
           "metadata": {"kernelspec": {"display_name": "python3", "language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.slow
def test_ctrl_c_inside_pace_reproduce_is_one_line_and_130(tmp_path):
    "The kernel's own log (a traceback of its sockets closing) no longer reaches the terminal."
    import signal
    (tmp_path / "exps").mkdir(); (tmp_path / "exps" / "01_wait.ipynb").write_text(json.dumps(SLEEPER))
    marker = tmp_path / "started"
    p = subprocess.Popen([sys.executable, "-m", "pace.cli", "reproduce", "--dir", str(tmp_path / "exps"), "-p", f"marker={marker}",
                          "--no-progress"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(PKG_ROOT)},
                         # as in a terminal: a shell without job control starts `cmd &` with SIGINT ignored, and
                         # Python keeps an ignored SIGINT, so a suite run in the background would never see the Ctrl-C
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t0 = time.time()
    while not marker.exists() and time.time() - t0 < 180 and p.poll() is None: time.sleep(0.2)
    assert marker.exists(), p.stderr.read() if p.poll() is not None else "the notebook never started"
    time.sleep(0.5); p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    time.sleep(1)   # a kernel that logs on its way out would have done so by now
    assert (p.returncode, err) == (130, "pace reproduce: interrupted\n"), err


def test_the_torn_line_notice_is_one_plain_line(tmp_path, capsys):
    a_finished_run(tmp_path)
    p = tmp_path / "runs" / "r" / "results.jsonl"
    p.write_bytes(p.read_bytes()[:-30])                                     # a kill in the middle of the last row
    capsys.readouterr()
    assert main([*RUN, "--out", str(tmp_path / "runs"), "--name", "r"]) == 0
    notes = [l for l in capsys.readouterr().err.splitlines() if "cut short" in l]
    assert len(notes) == 1 and notes[0].startswith(f"pace: warning: {p}: line 2 is cut short"), notes
    assert notes[0].endswith("removed from the file")


def test_a_full_disk_names_the_file_and_leaves_the_run_partial(tmp_path, capsys, monkeypatch):
    "Simulated ENOSPC: the first row cannot be appended, and no new run.json can be written either."
    import errno
    import pace.eval.run as pr, pace.runfolder as rf   # the run's manifest goes through its JobFolder
    full, write_manifest = [], rf.write_manifest
    def append_row(f, row):
        full.append(True); raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))   # as a write to a full disk says it
    def no_room(*a, **kw):
        if full: raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(a[0] / "run.json.tmp"))
        return write_manifest(*a, **kw)
    monkeypatch.setattr(pr, "append_row", append_row); monkeypatch.setattr(rf, "write_manifest", no_room)
    monkeypatch.delenv("PACE_DEBUG", raising=False)
    assert main([*RUN, "--out", str(tmp_path / "runs"), "--name", "r"]) == 2
    err = capsys.readouterr().err
    run = tmp_path / "runs" / "r"
    assert err == f"pace: error: {run / 'timings.jsonl'}: No space left on device\n", err
    assert json.loads((run / "run.json").read_text())["status"] == "partial"


# --- issue 30: an id is never a path (the fuzz) ---------------------------------------------------------------------

BAD_IDS = {"slash": "sub/x", "absolute": "ABS", "backslash": "a\\b", "dotdot": "../../victim", "dots": "..", "nul": "tiny\0maya",
           "leading dash": "-rf", "leading dot": ".hidden", "300 characters": "x" * 300, "division slash U+2215": "a\u2215b",
           "fullwidth solidus U+FF0F": "a\uff0fb", "fraction slash U+2044": "a\u2044b", "fullwidth reverse solidus U+FF3C": "a\uff3cb",
           "fullwidth dots U+FF0E": "\uff0e\uff0e", "one dot leader U+2024": "a\u2024\u2024b", "a newline": "a\nb"}


def hostile_dataset(t: Path, iid: str) -> Path:
    "tiny with its instance renamed `iid`, and its KB put where `kb/<iid>.jsonl` points (when that is a path at all)."
    victim = t / "outside" / "victim"
    iid = str(victim) if iid == "ABS" else iid
    a_dataset_with_id(iid)(t)
    kb = TINY / "kb" / "tiny-maya.jsonl"
    if "\0" not in iid:
        target = (t / "data" / "kb" / f"{iid}.jsonl")
        try:
            target.parent.mkdir(parents=True, exist_ok=True); target.write_bytes(kb.read_bytes())   # what a loader that made a path would read
        except OSError: pass   # a name the file system refuses itself
    return t / "data"


def refused_in_one_line(out: str, err: str, code: int, expect_code: int = 2) -> str:
    text = (err or out).strip()
    assert code == expect_code and len(text.splitlines()) == 1 and "Traceback" not in err + out, (code, out, err)
    return text


@pytest.mark.parametrize("iid", list(BAD_IDS.values()), ids=list(BAD_IDS))
def test_an_id_that_is_not_one_file_name_is_refused_everywhere(tmp_path, capsys, monkeypatch, iid):
    monkeypatch.delenv("PACE_DEBUG", raising=False)
    data = hostile_dataset(tmp_path, iid)
    iid = str(tmp_path / "outside" / "victim") if iid == "ABS" else iid
    before = tree(tmp_path)
    # data check and data verify: one line naming instances.jsonl:1, exit 1
    for cmd in ("check", "verify"):
        code = main(["data", cmd, str(data)]); cap = capsys.readouterr()
        line = refused_in_one_line(cap.out, cap.err, code, expect_code=1)
        assert line.startswith(f"{data}: instances.jsonl:1: field 'instance_id': ") and "one file name" in line, line
    # run: one line, exit 2, nothing made under --out
    code = main([*RUN, "--data", str(data), "--out", str(tmp_path / "runs")]); cap = capsys.readouterr()
    assert "instances.jsonl:1: field 'instance_id'" in refused_in_one_line(cap.out, cap.err, code)
    # run --name with the id
    code = main([*RUN, "--out", str(tmp_path / "runs"), f"--name={iid}"]); cap = capsys.readouterr()
    assert "a run name is one folder name inside --out" in refused_in_one_line(cap.out, cap.err, code)
    # generate: the id as a seed id
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps({"seed_id": iid, "persona": "I keep bees in Leeds."}) + "\n")
    code = main(["generate", "--out", str(tmp_path / "gen"), "--personas", str(seeds), "--chat", "fake:echo", "--embedder", "hash:hash"]); cap = capsys.readouterr()
    assert "seed_id" in refused_in_one_line(cap.out, cap.err, code)
    seeds.unlink()
    # the experiment notebooks' subset writer (pace reproduce 07 -p instance=...), in process
    from pace.eval.reproduce import subset_dataset
    from pace.data import UsageError
    with pytest.raises(UsageError, match="it names a file"): subset_dataset(data, tmp_path / "sub", iid, 6, 40)
    with pytest.raises(UsageError, match="it names a file"): subset_dataset(ROOT / "data" / "mini", tmp_path / "sub", iid, 6, 40)
    assert tree(tmp_path) == before                                          # nothing written, inside or outside


@pytest.mark.slow
@pytest.mark.parametrize("iid", ["ABS", "../../victim", "tiny\0maya"], ids=["absolute", "dotdot", "nul"])
def test_pace_reproduce_07_refuses_an_instance_that_is_a_path(tmp_path, capsys, iid):
    "The issue's data loss: `pace reproduce 07 -p instance=<a path>` overwrote the file <that path>.jsonl."
    data = hostile_dataset(tmp_path, iid)
    iid = str(tmp_path / "outside" / "victim") if iid == "ABS" else iid
    before = tree(tmp_path)
    code = main(["reproduce", "07", "-p", f"dataset={data}", "-p", f"instance={iid}", "-p", f"out_dir={tmp_path / 'out'}", "--no-progress"])
    cap = capsys.readouterr()
    assert code == 2 and len(cap.err.strip().splitlines()) == 1 and "Traceback" not in cap.err, cap.err
    assert "07_structured_methods failed: " in cap.err and "it names a file" in cap.err, cap.err
    assert tree(tmp_path) == before


# --- issue 42 and 44: a plug-in's junk and unchecked ids are refused per row, in one line each --------------------------

JUNK = """
from pace.methods.baselines import Retriever, MethodResult

class Junk(Retriever):
    name = "junk"
    def search(self, idx, q):
        hits = idx.dense([q], 33)[0]
        return {what}

class OwnRun:
    name, ranked, needs_llm, k = "own_run", True, False, 10
    def __init__(self, chat_model, index, **kw): pass
    def run(self, query, instance, kb, answer=True): return {what}
"""

# what the plug-in returns, its class, and what the refusal says (None: normalised, the row is kept)
PLUGIN_JUNK = {
    "None": ("None", "Junk", r"search returned None \(NoneType\), not a list of \(doc_id, score\) pairs"),
    "(None, score)": ("[(None, 1.0)]", "Junk", r"search's hit 1 is \(None, 1\.0\) \(tuple\): a hit is \(doc_id, score\)"),
    "an int id": ("[(7, 1.0)]", "Junk", r"search's hit 1 is \(7, 1\.0\) \(tuple\)"),
    "a pair of ids": ("[(d, d) for d, _ in hits][:3]", "Junk", r"search's hit 1 is \('m\d+', 'm\d+'\)"),
    "an unknown id": ("[('no-such-fact', 9.0)] + hits[:3]", "Junk", r"ids: 1 not a fact of the instance \(the first 'no-such-fact'\)$"),
    "a duplicate": ("hits[:3] + hits[:1]", "Junk", r"ids: 1 given more than once \(the first 'm\d+'\)$"),
    "33 ids at k=10": ("hits", "Junk", r"ids: 33 ids where 10 were asked for$"),
    "all three": ("hits + hits[:1] + [('zz', 0.0)]", "Junk", r"ids: 35 ids where 10 were asked for; 1 not a fact .*'zz'.*; 1 given more than once"),
    "run returns None": ("None", "OwnRun", r"run returned None \(NoneType\), not a MethodResult"),
    "run returns bare ids": ("['m01']", "OwnRun", r"run returned \['m01'\] \(list\), not a MethodResult"),
    "run returns unknown ids": ("MethodResult(retrieved_ids=['zz'], ranked=True, answer=None, trace={})", "OwnRun",
                                r"retrieved_ids: 1 not a fact of the instance \(the first 'zz'\)"),
    "bare ids (normalised)": ("[d for d, _ in hits][:10]", "Junk", None),
    "a generator (normalised)": ("(h for h in hits[:10])", "Junk", None),
}


@pytest.mark.parametrize("what, cls, msg", list(PLUGIN_JUNK.values()), ids=list(PLUGIN_JUNK))
def test_a_plug_in_that_returns_junk_gets_one_line_per_query_and_a_failed_row(tmp_path, capsys, monkeypatch, what, cls, msg):
    "Retrieval-only: before, each of these was a traceback (or, for unknown ids, duplicates and 33 ids, scored without a word)."
    monkeypatch.delenv("PACE_DEBUG", raising=False)
    (tmp_path / "junk.py").write_text(JUNK.format(what=what))
    code = main([*RUN, "--limit", "0", "--out", str(tmp_path / "runs"), "--name", "r", "--methods", f"bm25,{tmp_path}/junk.py:{cls}"])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    rows = read_rows(tmp_path / "runs" / "r" / "results.jsonl")
    mine = [r for r in rows if r["method"] != "bm25"]
    assert len(mine) == 4 and len(rows) == 8
    warned = [l for l in err.splitlines() if l.startswith("pace: warning: method ")]
    if msg is None:                                                    # normalised: the ids are kept and scored
        assert warned == [] and all(len(r["retrieved_ids"]) == 10 and not r["failed"]["agent"] for r in mine)
        return
    name = "junk" if cls == "Junk" else "own_run"
    assert len(warned) == 4 and all(re.search(rf"^pace: warning: method {name}, query tiny-q\d: {msg.rstrip('$')}.*; the row is recorded as failed \(stage 'output'\)$", l) for l in warned), warned
    for r in mine:
        assert (r["retrieved_ids"], r["evidence"], r["answer"], r["failed"]["agent"]) == ([], {"final": []}, None, ["output"])
        call = r["trace"]["calls"][0]
        assert call["stage"] == "output" and not call["ok"] and re.search(rf"^method {name}, query {r['query_id']}: {msg}", call["error"])
    tables = (tmp_path / "runs" / "r" / "tables.md").read_text()
    assert re.search(rf"\| {name}\s+\| output\s+\|\s+4\s+\|\s+4\s+\|\s+100", tables), tables      # the failures table counts them
    man = json.loads((tmp_path / "runs" / "r" / "run.json").read_text())
    assert man["n_pairs_with_failures"] == 4


def read_rows(p):
    return [json.loads(l) for l in Path(p).read_text().splitlines() if l.strip()]


def test_unchecked_ids_never_reach_the_answer_prompt_nor_the_scores(tmp_path, monkeypatch):
    "Answered with scripted models: before, unknown ids crashed the run with KeyError, and repeats and 33 ids were scored."
    from pace.eval.run import run_experiment
    from pace.testing import FakeChat, schema_reply
    from pace.eval.evaluate import results_frame, table2
    (tmp_path / "junk.py").write_text(JUNK.format(what="hits if 'Rear Window' in q else [('zz', 1.0)] + hits[:3] if 'dentist' in q "
                                                       "else hits[:4] + hits[:1] if len(q) % 2 else hits[:10]"))
    prompts = []
    def spy(messages, schema):
        prompts.append("\n".join(m["content"] for m in messages)); return schema_reply(messages, schema)
    res = run_experiment(dataset=str(TINY), methods=[f"{tmp_path}/junk.py:Junk"], chat=Cached(FakeChat(spy), False), embedder="hash:hash",
                         out_dir=tmp_path, name="a", cache=False, limit=0, progress=False)
    rows = read_rows(res["results"])
    refused = [r for r in rows if r["failed"]["agent"] == ["output"]]
    kept = [r for r in rows if not r["failed"]["agent"]]
    assert len(refused) >= 2 and len(rows) == 4 and len(refused) + len(kept) == 4
    assert {r["query_id"] for r in refused} >= {"tiny-q1"}                       # 33 ids at k=10 for the Rear Window request
    for r in refused:                                                            # nothing answered, nothing judged, no call made
        assert (r["retrieved_ids"], r["answer"], r["judge"], r["judge_calls"], r["usage"]) == ([], None, None, [], {})
    for r in kept: assert len(r["retrieved_ids"]) == 10 and r["answer"] is not None and r["judge"]["label"]
    # every model call belongs to a kept row: one answer and its judge calls each
    assert len(prompts) == sum(u["calls"] for r in kept for u in [*r["usage"].values(), *r["judge_usage"].values()])
    assert not any(r["query"] in p for r in refused for p in prompts)
    df = results_frame(rows)
    t = table2(df)
    assert t.loc["junk", "n"] == 4 and t.loc["junk", "evidence"] == 10 * len(kept) / 4          # refused rows: 0 facts
    assert df[df.query_id.isin([r["query_id"] for r in refused])]["recall@10"].eq(0).all()
    assert df[df.query_id.isin([r["query_id"] for r in refused])]["pass"].isna().all()
    assert res["n_failed"] == len(refused)
    # the same plug-in retrieval-only: the same rows refused, no KeyError either way
    ro = run_experiment(dataset=str(TINY), methods=[f"{tmp_path}/junk.py:Junk"], embedder="hash:hash", out_dir=tmp_path, name="ro",
                        cache=False, limit=0, progress=False, retrieval_only=True)
    assert {r["query_id"] for r in read_rows(ro["results"]) if r["failed"]["agent"]} == {r["query_id"] for r in refused}


def test_a_plug_in_that_fails_to_build_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PACE_DEBUG", raising=False)
    (tmp_path / "own.py").write_text("from pace.methods.baselines import Retriever\nclass Breaks(Retriever):\n"
                                     "    def __init__(self, chat_model, index, **kw): raise RuntimeError('no GPU here')\n")
    code = main([*RUN, "--out", str(tmp_path / "runs"), "--methods", f"{tmp_path}/own.py:Breaks"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().endswith("own.py:Breaks: building Breaks failed: RuntimeError: no GPU here") and len(err.strip().splitlines()) == 1, err


def test_a_batched_plug_in_that_returns_junk_is_refused_per_row(tmp_path, capsys, monkeypatch):
    "`--batch 2` runs a class with `run_batch` through `run_batch_checked`: None, and one result too few, refuse each row."
    monkeypatch.delenv("PACE_DEBUG", raising=False)
    (tmp_path / "own.py").write_text("from pace.methods.baselines import MethodResult\n"
                                     "class Batched:\n    name, needs_llm = 'batched', False\n"
                                     "    def __init__(self, chat_model, index, **kw): pass\n"
                                     "    def run(self, query, instance, kb, answer=True): return None\n"
                                     "    def run_batch(self, queries, instances, kbs, answer=True):\n"
                                     "        return [MethodResult(retrieved_ids=[kb[0].doc_id], ranked=True, answer=None, trace={})"
                                     " for kb in kbs][:-1]\n")
    code = main([*RUN, "--limit", "0", "--out", str(tmp_path / "runs"), "--name", "b", "--batch", "2", "--methods", f"{tmp_path}/own.py:Batched"])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    rows = read_rows(tmp_path / "runs" / "b" / "results.jsonl")
    assert len(rows) == 4 and all(r["failed"]["agent"] == ["output"] and r["retrieved_ids"] == [] for r in rows)
    warned = [l for l in err.splitlines() if l.startswith("pace: warning: method batched, query tiny-q")]
    assert len(warned) == 4 and all("run_batch returned [MethodResult(" in l and "for 2 queries, not one result each" in l for l in warned), warned
