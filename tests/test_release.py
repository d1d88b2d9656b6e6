"""Issue 31, parts 1 and 4, and issue 30 item 9: the released PACE (the hub dataset, a local copy of it, the authors'
on-disk layout) imported as a PACE folder, and a PACE folder exported in those shapes. The hub cannot be reached
from the test machines, so the hub path is driven through the same code with `datasets.load_dataset` pointed at
local parquet files that `datasets` itself wrote here."""
import json, shutil
from pathlib import Path

import datasets
import pytest

from pace.llm import Cached
import pace.release as release
from pace.cli import main
from pace.data import DatasetError, UsageError, load_pace_dataset
from pace.release import HUB_ID, CONFIGS, export_release, import_release

ROOT = Path(__file__).resolve().parent.parent
MINI, SAMPLE = ROOT / "data" / "mini", ROOT / "data" / "generated-sample"
TL = dict(window_start="2026-03-01", ref_date="2026-03-04", window_end="2026-04-30")
datasets.disable_progress_bars()


def pace_files(d: Path) -> dict:
    "Every file of a PACE folder but its card, as bytes."
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file() and p.name != "README.md"}


# --- the round trip on data/mini -----------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["official", "hub"])
def test_data_mini_comes_back_byte_for_byte(tmp_path, layout):
    export_release(MINI, tmp_path / "out", layout)
    import_release(tmp_path / "out", tmp_path / "back")
    assert pace_files(tmp_path / "back") == pace_files(MINI)
    card = (tmp_path / "back" / "README.md").read_text()
    kind = "authors' layout" if layout == "official" else "local copy"
    assert f"Source: {kind} `{tmp_path / 'out'}`" in card and "2262" in card and "565.50" in card


def test_the_official_layout_is_what_the_authors_loader_writes(tmp_path):
    "kb/<case>/{corpus,queries}.json as {timeline, rows} without case_id and timeline keys; profile/<case>.json with the name."
    export_release(MINI, tmp_path / "off", "official")
    cases = sorted(p.name for p in (tmp_path / "off" / "kb").iterdir())
    assert cases == ["mini-01", "mini-02", "mini-03", "mini-04"]
    q = json.loads((tmp_path / "off" / "kb" / "mini-01" / "queries.json").read_text())
    c = json.loads((tmp_path / "off" / "kb" / "mini-01" / "corpus.json").read_text())
    assert set(q) == {"timeline", "queries"} and set(c) == {"timeline", "corpus"}
    assert q["timeline"] == c["timeline"] == {"window_start": "2026-02-16", "ref_date": "2026-03-04", "window_end": "2026-04-12"}
    assert {"query_id", "query", "gold_doc_ids", "label", "judgment"} <= set(q["queries"][0])
    assert not {"case_id", "window_start", "window_end", "ref_date"} & set(q["queries"][0])
    assert {"doc_id", "text", "origin", "cases"} == set(c["corpus"][0])   # a fact's meta as metadata columns
    p = json.loads((tmp_path / "off" / "profile" / "mini-01.json").read_text())
    assert p["spec"]["demographic"]["full_name"] == "Priya Raman"
    assert (tmp_path / "off" / "kb" / "mini-01" / "queries.json").read_text().startswith('{\n  "timeline": {\n    "window_start"')


def test_the_hub_layout_loads_through_its_card_and_keeps_the_hub_schema(tmp_path):
    export_release(MINI, tmp_path / "hub", "hub")
    q = datasets.load_dataset(str(tmp_path / "hub"), "queries", split="test", cache_dir=str(tmp_path / "cache"))
    assert q.num_rows == 72
    assert {"case_id", "window_start", "ref_date", "window_end", "query_id", "query", "gold_doc_ids", "label",
            "judgment"} <= set(q.column_names)
    corpus = datasets.load_dataset(str(tmp_path / "hub"), "corpus", split="test", cache_dir=str(tmp_path / "cache"))
    assert corpus.num_rows == 2262 and {"doc_id", "text", "origin"} <= set(corpus.column_names)
    prof = datasets.load_dataset(str(tmp_path / "hub"), "profiles", split="test", cache_dir=str(tmp_path / "cache"))
    assert prof[0]["spec"]["demographic"]["full_name"] == "Priya Raman"


@pytest.mark.parametrize("layout", ["official", "hub"])
def test_a_generated_dataset_comes_back_the_same(tmp_path, layout):
    "data/generated-sample (sorted keys, a query ref_date of its own, an extra instance key) comes back equal."
    export_release(SAMPLE, tmp_path / "out", layout)
    import_release(tmp_path / "out", tmp_path / "back")
    a, b = load_pace_dataset(SAMPLE), load_pace_dataset(tmp_path / "back")
    assert [i.model_dump() for i in a.instances.values()] == [i.model_dump() for i in b.instances.values()]
    assert [q.model_dump() for q in a.queries] == [q.model_dump() for q in b.queries]
    assert {k: [f.model_dump() for f in v] for k, v in a.kb.items()} == {k: [f.model_dump() for f in v] for k, v in b.kb.items()}
    assert any(str(q.ref_date) != a.instances[q.instance_id].timeline.ref_date.isoformat() for q in a.queries)


# --- a release in the hub's row schema, written by `datasets` here ---------------------------------------------------

