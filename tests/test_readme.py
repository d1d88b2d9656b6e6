"""The README's Python block, run as written: PaceMaker on one `data/mini` request, its calls answered by the
committed cache of the reference run (no model call), what it prints checked against that run's committed row."""
import ast, json, os, re, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "results" / "main_results" / "mini-qwen2.5-0.5b-n6"


def readme_python() -> str:
    "The README's one ```python block."
    blocks = re.findall(r"^```python\n(.*?)^```$", (ROOT / "README.md").read_text(), re.S | re.M)
    assert len(blocks) == 1, f"README.md has {len(blocks)} python blocks, expected 1"
    return blocks[0]


def committed_row(query_id: str) -> dict:
    rows = [json.loads(l) for l in (RUN / "results.jsonl").read_text().splitlines()]
    return next(r for r in rows if r["method"] == "pacemaker" and r["query_id"] == query_id)


def test_readme_block_reads_a_pacemaker_trace():
    code = readme_python()
    for name in ("load_pace_dataset", "PaceMaker(", ".run(", "tr.plan", "tr.views", "tr.evidence", "tr.final_ids",
                 "tr.answer"):
        assert name in code, f"the README block does not use {name}"
    qid = re.search(r'q\.query_id == "([^"]+)"', code).group(1)
    row = committed_row(qid)
    views = [v["text"] for v in row["trace"]["views"]]
    assert len(views) >= 2, "the committed trace has no counter query to show"


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    "stdout of the README block run in a fresh folder (data/ linked), its calls served by the committed cache."
    pytest.importorskip("llama_cpp")
    from pace.backends.llamacpp import resolve_gguf
    from pace.llm import ModelNotFoundError
    from pace.cache import Cache, import_cache
    try: resolve_gguf("qwen2.5-0.5b")
    except ModelNotFoundError as e: pytest.skip(f"the bundled 0.5B model is not installed: {e}")
    d = tmp_path_factory.mktemp("readme")
    (d / "data").symlink_to(ROOT / "data", target_is_directory=True)
    import_cache(Cache(d / "cache.sqlite"), RUN / "cache.jsonl.gz", embeddings=ROOT / "results" / "_embeddings")
    env = {**os.environ, "PACE_CACHE": str(d / "cache.sqlite"), "PACE_CALL_LOG": str(d / "calls.jsonl"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), "TQDM_DISABLE": "1"}
    env.pop("PACE_REPLAY", None)
    r = subprocess.run([sys.executable, "-c", readme_python()], cwd=d, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    log = d / "calls.jsonl"
    return r.stdout, (log.read_text() if log.exists() else "")


def test_readme_block_runs_from_the_committed_cache(ran):
    out, log = ran
    assert log.strip() == "", f"the README block called a model:\n{log[:500]}"
    qid = re.search(r'q\.query_id == "([^"]+)"', readme_python()).group(1)
    row, lines = committed_row(qid), out.splitlines()
    tr = row["trace"]
    assert lines[0] == f"{row['query']} {row['label']}"
    plan = tr["plan"]["directions"][0]
    assert plan["dimension"] in lines[1] and all(a in lines[1] for a in plan["key_anchors"])
    shown_views = lines[2:2 + len(tr["views"])]
    assert shown_views == [f"{v['kind']} {v['weight']} {v['text']}" for v in tr["views"]]
    funnel = {k: len(v) for k, v in tr["evidence"].items()}
    assert ast.literal_eval(lines[2 + len(tr["views"])]) == funnel
    final = [l.split(" ", 1)[0] for l in lines[3 + len(tr["views"]):6 + len(tr["views"])]]
    assert final == tr["final_ids"][:3]
    gold = sorted(set(row["gold_doc_ids"]) & set(tr["final_ids"]))
    assert f"gold facts among them: {gold}" in out
    assert out.rstrip().endswith(row["answer"].rstrip())
