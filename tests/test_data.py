"""The strict loader: every kind of malformed dataset is rejected with its file, line and field."""
import json, shutil
from pathlib import Path

import pytest

from pace.cli import main as cli_main
from pace.data import DatasetError, load_pace_dataset

GOOD = Path(__file__).parent / "fixtures" / "good"


@pytest.fixture
def ds(tmp_path):
    "A fresh, writable copy of the good fixture."
    dst = tmp_path / "ds"
    shutil.copytree(GOOD, dst)
    return dst


def rows(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def write(path, objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))


def edit(path, line, **changes):
    "Apply `changes` to the object on 1-based `line` of a JSONL file (None deletes a key)."
    objs = rows(path)
    for k, v in changes.items():
        if v is None: objs[line - 1].pop(k)
        else: objs[line - 1][k] = v
    write(path, objs)


def problems(path):
    "(file, line, field) of every problem the loader reports; fails if it loads."
    with pytest.raises(DatasetError) as e:
        load_pace_dataset(path)
    return [(p.file, p.line, p.field) for p in e.value.problems], e.value


def test_good_fixture_loads():
    ds = load_pace_dataset(GOOD)
    assert len(ds.queries) == 4 and set(ds.kb) == {"ego-a", "ego-b"}


@pytest.mark.parametrize("victim, where", [("instances.jsonl", "instances.jsonl"),
                                           ("queries.jsonl", "queries.jsonl"),
                                           ("kb/ego-b.jsonl", "kb/ego-b.jsonl")])
def test_missing_file(ds, victim, where):
    (ds / victim).unlink()
    found, err = problems(ds)
    assert (where, None, None) in found
    assert f"{where}: missing file" in str(err)


def test_invalid_json_line(ds):
    with open(ds / "kb" / "ego-a.jsonl", "a") as f: f.write('{"doc_id": "a9", "text": "unterminated}\n')
    found, err = problems(ds)
    assert found == [("kb/ego-a.jsonl", 9, None)]
    assert "invalid JSON" in str(err)


def test_line_that_is_not_an_object(ds):
    with open(ds / "queries.jsonl", "a") as f: f.write('["q9"]\n')
    assert problems(ds)[0] == [("queries.jsonl", 5, None)]


def test_missing_field(ds):
    edit(ds / "queries.jsonl", 2, judgment=None)
    found, err = problems(ds)
    assert found == [("queries.jsonl", 2, "judgment")]
    assert "missing required field" in str(err)


def test_missing_nested_field(ds):
    inst = rows(ds / "instances.jsonl")
    del inst[1]["alters"][0]["relation"]
    write(ds / "instances.jsonl", inst)
    assert problems(ds)[0] == [("instances.jsonl", 2, "alters.0.relation")]


@pytest.mark.parametrize("field, value", [("gold_doc_ids", "a1"), ("query", 42), ("instance_id", 1)])
def test_mistyped_field(ds, field, value):
    edit(ds / "queries.jsonl", 1, **{field: value})
    found, _ = problems(ds)
    assert ("queries.jsonl", 1, field) in found


def test_unknown_field_is_reported(ds):
    edit(ds / "queries.jsonl", 3, gold_doc_id=["b1"])
    assert problems(ds)[0] == [("queries.jsonl", 3, "gold_doc_id")]


def test_empty_text(ds):
    edit(ds / "kb" / "ego-b.jsonl", 4, text="   ")
    found, err = problems(ds)
    assert found == [("kb/ego-b.jsonl", 4, "text")]
    assert "must not be empty" in str(err)


def test_duplicate_doc_id(ds):
    edit(ds / "kb" / "ego-a.jsonl", 5, doc_id="a2")
    found, err = problems(ds)
    assert ("kb/ego-a.jsonl", 5, "doc_id") in found
    assert "duplicate doc_id 'a2' (first on line 2)" in str(err)


def test_duplicate_query_id(ds):
    edit(ds / "queries.jsonl", 4, query_id="q2")
    found, err = problems(ds)
    assert found == [("queries.jsonl", 4, "query_id")]
    assert "duplicate query_id 'q2'" in str(err)


def test_duplicate_instance_id(ds):
    edit(ds / "instances.jsonl", 2, instance_id="ego-a")
    found, _ = problems(ds)
    assert ("instances.jsonl", 2, "instance_id") in found


def test_unknown_instance_id(ds):
    edit(ds / "queries.jsonl", 3, instance_id="ego-z")
    found, err = problems(ds)
    assert found == [("queries.jsonl", 3, "instance_id")]
    assert "unknown instance_id 'ego-z'" in str(err)


def test_kb_file_without_instance(ds):
    shutil.copy(ds / "kb" / "ego-a.jsonl", ds / "kb" / "ego-q.jsonl")
    assert problems(ds)[0] == [("kb/ego-q.jsonl", None, None)]


