"""Build the Table 5 subset dataset: one data/mini instance, a stratified subset of its queries, and a subset of its KB that holds
every gold fact of those queries plus distractors drawn at random (seeded) from the rest of the instance's KB, in KB order.
    python results/table5/make_subset.py [--instance mini-01] [--queries 6] [--facts 40] [--out results/table5/data-mini-01-q6-f40]"""
import argparse, json, random, shutil
from pathlib import Path
from pace.data import load_pace_dataset
from pace.run import select_queries

ap = argparse.ArgumentParser()
ap.add_argument("--data", default="data/mini"); ap.add_argument("--instance", default="mini-01")
ap.add_argument("--queries", type=int, default=6); ap.add_argument("--facts", type=int, default=40); ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--out", default=None)
a = ap.parse_args()
src = Path(a.data)
ds = load_pace_dataset(src)
qs = select_queries([q for q in ds.queries if q.instance_id == a.instance], a.queries, a.seed)
gold = {g for q in qs for g in q.gold_doc_ids}
kb = [json.loads(l) for l in (src / "kb" / f"{a.instance}.jsonl").read_text().splitlines() if l.strip()]
rest = [f["doc_id"] for f in kb if f["doc_id"] not in gold]
keep = gold | set(random.Random(a.seed).sample(rest, max(0, min(len(rest), a.facts - len(gold)))))
out = Path(a.out or f"results/table5/data-{a.instance}-q{len(qs)}-f{len(keep)}")
shutil.rmtree(out, ignore_errors=True); (out / "kb").mkdir(parents=True)
(out / "instances.jsonl").write_text("".join(l + "\n" for l in (src / "instances.jsonl").read_text().splitlines() if json.loads(l)["instance_id"] == a.instance))
(out / "kb" / f"{a.instance}.jsonl").write_text("".join(json.dumps(f, ensure_ascii=False) + "\n" for f in kb if f["doc_id"] in keep))
qids = {q.query_id for q in qs}
(out / "queries.jsonl").write_text("".join(l + "\n" for l in (src / "queries.jsonl").read_text().splitlines() if l.strip() and json.loads(l)["query_id"] in qids))
(out / "README.md").write_text(f"# Table 5 subset of {src.name}/{a.instance}\n\nMade by `results/table5/make_subset.py --instance {a.instance} --queries {a.queries} "
                               f"--facts {a.facts} --seed {a.seed}`: {len(qs)} queries (stratified by label and situation type), {len(keep)} of the "
                               f"instance's {len(kb)} facts: the {len(gold)} gold facts of those queries and {len(keep) - len(gold)} others drawn at random. "
                               "Synthetic data; same licence as data/mini.\n")
load_pace_dataset(out)   # the subset is a valid dataset
print(out, len(qs), "queries", len(keep), "facts", len(gold), "gold:", sorted((q.label, q.situation_type) for q in qs))
