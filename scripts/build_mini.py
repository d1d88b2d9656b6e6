"""Assemble the bundled development set `data/mini` from its hand-authored sources.

Each ego world is authored as one JSON file in `data/sources/mini/<instance_id>.json`
(profile, alters, timeline, 18 cases with gold and distractor facts, general profile facts).
This script checks the sources against the construction rules and writes the dataset in the
PACE dataset format (`nbs/00_data.ipynb`): facts of all cases are interleaved in a shuffled, fixed order.

    python scripts/build_mini.py                 # check every source, then build data/mini
    python scripts/build_mini.py --check FILE    # check one source and report BM25 recall
"""
from __future__ import annotations

import argparse, datetime as dt, json, random, re, sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "data" / "sources" / "mini"
OUT = ROOT / "data" / "mini"

TYPES = ("temporal", "personal", "state")
LABELS = ("conflict", "non_conflict")
# Words that would leak a verdict into the knowledge base (issue 3).
FORBIDDEN = ("conflict", "compatible", "feasible", "suitable", "cannot be carried out", "should not")
ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
PRONOUN_START = re.compile(r"^(he|she|they|it|his|her|their|its|this|that)\b", re.I)
MIN_FACTS = 520


def iso_dates(text: str) -> list[dt.date]:
    "Every ISO date written in `text` (raises on an impossible one such as 2026-02-30)."
    return [dt.date.fromisoformat(d) for d in ISO_DATE.findall(text)]


def check_source(src: dict, name: str = "source") -> list[str]:
    "All rule violations of one source world, as readable lines (empty when it is clean)."
    errs: list[str] = []
    def err(msg): errs.append(f"{name}: {msg}")
    for key in ("instance_id", "ego", "alters", "timeline", "cases", "profile_facts"):
        if key not in src: err(f"missing key {key!r}")
    if errs: return errs
    if not src["ego"].get("name"): err("ego.name is empty")
    if not 1 <= len(src["alters"]) <= 2: err(f"{len(src['alters'])} alters, expected 1 or 2")
    for i, a in enumerate(src["alters"]):
        for k in ("name", "relation"):
            if not a.get(k): err(f"alters[{i}].{k} is empty")
    try:
        tl = {k: dt.date.fromisoformat(src["timeline"][k]) for k in ("window_start", "ref_date", "window_end")}
    except (KeyError, ValueError) as e:
        return errs + [f"{name}: bad timeline: {e}"]
    if not tl["window_start"] <= tl["ref_date"] <= tl["window_end"]: err("ref_date outside the window")
    def check_dates(text, where):
        try: ds = iso_dates(text)
        except ValueError as e: return err(f"{where}: invalid date ({e}): {text!r}")
        for d in ds:
            if not tl["window_start"] <= d <= tl["window_end"]: err(f"{where}: date {d} outside the timeline: {text!r}")
    def check_fact(text, where):
        if not isinstance(text, str) or not text.strip(): return err(f"{where}: empty fact")
        low = text.lower()
        for w in FORBIDDEN:
            if w in low: err(f"{where}: forbidden word {w!r}: {text!r}")
        if PRONOUN_START.match(text.strip()): err(f"{where}: starts with a pronoun, name the subject: {text!r}")
        check_dates(text, where)
    cases = src["cases"]
    grid = Counter((c.get("situation_type"), c.get("label")) for c in cases)
    for t in TYPES:
        for l in LABELS:
            if grid[(t, l)] != 3: err(f"{grid[(t, l)]} cases of ({t}, {l}), expected 3")
    if len(cases) != 18: err(f"{len(cases)} cases, expected 18")
    ids = Counter(c.get("case_id") for c in cases)
    for cid, n in ids.items():
        if n > 1: err(f"duplicate case_id {cid!r}")
    reasons = Counter((c.get("hidden_reason") or "").strip().lower() for c in cases)
    for r, n in reasons.items():
        if n > 1: err(f"hidden_reason {r!r} used {n} times")
    for c in cases:
        cid = c.get("case_id", "?")
        for k in ("query", "context", "judgment", "hidden_reason"):
            if not (c.get(k) or "").strip(): err(f"case {cid}: {k} is empty")
        if c.get("situation_type") == "temporal" and not (c.get("arithmetic") or "").strip():
            err(f"case {cid}: temporal case without its arithmetic")
        check_dates(c.get("query", ""), f"case {cid} query")
        gold, dis = c.get("gold_facts", []), c.get("distractor_facts", [])
        if not 2 <= len(gold) <= 5: err(f"case {cid}: {len(gold)} gold facts, expected 2-5")
        if not 6 <= len(dis) <= 10: err(f"case {cid}: {len(dis)} distractor facts, expected 6-10")
        jwords = (c.get("judgment") or "").lower()
        for i, f in enumerate(gold): check_fact(f, f"case {cid} gold[{i}]")
        for i, f in enumerate(dis): check_fact(f, f"case {cid} distractor[{i}]")
        for f in gold + dis:
            if isinstance(f, str) and len(f) > 30 and f.lower().strip(". ") in jwords:
                err(f"case {cid}: a fact copies the judgment: {f!r}")
    for i, f in enumerate(src["profile_facts"]): check_fact(f, f"profile_facts[{i}]")
    facts = all_fact_texts(src)
    if len(set(facts)) < MIN_FACTS: err(f"{len(set(facts))} distinct facts, expected at least {MIN_FACTS}")
    return errs