def test_gold_id_not_in_kb(ds):
    # b1 exists, but in ego-b's KB, not in ego-a's: gold ids are checked per instance.
    edit(ds / "queries.jsonl", 2, gold_doc_ids=["a3", "b1"])
    found, err = problems(ds)
    assert found == [("queries.jsonl", 2, "gold_doc_ids.1")]
    assert "'b1' is not a doc_id in kb/ego-a.jsonl" in str(err)


@pytest.mark.parametrize("value", ["yes", 1, True, "Conflict"])
def test_label_outside_set(ds, value):
    edit(ds / "queries.jsonl", 1, label=value)
    assert problems(ds)[0] == [("queries.jsonl", 1, "label")]


def test_situation_type_outside_set(ds):
    edit(ds / "queries.jsonl", 2, situation_type="emotional")
    found, err = problems(ds)
    assert found == [("queries.jsonl", 2, "situation_type")]
    assert "'temporal', 'personal' or 'state'" in str(err)


@pytest.mark.parametrize("value", ["10/03/2026", "2026-3-10", "2026-02-30", "2026-03-10T09:00:00", 20260310])
def test_date_not_iso(ds, value):
    edit(ds / "queries.jsonl", 1, ref_date=value)
    assert problems(ds)[0] == [("queries.jsonl", 1, "ref_date")]


def test_timeline_date_not_iso(ds):
    inst = rows(ds / "instances.jsonl")
    inst[0]["timeline"]["window_end"] = "April 2026"
    write(ds / "instances.jsonl", inst)
    assert ("instances.jsonl", 1, "timeline.window_end") in problems(ds)[0]


def test_ref_date_outside_timeline(ds):
    edit(ds / "queries.jsonl", 3, ref_date="2026-08-01")
    found, err = problems(ds)
    assert found == [("queries.jsonl", 3, "ref_date")]
    assert "outside the timeline of 'ego-b'" in str(err)


def test_timeline_out_of_order(ds):
    inst = rows(ds / "instances.jsonl")
    inst[0]["timeline"]["ref_date"] = "2026-05-01"
    write(ds / "instances.jsonl", inst)
    found, _ = problems(ds)
    assert ("instances.jsonl", 1, "timeline") in found


def test_all_problems_are_collected(ds):
    edit(ds / "queries.jsonl", 1, label="maybe")
    edit(ds / "queries.jsonl", 4, gold_doc_ids=["nope"])
    edit(ds / "kb" / "ego-a.jsonl", 7, text="")
    with open(ds / "instances.jsonl", "a") as f: f.write("not json\n")
    found, err = problems(ds)
    assert found == [("instances.jsonl", 3, None), ("kb/ego-a.jsonl", 7, "text"),
                     ("queries.jsonl", 1, "label"), ("queries.jsonl", 4, "gold_doc_ids.0")]
    assert str(err).splitlines()[0].endswith("4 problems")


def test_cli_check(ds, capsys):
    assert cli_main(["data", "check", str(GOOD)]) == 0
    out = capsys.readouterr().out
    assert "Table 1" in out and "Table 6" in out
    edit(ds / "queries.jsonl", 1, label="maybe")
    assert cli_main(["data", "check", str(ds)]) == 1
    assert "queries.jsonl:1: field 'label'" in capsys.readouterr().out


def test_a_byte_that_is_not_utf8_is_one_problem_at_its_line(ds):
    "Issue 22: one bad byte made the whole KB file unreadable: 'empty knowledge base' and a gold-id error per citing query."
    kb = ds / "kb" / "ego-a.jsonl"
    kb.write_bytes(kb.read_bytes().replace(b"Jonas", b"J\xffnas", 1))     # line 1: fact a1, gold evidence of q1
    found, err = problems(ds)
    assert found == [("kb/ego-a.jsonl", 1, None)]
    assert "kb/ego-a.jsonl:1: not UTF-8 text: byte 0xff at column 28" in str(err)


def test_a_bad_byte_on_an_instance_line_orphans_neither_its_kb_nor_its_queries(ds):
    inst = ds / "instances.jsonl"
    inst.write_bytes(inst.read_bytes().replace(b'"Lena', b'"L\xe9na', 1))
    found, err = problems(ds)
    assert found == [("instances.jsonl", 1, None)] and "byte 0xe9" in str(err)


def test_a_whole_kb_of_bad_lines_is_not_also_empty(ds):
    kb = ds / "kb" / "ego-b.jsonl"
    kb.write_bytes(b"".join(b"\xff" + l + b"\n" for l in kb.read_bytes().splitlines()))
    found, _ = problems(ds)
    assert found and all(f == ("kb/ego-b.jsonl", n, None) for f, n in zip(found, range(1, 100)))   # one per line, nothing else


