"""One job skeleton (`pace.runfolder.JobFolder`) under `pace run`, `pace generate` and `pace judge calibrate`, and one
atomic-write helper (`pace.atomic`) under every writer: the behaviours they now share."""
import errno, json, os
from pathlib import Path
import pytest
import pace.runfolder as rf
from pace.cli import main
from pace.embed import get_embedder
from pace.eval.run import run_experiment
from pace.gen.base import GenConfig
from pace.gen.generate import generate_dataset
from pace.gen.testing import toy_chat
from pace.runfolder import JobFolder, RunLocked, RunMismatchError

ROOT = Path(__file__).parents[1]
TINY = ROOT / "tests" / "fixtures" / "tiny"
CFG = GenConfig(recipe="pace", cases_per_cell=1, facts=120, distractors_per_case=4, everyday_per_call=10)


def gen(out, cfg=CFG, **kw):
    return generate_dataset(out, "1", toy_chat(cache=False), config=cfg, embedder=get_embedder("hash:hash", cache=False),
                            progress=False, **kw)


def run(out, seed=0, **kw):
    return run_experiment(TINY, ["bm25"], embedder="hash:hash", retrieval_only=True, out_dir=out, name="r", limit=2,
                          seed=seed, cache=False, progress=False, **kw)


# --- one skeleton -----------------------------------------------------------------------------------------------------

def test_a_run_and_a_generation_refuse_other_settings_through_one_check(tmp_path, monkeypatch):
    "Both commands open their folder with `JobFolder` and refuse a mismatching manifest in its `check`, leaving it as it was."
    seen, check = [], JobFolder.check
    def spy(self, settings):
        seen.append((self.path.name, self.manifest))
        return check(self, settings)
    monkeypatch.setattr(JobFolder, "check", spy)
    run(tmp_path / "runs")
    gen(tmp_path / "ds", stop_after="2_profile")
    before = {p: p.read_bytes() for p in [tmp_path / "runs" / "r" / "run.json", tmp_path / "ds" / "generate.json"]}
    with pytest.raises(RunMismatchError, match=r"holds a run with other settings; it was not resumed .*\n  seed: 0 -> 1"):
        run(tmp_path / "runs", seed=1)
    with pytest.raises(RunMismatchError, match=r"holds a generation with other settings; .*use another --out.*\n  config.facts: 120 -> 200"):
        gen(tmp_path / "ds", cfg=CFG.model_copy(update=dict(facts=200)))
    assert seen == [("r", "run.json"), ("ds", "generate.json")] * 2
    assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "runs" / "r" / "run.lock").exists() and not (tmp_path / "ds" / "run.lock").exists()


def test_a_generation_folder_is_locked_while_it_runs(tmp_path):
    "`pace generate` holds its folder's lock as `pace run` does: a second generation into it is refused, naming --out."
    out = tmp_path / "ds"
    gen(out, stop_after="2_profile")
    with JobFolder(out, "generate.json").opening() as held:
        with pytest.raises(RunLocked, match=rf"{out} is in use by pid {os.getpid()} .*or use another --out$"):
            gen(out)
        assert held.lock is not None
    held.release()
    assert gen(out)["status"] == "complete" and not (out / "run.lock").exists()


def test_a_killed_generation_resumes_and_takes_over_its_lock(tmp_path, capsys):
    "A kill leaves a stage line cut short and the lock file of a dead process: the same call resumes, one line says so."
    whole = gen(tmp_path / "whole")
    out = tmp_path / "ds"
    gen(out, stop_after="4_validate")
    p = out / "stages" / "4_validate.jsonl"
    p.write_bytes(p.read_bytes()[:-40])                                                      # the kill, mid-line
    (out / "run.lock").write_text(json.dumps(dict(pid=2**22 + 1, host=rf._HOST, since="yesterday")))   # its dead lock
    capsys.readouterr()
    res = gen(out)
    err = capsys.readouterr().err
    assert f"pace generate: {out} was left locked by pid {2**22 + 1}" in err and "the lock is taken over" in err
    assert res["status"] == "complete" and not (out / "run.lock").exists()
    for f in ["instances.jsonl", "queries.jsonl", "stages/4_validate.jsonl", "stages/7_kb.jsonl"]:
        assert (out / f).read_bytes() == (tmp_path / "whole" / f).read_bytes(), f
    assert whole["n_queries"] == res["n_queries"]