def hub_rows(dangling=False):
    "Two cases, one of them not a file name; messy labels, a query id in both cases, no situation_type, an empty gold list."
    rows = {"profiles": [], "corpus": [], "queries": []}
    for case, name in (("case-1", "Ana Ortega"), ("user/7", "Bo Lind")):
        rows["profiles"].append({"case_id": case, "spec": {"demographic": {"full_name": name, "age": 30},
                                                           "relationships": [{"full_name": "Kim", "relationship": "friend"}]}})
        for i in range(12):
            rows["corpus"].append({"case_id": case, **TL, "doc_id": f"d{i}", "text": f"{name} fact {i}.",
                                   "label": ["Conflict", "non_conflict"][i % 2], "origin": "gold" if i < 2 else "profile"})
    labels = ["Conflict", "non-conflict", "No Conflict", " CONFLICT"]   # (a whole column of booleans: 08_release)
    for case in ("case-1", "user/7"):
        for k, lab in enumerate(labels):
            gold = [] if (case, k) == ("case-1", 3) else [f"d{k % 4}", "d3"]
            if dangling and (case, k) == ("user/7", 1): gold = ["d1", "zz"]
            rows["queries"].append({"case_id": case, **TL, "query_id": f"q{k}", "query": f"Request {k} of {case}.",
                                    "gold_doc_ids": gold, "label": lab, "judgment": f"Because {k}.", "difficulty": k})
    return rows


def write_parquet(folder: Path, rows: dict) -> dict:
    "{config: [its parquet file]}: a local copy laid out as the hub repository is (data/<config>.parquet)."
    (folder / "data").mkdir(parents=True)
    out = {}
    for c in CONFIGS:
        f = folder / "data" / f"{c}.parquet"
        datasets.Dataset.from_list(rows[c]).to_parquet(str(f))
        out[c] = [str(f)]
    return out


def check_imported(out: Path):
    ds = load_pace_dataset(out)
    assert [i.instance_id for i in ds.instances.values()] == ["case-1", release.safe_case_name("user/7")]
    second = list(ds.instances.values())[1]
    assert second.meta == {"source_case_id": "user/7"} and second.ego.name == "Bo Lind"
    assert [a.model_dump() for a in second.alters] == [{"name": "Kim", "relation": "friend"}]
    assert len(ds.queries) == 8   # an empty gold list kept, as the release keeps it
    assert [q.label for q in ds.queries] == ["conflict", "non_conflict", "non_conflict", "conflict"] * 2
    assert ds.queries[3].gold_doc_ids == [] and ds.queries[3].meta == {"difficulty": 3, "empty_gold": True, "source_query_id": "q3"}
    assert all(q.situation_type is None for q in ds.queries)
    assert ds.queries[0].query_id == "case-1-q0" and ds.queries[0].meta == {"difficulty": 0, "source_query_id": "q0"}
    assert ds.queries[0].gold_doc_ids == ["d0", "d3"]
    assert ds.fact("case-1", "d0").meta == {"label": "Conflict", "origin": "gold"}   # corpus columns kept as given
    card = (out / "README.md").read_text()
    assert "1 queries have an empty gold list: kept" in card and "case-1/q3" in card and "'No Conflict' -> non_conflict (2)" in card
    assert "' CONFLICT' -> conflict (2)" in card and "1 gold lists named a doc twice" in card
    assert "'user/7' -> " in card and "`spec.relationships` (2)" in card and "n/a" in card
    return ds, card


def test_a_parquet_copy_in_the_hub_schema_is_imported(tmp_path):
    write_parquet(tmp_path / "copy", hub_rows())
    s = import_release(tmp_path / "copy", tmp_path / "out", date="2026-01-02")
    assert s["empty_gold"] == ["case-1/q3"] and s["queries"] == 8 and s["changed"] == []
    _, card = check_imported(tmp_path / "out")
    assert "on 2026-01-02" in card and "Licence, as the source gives it: not stated" in card
    assert main(["data", "check", str(tmp_path / "out")]) == 0


@pytest.mark.parametrize("shape", ["dict of configs", "one folder per config"])
def test_save_to_disk_copies_import_the_same(tmp_path, shape):
    rows = hub_rows()
    write_parquet(tmp_path / "pq", rows)
    import_release(tmp_path / "pq", tmp_path / "want")
    tables = {c: datasets.Dataset.from_list(rows[c]) for c in CONFIGS}
    if shape == "dict of configs": datasets.DatasetDict(tables).save_to_disk(str(tmp_path / "copy"))
    else:
        for c, t in tables.items(): datasets.DatasetDict({"test": t}).save_to_disk(str(tmp_path / "copy" / c))
    import_release(tmp_path / "copy", tmp_path / "out")
    assert pace_files(tmp_path / "out") == pace_files(tmp_path / "want")


def test_the_hub_id_goes_through_load_dataset_like_a_local_copy(tmp_path, monkeypatch):
    "The hub path is the local path: `load_dataset(HUB_ID, config, split='test')`, here answered from local parquet files."
    files = write_parquet(tmp_path / "copy", hub_rows())
    real, calls = datasets.load_dataset, []
    def hub(path, name=None, split=None, **kw):
        calls.append((path, name, split, sorted(kw)))
        if path != HUB_ID: return real(path, name, split=split, **kw)
        t = real("parquet", data_files={"test": files[name]}, split="test", cache_dir=str(tmp_path / "hf"))
        t.info.license = "cc-by-4.0"
        return t
    monkeypatch.setattr(datasets, "load_dataset", hub)
    import_release(HUB_ID, tmp_path / "out")
    assert calls == [(HUB_ID, c, "test", []) for c in CONFIGS]   # the user's cache: no cache_dir of ours
    _, card = check_imported(tmp_path / "out")
    assert f"hub `{HUB_ID}`" in card and "Licence, as the source gives it: cc-by-4.0" in card
    import_release(tmp_path / "copy", tmp_path / "local")
    assert pace_files(tmp_path / "out") == pace_files(tmp_path / "local")