def all_fact_texts(src: dict) -> list[str]:
    "Every fact text of a source, gold first, then distractors, then profile facts."
    out = [f for c in src["cases"] for f in c.get("gold_facts", [])]
    out += [f for c in src["cases"] for f in c.get("distractor_facts", [])]
    return out + list(src["profile_facts"])


def assemble(src: dict) -> tuple[dict, list[dict], list[dict]]:
    "One source world -> (instance record, KB facts in a shuffled fixed order, queries)."
    iid = src["instance_id"]
    origin: dict[str, dict] = {}
    for c in src["cases"]:
        for kind in ("gold", "distractor"):
            for f in c[f"{kind}_facts"]:
                m = origin.setdefault(f.strip(), {"origin": kind, "cases": []})
                if kind == "gold": m["origin"] = "gold"
                m["cases"].append(c["case_id"])
    for f in src["profile_facts"]: origin.setdefault(f.strip(), {"origin": "profile", "cases": []})
    texts = sorted(origin)                       # sort first so the shuffle depends only on content
    random.Random(f"pace-mini:{iid}").shuffle(texts)
    doc_of = {t: f"{iid}-f{i:04d}" for i, t in enumerate(texts, 1)}
    kb = [{"doc_id": doc_of[t], "text": t, "meta": origin[t]} for t in texts]
    tl = src["timeline"]
    queries = [{"query_id": f"{iid}-{c['case_id']}", "instance_id": iid, "query": c["query"],
                "ref_date": tl["ref_date"], "situation_type": c["situation_type"], "label": c["label"],
                "gold_doc_ids": [doc_of[f.strip()] for f in c["gold_facts"]], "judgment": c["judgment"],
                "context": c["context"],
                "meta": {"case_id": c["case_id"], "hidden_reason": c["hidden_reason"],
                         **({"arithmetic": c["arithmetic"]} if c.get("arithmetic") else {})}}
               for c in src["cases"]]
    inst = {"instance_id": iid, "ego": src["ego"], "alters": src["alters"], "timeline": tl}
    return inst, kb, queries


def bm25_report(kb: list[dict], queries: list[dict], k: int = 10) -> dict:
    "Recall@k and Gold@k of each raw query against its own instance KB with BM25 (bm25s)."
    import bm25s
    corpus = [f["text"] for f in kb]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    res, _ = retriever.retrieve(bm25s.tokenize([q["query"] for q in queries], stopwords="en", show_progress=False),
                                k=k, show_progress=False)
    rows = []
    for q, idx in zip(queries, res):
        got = {kb[i]["doc_id"] for i in idx}
        gold = set(q["gold_doc_ids"])
        rows.append((q["query_id"], len(got & gold) / len(gold), gold <= got))
    return {"recall": sum(r for _, r, _ in rows) / len(rows), "gold": sum(g for *_, g in rows) / len(rows), "rows": rows}


def write_jsonl(path: Path, rows: list[dict]):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", metavar="FILE", help="check one source file and report BM25 recall of its queries")
    ap.add_argument("--sources", default=str(SOURCES))
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    files = [Path(a.check)] if a.check else sorted(Path(a.sources).glob("*.json"))
    if not files: sys.exit(f"no source files in {a.sources}")
    built, failed = [], False
    for f in files:
        src = json.loads(f.read_text(encoding="utf-8"))
        errs = check_source(src, f.name)
        for e in errs: print("ERROR", e)
        failed |= bool(errs)
        if errs and not a.check: continue
        try: inst, kb, qs = assemble(src)
        except KeyError as e:
            print("ERROR", f.name, "cannot assemble:", e); failed = True; continue
        rep = bm25_report(kb, qs)
        print(f"{f.name}: {len(kb)} facts, {len(qs)} queries, BM25 raw-query Recall@10={rep['recall']:.3f} Gold@10={rep['gold']:.3f}")
        if a.check:
            for qid, r, g in rep["rows"]: print(f"  {qid:14s} recall@10={r:.2f}{'  (all gold found)' if g else ''}")
        built.append((inst, kb, qs))
    if a.check or failed:
        sys.exit(1 if failed else 0)
    out = Path(a.out)
    write_jsonl(out / "instances.jsonl", [i for i, _, _ in built])
    write_jsonl(out / "queries.jsonl", [q for *_, qs in built for q in qs])
    for inst, kb, _ in built: write_jsonl(out / "kb" / f"{inst['instance_id']}.jsonl", kb)
    print(f"wrote {out} ({len(built)} instances)")


if __name__ == "__main__":
    main()