def test_a_failed_start_leaves_no_folder_for_every_job(tmp_path, capsys):
    "A model that cannot be built: the run, the generation and the calibration each remove the folders they made."
    assert main(["run", "--data", str(TINY), "--methods", "bm25", "--retrieval-only", "--embedder", "nope:x",
                 "--out", str(tmp_path / "a" / "runs"), "--name", "r", "--no-progress"]) == 2
    with pytest.raises(Exception):
        generate_dataset(tmp_path / "b" / "ds", "1", "nope:x", config=CFG, embedder="hash:hash", progress=False)
    assert main(["judge", "calibrate", "--judge", "nope:x", "--set", str(ROOT / "data/judge_calibration/mini.jsonl"),
                 "--data", str(ROOT / "data/mini"), "--out", str(tmp_path / "c" / "cal"), "--no-progress"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_generation_folder_that_cannot_be_made_is_a_one_line_usage_error(tmp_path):
    "As `pace run` does: the folder, and why (before: a bare OSError)."
    (tmp_path / "f").write_text("x")
    with pytest.raises(rf.UsageError, match=r"cannot make the generation folder .*f/sub/ds: Not a directory"):
        gen(tmp_path / "f" / "sub" / "ds")


# --- one atomic write: old or new on a crash, for each kind of caller -------------------------------------------------

@pytest.fixture
def crash(monkeypatch):
    "`os.replace` whose call number `after + 1` fails (as a crash at that rename would leave things); the others work."
    def arm(after=0):
        real, calls = os.replace, []
        def replace(a, b):
            calls.append(b)
            if len(calls) == after + 1: raise OSError(errno.EIO, "simulated crash")
            return real(a, b)
        monkeypatch.setattr(os, "replace", replace)
        return calls
    return arm


def _no_temp(folder: Path) -> list:
    return [p.name for p in Path(folder).rglob("*") if ".tmp" in p.name or p.name.endswith(".part")]


def test_a_manifest_and_result_files_stay_old_on_a_crash(tmp_path, crash):
    "The job files (manifest, rewritten rows): the old bytes, and no temporary file left beside them."
    man = rf.write_manifest(tmp_path, dict(seed=0), dict(methods=["bm25"]), "running") or tmp_path / "run.json"
    old = man.read_bytes()
    crash()
    with pytest.raises(OSError, match="simulated crash"):
        rf.write_manifest(tmp_path, dict(seed=0), dict(methods=["bm25"]), "complete")
    assert man.read_bytes() == old and _no_temp(tmp_path) == []


def test_a_generated_dataset_file_stays_old_on_a_crash(tmp_path, crash):
    from pace.gen import kb
    p = tmp_path / "ds" / "queries.jsonl"
    kb._write(p, [dict(query_id="a")])
    crash()
    with pytest.raises(OSError): kb._write(p, [dict(query_id="b")])
    assert p.read_text() == '{"query_id": "a"}\n' and _no_temp(tmp_path) == []


def test_a_cache_file_and_a_memo_stay_old_on_a_crash(tmp_path, crash):
    from pace.cache import Cache, export_cache
    from pace.llm import read_json_memo, write_json_memo
    memo = tmp_path / "m.json"
    write_json_memo(memo, {"a": 1})
    c = Cache()
    out = tmp_path / "calls.jsonl"; export_cache(c, out)
    old = out.read_bytes()
    crash()
    write_json_memo(memo, {"a": 2})                                     # a memo that cannot be written is skipped
    crash()
    with pytest.raises(OSError): export_cache(c, out)
    assert read_json_memo(memo) == {"a": 1} and out.read_bytes() == old and _no_temp(tmp_path) == []


def test_an_index_folder_stays_whole_on_a_crash(tmp_path, crash):
    "The index folder is replaced whole: a crash at either rename leaves the old index loadable (before: it was removed first)."
    from pace.index import InstanceIndex
    from retrieval_helpers import Fact, random_embedder
    emb = random_embedder(16)
    facts = [Fact(f"d{i}", f"fact number {i} about the dentist") for i in range(12)]
    path = InstanceIndex.build(facts, emb, knn_k=3).save(tmp_path / "idx")
    old = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    for after in (0, 1):                                                 # the old one moved aside; the new one moved in
        crash(after)
        with pytest.raises(OSError, match="simulated crash"):
            InstanceIndex.build(facts[:6], emb, knn_k=3).save(path)
        assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} == old
        assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_a_release_folder_is_not_left_half_on_a_crash(tmp_path, crash):
    from pace.release import new_folder
    crash()
    with pytest.raises(OSError, match="simulated crash"):
        with new_folder(tmp_path / "rel") as t: (t / "a.jsonl").write_text("x\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == []            # before: os.rename, untouched by a failed replace


def test_an_assembled_model_file_is_all_or_nothing(tmp_path, crash):
    from pace.backends.llamacpp import _assemble
    parts = [tmp_path / "p1", tmp_path / "p2"]
    parts[0].write_bytes(b"GGUF" + b"a" * 10); parts[1].write_bytes(b"b" * 10)
    dest = tmp_path / "models" / "m.gguf"
    _assemble(parts, dest, 24)
    assert dest.read_bytes() == b"GGUF" + b"a" * 10 + b"b" * 10
    crash()
    parts[1].write_bytes(b"c" * 10)
    with pytest.raises(OSError): _assemble(parts, dest, 24)
    assert dest.read_bytes().endswith(b"b" * 10) and _no_temp(tmp_path) == []