@pytest.mark.parametrize("offline", [False, True])
def test_an_unreachable_hub_is_one_line(tmp_path, monkeypatch, capsys, offline):
    def unreachable(*a, **kw): raise ConnectionError("Couldn't reach 'p2chp2t/pace' on the Hub (LocalEntryNotFoundError)\nmore")
    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1") if offline else monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("PACE_DEBUG", raising=False)
    assert main(["data", "import", HUB_ID, str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "'queries' table cannot be loaded (ConnectionError: Couldn't reach" in err
    assert ("HF_HUB_OFFLINE is set" in err) == offline
    assert not any(tmp_path.iterdir())


def test_the_authors_layout_is_imported_like_its_tables(tmp_path):
    "The rows written out as the authors' loader does (grouped per case, case_id and timeline stripped) import the same."
    rows = hub_rows()
    write_parquet(tmp_path / "pq", rows)
    import_release(tmp_path / "pq", tmp_path / "want")
    root = tmp_path / "authors"
    strip = lambda r, keys: {k: v for k, v in r.items() if k not in keys}
    for c in ("queries", "corpus"):
        by = {}
        for r in rows[c]: by.setdefault(r["case_id"], []).append(strip(r, ("case_id", *TL)))
        for case, rs in by.items():   # a case id with '/' makes a sub-folder in their layout: name it as we would
            f = root / "kb" / release.safe_case_name(case) / f"{c}.json"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps({"timeline": TL, c: rs}, indent=2))
    (root / "profile").mkdir()
    for r in rows["profiles"]:
        (root / "profile" / f"{release.safe_case_name(r['case_id'])}.json").write_text(json.dumps(strip(r, ("case_id",))))
    (root / "kb" / ".ipynb_checkpoints").mkdir()   # a hidden folder is no case
    import_release(root, tmp_path / "out")
    a, b = load_pace_dataset(tmp_path / "want"), load_pace_dataset(tmp_path / "out")
    assert [q.model_dump() for q in a.queries] == [q.model_dump() for q in b.queries]
    assert sorted(a.instances) == sorted(b.instances)


def test_a_dangling_gold_id_is_refused_under_strict_with_its_row_and_nothing_is_written(tmp_path):
    write_parquet(tmp_path / "copy", hub_rows(dangling=True))
    with pytest.raises(DatasetError) as e: import_release(tmp_path / "copy", tmp_path / "out", strict=True)
    assert "queries row 5: field 'gold_doc_ids.1': 'zz' is not a doc_id of the corpus of case 'user/7'" in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]


def test_an_existing_folder_is_refused_before_anything_is_read(tmp_path):
    (tmp_path / "out").mkdir(); (tmp_path / "out" / "keep").write_text("x")
    with pytest.raises(UsageError, match="exists and is not empty"): import_release(tmp_path / "nowhere", tmp_path / "out")
    with pytest.raises(UsageError, match="exists and is not empty"): export_release(MINI, tmp_path / "out")
    (tmp_path / "empty").mkdir()
    export_release(MINI, tmp_path / "empty")   # an empty folder is fine
    assert (tmp_path / "empty" / "kb" / "mini-01" / "corpus.json").exists()


def test_an_import_that_fails_while_writing_leaves_no_folder(tmp_path, monkeypatch):
    write_parquet(tmp_path / "copy", hub_rows())
    def boom(*a, **kw): raise OSError(28, "No space left on device")
    monkeypatch.setattr(release, "import_card", boom)
    with pytest.raises(OSError): import_release(tmp_path / "copy", tmp_path / "sub" / "out")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if "copy" not in p.parts) == ["sub"]


# --- untyped requests through a run: the tables say n/a ---------------------------------------------------------------

def test_a_run_on_partly_untyped_requests_tabulates_them_as_na(tmp_path, capsys):
    rows = hub_rows()
    for r in rows["queries"]:
        if r["case_id"] == "case-1": r["situation_type"] = "Temporal"   # the other case has none (null)
    write_parquet(tmp_path / "copy", rows)
    import_release(tmp_path / "copy", tmp_path / "ds")
    assert main(["data", "check", str(tmp_path / "ds")]) == 0
    out = capsys.readouterr().out
    assert "| n/a      |" in out and "| temporal |" in out
    assert main(["run", "--data", str(tmp_path / "ds"), "--retrieval-only", "--methods", "bm25", "--embedder", "hash:hash",
                 "--out", str(tmp_path / "runs"), "--name", "r", "--limit", "4", "--no-progress"]) == 0
    rows_out = [json.loads(l) for l in (tmp_path / "runs" / "r" / "results.jsonl").read_text().splitlines()]
    assert {r["situation_type"] for r in rows_out} == {"temporal", None}
    from pace.eval.evaluate import rate_by, results_frame
    t = rate_by(results_frame(rows_out), "situation_type", "recall@10")
    assert [v for _, v in t.index] == ["n/a", "temporal", "overall"] and t["n"].tolist() == [2, 2, 4]


# --- issue 42: nothing moved, merged or renamed without a word --------------------------------------------------------

def write_pace(folder: Path, instances: list[dict], facts: dict, queries: list[dict]) -> Path:
    "A PACE folder from plain rows (facts: {instance id: [fact]})."
    (folder / "kb").mkdir(parents=True)
    line = lambda rs: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rs)
    (folder / "instances.jsonl").write_text(line(instances), encoding="utf-8")
    for iid, fs in facts.items(): (folder / "kb" / f"{iid}.jsonl").write_text(line(fs), encoding="utf-8")
    (folder / "queries.jsonl").write_text(line(queries), encoding="utf-8")
    return folder


def small_pace(folder: Path, ids, inst_meta=None, query_ids=None, query_meta=None) -> Path:
    "One instance per id (two facts, one query each); optional meta per instance and per query."
    inst_meta, query_meta = inst_meta or {}, query_meta or {}
    instances = [{"instance_id": i, "ego": {"name": f"Ego {k}"}, "alters": [], "timeline": TL}
                 | ({"meta": inst_meta[i]} if i in inst_meta else {}) for k, i in enumerate(ids)]
    facts = {i: [{"doc_id": "d0", "text": f"{i} fact 0."}, {"doc_id": "d1", "text": f"{i} fact 1."}] for i in ids}
    qids = query_ids or [f"q{k}" for k in range(len(ids))]
    queries = [{"query_id": q, "instance_id": i, "query": f"Request of {i}.", "ref_date": TL["ref_date"],
                "situation_type": "personal", "label": "conflict", "gold_doc_ids": ["d1"], "judgment": "Because."}
               | ({"meta": query_meta[q]} if q in query_meta else {}) for q, i in zip(qids, ids)]
    return write_pace(folder, instances, facts, queries)


