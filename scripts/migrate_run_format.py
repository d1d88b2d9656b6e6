#!/usr/bin/env python
"""One-off migration of committed run folders from run format 1 to 2 (issue 46).

    .venv/bin/python scripts/migrate_run_format.py results [more folders...]

Format 1 wrote PaceMaker's settings in full (`run.json` `pacemaker`, every PaceMaker row's `trace.config`), with the
ablations as settings (`use_planning`, `use_traversal`, `use_selection`, pacemaker-score's `date_seeds`,
`entity_view`, `use_scores`), the variant as a setting (`variant`) and pacemaker-small's overlay (`small_preset`).
Format 2 writes only the settings that differ from their defaults (the ablation is the method's name), the index
settings only when they differ from the default BM25 ('release'), a filter's count of the ids it hands on as `n_out`
(format 1: `n_final`, a name the post-hop setting also has), and `run_format: 2`.

The rows are rewritten with the same serializer `pace run` uses, and only their PaceMaker traces' `config` and
filter reports change: `pace reproduce --all` then checks every row byte for byte against a replay by the new code.
Each step is idempotent: a folder already migrated is left as it is.
"""
import json, sys
from pathlib import Path
from pace.data import jsonl_text, read_jsonl
from pace.methods.pipeline import PaceMakerConfig, variant
from pace.runfolder import digests_path, write_digests

FORMAT = 2


def settings_now(cls, old: dict) -> dict:
    "A format-1 dump of `cls` settings as format 2 writes it: the fields it still has, those not at their default."
    return cls(**{k: v for k, v in old.items() if k in cls.model_fields}).changed()


def migrate_rows(path: Path) -> int:
    "Rewrite the PaceMaker rows' trace config of one results.jsonl; how many rows changed."
    text = path.read_text()
    rows = read_jsonl(path)
    if jsonl_text(rows) != text: raise SystemExit(f"{path}: does not round-trip through jsonl_text; not touched")
    n = 0
    for r in rows:
        tr = r.get("trace")
        if not isinstance(tr, dict) or not isinstance(tr.get("config"), dict): continue
        try: cls = variant(r["method"]).config
        except ValueError: continue   # not a PaceMaker method
        new = settings_now(cls, tr["config"])
        reps = [rep for rep in (tr.get("selection") or {}).values() if "n_final" in rep]
        for rep in reps: rep["n_out"] = rep.pop("n_final")
        if new != tr["config"] or reps: tr["config"], n = new, n + 1
    if n:
        path.write_text(jsonl_text(rows))
        if digests_path(path).exists(): write_digests(path, rows)
    return n


def migrate_manifest(path: Path) -> bool:
    "Rewrite one run.json's settings in format 2; False when it already is."
    d = json.loads(path.read_text())
    s = d["settings"]
    if s.get("run_format", 1) >= FORMAT: return False
    s["pacemaker"] = settings_now(PaceMakerConfig, s["pacemaker"])
    s.pop("small_preset", None)
    index = s.pop("index", None) or dict(bm25="pace")   # format 1 left out the BM25 it was recorded with, 'pace'
    if index != dict(bm25="release"): s["index"] = index
    # the key order `_settings` writes: index before model_calls, depth and the preset's keys; run_format last
    order = ["dataset", "pace_version", "prompts", "chat", "judge", "judge_mode", "judge_is_agent", "judge_max_tokens",
             "embedder", "pacemaker", "seed", "retrieval_only", "graphrag", "hipporag", "own_methods", "index",
             "model_calls", "depth", "preset", "release_prompts", "paper_judge_prompts"]
    if extra := [k for k in s if k not in order]: raise SystemExit(f"{path}: unexpected settings {extra}")
    d["settings"] = {k: s[k] for k in order if k in s} | dict(run_format=FORMAT)
    text = json.dumps(d, indent=1, default=str) + "\n"
    path.write_text(text)
    return True


def main(roots):
    runs = sorted({p.parent for r in roots for p in Path(r).rglob("run.json") if (p.parent / "results.jsonl").exists()})
    for run in runs:
        n, m = migrate_rows(run / "results.jsonl"), migrate_manifest(run / "run.json")
        if n or m: print(f"{run}: {'run.json and ' if m else ''}{n} PaceMaker rows in format {FORMAT}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["results"])
