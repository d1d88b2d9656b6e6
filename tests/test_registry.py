"The registry of methods (`pace.methods.baselines.METHOD_SPECS`): the lists derived from it, and a retriever of your own run by `pace run`."
import json, subprocess, sys
from pathlib import Path
import pytest
from pace.llm import Cached
from pace.cli import main
from pace.eval.evaluate import read_jsonl

ROOT = Path(__file__).resolve().parent.parent
TINY = str(ROOT / "tests/fixtures/tiny")

# The lists as they were written out by hand before the registry: a change to any of them shows here.
OLD_METHODS = ("oracle", "full_kb", "full_kb_dense", "bm25", "dense", "hybrid", "hybrid@15",
               "pacemaker", "pacemaker-no_planning", "pacemaker-no_traversal", "pacemaker-no_selection",
               "pacemaker-small", "pacemaker-small-no_weighting", "pacemaker-small-no_anchors", "pacemaker-small-no_poolcap")
SCORE_METHODS = ("pacemaker-score", "pacemaker-score-no_dates", "pacemaker-score-no_entities", "pacemaker-score-no_scores")  # added since
OLD_LLM_FREE = ("bm25", "dense", "hybrid", "hybrid@15")
OLD_SIZED = ("bm25", "dense", "hybrid")
OLD_STRUCTURED = ("hipporag2", "graphrag")
OLD_ORDER = ("oracle", "full_kb", "full_kb_dense", "bm25", "dense", "hybrid", "pacemaker")
OLD_RETRIEVE_NOTHING = ("oracle", "full_kb", "full_kb_dense")   # the exclusion list of `_check_scope`


def test_every_derived_list_is_what_it_was():
    import pace.methods.baselines as b, pace.eval.run as r, pace.eval.evaluate as e
    assert (b.METHODS, b.LLM_FREE, b.SIZED) == (OLD_METHODS + SCORE_METHODS, OLD_LLM_FREE, OLD_SIZED)
    assert r.STRUCTURED_METHODS == OLD_STRUCTURED and r.METHODS == OLD_METHODS + SCORE_METHODS + OLD_STRUCTURED
    assert e.ORDER == OLD_ORDER
    specs = {m: b.method_spec(m) for m in r.METHODS}
    assert tuple(m for m, s in specs.items() if not s.ranked) == OLD_RETRIEVE_NOTHING
    assert tuple(m for m, s in specs.items() if s.alone) == OLD_STRUCTURED           # what `_run_pairs` ran one at a time
    assert {m for m, s in specs.items() if s.batchable} == {m for m in OLD_METHODS + SCORE_METHODS if m.startswith("pacemaker")}
    assert [m for m, s in specs.items() if s.sees_gold] == ["oracle"]
    # sizes and PaceMaker's variants keep their names, and build as before
    assert (specs["hybrid@15"].make, specs["hybrid@15"].options) == (b.Hybrid, {"k": 15})
    assert {m for m, s in specs.items() if s.config == "pacemaker"} == {m for m in OLD_METHODS + SCORE_METHODS if m.startswith("pacemaker")}
    from pace.testing import ToyIndex
    names = ("hybrid@15", "bm25@20", "full_kb_dense", "pacemaker-small-no_anchors", "pacemaker-score-no_entities")
    assert [b.make_method(m, None, ToyIndex([])).name for m in names] == list(names)


OWN = '''
from pace.methods.baselines import Retriever
from pace.retrieve import wrrf

class BM25First(Retriever):
    "Weighted RRF of BM25 and dense, BM25 weighted twice (a retriever from outside the package)."
    name = "bm25_first"
    def search(self, idx, q):
        ranked = lambda hits: [d for d, _ in hits]
        runs = [(ranked(idx.sparse([q], self.k)[0]), 2.0), (ranked(idx.dense([q], self.k)[0]), 1.0)]
        return wrrf(runs, k=60)[:self.k]

class Nameless(Retriever):
    def search(self, idx, q): return idx.dense([q], self.k)[0]

class NotAMethod:
    pass

class Asks(Retriever):
    "Calls the chat model to retrieve."
    name, needs_llm = "asks", True
    def search(self, idx, q):
        assert self.cm is not None
        return idx.sparse([q], self.k)[0]
'''


@pytest.fixture
def own_file(tmp_path):
    d = tmp_path / "elsewhere"; d.mkdir()
    p = d / "my_retrievers.py"; p.write_text(OWN)
    return p


