"""Issue 42: a resume and `pace merge` see every change: the files a method of your own imports, a result row edited by
hand, the same dataset at another path; and a merge only reads its parts, refusing what is not a row of its job."""
import json, shutil, sys
from pathlib import Path
import pytest
from pace.cli import main
from pace.eval.evaluate import read_jsonl

digests_path = lambda p: Path(p).with_suffix(".sha256")   # where `pace.runfolder.digests_path` keeps a file's digests

ROOT = Path(__file__).resolve().parents[1]
TINY, MINI = ROOT / "tests" / "fixtures" / "tiny", ROOT / "data" / "mini"


def pace(capsys, *args) -> tuple[int, str, str]:
    "`pace ARGS` in this process: (exit status, stdout, stderr)."
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def run_args(out, data=TINY, methods="bm25", name="r", *more):
    return ["run", "--data", data, "--methods", methods, "--retrieval-only", "--embedder", "hash:hash", "--out", out,
            "--name", name, "--no-progress", *more]


def one_line(err: str) -> str:
    assert err.startswith("pace: error: ") and len(err.splitlines()) == 1, err
    return err


# --- 1. a plug-in is also what it imports ---------------------------------------------------------------------------

PLUG = '''
from pace.methods.baselines import Retriever
{imports}

class Mine(Retriever):
    name = "mine"
    def search(self, idx, q): return idx.sparse([q], self.k)[0][:N]
'''


def file_plugin(d: Path) -> tuple[str, Path]:
    "'plug.py:Mine', importing a module of the user's beside it: (spec, the imported file)."
    (d / "h42_helper.py").write_text("N = 3\n")
    (d / "h42_plug.py").write_text(PLUG.format(imports="from h42_helper import N"))
    return f"{d / 'h42_plug.py'}:Mine", d / "h42_helper.py"


def package_plugin(d: Path) -> tuple[str, Path]:
    "'pkg.plug:Mine', importing a module of its package relatively (inside a function, too)."
    (d / "h42pkg").mkdir()
    (d / "h42pkg" / "__init__.py").write_text("")
    (d / "h42pkg" / "util.py").write_text("N = 3\n")
    (d / "h42pkg" / "plug.py").write_text(PLUG.format(imports="from .util import N\ndef later():\n    from . import more"))
    (d / "h42pkg" / "more.py").write_text("X = 1\n")
    return "h42pkg.plug:Mine", d / "h42pkg" / "util.py"


@pytest.mark.parametrize("make", [file_plugin, package_plugin])
def test_an_edit_to_a_module_a_plugin_imports_refuses_the_resume_naming_the_file(tmp_path, capsys, monkeypatch, request, make):
    "run.json fingerprints the plug-in's imports from outside site-packages; an edited one is named in one line."
    code = tmp_path / "code"; code.mkdir()
    spec, helper = make(code)
    monkeypatch.chdir(code); monkeypatch.syspath_prepend(str(code))
    request.addfinalizer(lambda: [sys.modules.pop(m, None) for m in ("h42_helper", "h42pkg", "h42pkg.plug", "h42pkg.util", "h42pkg.more")])
    args = run_args(tmp_path / "runs", TINY, spec, "r", "--limit", "2")
    rc, out, err = pace(capsys, *args)
    assert rc == 0, err
    rc, out, err = pace(capsys, *args)
    assert rc == 0 and "(0 new" in out, err                               # nothing changed: resumed as it was
    helper.write_text("N = 2\n")                                          # 2 of 6 rows came from the old code before
    rc, out, err = pace(capsys, *run_args(tmp_path / "runs", TINY, spec, "r", "--limit", "0"))
    assert rc == 2 and str(helper) in one_line(err) and "it was not resumed" in err, err
    assert len(read_jsonl(tmp_path / "runs" / "r" / "results.jsonl")) == 2
    man = json.loads((tmp_path / "runs" / "r" / "run.json").read_text())
    imports = man["settings"]["own_methods"]["mine"]["imports"]
    assert len(imports) == (1 if make is file_plugin else 3), imports     # the package's __init__, util and more


# --- 2. a hand-edited row -------------------------------------------------------------------------------------------

def test_a_hand_edited_row_is_refused_on_resume_naming_its_file_and_line(tmp_path, capsys):
    args = run_args(tmp_path, TINY, "bm25,dense", "r", "--limit", "1")
    assert pace(capsys, *args)[0] == 0
    res = tmp_path / "r" / "results.jsonl"
    rows = read_jsonl(res)
    assert len(rows) == 2 and len(digests_path(res).read_text().split()) == 2
    rows[1]["retrieved_ids"] = rows[1]["retrieved_ids"][::-1]            # a hand edit of line 2
    res.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    rc, out, err = pace(capsys, *run_args(tmp_path, TINY, "bm25,dense", "r", "--limit", "0"))
    assert rc == 2, err
    assert f"{res}: line 2 (query_id {rows[1]['query_id']!r}, method 'dense') is not a row this job wrote" in one_line(err)
    # deleting the digests accepts the rows as they are (a folder made before digests is read the same way)
    digests_path(res).unlink()
    rc, out, err = pace(capsys, *run_args(tmp_path, TINY, "bm25,dense", "r", "--limit", "0"))
    assert rc == 0, err
    assert len(read_jsonl(res)) == 8 and len(digests_path(res).read_text().split()) == 8   # adopted, then kept


