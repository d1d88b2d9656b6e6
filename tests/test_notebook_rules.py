"""The notebook rules CI checks: scripts/one_definition.py (one public function per exported cell) on small notebooks."""
import importlib.util, json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("one_definition",
                                               Path(__file__).parents[1] / "scripts" / "one_definition.py")
one_definition = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(one_definition)


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
