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


def test_pace_run_writes_the_report_at_its_end(tmp_path, capsys):
    assert main([*RUN, "--limit", "2", "--out", str(tmp_path), "--name", "r"]) == 0
    assert f"Each query's funnel and verdict: {tmp_path / 'r' / 'report.html'}" in capsys.readouterr().out
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


# --- figures and LaTeX a paper can use ------------------------------------------------------------------------------

FIGURES = sorted(p for p in (ROOT / "results").rglob("figure*.png") if p.with_suffix(".csv").is_file())


@pytest.mark.parametrize("png", FIGURES, ids=lambda p: str(p.relative_to(ROOT / "results")))
def test_a_committed_figure_is_drawn_only_from_data(png):
    "Each figure whose data is written beside it (name.csv) rests on at least one item (n > 0) and one value."
    import pandas as pd
    d = pd.read_csv(png.with_suffix(".csv"))
    if "n" in d: assert int(d["n"].fillna(0).sum()) > 0, f"{png.name}: drawn from n = 0 everywhere (no figure: remove it)"
    values = [c for c in ("value", "share", "pass_rate") if c in d]
    assert not values or d[values].notna().any().any(), f"{png.name}: no value to draw"


def test_figure_problems_refuses_an_empty_or_unlabelled_figure(tmp_path):
    "The check `save_figure` runs: the old figure 3 (an unnamed panel, no y label) and an all-missing PASS panel."
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pace.eval.figures import figure_problems, save_figure
    fig, axes = plt.subplots(1, 2, sharey=True)
    axes[0].bar(["none", "full"], [50.0, 50.0]); axes[1].bar(["none", "full"], [float("nan")] * 2)
    for ax in axes: ax.set(xlabel="gold evidence the answerer saw")
    axes[0].set_ylabel("conflict queries (%)"); fig.suptitle("mini-qwen2.5-0.5b-n6")
    assert figure_problems(fig) == ["panel 1 has no title", "panel 2 has no title", "panel 2 has no y label",
                                    "panel 2 shows no data"]
    with pytest.raises(ValueError, match="figure f3: panel 1 has no title"): save_figure(fig, tmp_path, "f3")
    assert not list(tmp_path.iterdir())
    plt.close(fig)


def table2_tex(tmp_path) -> str:
    "Table 2 of two committed runs side by side, written as 05_main_results and 10_models write it."
    from pace.data import read_jsonl
    from pace.eval.evaluate import results_frame, paper_metrics, side_by_side, config_label
    from pace.eval.figures import write_table
    T2 = ["R@5", "R@10", "Hit@5", "Hit@10", "Gold@5", "Gold@10", "MRR@5", "MRR@10", "PASS"]
    runs = [MAIN / "mini-qwen2.5-0.5b-n6", MAIN / "mini-smollm2-135m-n6"]
    t = side_by_side({config_label(json.loads((r / "run.json").read_text())):
                      paper_metrics(results_frame(read_jsonl(r / "results.jsonl")))[T2] for r in runs})
    write_table(t, tmp_path, "table2", index=True, floatfmt=".1f",
                caption="Table 2: retrieval (%) at 5 and 10 and PASS (%) per method. Queries: 6 of mini. Made with "
                        "small models on CPU: it shows the pipeline at work, not how well the method does.")
    return (tmp_path / "table2.tex").read_text()


def test_table2_latex_has_grouped_headers_and_a_one_sentence_caption(tmp_path):
    tex = table2_tex(tmp_path)
    assert tex.count(r"\multicolumn{9}{c}") == 2 and r"\cmidrule(lr){2-10} \cmidrule(lr){11-19}" in tex
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert r"\caption{Table 2: retrieval (\%) at 5 and 10 and PASS (\%) per method.}" in tex
    assert "qwen2.5-coder-0.5b R@5" not in tex and r"\footnotesize Queries: 6 of mini." in tex


@pytest.mark.skipif(not __import__("shutil").which("pdflatex"), reason="no TeX engine (apt-get install texlive-latex-recommended)")
def test_table2_latex_compiles_as_a_fragment(tmp_path):
    import subprocess
    table2_tex(tmp_path)
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\\usepackage{booktabs}\\usepackage[margin=1cm,landscape]"
                                      "{geometry}\\begin{document}\\input{table2.tex}\\end{document}\n")
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and (tmp_path / "doc.pdf").is_file(), r.stdout[-2000:]