def dumps(ds) -> tuple:
    "A loaded dataset as plain data: instances, facts, queries (by id: the authors' layout reads cases in sorted order)."
    return (sorted((i.model_dump(mode="json") for i in ds.instances.values()), key=lambda i: i["instance_id"]),
            {k: [f.model_dump() for f in v] for k, v in ds.kb.items()},
            sorted((q.model_dump(mode="json") for q in ds.queries), key=lambda q: q["query_id"]))


def one_line_error(capsys, argv) -> str:
    "Run the CLI, expecting a one-line user error (status 2, no traceback): that line."
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("pace: error: "), err
    return err


@pytest.mark.parametrize("layout", ["official", "hub"])
def test_export_never_writes_two_instances_as_one_case(tmp_path, layout):
    "Item 1: meta.source_case_id naming another instance merged the two cases (official) or failed the re-import (hub)."
    src = small_pace(tmp_path / "src", ["A", "B"], inst_meta={"B": {"source_case_id": "A"}})
    s = export_release(src, tmp_path / "out", layout)
    assert s["profiles"] == 2
    import_release(tmp_path / "out", tmp_path / "back")
    assert dumps(load_pace_dataset(tmp_path / "back")) == dumps(load_pace_dataset(src))


def test_export_refuses_a_case_id_twice_in_one_line(tmp_path, capsys, monkeypatch):
    "Item 1: an instance key 'case_id' would be written over the case column; one case id for two instances is refused."
    src = small_pace(tmp_path / "src", ["A", "B"])
    rows = [json.loads(l) for l in (src / "instances.jsonl").read_text().splitlines()]
    rows[1]["case_id"] = "A"
    (src / "instances.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    err = one_line_error(capsys, ["data", "export", str(src), str(tmp_path / "out")])
    assert "instance 'B' has a key 'case_id'" in err and not (tmp_path / "out").exists()
    ds = load_pace_dataset(small_pace(tmp_path / "src2", ["A", "B"], inst_meta={"B": {"source_case_id": "A"}}))
    monkeypatch.setattr(release, "safe_case_name", lambda c: "B")   # a renaming rule under which B came from A
    with pytest.raises(UsageError, match="instances 'A' and 'B' would both be case 'A'"): release.pace_to_release(ds)


def authors_layout(root: Path, cases=("case1", "case2")) -> Path:
    "The authors' layout of two small cases."
    for c in cases:
        (root / "kb" / c).mkdir(parents=True)
        corpus = [{"doc_id": f"d{k}", "text": f"{c} fact {k}."} for k in range(2)]
        queries = [{"query_id": "q0", "query": f"Request of {c}.", "gold_doc_ids": ["d1"], "label": "conflict",
                    "judgment": "Because."}]
        (root / "kb" / c / "corpus.json").write_text(json.dumps({"timeline": TL, "corpus": corpus}))
        (root / "kb" / c / "queries.json").write_text(json.dumps({"timeline": TL, "queries": queries}))
    (root / "profile").mkdir()
    for c in cases: (root / "profile" / f"{c}.json").write_text(json.dumps({"spec": {"demographic": {"full_name": c}}}))
    return root


@pytest.mark.parametrize("file, entry, want", [
    ("kb/case1/corpus.json", "corpus", "kb/case1/corpus.json: field 'corpus.0.case_id': 'case2' is not the case 'case1'"),
    ("kb/case1/queries.json", "queries", "kb/case1/queries.json: field 'queries.0.case_id': 'case2' is not the case 'case1'"),
    ("profile/case1.json", None, "profile/case1.json: field 'case_id': 'case2' is not the case 'case1'")])
def test_the_folder_decides_the_case_of_an_authors_layout_row(tmp_path, capsys, file, entry, want):
    "Item 2: an entry's own case_id won over its folder, and the row landed in the other case without a word."
    root = authors_layout(tmp_path / "authors")
    obj = json.loads((root / file).read_text())
    (obj[entry][0] if entry else obj)["case_id"] = "case2"
    (root / file).write_text(json.dumps(obj))
    err = one_line_error(capsys, ["data", "import", str(root), str(tmp_path / "out")])
    assert want in err and "the place decides" in err and not (tmp_path / "out").exists()
    obj = json.loads((root / file).read_text())
    (obj[entry][0] if entry else obj)["case_id"] = "case1"   # its own case: fine
    (root / file).write_text(json.dumps(obj))
    assert main(["data", "import", str(root), str(tmp_path / "out")]) == 0


@pytest.mark.parametrize("layout", ["official", "hub"])
def test_a_round_trip_keeps_every_valid_id(tmp_path, layout):
    "Item 3: 'ütf' became 'tf-30ee29c8', ids over 100 characters were hashed, a user's meta.source_query_id renamed a query."
    ids = ["ütf", "x" * 150, "日本 語", "plain"]
    src = small_pace(tmp_path / "src", ids, query_ids=["qa", "qb", "qc", "plain-zz"],
                     query_meta={"qa": {"source_query_id": "zz"}, "plain-zz": {"source_query_id": "zz"}})
    export_release(src, tmp_path / "out", layout)
    import_release(tmp_path / "out", tmp_path / "back")
    assert dumps(load_pace_dataset(tmp_path / "back")) == dumps(load_pace_dataset(src))


def test_an_imports_prefixed_query_ids_still_go_back_to_their_source(tmp_path):
    "Item 3: the rule keeps undoing what an import did (a query id in two cases), and only that."
    write_parquet(tmp_path / "copy", hub_rows())
    import_release(tmp_path / "copy", tmp_path / "pace")
    export_release(tmp_path / "pace", tmp_path / "hub", "hub")
    q = datasets.load_dataset(str(tmp_path / "hub"), "queries", split="test", cache_dir=str(tmp_path / "cache"))
    assert q[0]["query_id"] == "q0" and q[0]["case_id"] == "case-1" and "source_query_id" not in q.column_names
    import_release(tmp_path / "hub", tmp_path / "back")
    assert dumps(load_pace_dataset(tmp_path / "back")) == dumps(load_pace_dataset(tmp_path / "pace"))


def with_row(config, i, **changes) -> dict:
    rows = hub_rows()
    rows[config][i] = rows[config][i] | changes
    return rows


@pytest.mark.parametrize("broken, want", [
    ("corrupt parquet", "data/corpus.parquet: the 'corpus' table cannot be read (ArrowInvalid: "),
    ("zero-row parquet", "data/corpus.parquet: the 'corpus' table cannot be read (DatasetGenerationError: "),
    ("zero-row parquet with columns", "data/corpus.parquet: the 'corpus' table cannot be read (ValueError: "),
    ("bad dataset_dict.json", "copy/dataset_dict.json: the 'queries' table cannot be read (JSONDecodeError: ")])
def test_a_damaged_table_is_one_line(tmp_path, capsys, broken, want):
    "Item 4: each of these was a traceback."
    rows = hub_rows()
    write_parquet(tmp_path / "copy", rows)
    f = tmp_path / "copy" / "data" / "corpus.parquet"
    if broken == "corrupt parquet": f.write_bytes(b"PAR1 not really parquet PAR1")
    if broken == "zero-row parquet": datasets.Dataset.from_list([]).to_parquet(str(f))
    if broken == "zero-row parquet with columns": datasets.Dataset.from_list(rows["corpus"]).select([]).to_parquet(str(f))
    if broken == "bad dataset_dict.json":
        shutil.rmtree(tmp_path / "copy" / "data")
        datasets.DatasetDict({c: datasets.Dataset.from_list(rows[c]) for c in CONFIGS}).save_to_disk(str(tmp_path / "copy"))
        (tmp_path / "copy" / "dataset_dict.json").write_text('{"splits": ')
    err = one_line_error(capsys, ["data", "import", str(tmp_path / "copy"), str(tmp_path / "out")])
    assert want in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("file, change, want", [
    ("kb/case1/queries.json", {"gold_doc_ids": [{"id": "d1"}]}, "field 'queries.0.gold_doc_ids.0': expected a doc id (a string), got dict"),
    ("kb/case1/queries.json", {"gold_doc_ids": [["d1"]]}, "field 'queries.0.gold_doc_ids.0': expected a doc id (a string), got list"),
    ("profile/case1.json", {"ego": "Ana"}, "profile/case1.json: field 'ego': Input should be a valid dictionary")])
def test_a_value_of_the_wrong_kind_is_one_line(tmp_path, capsys, file, change, want):
    "Item 4: a gold id that is an object or a list, an ego that is a string: tracebacks."
    root = authors_layout(tmp_path / "authors")
    obj = json.loads((root / file).read_text())
    (obj["queries"][0] if "queries" in obj else obj).update(change)
    (root / file).write_text(json.dumps(obj))
    assert want in one_line_error(capsys, ["data", "import", str(root), str(tmp_path / "out")])


def test_the_loaders_warnings_are_shown_by_an_import(tmp_path, capsys):
    "Item 5: a fact over MAX_FACT_CHARS went in without a word."
    rows = with_row("corpus", 2, text="x" * 1500)
    write_parquet(tmp_path / "copy", rows)
    assert main(["data", "import", str(tmp_path / "copy"), str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert f"pace: warning: {tmp_path / 'out'}/kb/case-1.jsonl:3: field 'text': 1500 characters" in err
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## Warnings of the format's check" in card and "kb/case-1.jsonl:3: field 'text': 1500 characters" in card


KILLER = """
import os, signal, sys
import pace.release as r
real = r.write_pace
def write_pace(folder, imp):
    real(folder, imp)
    os.kill(os.getpid(), getattr(signal, sys.argv[3]))
r.write_pace = write_pace
r.import_release(sys.argv[1], sys.argv[2])
"""


def test_a_killed_import_leaves_no_temporary_folder(tmp_path):
    "Item 6: each SIGTERM or SIGKILL during an import left a hidden temporary folder beside OUT."
    import os, subprocess, sys
    import pace
    here = str(Path(pace.__file__).parent.parent)   # the subprocess imports the pace this test imported
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    write_parquet(tmp_path / "copy", hub_rows())
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / ".mine.tmp").mkdir()   # not made by an import: never touched
    run = lambda sig: subprocess.run([sys.executable, "-c", KILLER, str(tmp_path / "copy"), str(tmp_path / "runs" / "out"), sig],
                                     capture_output=True, text=True, timeout=120, env=env)
    p = run("SIGTERM")
    assert p.returncode == 143 and "terminated (SIGTERM)" in p.stderr and "Traceback" not in p.stderr
    assert sorted(f.name for f in (tmp_path / "runs").iterdir()) == [".mine.tmp"]
    assert run("SIGKILL").returncode == -9
    left = [f.name for f in (tmp_path / "runs").iterdir() if f.name != ".mine.tmp"]
    assert len(left) == 1 and left[0].startswith(".out.")   # a SIGKILL cannot be caught: the next command cleans up
    import_release(tmp_path / "copy", tmp_path / "runs" / "out")
    assert sorted(f.name for f in (tmp_path / "runs").iterdir()) == [".mine.tmp", "out"]
    assert not list(tmp_path.glob("**/.pace-partial"))


def test_a_dangling_symlink_out_is_named_by_its_own_name(tmp_path, capsys):
    "Item 6: the error named the temporary folder instead of OUT."
    write_parquet(tmp_path / "copy", hub_rows())
    (tmp_path / "out").symlink_to(tmp_path / "gone")
    err = one_line_error(capsys, ["data", "import", str(tmp_path / "copy"), str(tmp_path / "out")])
    assert f"{tmp_path / 'out'}: a symbolic link to {tmp_path / 'gone'}, which does not exist" in err and ".tmp" not in err


@pytest.mark.parametrize("second", ["queries.parquet", "data/queries-00000-of-00001.parquet", "save_to_disk"])
def test_two_copies_of_a_table_are_refused_naming_both(tmp_path, capsys, second):
    "Item 7: with two copies of one config, one was picked without a word."
    rows = hub_rows()
    write_parquet(tmp_path / "copy", rows)
    if second == "save_to_disk": datasets.DatasetDict({"test": datasets.Dataset.from_list(rows["queries"])}).save_to_disk(str(tmp_path / "copy" / "queries"))
    else: datasets.Dataset.from_list(rows["queries"][:2]).to_parquet(str(tmp_path / "copy" / second))
    err = one_line_error(capsys, ["data", "import", str(tmp_path / "copy"), str(tmp_path / "out")])
    assert "two copies of the 'queries' table" in err and "data/queries.parquet" in err
    assert (str(tmp_path / "copy" / "queries") if second == "save_to_disk" else second) in err


def test_a_column_and_its_meta_key_with_two_values_are_refused(tmp_path, capsys):
    "Item 8: the row's column silently replaced the same key of its meta object (or the other way round)."
    rows = hub_rows()
    rows["corpus"] = [r | {"meta": {"origin": "gold"} if i == 6 else None} for i, r in enumerate(rows["corpus"])]
    write_parquet(tmp_path / "copy", rows)
    err = one_line_error(capsys, ["data", "import", str(tmp_path / "copy"), str(tmp_path / "out")])
    assert "corpus row 6: field 'meta.origin': both a column and a key of the row's `meta`, with two values ('profile', 'gold')" in err
    write_parquet(tmp_path / "same", with_row("corpus", 0, meta={"origin": "gold", "k": 1}))   # one value: kept once
    import_release(tmp_path / "same", tmp_path / "ok")
    assert load_pace_dataset(tmp_path / "ok").fact("case-1", "d0").meta == {"label": "Conflict", "origin": "gold", "k": 1}


@pytest.mark.parametrize("file, text, where", [
    ("kb/case1/corpus.json", '{"timeline": {}, "corpus": [{"doc_id": "d0",\n "doc_id": "d1", "text": "t"}]}',
     "kb/case1/corpus.json:2: invalid JSON: key 'doc_id' repeated in one object"),
    ("profile/case2.json", '{"spec": {"demographic": {"full_name": "A"}},\n\n "spec": {}}',
     "profile/case2.json:3: invalid JSON: key 'spec' repeated in one object")])
def test_a_json_key_given_twice_is_refused_with_file_and_line(tmp_path, capsys, file, text, where):
    "Item 8: duplicate JSON keys took the last value."
    root = authors_layout(tmp_path / "authors")
    (root / file).write_text(text)
    assert where in one_line_error(capsys, ["data", "import", str(root), str(tmp_path / "out")])


# --- item 9: export, import, export again over random ids --------------------------------------------------------------

INSTANCE_IDS = ["c1", "A", "a", "ütf", "Zoë", "日本 語", "e\u0301", "\u00e9", "x" * 150, "ü" * 99, "a.b=1,2", "a_b",
                release.safe_case_name("a/b"), release.safe_case_name("a b/c"), "q"]
SOURCE_CASE_IDS = ["a/b", "a b/c", "../x", "-rf", "x" * 250, "A", "c1", "ütf"]
QUERY_IDS = ["q", "q1", "ütf", "y" * 180, "A-q", "c1-q1", "日本"]


def random_pace(rng, folder: Path) -> Path:
    "A PACE folder of 1 to 4 instances with ids, source ids and metas drawn to collide after sanitising."
    ids = rng.sample(INSTANCE_IDS, rng.randint(1, 4))
    instances, facts, queries = [], {}, []
    for k, iid in enumerate(ids):
        inst = {"instance_id": iid, "ego": {"name": f"Ego {k}"}, "alters": [], "timeline": TL}
        if rng.random() < 0.5: inst["meta"] = {"source_case_id": rng.choice(SOURCE_CASE_IDS + ids)}
        if rng.random() < 0.05: inst["case_id"] = rng.choice(ids)   # refused: the release's case column
        instances.append(inst)
        facts[iid] = [{"doc_id": d, "text": f"{iid} fact {d}."} | (
            {"meta": {rng.choice(["origin", "case_id", "text", "k"]): rng.choice(["gold", "x", iid])}}
            if rng.random() < 0.5 else {}) for d in rng.sample(["d0", "d1", "ü", "z" * 120], rng.randint(1, 3))]
    prefixed, taken = rng.random() < 0.4, set()
    for iid in ids:
        for _ in range(rng.randint(1, 2)):
            src = rng.choice(["q", "q1"] if prefixed else QUERY_IDS)
            qid = f"{iid}-{src}" if prefixed else src
            if qid in taken: continue
            taken.add(qid)
            meta = {"source_query_id": src} if prefixed or rng.random() < 0.2 else {}
            queries.append({"query_id": qid, "instance_id": iid, "query": f"Request {qid}.", "ref_date": TL["ref_date"],
                            "situation_type": rng.choice(["personal", None]), "label": "conflict",
                            "gold_doc_ids": [facts[iid][0]["doc_id"]], "judgment": "Because.", "meta": meta})
    return write_pace(folder, instances, facts, queries)


def exported(folder: Path) -> dict:
    "An exported folder's rows: JSON files as values, parquet files as row lists (the card left out)."
    import pyarrow.parquet as pq
    out = {}
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder).as_posix()
        if f.suffix == ".json": out[rel] = json.loads(f.read_text(encoding="utf-8"))
        if f.suffix == ".parquet": out[rel] = pq.read_table(f).to_pylist()
    return out


@pytest.mark.parametrize("layout, n", [("official", 120), ("hub", 24)])
def test_export_import_export_keeps_every_row_or_refuses_in_one_line(tmp_path, layout, n):
    "Item 9: over random (seeded) ids, a round trip gives back every instance, fact and query, or one line says why not."
    import random
    kept, refused = 0, []
    for seed in range(n):
        rng, d = random.Random(seed), tmp_path / str(seed)
        src = random_pace(rng, d / "src")
        try:
            export_release(src, d / "out", layout)
            import_release(d / "out", d / "back")
            export_release(d / "back", d / "again", layout)
        except (UsageError, DatasetError) as e:
            msg = e.one_line() if isinstance(e, DatasetError) else str(e)
            assert "\n" not in msg and "Traceback" not in msg, (seed, msg)
            refused.append(msg); continue
        assert dumps(load_pace_dataset(d / "back")) == dumps(load_pace_dataset(src)), seed
        assert exported(d / "again") == exported(d / "out"), seed
        kept += 1
    assert kept >= n * 3 // 4 and all("has a key 'case_id'" in m for m in refused), refused


@pytest.mark.parametrize("layout", ["official", "hub"])
def test_an_export_says_which_nulls_it_cannot_keep(tmp_path, capsys, layout):
    "A null in a meta or a persona cannot be told from a missing key in a release's table: it was dropped without a word."
    src = small_pace(tmp_path / "src", ["A"], inst_meta={"A": {"note": None}}, query_meta={"q0": {"k": None, "j": [None]}})
    assert main(["data", "export", str(src), str(tmp_path / "out"), "--layout", layout]) == 0
    assert f"pace: warning: {src}: 2 keys hold null (in meta, a persona, ...): left out" in capsys.readouterr().err
    assert export_release(MINI, tmp_path / "mini")["nulls_left_out"] == 0


def test_two_cases_that_become_one_instance_id_are_refused_in_one_line(tmp_path, capsys):
    "Item 9 (import side): 'user/7' is renamed to a name that another case of the release already has."
    rows, twin = hub_rows(), release.safe_case_name("user/7")
    for c in CONFIGS: rows[c] += [r | {"case_id": twin} for r in rows[c] if r["case_id"] == "user/7"]
    write_parquet(tmp_path / "copy", rows)
    err = one_line_error(capsys, ["data", "import", str(tmp_path / "copy"), str(tmp_path / "out")])
    assert f"profiles row 2: field 'case_id': case {twin!r} becomes instance id {twin!r}, which case 'user/7' has" in err


# --- issue 43 item 7: the import keeps going where the release would ---------------------------------------------------

def defective_rows(defect=None):
    "`hub_rows` with each defect the release runs on (or only `defect`): every one is repaired, kept or left out."
    rows = hub_rows(dangling=defect in (None, "dangling"))
    q = {(r["case_id"], r["query_id"]): r for r in rows["queries"]}
    if defect in (None, "outside"): q[("case-1", "q0")]["ref_date"] = "2026-05-09"   # outside the window; the case's is the last row's
    if defect in (None, "date"):
        for r in rows["corpus"] + rows["queries"]:
            if r["case_id"] == "user/7": r["window_start"] = "2026/3/1"
    if defect in (None, "empty fact"):
        rows["corpus"][5]["text"] = "  "   # case-1 d5
        if defect is None: q[("case-1", "q1")]["gold_doc_ids"] = ["d1", "d5", "d3"]
    if defect in (None, "label"): q[("user/7", "q2")]["label"] = "maybe"
    return rows


def test_an_import_lists_every_row_it_changed_or_left_out(tmp_path, capsys):
    write_parquet(tmp_path / "copy", defective_rows())
    assert main(["data", "import", str(tmp_path / "copy"), str(tmp_path / "out")]) == 0
    said = capsys.readouterr().out
    assert "7 queries" in said and "1 queries with an empty gold list kept" in said and "5 rows changed or left out" in said
    ds = load_pace_dataset(tmp_path / "out")
    q = {(q.instance_id, q.meta["source_query_id"]): q for q in ds.queries}
    seven = release.safe_case_name("user/7")
    assert ("user/7" not in q) and (seven, "q2") not in q   # the unknown label: left out
    assert q[(seven, "q1")].gold_doc_ids == ["d1"]   # the dangling id dropped, the query kept
    assert q[("case-1", "q1")].gold_doc_ids == ["d1", "d3"] and "d5" not in {f.doc_id for f in ds.kb["case-1"]}
    assert str(q[("case-1", "q0")].ref_date) == "2026-03-04"   # the case's date, as the release's loader takes it
    assert str(ds.instances[seven].timeline.window_start) == "2026-03-01"
    assert q[("case-1", "q3")].gold_doc_ids == [] and q[("case-1", "q3")].meta["empty_gold"] is True
    card = (tmp_path / "out" / "README.md").read_text()
    for line in ["case 'user/7', queries row 5 (gold_doc_ids.1): gold id 'zz' dropped (not a doc_id of the case's corpus); the query kept",
                 "case 'user/7', queries row 6 (label): label 'maybe' is no spelling of conflict or non_conflict: the query left out",
                 "case 'case-1', corpus row 5 (text): fact 'd5' has no text: left out (and from gold lists)",
                 "case 'case-1', queries row 1 (gold_doc_ids.1): gold id 'd5' dropped (its fact has no text); the query kept",
                 "case 'user/7', corpus row 12 (window_start): '2026/3/1' read as 2026-03-01 (every row of the case that gives it)",
                 "case 'case-1': 1 of 16 rows give another timeline (first: queries row 0); the case's is the last row's (queries row 3)",
                 "1 cases whose rows disagree on the timeline", "5 rows changed or left out (`--strict` refuses them)",
                 "1 queries have an empty gold list: kept, marked `meta.empty_gold`"]:
        assert line in card, line
    assert main(["data", "check", str(tmp_path / "out")]) == 0


def test_strict_refuses_each_defect_and_writes_nothing(tmp_path, capsys):
    write_parquet(tmp_path / "copy", defective_rows())
    assert main(["data", "import", str(tmp_path / "copy"), str(tmp_path / "out"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    for want in ["profiles row 1: field 'timeline.window_start': '2026/3/1' is not an ISO date", "corpus row 5: field 'text': missing or empty",
                 "queries row 0: field 'ref_date': 2026-05-09 is outside the case's window", "queries row 1: field 'gold_doc_ids.1': 'd5' is not a doc_id"]:
        assert want in err, want


@pytest.mark.parametrize("defect", ["dangling", "outside", "date", "empty fact", "label"])
def test_strict_refuses_one_defect_in_one_line(tmp_path, capsys, defect):
    rows = defective_rows(defect)
    rows["queries"] = [r for r in rows["queries"] if r["gold_doc_ids"]]   # (an empty gold list is kept either way)
    write_parquet(tmp_path / "copy", rows)
    assert main(["data", "import", str(tmp_path / "copy"), str(tmp_path / "out"), "--strict"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("pace: "), err
    assert main(["data", "import", str(tmp_path / "copy"), str(tmp_path / "lenient")]) == 0


def test_an_authors_layout_query_without_a_date_takes_its_cases_and_one_of_its_own_is_kept(tmp_path):
    export_release(SAMPLE, tmp_path / "official", layout="official")
    import_release(tmp_path / "official", tmp_path / "out")
    a, b = load_pace_dataset(SAMPLE), load_pace_dataset(tmp_path / "out")
    assert {q.query_id: q.ref_date for q in a.queries} == {q.query_id: q.ref_date for q in b.queries}
    export_release(SAMPLE, tmp_path / "hub", layout="hub")
    t, c = (datasets.load_dataset(str(tmp_path / "hub"), n, split="test", cache_dir=str(tmp_path / "cache")) for n in ("queries", "corpus"))
    tl = {r["case_id"]: r["ref_date"] for r in c}
    assert all(r["ref_date"] == tl[r["case_id"]] for r in t)   # the release's loader reads one timeline a case


def test_an_empty_gold_query_scores_0_for_retrieval_and_is_still_judged(tmp_path):
    "The release keeps a query without gold: its retrieval scores 0 (no crash, not skipped) and its answer is judged."
    from pace.testing import FakeChat, schema_reply
    from pace.eval.run import run_experiment
    from pace.eval.evaluate import read_jsonl, results_frame
    data = tmp_path / "tiny"
    shutil.copytree(ROOT / "tests" / "fixtures" / "tiny", data)
    lines = (data / "queries.jsonl").read_text().splitlines()
    q = json.loads(lines[0]) | {"gold_doc_ids": [], "meta": {"empty_gold": True}}
    (data / "queries.jsonl").write_text("\n".join([json.dumps(q)] + lines[1:]) + "\n")
    r = run_experiment(chat=Cached(FakeChat(schema_reply), False), name="e", cache=False, dataset=data, methods=["oracle", "bm25"],
                       embedder="hash:hash", out_dir=tmp_path / "runs", limit=0, progress=False)
    rows = [x for x in read_jsonl(r["results"]) if x["query_id"] == q["query_id"]]
    assert len(rows) == 2 and all(x["judge"] is not None and x["judge"]["label"] in ("PASS", "FAIL") for x in rows)
    df = results_frame(read_jsonl(r["results"])).set_index(["query_id", "method"])
    row = df.loc[(q["query_id"], "bm25")]
    assert (row["recall@10"], row["hit@10"], row["mrr"], row["funnel:final"]) == (0.0, 0.0, 0.0, 0.0)
    assert r["n_rows"] == 8


def test_an_authors_layout_querys_own_date_is_read_or_replaced_by_its_cases(tmp_path, capsys):
    "An entry's own ref_date (the loader strips the release's): a loose one read, one outside the window the case's."
    export_release(MINI, tmp_path / "off", layout="official")
    f = tmp_path / "off" / "kb" / "mini-01" / "queries.json"
    obj = json.loads(f.read_text())
    obj["queries"][0]["ref_date"], obj["queries"][1]["ref_date"] = "2099-01-01", "2026/3/10"
    f.write_text(json.dumps(obj))
    s = import_release(tmp_path / "off", tmp_path / "out")
    ds = load_pace_dataset(tmp_path / "out")
    q = [x for x in ds.queries if x.instance_id == "mini-01"]
    assert (str(q[0].ref_date), str(q[1].ref_date)) == ("2026-03-04", "2026-03-10")
    assert s["changed"] == ["case 'mini-01', kb/mini-01/queries.json (queries.0.query_ref_date): '2099-01-01' is no date in the case's window: the case's 2026-03-04 taken",
                            "case 'mini-01', kb/mini-01/queries.json (queries.1.query_ref_date): '2026/3/10' read as 2026-03-10"]
    assert all(c in (tmp_path / "out" / "README.md").read_text() for c in s["changed"])
    assert main(["data", "import", str(tmp_path / "off"), str(tmp_path / "strict"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "field 'queries.0.ref_date': 2099-01-01 is outside the case's window" in err and "'2026/3/10' is not an ISO date" in err


def test_a_queries_file_without_a_timeline_takes_the_corpus_one(tmp_path):
    "Rows that give no timeline at all neither set the case's nor count as disagreeing (a bare list of queries)."
    export_release(MINI, tmp_path / "off", layout="official")
    f = tmp_path / "off" / "kb" / "mini-01" / "queries.json"
    f.write_text(json.dumps(json.loads(f.read_text())["queries"]))
    s = import_release(tmp_path / "off", tmp_path / "out")
    assert (s["queries"], s["changed"], s["timelines"]) == (72, [], {})
    assert pace_files(tmp_path / "out") == pace_files(MINI)
