"""Issue 45: the run report (`pace report`, and `pace run` at its end), the loss table in pipeline order, SIGTERM
leaving a run `partial`, and an optional backend's ImportError naming its extra."""
import csv, json, re, signal, os, sys
from pathlib import Path
import pytest
from pace.cli import main
from pace.methods.agents import EVIDENCE_STAGES

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "tiny"
MAIN = ROOT / "results" / "main_results"
RUNS = sorted(p.parent for p in (ROOT / "results").rglob("run.json"))
RUN = ["run", "--data", str(TINY), "--embedder", "hash:hash", "--retrieval-only", "--methods", "bm25", "--no-progress"]


def rows_of(run): return [json.loads(l) for l in (run / "results.jsonl").read_text().splitlines() if l.strip()]


@pytest.mark.parametrize("run", RUNS, ids=lambda p: str(p.relative_to(ROOT / "results")))
def test_pace_report_writes_a_self_contained_page_for_every_committed_run(run, tmp_path, capsys):
    page = tmp_path / "report.html"
    assert main(["report", str(run), "--dataset", str(ROOT / "data" / "mini"), "--out", str(page)]) == 0
    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "the page fetches something"
    assert "<link" not in html and "<script src" not in html
    rows = rows_of(run)
    assert html.count('class="card"') == len(rows)
    assert html.count('<section class="query"') == len({r["query_id"] for r in rows})
    assert "dataset not found" not in html                   # the facts' texts are there, not ids only
    assert str(run.name) not in html.split("</h1>")[0]      # the title says what the run is, not its folder


def test_the_loss_table_is_in_pipeline_order_and_says_where_each_gold_fact_was_lost(tmp_path):
    run = MAIN / "mini-qwen2.5-0.5b-n6"
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 0
    with open(tmp_path / "losses.csv") as f: table = list(csv.DictReader(f))
    stages = list(table[0])[5:-1]
    assert stages == list(EVIDENCE_STAGES) == ["fused", "prehop", "pool", "final", "answer"]
    assert list(json.loads((run / "results.jsonl").read_text().splitlines()[0])["evidence"]) == ["answer", "final"]
    n = 0
    for r in rows_of(run):
        ev, mine = r["evidence"], [t for t in table if (t["query_id"], t["method"]) == (r["query_id"], r["method"])]
        assert [t["doc_id"] for t in mine] == r["gold_doc_ids"]
        for t in mine:   # checked against the row by hand: the stage after the last one that held the fact
            order = [s for s in stages if s in ev]
            held = [s for s in order if t["doc_id"] in ev[s]]
            assert [t[s] for s in order] == ["1" if s in held else "0" for s in order]
            expect = "" if held and held[-1] == order[-1] else order[order.index(held[-1]) + 1] if held else order[0]
            assert t["lost_at"] == expect; n += t["lost_at"] == "final" and "pool" in ev
    assert n > 0   # facts the BFS pool held and the post-hop filter dropped: an a-z walk sees `final` before `pool`


def test_a_retrieval_only_report_has_no_answers_and_filters_on_not_judged(tmp_path):
    run = MAIN / "mini-qwen2.5-0.5b-paper-all-retrieval"
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert 'data-verdict="not judged"' in html and "<b>answer</b>" not in html and "<b>verdict</b>" not in html
    assert '<option value="not judged">' in html and '<option value="PASS">' not in html
    assert "retrieval only" in html.split("</h1>")[0]


def test_pace_run_writes_the_report_at_its_end(tmp_path):
    assert main([*RUN, "--limit", "2", "--out", str(tmp_path), "--name", "r"]) == 0
    html = (tmp_path / "r" / "report.html").read_text()
    assert html.count('class="card"') == 2 and (tmp_path / "r" / "losses.csv").is_file()


def test_pace_report_on_a_folder_that_is_not_a_run_is_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pace: error: ") and "not a run folder (no run.json)" in err and len(err.splitlines()) == 1


def test_sigterm_leaves_the_run_partial_with_the_command_that_resumes_it(tmp_path, capsys, monkeypatch):
    import pace.eval.run as pr
    real, n = pr._run_pair, [0]
    def pair(*a, **kw):
        n[0] += 1
        if n[0] == 3: os.kill(os.getpid(), signal.SIGTERM)   # as `kill PID` or a scheduler's time limit does
        return real(*a, **kw)
    monkeypatch.setattr(pr, "_run_pair", pair)
    argv = [*RUN, "--all", "--workers", "1", "--out", str(tmp_path), "--name", "cut"]
    before = signal.getsignal(signal.SIGTERM)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "resume with: pace run" in err and "Traceback" not in err, err
    man = json.loads((tmp_path / "cut" / "run.json").read_text())
    assert man["status"] == "partial" and man["stopped"] == "interrupted (SIGTERM)", man
    assert signal.getsignal(signal.SIGTERM) == before   # the old handler is back after the run


def test_an_optional_backend_that_is_missing_names_its_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)   # as if transformers were not installed
    monkeypatch.delenv("PACE_DEBUG", raising=False)
    (tmp_path / "m").mkdir()
    assert main(["run", "--data", str(TINY), "--chat", f"hf:{tmp_path / 'm'}", "--embedder", "hash:hash",
                 "--methods", "bm25", "--limit", "1", "--no-progress", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "No module named 'transformers'" in err and "'hf' extra" in err and "pip install -e '.[hf]'" in err, err