def test_a_very_long_fact_is_a_warning_not_a_problem(ds, capsys):
    from pace.data import MAX_FACT_CHARS
    edit(ds / "kb" / "ego-a.jsonl", 2, text="x" * (MAX_FACT_CHARS + 1))
    assert [(w.file, w.line, w.field) for w in load_pace_dataset(ds).warnings] == [("kb/ego-a.jsonl", 2, "text")]
    assert cli_main(["data", "check", str(ds)]) == 0
    assert f"warning: kb/ego-a.jsonl:2: field 'text': {MAX_FACT_CHARS + 1} characters" in capsys.readouterr().out


# --- issue 30: an instance id is a file name, never a path -----------------------------------------------------------

def rename_instance(ds, old, new):
    "Rename instance `old` to `new` in instances.jsonl and queries.jsonl."
    for f in ("instances.jsonl", "queries.jsonl"):
        write(ds / f, [{**o, "instance_id": new} if o["instance_id"] == old else o for o in rows(ds / f)])


@pytest.mark.parametrize("iid", ["sub/x", "../../victim", "ABS", "a\\b", "..", "a..b", "x\0y", "-x", ".x", "x" * 300,
                                 "a\u2215b", "a\uff0fb", "\uff0e\uff0e"])
def test_an_instance_id_that_is_not_one_file_name_is_refused(ds, tmp_path, iid):
    "Its KB is put where `kb/<id>.jsonl` points: the loader must not read it (it read a KB from outside and said OK)."
    iid = str(tmp_path / "victim") if iid == "ABS" else iid
    rename_instance(ds, "ego-b", iid)
    kb = (ds / "kb" / "ego-b.jsonl").read_bytes(); (ds / "kb" / "ego-b.jsonl").unlink()
    if "\0" not in iid:
        with __import__("contextlib").suppress(OSError):
            (ds / "kb" / f"{iid}.jsonl").parent.mkdir(parents=True, exist_ok=True); (ds / "kb" / f"{iid}.jsonl").write_bytes(kb)
    found, err = problems(ds)
    assert found[0] == ("instances.jsonl", 2, "instance_id") and "so it must be one file name" in str(err), str(err)
    assert all(f != "queries.jsonl" for f, _, _ in found), str(err)   # its queries are not reported again


def test_a_kb_in_a_subfolder_is_not_read_and_a_stale_run_is_not_resumed(ds):
    "`sub/x` read kb/sub/x.jsonl, which dataset_sha256 did not hash: a run resumed with stale rows after it changed."
    rename_instance(ds, "ego-b", "sub/x")
    (ds / "kb" / "sub").mkdir(); (ds / "kb" / "ego-b.jsonl").rename(ds / "kb" / "sub" / "x.jsonl")
    with pytest.raises(DatasetError, match="'sub/x' holds a path separator"): load_pace_dataset(ds)


COMMITTED_DIGESTS = {   # what the committed runs' run.json recorded (and main computed before issue 30)
    "tests/fixtures/tiny": "ec6ad3c3bdec7a6591b3536b6870cc81c2ac02b7a847a940bb0806d70ae70507",
    "tests/fixtures/good": "01d924eed2ddd88e3b7f90c8ebf874d2f8ba6d2ff7bf89493cfbfdc1af78ef14",
    "data/mini": "850f82da2ca42a5b86a4ca3dc17fe95be5019db08adb0f536b1cad1c84d6ca9a",
    "data/generated-sample": "11ef3c1254e6dc8f67bdb9ca907d50078d603f20981e3e4843514d5601470cf7",
    "results/structured/mini-01-q6-f40-qwen2.5-0.5b/data": "98489d77afeded4e60fb0999b217e1301dc316148b582c68e96116b5e4b85a75",
    "data/judge_calibration": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",   # no dataset files: sha256 of nothing
}


@pytest.mark.parametrize("rel", list(COMMITTED_DIGESTS))
def test_dataset_sha256_of_the_committed_datasets_is_unchanged(rel):
    from pace.runfolder import dataset_sha256
    assert dataset_sha256(GOOD.parent.parent.parent / rel) == COMMITTED_DIGESTS[rel]



@pytest.mark.parametrize("victim, line, text", [
    ("instances.jsonl", 3, '{"instance_id": "ego-c", "instance_id": "ego-a"}'),
    ("kb/ego-a.jsonl", 9, '{"doc_id": "a9", "text": "first", "text": "second"}'),
    ("queries.jsonl", 5, '{"query_id": "q9", "meta": {"k": 1, "k": 2}}')])
def test_a_key_given_twice_is_refused_at_its_line(ds, capsys, victim, line, text):
    "Issue 42: json keeps the last value of a repeated key, so a hand edit lost a field without a word."
    with open(ds / victim, "a") as f: f.write(text + "\n")
    found, err = problems(ds)
    assert (victim, line, None) in found and "repeated in one object" in str(err)
    assert cli_main(["data", "check", str(ds)]) == 1
    assert f"{victim}:{line}: invalid JSON: key " in capsys.readouterr().out