def pace_run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "pace.cli", "run", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_a_retriever_from_a_file_outside_the_package_runs_through_pace_run(tmp_path, own_file):
    out = tmp_path / "runs"
    r = pace_run("--data", TINY, "--methods", f"hybrid,{own_file}:BM25First", "--retrieval-only", "--chat", "fake:echo",
                 "--embedder", "hash:hash", "--limit", "0", "--out", out, "--name", "own", "--no-progress")
    assert r.returncode == 0, r.stderr
    rows = read_jsonl(out / "own" / "results.jsonl")
    mine = [x for x in rows if x["method"] == "bm25_first"]
    assert len(mine) == 4 and {x["method"] for x in rows} == {"hybrid", "bm25_first"}
    assert all(x["ranked"] and x["answer"] is None and len(x["retrieved_ids"]) == 10 for x in mine)
    assert all(x["trace"]["method"] == "bm25_first" for x in mine)
    assert "| bm25_first" in (out / "own" / "tables.md").read_text()                 # scored with the retrieval metrics
    man = json.loads((out / "own" / "run.json").read_text())
    own = man["settings"]["own_methods"]["bm25_first"]
    assert own["spec"] == f"{own_file}:BM25First" and len(own["sha256"]) == 64 and man["methods"] == ["hybrid", "bm25_first"]
    assert man["settings"]["chat"] is None                                           # a Retriever needs no chat model
    # resumed as it was: nothing new to run
    again = pace_run("--data", TINY, "--methods", f"hybrid,{own_file}:BM25First", "--retrieval-only", "--chat", "fake:echo",
                     "--embedder", "hash:hash", "--limit", "0", "--out", out, "--name", "own", "--no-progress")
    assert again.returncode == 0 and "(0 new" in again.stdout, again.stderr
    # an edited retriever is another method: the resume is refused, in one line
    own_file.write_text(OWN.replace(", 2.0)", ", 3.0)"))
    edited = pace_run("--data", TINY, "--methods", f"hybrid,{own_file}:BM25First", "--retrieval-only", "--chat", "fake:echo",
                      "--embedder", "hash:hash", "--limit", "0", "--out", out, "--name", "own", "--no-progress")
    assert edited.returncode == 2 and "own_methods.bm25_first.sha256" in edited.stderr, edited.stderr


def test_a_module_in_the_current_folder_and_a_class_without_a_name(tmp_path, own_file):
    "'module:Class' is looked up in the current folder too; a class with no `name` of its own is named by its spec."
    r = pace_run("--data", TINY, "--methods", "my_retrievers:Nameless", "--retrieval-only", "--chat", "fake:echo",
                 "--embedder", "hash:hash", "--limit", "2", "--out", tmp_path / "runs", "--name", "mod", "--no-progress",
                 cwd=own_file.parent)
    assert r.returncode == 0, r.stderr
    rows = read_jsonl(tmp_path / "runs" / "mod" / "results.jsonl")
    assert {x["method"] for x in rows} == {"my_retrievers:Nameless"} and len(rows) == 2


def test_a_retriever_that_needs_the_chat_model_gets_one(tmp_path, own_file, monkeypatch):
    import pace.llm
    from pace.testing import FakeChat
    from pace.testing import schema_reply
    monkeypatch.setattr(pace.llm, "as_chat_model", lambda spec, cache, **kw: Cached(FakeChat(schema_reply), False))
    assert main(["run", "--data", TINY, "--methods", f"{own_file}:Asks", "--retrieval-only", "--embedder", "hash:hash",
                 "--limit", "1", "--out", str(tmp_path), "--name", "asks", "--no-progress"]) == 0
    assert json.loads((tmp_path / "asks" / "run.json").read_text())["settings"]["chat"]["model_id"] == "fake"


@pytest.mark.parametrize("spec,msg", [
    ("{dir}/nowhere.py:X", "no file"),
    ("{dir}/my_retrievers.py:Missing", "defines no Missing"),
    ("{dir}/my_retrievers.py:NotAMethod", "is not a method"),
    ("pace_no_such_pkg.mod:X", "no module named 'pace_no_such_pkg'"),
    ("pace.methods.baselines:BM25", "is a method of pace"),
    ("{dir}/broken.py:X", "importing"),
    ("{dir}/my_retrievers.py:", "'package.module:Class'"),
])
def test_bad_specs_give_one_line_errors(tmp_path, own_file, capsys, spec, msg):
    (own_file.parent / "broken.py").write_text("import pace_no_such_dependency\n")
    out = tmp_path / "runs"
    code = main(["run", "--data", TINY, "--methods", f"bm25,{spec.format(dir=own_file.parent)}", "--retrieval-only",
                 "--embedder", "hash:hash", "--limit", "1", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("pace: error: --methods ") and msg in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_two_methods_with_one_name_are_refused(tmp_path, own_file, capsys):
    (own_file.parent / "other.py").write_text(OWN)
    code = main(["run", "--data", TINY, "--methods", f"{own_file}:BM25First,{own_file.parent}/other.py:BM25First",
                 "--retrieval-only", "--embedder", "hash:hash", "--limit", "1", "--out", str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "both named 'bm25_first'" in err, err


def test_an_entry_point_gives_a_method_a_plain_name(tmp_path, own_file, monkeypatch):
    import importlib.metadata as md
    from pace.methods.baselines import method_spec
    ep = md.EntryPoint(name="mine", value=f"{own_file}:Nameless", group="pace.methods")
    real = md.entry_points
    monkeypatch.setattr(md, "entry_points", lambda **k: [ep] if k.get("group") == "pace.methods" else real(**k))
    s = method_spec("mine")
    assert (s.name, s.kind, s.spec, s.needs_llm) == ("mine", "own", f"{own_file}:Nameless", False)
    with pytest.raises(ValueError, match="unknown method"): method_spec("not_mine")
