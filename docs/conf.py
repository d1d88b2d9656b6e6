# Sphinx configuration of the offline docs site (built by `scripts/build_docs.py`).
#
# Why Sphinx + myst-nb (and not mkdocs-material + mkdocs-jupyter, or jupyter-book):
# - well kept: Sphinx and myst-nb (Executable Books) release several times a year; MkDocs 1.x has
#   had no release since 1.6.1 (Aug 2024) and mkdocs-material is in maintenance mode (its team now
#   builds Zensical); jupyter-book 2 moved to the Node-based mystmd, and its Sphinx-based 1.x is
#   this same myst-nb underneath.
# - renders each .ipynb with the outputs committed in it (`nb_execution_mode = "off"`: nothing is
#   executed at build time), including HTML tables, images, stderr and nbdev `show_doc` markdown;
# - API signatures from the exported `pace` package: scripts/build_docs.py reads pace/*.py (what
#   nbdev_export wrote) and renders each public name of the module's `__all__` with Sphinx's Python
#   domain, signature as written, Markdown docstring, parameters' trailing comments (the docments
#   convention nbdev's show_doc renders): on an API page per module, and after each `#| export`
#   cell on the notebook's page, as nbdev's Quarto site shows them. (Not autodoc: it reads
#   docstrings as reStructuredText, and nbdev docstrings are Markdown.)
# - works offline: pip wheels only, no Node, no CDN (furo ships its assets, MathJax from a wheel).
# The sources are staged by scripts/build_docs.py (README as home page, notebooks in reading order
# from their file names, results tables); this file is only the configuration: `sphinx-build -c docs`.
import configparser, pathlib

_root = pathlib.Path(__file__).resolve().parent.parent
_ini = configparser.ConfigParser(interpolation=None)
_ini.read(_root / "settings.ini")
_s = _ini["DEFAULT"]

project = _s.get("title", "pace")
author = _s.get("author", "")
copyright = _s.get("copyright", "")
release = version = _s.get("version", "")

extensions = ["myst_nb"]
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "_results", "_files"]   # raw files, included or downloaded

# notebooks: render what is committed, never execute
nb_execution_mode = "off"
nb_output_stderr = "show"
nb_merge_streams = True
nb_render_markdown_format = "myst"   # nbdev show_doc outputs are markdown with fenced signatures
myst_enable_extensions = ["colon_fence", "dollarmath", "fieldlist"]   # fieldlist: :param x: in API entries
myst_heading_anchors = 3             # README's `#section` links keep working

# look
html_theme = "furo"
html_title = f"{project} {release}"
html_static_path = ["_static"]
html_css_files = ["pace.css"]
html_show_sourcelink = False
html_theme_options = {"navigation_with_keys": True}
pygments_style = "friendly"

# Math ($...$ in notebooks) with MathJax 3 from the django-static-mathjax wheel (plain MathJax files,
# no Django needed), served by the site itself: scripts/build_docs.py copies it to _static/mathjax/.
# No CDN, so math renders offline.
mathjax_path = "mathjax/tex-mml-chtml.js"

# A page heading level jump inside a notebook (e.g. an H3 right after the H1) is fine on the site.
suppress_warnings = ["myst.header"]
