"""The bundled development set data/mini obeys the paper's construction rules."""
import datetime as dt, json, re, sys
from collections import Counter
from pathlib import Path

import pytest

from pace.data import load_pace_dataset

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "data" / "mini"
sys.path.insert(0, str(ROOT / "scripts"))
import build_mini  # noqa: E402

VERDICT_WORDS = ("conflict", "compatible", "feasible", "suitable", "cannot be carried out", "should not")
YEAR_DATE = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|November|December)"
                       r" (\d{1,2}), (\d{4})\b")


@pytest.fixture(scope="module")
def ds():
    return load_pace_dataset(MINI)


def test_loads_and_has_the_promised_shape(ds):
    assert len(ds.instances) >= 4
    for iid, inst in ds.instances.items():
        assert 1 <= len(inst.alters) <= 2, iid
        assert len(ds.facts(iid)) >= 500, iid
        assert sum(q.instance_id == iid for q in ds.queries) == 18, iid


def test_labels_balanced_per_instance_and_type(ds):
    grid = Counter((q.instance_id, q.situation_type, q.label) for q in ds.queries)
    for iid in ds.instances:
        for t in ("temporal", "personal", "state"):
            for l in ("conflict", "non_conflict"):
                assert grid[(iid, t, l)] == 3, (iid, t, l)


def test_gold_facts_per_query(ds):
    sizes = [len(q.gold_doc_ids) for q in ds.queries]
    assert min(sizes) >= 2 and max(sizes) <= 5
    assert 3.0 <= sum(sizes) / len(sizes) <= 4.5


def test_sources_pass_the_builder_checks():
    for f in sorted((ROOT / "data" / "sources" / "mini").glob("*.json")):
        assert build_mini.check_source(json.loads(f.read_text()), f.name) == []


def test_built_files_match_the_sources(tmp_path):
    build_mini.main(["--out", str(tmp_path)])
    for rel in ["instances.jsonl", "queries.jsonl", *[f"kb/{p.name}" for p in (MINI / "kb").glob("*.jsonl")]]:
        assert (tmp_path / rel).read_text() == (MINI / rel).read_text(), rel


def test_no_verdict_words_or_judgment_wording_in_the_kb(ds):
    "Facts state evidence, never the verdict: no verdict words, and no sentence of a judgment copied into a fact."
    for q in ds.queries:
        sentences = [s.strip().lower() for s in re.split(r"(?<=[.;])\s+", q.judgment) if len(s.split()) >= 6]
        for f in ds.facts(q.instance_id):
            low = f.text.lower()
            assert not any(w in low for w in VERDICT_WORDS), (q.instance_id, f.doc_id, f.text)
            assert not any(s.rstrip(".;") in low for s in sentences), (q.query_id, f.doc_id, f.text)


def test_queries_carry_no_hint(ds):
    for q in ds.queries:
        low = q.query.lower()
        assert not any(w in low for w in VERDICT_WORDS + ("check whether", "if possible")), q.query_id


def test_dates_inside_timeline(ds):
    for q in ds.queries:
        tl = ds.instances[q.instance_id].timeline
        texts = [(q.query_id, q.query)] + [(f.doc_id, f.text) for f in ds.facts(q.instance_id)]
        for where, text in texts:
            dates = [dt.date.fromisoformat(d) for d in build_mini.ISO_DATE.findall(text)]
            dates += [dt.datetime.strptime(" ".join(m), "%B %d %Y").date() for m in YEAR_DATE.findall(text)]
            for d in dates:
                assert tl.window_start <= d <= tl.window_end, (where, text)


def test_cases_interleave_in_the_kb(ds):
    "Facts written for one case are shuffled among the others, not stored as a block."
    for iid, facts in ds.kb.items():
        cases = [tuple(f.meta.get("cases", [])) for f in facts]
        same = sum(bool(a) and a == b for a, b in zip(cases, cases[1:]))
        assert same / len(cases) < 0.1, iid


def test_gold_evidence_is_not_lexically_obvious(ds):
    "BM25 with the raw query alone misses much of the gold evidence (the point of the benchmark)."
    recalls, golds = [], []
    for iid in ds.instances:
        kb = [f.model_dump() for f in ds.facts(iid)]
        qs = [q.model_dump() for q in ds.queries if q.instance_id == iid]
        rep = build_mini.bm25_report(kb, qs)
        recalls += [r for _, r, _ in rep["rows"]]
        golds += [g for *_, g in rep["rows"]]
    recall, gold = sum(recalls) / len(recalls), sum(golds) / len(golds)
    print(f"BM25 raw-query Recall@10={recall:.3f} Gold@10={gold:.3f}")
    assert recall < 0.6 and gold < 0.35
