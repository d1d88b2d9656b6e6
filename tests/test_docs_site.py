"""The docs site build (scripts/build_docs.py) and its browser check (scripts/check_docs.py).

A small made-up repository (README, CONTRIBUTING, a module notebook with every kind of output,
an experiment notebook and its results, the exported module) is built into a site, the check
passes on it in headless Chromium, and fails on a missing page, a broken link and a notebook page
shown without its outputs. The real site is built and checked by `scripts/build_docs.py --check`
(a step of .ci/run). Skips without the `docs` extra or without Chromium.
"""
import importlib.util, json, shutil, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_docs as bd  # noqa: E402  (stdlib only at import time)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

def code(src, outputs=(), tags=()):
    return {"cell_type": "code", "execution_count": None, "metadata": {"tags": list(tags)} if tags else {},
            "source": src, "outputs": list(outputs)}
def md(src): return {"cell_type": "markdown", "metadata": {}, "source": src}
def result(**data): return {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": data}
def display(**data): return {"output_type": "display_data", "metadata": {}, "data": data}
def stream(text, name="stdout"): return {"output_type": "stream", "name": name, "text": text}
def notebook(cells):
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "python3", "language": "python"}},
            "cells": [dict(c, id=f"c{i}") for i, c in enumerate(cells)]}

DEMO_CELLS = [
    code("#| default_exp demo"),
    md("# Demo\n> A made-up module.\n\nBack to [the home page](../README.md); the [data card](../data/card.md)."),
    code("#| export\ndef add(a: int,  # the first number\n        b: int = 2,  # the second number\n       ) -> int:\n"
         "    \"Add `a` and `b` (nbdev docstrings are *Markdown*).\"\n    return a + b\n\n"
         "def mul(a: int, b: int) -> int:\n    \"Multiply; no `show_doc` for it, so the site shows its signature.\"\n    return a * b"),
    md("Math is typeset by the site's own MathJax: $a + b$."),
    code("add(1)", [result(**{"text/plain": "3"})]),                                               # 1
    code("print('hello')", [stream("hello\n")]),                                                   # 2
    code("df", [result(**{"text/html": "<table><tr><th>x</th></tr><tr><td>1</td></tr></table>", "text/plain": "   x\n0  1"})]),  # 3
    code("plot()", [display(**{"image/png": PNG, "text/plain": "<Figure>"})]),                      # 4
    code("#| hide\nsecret()", [result(**{"text/plain": "'hidden'"})]),                             # hidden: not counted
    code("show_doc(add)", [display(**{"text/markdown": "---\n\n### add\n\n```python\ndef add(a:int, b:int=2)->int\n```\n\n*Add `a` and `b`.*",
                                      "text/plain": "<ShowDocRenderer>"})]),                       # 5
    code("import warnings; warnings.warn('careful')", [stream("UserWarning: careful\n", "stderr")]),  # 6
    code("#| echo: false\nadd(2)", [result(**{"text/plain": "4"})]),                                # 7: output without its code
    code("#| output: false\nadd(3)", [result(**{"text/plain": "5"})]),                              # hidden output: not counted
    code("x = 1"),
]