def test_a_folder_without_row_digests_resumes_byte_for_byte(tmp_path, capsys):
    "A committed run folder (no results.sha256) resumes as before: its rows are not rewritten, only their digests added."
    assert pace(capsys, *run_args(tmp_path, TINY, "bm25", "r", "--limit", "0"))[0] == 0
    res = tmp_path / "r" / "results.jsonl"
    before = res.read_bytes(); digests_path(res).unlink()
    rc, out, err = pace(capsys, *run_args(tmp_path, TINY, "bm25", "r", "--limit", "0"))
    assert rc == 0 and "(0 new" in out, err
    assert res.read_bytes() == before and digests_path(res).exists()


def test_a_digest_cut_short_by_a_kill_does_not_spoil_the_next_one(tmp_path, capsys, monkeypatch):
    import pace.eval.run as pr
    assert pace(capsys, *run_args(tmp_path, TINY, "bm25", "r", "--limit", "1"))[0] == 0
    with open(tmp_path / "r" / "results.sha256", "a") as f: f.write("0f3a")   # killed while appending a digest
    def killed(*a): raise KeyboardInterrupt                               # and the resume is stopped before its rewrite
    monkeypatch.setattr(pr, "_rewrite_sorted", killed)
    assert pace(capsys, *run_args(tmp_path, TINY, "bm25", "r", "--limit", "2"))[0] == 130
    monkeypatch.undo()
    rc, out, err = pace(capsys, *run_args(tmp_path, TINY, "bm25", "r", "--limit", "0"))
    assert rc == 0, err
    assert len(read_jsonl(tmp_path / "r" / "results.jsonl")) == 4


# --- 3. a dataset is its content ------------------------------------------------------------------------------------

def test_the_same_dataset_at_another_path_resumes_and_merges(tmp_path, capsys):
    a, b = tmp_path / "a" / "mini", tmp_path / "b" / "mini-copy"
    shutil.copytree(MINI, a); shutil.copytree(MINI, b)
    assert pace(capsys, *run_args(tmp_path / "runs", a, "bm25", "r", "--limit", "4"))[0] == 0
    rc, out, err = pace(capsys, *run_args(tmp_path / "runs", b, "bm25", "r", "--limit", "4"))
    assert rc == 0 and "(0 new" in out, err
    for k, d in enumerate([a, b]):
        assert pace(capsys, *run_args(tmp_path / "runs", d, "bm25", "s", "--limit", "4", "--shard", f"{k}/2"))[0] == 0
    rc, out, err = pace(capsys, "merge", tmp_path / "m", tmp_path / "runs" / "s-shard0of2", tmp_path / "runs" / "s-shard1of2")
    assert rc == 0, err
    # another content is still refused
    with open(b / "queries.jsonl", "a") as f: f.write("\n")
    rc, out, err = pace(capsys, *run_args(tmp_path / "runs", b, "bm25", "r", "--limit", "4"))
    assert rc == 2 and "dataset.sha256" in err, err


# --- 4. pace merge reads its parts and checks every row --------------------------------------------------------------

@pytest.fixture
def shards(tmp_path, capsys):
    for k in range(2):
        assert pace(capsys, *run_args(tmp_path / "runs", MINI, "bm25", "s", "--limit", "6", "--shard", f"{k}/2"))[0] == 0
    return [tmp_path / "runs" / f"s-shard{k}of2" for k in range(2)]


def test_merge_refuses_a_row_whose_query_is_not_in_the_job(tmp_path, capsys, shards):
    res = shards[0] / "results.jsonl"
    rows = read_jsonl(res)
    rows.append(rows[0] | dict(query_id="not-in-the-job"))              # a row the job did not ask for
    res.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    digests_path(res).unlink(missing_ok=True)                            # no digests: the job's scope itself speaks
    rc, out, err = pace(capsys, "merge", tmp_path / "m", *shards)
    assert rc == 2, err
    assert f"{res}: line {len(rows)}: ('not-in-the-job', 'bm25') is not in the job" in one_line(err)
    assert not (tmp_path / "m").exists()


def test_a_failed_merge_leaves_every_part_as_it_was_and_names_a_line_that_is_no_row(tmp_path, capsys, shards):
    torn, bad = shards[0] / "results.jsonl", shards[1] / "results.jsonl"
    with open(torn, "a") as f: f.write('{"query_id": "q')                    # a torn last line
    n = len(bad.read_text().splitlines()) + 1
    digests_path(bad).unlink(missing_ok=True)                                        # no digests: the row check itself speaks
    with open(bad, "a") as f: f.write('{"not": "a row"}\n')
    before = {p: p.read_bytes() for s in shards for p in s.iterdir() if p.is_file()}
    rc, out, err = pace(capsys, "merge", tmp_path / "m", *shards)
    assert rc == 2, err
    line = [l for l in err.splitlines() if not l.startswith("pace merge: warning:")]
    assert line == [f"pace: error: {bad}: line {n} is not a row of this job (no 'query_id'): delete that line"], err
    assert {p: p.read_bytes() for s in shards for p in s.iterdir() if p.is_file()} == before
    assert not (tmp_path / "m").exists()


def test_merge_names_a_hand_edited_row(tmp_path, capsys, shards):
    res = shards[1] / "results.jsonl"
    lines = res.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"bm25"', '"bm25" ', 1)                  # only spacing: the same row, accepted
    row = json.loads(lines[-1]); row["retrieved_ids"] = row["retrieved_ids"][::-1]
    lines[-1] = json.dumps(row, sort_keys=True) + "\n"                    # a value edited by hand
    res.write_text("".join(lines))
    rc, out, err = pace(capsys, "merge", tmp_path / "m", *shards)
    assert rc == 2 and f"{res}: line {len(lines)} (query_id {row['query_id']!r}, method 'bm25') is not a row this job wrote" in one_line(err)
