"""The notebook rules CI checks on small notebooks: scripts/one_definition.py (one public function per exported
cell), scripts/long_lines.py (exported lines of at most 110 characters) and `ruff check` with pyproject.toml's rules."""
import importlib.util, json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).parents[1]

_spec = importlib.util.spec_from_file_location("one_definition",
                                               Path(__file__).parents[1] / "scripts" / "one_definition.py")
one_definition = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(one_definition)
_spec = importlib.util.spec_from_file_location("long_lines", ROOT / "scripts" / "long_lines.py")
long_lines = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(long_lines)


def _notebook(path: Path, *cells: tuple[str, str]) -> Path:
    "A notebook of (cell type, source) cells."
    nb = dict(nbformat=4, nbformat_minor=5, metadata={},
              cells=[dict(cell_type=t, metadata={}, source=s, **(dict(outputs=[], execution_count=None)
                                                                  if t == "code" else {})) for t, s in cells])
    path.write_text(json.dumps(nb))
    return path


def test_a_notebook_that_keeps_the_rule_passes(tmp_path):
    nb = _notebook(tmp_path / "good.ipynb",
                   ("markdown", "# Title\n\ndef a(): pass\ndef b(): pass"),
                   ("code", "#| export\nimport json\nLIMIT = 3\n\ndef _helper(x): return x\n\ndef public(x):\n"
                            "    def inner(): pass\n    return _helper(x)"),
                   ("code", "#| export\nclass Error(Exception): pass\nclass OtherError(Error): pass"),
                   ("code", "#|export\nasync def fetch(): pass"),
                   ("code", "def test_one(): pass\ndef test_two(): pass"))   # not exported: tests may group
    assert one_definition.crowded_cells(nb) == []
    assert one_definition.main([str(nb)]) == 0


def test_a_cell_with_two_public_functions_fails(tmp_path, capsys):
    nb = _notebook(tmp_path / "bad.ipynb",
                   ("code", "#| export\ndef fine(): pass"),
                   ("code", "#| exporti\ndef first(): pass\n\nasync def second(): pass\ndef _private(): pass"),
                   ("code", "#| export\n%time\ndef third(): pass\ndef fourth(): pass"))   # not Python: read as text
    assert one_definition.crowded_cells(nb) == [(1, ["first", "second"]), (2, ["third", "fourth"])]
    assert one_definition.main([str(nb)]) == 1
    assert "2 exported cell(s) with more than one public function in 1 notebook(s)" in capsys.readouterr().out
    assert one_definition.main(["--report", str(nb)]) == 0
    assert "cell 1: first, second" in capsys.readouterr().out


def test_long_lines_counts_exported_cells_only(tmp_path, capsys):
    long = "x = '" + "a" * 110 + "'"
    nb = _notebook(tmp_path / "long.ipynb", ("code", "#| export\nshort = 1\n" + long), ("code", long),
                   ("markdown", long))
    assert long_lines.long_lines(nb, 110) == [(0, len(long))]
    assert long_lines.main(["--max", "110", str(nb)]) == 1 and long_lines.main(["--max", "120", str(nb)]) == 0


def _ruff(path: str, text: str) -> subprocess.CompletedProcess:
    "`ruff check` with the project's settings on `text`, read as the file `path` of the repository."
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           "--stdin-filename", path, "-"], input=text, capture_output=True, text=True, cwd=ROOT)


def _nb_json(*sources: str) -> str:
    return json.dumps(dict(nbformat=4, nbformat_minor=5, metadata={}, cells=[
        dict(cell_type="code", metadata={}, source=s, outputs=[], execution_count=None) for s in sources]))


def test_ruff_reads_notebooks_with_the_project_rules():
    ok = _nb_json("#| export\nfrom __future__ import annotations\nimport os, json\ndef f(x): return x",
                  "import re\ndef f(x): return x + 1\nf(1)")   # demo imports and a redefined variant are allowed
    r = _ruff("nbs/99_fixture.ipynb", ok)
    assert r.returncode == 0, r.stdout
    bad = _nb_json("#| export\ndef f(x): return undefined_name", "def g():\n    unused = 1\n    return 2")
    r = _ruff("nbs/99_fixture.ipynb", bad)
    assert r.returncode == 1 and "cell 1:2:18: F821" in r.stdout and "cell 2:2:5: F841" in r.stdout, r.stdout


def test_ruff_flags_unused_imports_outside_notebooks_and_package():
    r = _ruff("tests/test_fixture.py", "import os\n\ndef test_x(): assert f'{1}'\n")
    assert r.returncode == 1 and "F401" in r.stdout, r.stdout
    assert _ruff("pace/fixture.py", "from .cache import Entry   # a re-export\n").returncode == 0


def test_the_repository_passes_ruff_check():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:]