@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    r = tmp_path_factory.mktemp("repo")
    shutil.copy(ROOT / "settings.ini", r / "settings.ini")
    (r / "settings.ini").write_text((r / "settings.ini").read_text().replace("lib_name = pace", "lib_name = demo")
                                    .replace("lib_path = pace", "lib_path = demo"))
    (r / "README.md").write_text("# demo\n\nRead [the notebook](nbs/00_demo.ipynb), then [how to work on it](CONTRIBUTING.md#set-up) "
                                 "or [the usage](#usage); `nbs/00_demo.ipynb` exports `demo.demo`.\n\n"
                                 "```bash\ncat [not a link](nowhere.md)\n```\n\n## Usage\n\nNothing else.\n")
    (r / "CONTRIBUTING.md").write_text("# Working on demo\n\n## Set up\n\nBack [home](README.md).\n")
    (r / "data").mkdir(); (r / "data/card.md").write_text("a card\n")
    (r / "demo").mkdir()
    (r / "demo/demo.py").write_text('"""A made-up module."""\n__all__ = [\'add\', \'mul\', \'LIMIT\']\n'
                                    + DEMO_CELLS[2]["source"].split("\n", 1)[1] + "\n\nLIMIT = 10  # the largest sum\n")
    (r / "nbs/experiments").mkdir(parents=True)
    (r / "nbs/00_demo.ipynb").write_text(json.dumps(notebook(DEMO_CELLS)))
    (r / "nbs/experiments/01_table.ipynb").write_text(json.dumps(notebook([
        md("# Table 1: a table\n> Writes `results/demo/`."),
        code('out_dir = "../../results/demo"  # where the table goes', tags=["parameters"]),
        code("table", [result(**{"text/plain": "x\n1"})])])))
    (r / "results/demo").mkdir(parents=True)
    (r / "results/demo/table1.md").write_text("| x | y |\n|--:|--:|\n| 1 | 2 |\n")
    (r / "results/demo/table1.csv").write_text("x,y\n1,2\n")
    return r

# ---------------------------------------------------------------- without a browser

def test_nbdev_directives_decide_what_shows():
    view = lambda src, **kw: bd.cell_view(code(src, **kw))
    assert view("x") == (True, True)
    assert view("#| hide\nx") == (False, False) and view("#|hide\nx") == (False, False)
    assert view("#| export\ndef f(): pass") == (False, True)      # source replaced by the signature
    assert view("#| exports\ndef f(): pass") == (True, True)
    assert view("#| exporti\ndef _f(): pass") == (False, False)
    assert view("#| echo: false\nx") == (False, True) and view("#| output: false\nx") == (True, False)
    assert view("#| default_exp demo") == (False, False)
    assert view("x", tags=["remove-cell"]) == (False, False)
    assert bd.split_directives("#| export\n#| slow\nx = 1\n#| not a directive") == ({"export": "", "slow": ""}, "x = 1\n#| not a directive")
    assert bd.output_cells(notebook(DEMO_CELLS)) == 7
    assert bd.output_cells(notebook([code("x", [stream("  \n")])])) == 0   # blank stream: nothing to show

def test_api_signatures_read_from_the_source(tmp_path):
    (tmp_path / "m.py").write_text(
        '"""Doc."""\n__all__ = ["f", "Rec", "C"]\nfrom pydantic import BaseModel\n'
        'def f(x: int,  # the x\n      y: "list[str] | None" = None,  # the ys\n      *, z=60) -> dict:\n    "Do `f`."\n\n'
        'class Base(BaseModel):\n    name: str  # who\n'
        'class Rec(Base):\n    "A record."\n    age: int = 3  # years\n    model_config = {}\n\n'
        'class C:\n    "A class."\n    def __init__(self, k: int = 1): pass\n'
        '    def go(self, n: int) -> int:\n        "Go."\n    @property\n    def size(self) -> int: return 1\n    def _private(self): pass\n')
    api = bd.ModuleAPI("pkg.m", tmp_path / "m.py")
    assert api.all == ["f", "Rec", "C"] and api.doc == "Doc."
    f = api.render("f")
    assert f.startswith("```{py:function} f(x: int, y: 'list[str] | None'=None, *, z=60) -> dict\n:module: pkg.m\n")
    assert ":param x: the x" in f and ":param y: the ys" in f and "Do `f`." in f
    rec = api.render("Rec", no_index=True)
    assert "{py:class} Rec(name: str, age: int = 3)" in rec and ":param age: years" in rec and ":param name: who" in rec
    assert ":no-index:" in rec and "model_config" not in rec
    c = api.render("C")
    assert "{py:class} C(k: int=1)" in c and "{py:method} go(n: int) -> int" in c and "{py:property} size" in c
    assert "_private" not in c and c.startswith("````")             # nested directives: a longer outer fence

