"""`pace reproduce`: finding and listing the experiment notebooks, `-p` values, running them (replay by default, one line per
failure, exit 2), saving them byte for byte, and the table and figure writers' determinism across processes."""
import json, os, shutil, subprocess, sys, textwrap
from pathlib import Path
import pandas as pd
import pytest
import pace
from pace.cli import main
from pace.data import UsageError
from pace.eval.reproduce import parse_param, parse_parameters, select_experiments, find_experiments, clean_notebook
from pace.eval.figures import write_table, caption, SMALL_MODEL_NOTE

REPO = Path(pace.__file__).resolve().parents[1]
slow = pytest.mark.slow   # starts Jupyter kernels (about 1-3 s each)


def notebook(cells: list[tuple[str, str, list]]) -> dict:
    "An nbformat-4 notebook of (cell type, source, tags)."
    out = []
    for i, (kind, src, tags) in enumerate(cells):
        c = {"cell_type": kind, "id": f"c{i}", "metadata": {"tags": tags} if tags else {}, "source": textwrap.dedent(src).strip()}
        if kind == "code": c |= {"execution_count": None, "outputs": []}
        out.append(c)
    return {"cells": out, "metadata": {"kernelspec": {"display_name": "python3", "language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


def write_nb(folder: Path, name: str, cells) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(notebook(cells), indent=1))
    return folder / name


# A notebook that stands for one answered from the call cache: under PACE_REPLAY=1 its "model" misses and raises the
# error pace.llm raises (a UsageError naming the call); otherwise it makes n + 1 calls and logs them as pace.cache does.
MODEL_NB = [("markdown", "# Table 99: a toy table\nMade by a scripted model.", []),
            ("code", 'out_dir = "out"   # where the table goes\nn = 3   # how many calls', ["parameters"]),
            ("code", """
             import json, os
             from pace.data import UsageError
             if os.environ.get("PACE_REPLAY") == "1":
                 raise UsageError("replay: no cached answer for chat call stage=planner model=toy-0.5b key=ab12cd\\n(second line)")
             with open(os.environ["PACE_CALL_LOG"], "a") as f:   # as pace.cache.log_calls writes it: one line per batch
                 f.write(json.dumps({"kind": "chat", "model": "toy-0.5b", "stage": "planner", "n": n}) + "\\n")
                 f.write(json.dumps({"kind": "embed", "model": "toy-embed", "stage": "query", "n": 1}) + "\\n")
             """, []),
            ("code", """
             import pandas as pd
             from pace.eval.figures import write_table, caption
             write_table(pd.DataFrame({"x": [1.25, 2.5]}), out_dir, "table99", caption=caption("Table 99", models="toy-0.5b", n=n))
             """, [])]
# A notebook whose code catches a replay miss and goes on (as a run that counts a failed call would): pace.cache has
# logged the miss, and the notebook ends without an error.
SWALLOW_NB = [("markdown", "# Table 97: made with a hole", []),
              ("code", 'out_dir = "swallowed"', ["parameters"]),
              ("code", """
               import json, os
               with open(os.environ["PACE_CALL_LOG"], "a") as f:
                   f.write(json.dumps({"kind": "miss", "model": "toy-0.5b", "stage": "answer", "n": 2}) + "\\n")
               """, [])]
PLAIN_NB = [("markdown", "# Figure 98: nothing to call", []),
            ("code", 'out_dir = "plain"  # where it goes', ["parameters"]),
            ("code", "from pathlib import Path\nPath(out_dir).mkdir(exist_ok=True); (Path(out_dir) / 'done.txt').write_text('ok\\n')", [])]


# ---- finding, listing, choosing

def test_repo_notebooks_are_found_and_each_has_out_dir():
    exps = find_experiments()
    names = [e.name for e in exps]
    assert names[:4] == ["01_dataset_statistics", "02_dataset_examples", "03_pacemaker_small", "04_judge_calibration"]
    assert all("out_dir" in e.params for e in exps)
    assert exps[3].title.startswith("Tables 7 and 8")


def test_list_prints_titles_and_parameters(tmp_path, capsys):
    d = tmp_path / "experiments"
    write_nb(d, "05_model.ipynb", MODEL_NB); write_nb(d, "07_plain.ipynb", PLAIN_NB); write_nb(d, "notes.ipynb", PLAIN_NB)
    assert main(["reproduce", "--list", "--dir", str(d)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["05_model: Table 99: a toy table", '    out_dir = "out"   # where the table goes', "    n = 3   # how many calls",
                   "07_plain: Figure 98: nothing to call", '    out_dir = "plain"   # where it goes']
    assert main(["reproduce", "--list", "7", "--dir", str(d)]) == 0
    assert capsys.readouterr().out.startswith("07_plain: Figure 98")


def test_list_of_the_repo_names_every_notebook(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for line in ("01_dataset_statistics: Tables 1 and 6", "02_dataset_examples: Tables 9-13", "04_judge_calibration: Tables 7 and 8",
                 '    out_dir = "../../results/judge_calibration"'):
        assert line in out, line


def test_selection_by_number_and_name(tmp_path):
    d = tmp_path / "experiments"
    write_nb(d, "05_model.ipynb", MODEL_NB); write_nb(d, "07_plain.ipynb", PLAIN_NB)
    exps = find_experiments(d)
    assert [e.name for e in select_experiments(exps, ["plain", "05", "7"])] == ["07_plain", "05_model"]
    with pytest.raises(UsageError, match=r"no experiment notebook '6' \(there are: 05_model, 07_plain\)"): select_experiments(exps, ["6"])


def test_no_checkout_is_a_clear_error(tmp_path):
    "A copy of the package without nbs/ beside it (as from a wheel) says so in one line and exits 2."
    shutil.copytree(REPO / "pace", tmp_path / "site" / "pace", ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pace.cli", "reproduce", "--list"], capture_output=True, text=True, cwd=tmp_path,
                       env=os.environ | {"PYTHONPATH": str(tmp_path / "site")})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"pace: error: no experiment notebooks at {tmp_path / 'site' / 'nbs' / 'experiments'}")
    assert "not of a wheel install" in r.stderr and len(r.stderr.splitlines()) == 1


def test_a_notebook_without_parameters_cell_is_named(tmp_path):
    d = tmp_path / "experiments"
    write_nb(d, "01_bare.ipynb", [("code", "x = 1", [])])
    with pytest.raises(UsageError, match="01_bare.ipynb: no cell tagged `parameters`"): find_experiments(d)


# ---- -p values

@pytest.mark.parametrize("arg,expected", [
    ("n=3", ("n", 3)), ("rescore=false", ("rescore", False)), ("runs=null", ("runs", None)), ("x=2.5", ("x", 2.5)),
    ('tune_instances=["mini-01", "mini-02"]', ("tune_instances", ["mini-01", "mini-02"])),
    ("dataset=../../data/mini", ("dataset", "../../data/mini")), ("id=01", ("id", "01")), ("q=a=b", ("q", "a=b")),
    ("empty=", ("empty", "")), ('name="quoted"', ("name", "quoted"))])
def test_param_values_are_json_when_they_parse(arg, expected):
    assert parse_param(arg) == expected


@pytest.mark.parametrize("arg", ["novalue", "=3", "1x=3", "a b=3"])
def test_param_without_a_key_is_refused(arg):
    with pytest.raises(UsageError, match="expected KEY=VALUE"): parse_param(arg)


def test_unknown_param_is_refused_before_anything_runs(tmp_path, capsys):
    d = tmp_path / "experiments"
    write_nb(d, "05_model.ipynb", MODEL_NB)
    assert main(["reproduce", "--dir", str(d), "-p", "dataset=x", "--no-progress"]) == 2
    assert capsys.readouterr().err == "pace: error: -p dataset: no such parameter in 05_model (see pace reproduce --list)\n"
    assert not (d / "out").exists()


def test_parameters_cell_parsing_keeps_defaults_and_comments():
    src = 'runs = None          # folders (None: all)\nk: int = 3\nlimits = {"a": 1,\n          "b": 2}   # two lines\nprint(k)\n'
    assert parse_parameters(src) == {"runs": ("None", "folders (None: all)"), "k": ("3", ""), "limits": ('{"a": 1,\n          "b": 2}', "two lines")}


# ---- cleaning an executed notebook

def test_clean_notebook_drops_what_varies_and_keeps_the_results():
    nb = {"metadata": {"papermill": {"start_time": "t0", "end_time": "t1", "duration": 2.0, "input_path": "/abs/in.ipynb",
                                     "parameters": {"n": 2}, "version": "2.7.0"},
                       "language_info": {"name": "python", "version": "3.11.7"}, "widgets": {"state": {}}},
          "cells": [{"cell_type": "markdown", "id": "m", "metadata": {"papermill": {"duration": 0.0}, "tags": []}, "source": "# t"},
                    {"cell_type": "code", "id": "f00dfeed", "execution_count": 5, "outputs": [], "source": "n = 2",
                     "metadata": {"tags": ["injected-parameters"], "papermill": {"start_time": "t"}, "execution": {"iopub.status.busy": "t"}}},
                    {"cell_type": "code", "id": "k", "execution_count": None, "outputs": [], "source": "", "metadata": {}},
                    {"cell_type": "code", "id": "r", "execution_count": 8, "source": "x", "metadata": {},
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": ["<Obj at 0x7fa1b2c3d4e5>\n"]},
                                 {"output_type": "execute_result", "execution_count": 8,
                                  "data": {"text/plain": "<Obj at 0x55d0>", "image/png": "iVBOR at 0x1"}}]}]}
    c = clean_notebook(json.loads(json.dumps(nb)))
    assert c["metadata"] == {"papermill": {"parameters": {"n": 2}}, "language_info": {"name": "python"}}
    assert [x["metadata"] for x in c["cells"]] == [{}, {"tags": ["injected-parameters"]}, {}, {}]
    assert [x.get("execution_count") for x in c["cells"]] == [None, 1, None, 2] and c["cells"][1]["id"] == "injected-parameters"
    assert c["cells"][3]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": ["<Obj at 0x...>\n"]},
                                        {"output_type": "execute_result", "execution_count": 2,
                                         "data": {"text/plain": "<Obj at 0x...>", "image/png": "iVBOR at 0x1"}}]


# ---- the writers

WRITER_SCRIPT = """
import sys, pandas as pd, matplotlib; matplotlib.use("Agg")
import matplotlib.pyplot as plt, seaborn as sns
from pace.eval.figures import write_table, save_figure, caption
out = sys.argv[1]
df = pd.DataFrame({"judge": ["a_1", "b"], "accuracy %": [51.39664804469274, float("nan")], "n": [179, 72]})
write_table(df, out, "t", caption=caption("Table 7: 50% & more", models=["qwen2.5-0.5b"], n=179, unit="replies"),
            floatfmt=("g", ".1f", "g"))
fig, ax = plt.subplots(figsize=(3, 2.5))
sns.heatmap(pd.DataFrame([[21, 14], [16, 15]], index=["PASS", "WR"], columns=["PASS", "WR"]), annot=True, fmt="d", ax=ax)
ax.set(title="two judges", xlabel="judge", ylabel="accuracy (%)")   # save_figure refuses an unlabelled axis
save_figure(fig, out, "f", caption="Figure 1. No model call. n = 4 replies.")
"""


def test_writers_give_the_same_bytes_in_two_processes(tmp_path):
    (tmp_path / "w.py").write_text(WRITER_SCRIPT)
    for d in ("a", "b"):
        r = subprocess.run([sys.executable, str(tmp_path / "w.py"), str(tmp_path / d)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == ["f.md", "f.pdf", "f.png", "t.csv", "t.md", "t.tex"]
    for f in files: assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    pdf, png = (tmp_path / "a" / "f.pdf").read_bytes(), (tmp_path / "a" / "f.png").read_bytes()
    assert b"CreationDate" not in pdf and b"Matplotlib" not in pdf and b"Software" not in png and b"atplotlib" not in png
    assert (tmp_path / "a" / "t.csv").read_text() == "judge,accuracy %,n\na_1,51.39664804469274,179\nb,,72\n"
    md = (tmp_path / "a" / "t.md").read_text()
    assert md.startswith("Table 7: 50% & more. Models: qwen2.5-0.5b. n = 179 replies. " + SMALL_MODEL_NOTE + "\n\n| judge")
    assert "| a_1     |         51.4 | 179 |" in md and "| b       |        n/a   |  72 |" in md
    tex = (tmp_path / "a" / "t.tex").read_text()
    assert r"\caption{Table 7: 50\% \& more." in tex and r"a\_1 & 51.4 & 179 \\" in tex and r"b & n/a & 72 \\" in tex


def test_write_table_keeps_the_committed_csv_and_markdown_of_table_6(tmp_path):
    "Table 6 (an unnamed index) written as the notebook wrote it before: the same CSV, the same table under the caption."
    t6 = pd.read_csv(REPO / "results/dataset_statistics/mini/table6_query_distribution.csv", index_col=0)
    write_table(t6, tmp_path, "t6", caption="Table 6", index=True)
    assert (tmp_path / "t6.csv").read_bytes() == (REPO / "results/dataset_statistics/mini/table6_query_distribution.csv").read_bytes()
    assert (tmp_path / "t6.md").read_text() == "Table 6\n\n" + t6.to_markdown(floatfmt="g") + "\n"


def test_caption_names_models_count_and_small_model():
    assert caption("Table 2: answers", models=["openai:gpt-4.1-mini"], n=300) == "Table 2: answers. Models: openai:gpt-4.1-mini. n = 300 queries."
    assert caption("Table 2: answers", models="llamacpp:qwen2.5-1.5b", n=6).endswith("n = 6 queries. " + SMALL_MODEL_NOTE)
    assert caption("T", models=[], n=1, small_model=True).endswith(SMALL_MODEL_NOTE)
    with pytest.raises(TypeError): caption("T", models=None)   # the count is not optional


# ---- running notebooks (kernels)

@slow
def test_failure_is_one_line_the_others_run_and_exit_is_2(tmp_path, capsys, monkeypatch):
    d = tmp_path / "experiments"
    write_nb(d, "05_model.ipynb", MODEL_NB); write_nb(d, "07_plain.ipynb", PLAIN_NB)
    monkeypatch.delenv("PACE_REPLAY", raising=False)
    assert main(["reproduce", "--dir", str(d), "--no-progress"]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == ["pace reproduce: 05_model failed: cell 2: UsageError: replay: no cached answer for chat call "
                                "stage=planner model=toy-0.5b key=ab12cd"]
    assert (d / "plain" / "07_plain.ipynb").exists() and not (d / "out").exists()   # the other ran; the failed one saved nothing
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()[2:]]
    assert [(r[0], r[2], r[3]) for r in rows] == [("05_model", "0", "failed"), ("07_plain", "0", "ok")]
    assert main(["reproduce", "--dir", str(d), "--no-progress", "--fail-fast"]) == 2
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and "| 07_plain   |           |               | not run  |" in out


@slow
def test_record_lets_models_run_and_counts_their_calls(tmp_path, capsys, monkeypatch):
    d = tmp_path / "experiments"
    write_nb(d, "05_model.ipynb", MODEL_NB)
    monkeypatch.setenv("PACE_REPLAY", "1")   # --record runs without it even when the shell has it
    assert main(["reproduce", "5", "--dir", str(d), "--no-progress", "--record", "-p", "n=4", "-p", "out_dir=recorded"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and os.environ["PACE_REPLAY"] == "1"
    row = [c.strip() for c in out.splitlines()[2].strip("|").split("|")]
    assert (row[0], row[2], row[3]) == ("05_model", "5", "ok") and row[4].endswith("recorded/05_model.ipynb")   # 4 chat + 1 embed
    saved = json.loads((d / "recorded" / "05_model.ipynb").read_text())
    assert saved["metadata"]["papermill"] == {"parameters": {"n": 4, "out_dir": "recorded"}}
    assert (d / "recorded" / "table99.md").read_text().startswith("Table 99. Models: toy-0.5b. n = 4 queries.")


def checkout_copy(tmp_path: Path, names: list[str], results: tuple = ()) -> Path:
    "A repository-shaped copy: the chosen experiment notebooks, data/ linked, the `results` folders copied."
    root = tmp_path / "repo"
    (root / "nbs" / "experiments").mkdir(parents=True)
    for n in names: shutil.copy(REPO / "nbs" / "experiments" / f"{n}.ipynb", root / "nbs" / "experiments")
    (root / "data").symlink_to(REPO / "data")
    for r in results: shutil.copytree(REPO / r, root / r, ignore=shutil.ignore_patterns("*.sqlite*", "index"))
    return root


def git(root: Path, *args) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


@slow
def test_rerun_gives_the_same_bytes_and_a_clean_git_status(tmp_path, capsys):
    root = checkout_copy(tmp_path, ["01_dataset_statistics"])
    out = root / "results" / "dataset_statistics" / "fresh"
    args = ["reproduce", "01", "--dir", str(root / "nbs" / "experiments"), "--no-progress", "-p", f"out_dir={out}"]
    assert main(args) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(first) == ["01_dataset_statistics.ipynb", *(f"table{t}.{x}" for t in ("1_dataset_size", "6_query_distribution")
                                                              for x in ("csv", "md", "tex"))]
    git(root, "init", "-q"); git(root, "add", "-A"); git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first run")
    assert main(args) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert git(root, "status", "--porcelain") == ""
    ran = json.loads(first["01_dataset_statistics.ipynb"])
    assert "papermill" not in json.dumps([c["metadata"] for c in ran["cells"]]) and ran["metadata"]["papermill"] == {"parameters": {"out_dir": str(out)}}
    assert "version" not in ran["metadata"]["language_info"]


@slow
@pytest.mark.parametrize("name,out", [("01_dataset_statistics", "results/dataset_statistics/mini"),
                                      ("02_dataset_examples", "results/dataset_examples/generated-sample"),
                                      ("04_judge_calibration", "results/judge_calibration")])
def test_the_committed_results_are_what_the_notebook_writes(tmp_path, capsys, name, out):
    "Run with its defaults in a copy of the checkout, a notebook rewrites its committed results/ files byte for byte."
    root = checkout_copy(tmp_path, [name], (out,))
    before = {p.relative_to(root): p.read_bytes() for p in (root / out).rglob("*") if p.is_file()}
    assert main(["reproduce", name[:2], "--dir", str(root / "nbs" / "experiments"), "--no-progress"]) == 0
    after = {p.relative_to(root): p.read_bytes() for p in (root / out).rglob("*") if p.is_file()}
    assert sorted(after) == sorted(before), set(after) ^ set(before)
    changed = [str(p) for p in after if after[p] != before[p]]
    assert not changed, changed


@slow
def test_a_replay_miss_caught_inside_the_notebook_still_fails_it(tmp_path, capsys):
    d = tmp_path / "experiments"
    write_nb(d, "06_swallow.ipynb", SWALLOW_NB)
    assert main(["reproduce", "--dir", str(d), "--no-progress"]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == ["pace reproduce: 06_swallow failed: 2 replay misses (the first: a call of toy-0.5b at stage "
                                "'answer'), caught and passed over"]
    assert "| 06_swallow |" in out and "failed" in out and not (d / "swallowed" / "06_swallow.ipynb").exists()


def test_all_and_names_together_are_refused(capsys):
    from pace.cli import main
    assert main(["reproduce", "--all", "01", "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == "pace: error: give notebook names or --all, not both"


@slow
def test_committed_settings_are_replayed_besides_the_defaults_and_p_runs_only_what_it_says(tmp_path, capsys):
    "settings.json: a notebook committed for a second model setting is rerun by `pace reproduce` as well."
    exp = tmp_path / "experiments"
    write_nb(exp, "01_echo.ipynb", [("markdown", "# Echo", []),
                                     ("code", 'word = "a"\nout_dir = "out/a"', ["parameters"]),
                                     ("code", "from pathlib import Path\nPath(out_dir).mkdir(parents=True, exist_ok=True)\n"
                                              "(Path(out_dir) / 'word.txt').write_text(word)", [])])
    (exp / "settings.json").write_text(json.dumps({"01_echo": [{"word": "b", "out_dir": "out/b"}]}))
    assert main(["reproduce", "--dir", str(exp), "--no-progress"]) == 0
    assert (exp / "out/a/word.txt").read_text() == "a" and (exp / "out/b/word.txt").read_text() == "b"
    assert "01_echo (b)" in capsys.readouterr().out
    shutil.rmtree(exp / "out")
    assert main(["reproduce", "--dir", str(exp), "--no-progress", "-p", "word=c", "-p", "out_dir=out/c"]) == 0
    assert sorted(p.name for p in (exp / "out").iterdir()) == ["c"]
