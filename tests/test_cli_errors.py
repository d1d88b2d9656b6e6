"""Issue 22, part 3: each foreseeable mistake on the command line ends in one line on stderr (`pace: error: ...`), exit
status 2 and no traceback, and leaves no file or folder behind (and changes none that was there). One table of command
lines, run in-process through `pace.cli.main` with the hash embedder and BM25, so no model is needed."""
import json, os, re, shutil, subprocess, sys
from pathlib import Path
import pytest
from pace.cli import main

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
    Cache(t / "c.sqlite").put(Entry(key=request_key("embed", req), kind="embed", model="h", stage="index", request=req, response=[1]))

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

GOOD_LINE = (b'{"completion_tokens": 0, "key": "k", "kind": "embed", "model": "m", "prompt_tokens": 0, "request": {}, '
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
    ("data import of a dangling gold id", a_hub_copy_with_a_dangling_gold_id, ["data", "import", "T/hub", "T/out"],
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
    monkeypatch.setattr(pace.cli, "data_check", lambda path, out=None: interrupted(path))
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