def test_links_rewritten_for_the_site(repo, tmp_path):
    site = bd.Site(repo, tmp_path / "src")
    site.stage()
    home = (tmp_path / "src/index.md").read_text()
    assert "](nbs/00_demo.ipynb)" in home and "](contributing.md#set-up)" in home and "](#usage)" in home
    assert "[`nbs/00_demo.ipynb`](nbs/00_demo.ipynb)" in home and "[`demo.demo`](api/demo.md)" in home
    assert "cat [not a link](nowhere.md)" in home                       # code blocks stay as written
    assert ":caption: Notebooks" in home and "00 · Demo <nbs/00_demo>" in home and ":caption: Experiments" in home
    nb = json.loads((tmp_path / "src/nbs/00_demo.ipynb").read_text())
    text = json.dumps(nb)
    assert "../index.md" in text and "{download}`data card <../_files/data/card.md>`" in text and (tmp_path / "src/_files/data/card.md").exists()
    assert "secret()" not in text and "#| export" not in text
    assert "{py:function} mul(a: int, b: int) -> int" in text and "{py:function} add" not in text   # add has show_doc
    exp = json.loads((tmp_path / "src/nbs/experiments/01_table.ipynb").read_text())
    assert "In `results/demo/`" in json.dumps(exp) and "table1.md" in json.dumps(exp)

# ---------------------------------------------------------------- the built site in Chromium

def _need_docs_tools():
    missing = [m for m in ("sphinx", "myst_nb", "furo") if importlib.util.find_spec(m) is None]
    if missing: pytest.skip(f"docs extra not installed ({', '.join(missing)}): pip install -e '.[docs]'")

@pytest.fixture(scope="module")
def site(repo, tmp_path_factory):
    _need_docs_tools()
    return bd.build(tmp_path_factory.mktemp("build"), root=repo)

@pytest.fixture(scope="module")
def chromium():
    import check_docs
    exe = check_docs.find_chromium()
    if not exe: pytest.skip("no Chromium: apt-get install chromium")
    return exe

def check(site_dir, repo, chromium, **kw):
    import check_docs
    c = check_docs.Checker(site_dir, chromium, root=repo)
    try: return c.run(**kw), c
    finally: c.close()

def test_site_passes_the_browser_check(site, repo, chromium, tmp_path):
    rc, c = check(site, repo, chromium, shots=tmp_path)
    assert rc == 0, c.failures
    assert "nbs/00_demo.html: outputs 7/7 (chromium), math 1 typeset" in c.report
    assert (tmp_path / "home.png").stat().st_size > 1000 and (tmp_path / "module_00_demo.png").exists()
    page = (site / "nbs/00_demo.html").read_text()
    assert "secret" not in page and "'hidden'" not in page and ">5<" not in page and "so the site shows its signature" in page
    assert "UserWarning: careful" in page and "<img" in page and "<th>x</th>" in page
    assert "demo.demo.add" in (site / "api/demo.html").read_text() and "the largest sum" in (site / "api/demo.html").read_text()
    assert "results/demo" in (site / "nbs/experiments/01_table.html").read_text()

def _copy(site, tmp_path):
    dst = tmp_path / "site"; shutil.copytree(site, dst); return dst

def test_check_fails_on_a_notebook_shown_without_outputs(site, repo, chromium, tmp_path):
    s = _copy(site, tmp_path)
    p = s / "nbs/00_demo.html"; p.write_text(p.read_text().replace("cell_output", "cell_gone"))
    rc, c = check(s, repo, chromium)
    assert rc == 1 and any("nbs/00_demo.html is shown without outputs: 0 rendered output block(s), 7 code cell(s)" in f for f in c.failures)

def test_check_fails_on_a_broken_link_and_a_missing_page(site, repo, chromium, tmp_path):
    s = _copy(site, tmp_path)
    p = s / "index.html"; p.write_text(p.read_text().replace("</article>", '<a href="nbs/nowhere.html">x</a><a href="contributing.html#no-such-part">y</a></article>'))
    (s / "api/demo.html").unlink()
    rc, c = check(s, repo, chromium)
    assert rc == 1
    assert any("index.html: broken link nbs/nowhere.html (HTTP 404)" in f for f in c.failures)
    assert any("no #no-such-part in contributing.html" in f for f in c.failures)
    assert any("missing page: api/demo.html" in f for f in c.failures)
