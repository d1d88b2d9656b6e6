#!/usr/bin/env python
"""BM25 on a dataset one difference at a time, between the project's BM25 and the authors' (`--bm25 release`):
tokens, scoring, zero-score fill-in. Prints Recall@10, Hit@10 and MRR@10 of each variant over every query.

    .venv/bin/python scripts/bm25_variants.py data/mini
    .venv/bin/python scripts/bm25_variants.py data/generated-sample
"""
import re, sys
import numpy as np, bm25s, Stemmer
from bm25s.stopwords import STOPWORDS_EN
from pace.data import load_pace_dataset
from pace.index import release_tokens, _bm25_release, _topk
from pace.metrics import retrieval_metrics

STEM, STOP = Stemmer.Stemmer("english"), set(STOPWORDS_EN)
def bm25s_tokens(texts, **kw): return [[t for t in ts if t] for ts in bm25s.tokenize(texts, return_ids=False, show_progress=False, **kw)]
# ISO dates and clock times as one token each: bm25s splits them at '-' and ':' ('2026' then matches every dated fact);
# '_' is a word character to bm25s, so '2026_03_14' and '7_30' stay whole
WHOLE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}")
def whole_dates(texts): return [WHOLE.sub(lambda m: re.sub("[-:]", "_", m.group()), t) for t in texts]
def lucene(toks):
    r = bm25s.BM25(method="lucene", k1=1.5, b=0.75); r.index(toks, show_progress=False); return r

VARIANTS = {  # name: (tokens, index builder (None: the authors' scores), only scores > 0)
    "project (bm25s tokens, stopwords dropped, stemmed; Lucene)": (lambda T: bm25s_tokens(T, stopwords="en", stemmer=STEM), lucene, True),
    "project, not stemmed": (lambda T: bm25s_tokens(T, stopwords="en"), lucene, True),
    # bm25s.tokenize drops English stopwords unless told `stopwords=None`
    "project, stopwords kept": (lambda T: bm25s_tokens(T, stopwords=None, stemmer=STEM), lucene, True),
    "project, ISO dates and clock times whole": (lambda T: bm25s_tokens(whole_dates(T), stopwords="en", stemmer=STEM), lucene, True),
    "authors' tokens; Lucene": (release_tokens, lucene, True),
    "authors' tokens, stopwords dropped; Lucene": (lambda T: [[t for t in ts if t not in STOP] for ts in release_tokens(T)], lucene, True),
    "authors' tokens, stemmed; Lucene": (lambda T: [STEM.stemWords(ts) for ts in release_tokens(T)], lucene, True),
    "authors' tokens; BM25Okapi": (release_tokens, None, True),
    "authors' tokens; BM25Okapi; zero scores fill the top 10 (--bm25 release)": (release_tokens, None, False),
}

def main(path="data/mini"):
    ds = load_pace_dataset(path)
    for name, (tok, build, positive) in VARIANTS.items():
        ms, short = [], 0
        for inst in sorted(ds.instances):
            facts = ds.facts(inst); ids = [f.doc_id for f in facts]; texts = [f.text for f in facts]
            r = build(tok(texts)) if build else _bm25_release(texts)
            for q in (q for q in ds.queries if q.instance_id == inst):
                sc = r.get_scores_from_ids(r.get_tokens_ids(tok([q.query])[0]))
                short += int((sc > 0).sum() < 10)
                ii, _ = _topk(sc, 10, positive=positive)
                ms.append(retrieval_metrics([ids[i] for i in ii], q.gold_doc_ids))
        mean = lambda k: 100 * np.mean([m[k] for m in ms])
        print(f"{name}: Recall@10 {mean('recall@10'):.1f}, Hit@10 {mean('hit@10'):.1f}, MRR@10 {mean('mrr@10'):.1f} "
              f"({short} of {len(ms)} queries have fewer than 10 facts scoring above 0)")

if __name__ == "__main__":
    main(*sys.argv[1:])
