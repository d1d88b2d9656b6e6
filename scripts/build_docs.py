#!/usr/bin/env python3
"""Build the docs site from the notebooks, offline, in one command.

    .venv/bin/pip install -e '.[docs]'                 # once: Sphinx, myst-nb, furo, MathJax files
    .venv/bin/python scripts/build_docs.py             # -> build/docs/html/index.html
    .venv/bin/python scripts/build_docs.py --check     # ... then check it in headless Chromium

Sphinx + myst-nb + furo (the choice is argued at the top of docs/conf.py). Users with Quarto can
still run `nbdev_docs` (settings.ini is untouched); this build needs no Quarto and no network.

1. Stages the Sphinx sources in build/docs/src (nothing under nbs/ is touched or executed):
   - index.md, the home page: README.md with its relative links rewritten for the site;
   - guide/<name>.md: the pages of docs/guide/ (links rewritten the same way), first in the
     navigation, in the order of the README's list of them;
   - the notebooks in reading order from their file names: nbs/*.ipynb under "Notebooks",
     each folder nbs/<name>/ (experiments/, ...) its own section; nbdev directives applied as
     nbdev's Quarto site does (`#| hide` cells dropped, `#| export` source replaced by the API
     signature of what the cell exports, `#| echo: false`, `#| output: false` ...), committed
     outputs kept as they are;
   - api/<module>.md: the signature, docstring and parameter comments of every name in the
     `__all__` of each module a notebook exports (`#| default_exp`), read from pace/*.py;
   - results/: a page per folder of results/ with its Markdown tables included, its figures
     shown and its CSV/LaTeX/JSON files downloadable, and the folder's README.md (its findings)
     at the top; each experiment notebook's page ends with the tables its default parameters wrote;
   - contributing.md (CONTRIBUTING.md).
2. Runs sphinx-build with -W (a broken cross-reference or a missing include fails the build) and
   copies MathJax into the site, so math renders offline.
3. Writes build/docs/html/_pace_docs.json (each page, its source and the number of its code
   cells with outputs), which scripts/check_docs.py compares with what Chromium shows.
"""
from __future__ import annotations
import argparse, ast, configparser, copy, io, json, os, re, shutil, subprocess, sys, time, tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = ROOT / "docs"
DEFAULT_OUT = ROOT / "build" / "docs"
RESULT_EXTS = {".md", ".csv", ".tex", ".json", ".jsonl", ".png", ".svg", ".jpg", ".pdf", ".txt"}
IMAGE_EXTS = {".png", ".svg", ".jpg"}
MANIFEST = "_pace_docs.json"

# ---------------------------------------------------------------- notebooks and nbdev directives

_DIRECTIVE = re.compile(r"^\s*#\|\s*([\w-]+):?\s*(.*?)\s*$")

def split_directives(src: str) -> tuple[dict[str, str], str]:
    "nbdev directives at the top of a code cell (`#| name value`) and the rest of the source."
    lines, d = src.splitlines(), {}
    i = 0
    while i < len(lines) and (not lines[i].strip() or _DIRECTIVE.match(lines[i])):
        if m := _DIRECTIVE.match(lines[i]): d[m.group(1).lower()] = m.group(2)
        i += 1
    return d, "\n".join(lines[i:]).strip("\n")

def _src(cell) -> str: s = cell.get("source", ""); return "".join(s) if isinstance(s, list) else s

_ids = iter(range(10**9))
def _md(source: str) -> dict: return {"cell_type": "markdown", "id": f"pace-docs-{next(_ids)}", "metadata": {}, "source": source}

def _false(v: str) -> bool: return v.strip().lower() in ("false", "0", "no")

def _clean_output(o: dict) -> dict:
    "nbdev's show_doc markdown starts with a `---` rule, which docutils refuses at the start of an output."
    md = o.get("data", {}).get("text/markdown")
    if md is None: return o
    text = "".join(md) if isinstance(md, list) else md
    return dict(o, data=dict(o["data"], **{"text/markdown": re.sub(r"\A\s*(---+|\*\*\*+)\s*\n", "", text)}))

def cell_view(cell) -> tuple[bool, bool]:
    "(input shown, outputs shown) for a code cell on the site, from its nbdev directives and tags."
    d, body = split_directives(_src(cell))
    tags = set(cell.get("metadata", {}).get("tags", []))
    if "hide" in d or "exporti" in d or "default_exp" in d and not body or "remove-cell" in tags: return False, False
    if "include" in d and _false(d["include"]): return False, False
    show_in = bool(body) and not ({"export", "hide_input"} & d.keys()) and not ("echo" in d and _false(d["echo"])) \
              and "remove-input" not in tags
    show_out = "hide_output" not in d and not ("output" in d and _false(d["output"])) and "remove-output" not in tags
    return show_in, show_out

def _visible_output(o) -> bool:
    t = o.get("output_type")
    if t == "stream": return bool("".join(o.get("text", "")).strip())
    if t == "error": return True
    return t in ("execute_result", "display_data") and any(k != "application/vnd.jupyter.widget-view+json" for k in o.get("data", {}))

def output_cells(nb: dict) -> int:
    "How many code cells show outputs on the site: what the check expects to find rendered."
    return sum(1 for c in nb["cells"] if c["cell_type"] == "code" and cell_view(c)[1]
               and any(_visible_output(o) for o in c.get("outputs", [])))

def nb_title(nb: dict, fallback: str) -> str:
    for c in nb["cells"]:
        if c["cell_type"] == "markdown" and (m := re.search(r"^#\s+(.+?)\s*#*\s*$", _src(c), re.M)):
            return re.sub(r"[`*_]", "", m.group(1))
    return fallback

# ---------------------------------------------------------------- API signatures
# Read from the exported package's source (pace/*.py, which nbdev writes from the notebooks), not
# imported: signatures exactly as written (annotations and defaults unevaluated), docstrings in
# their Markdown, and each parameter's trailing comment (the fastcore "docments" convention that
# nbdev's show_doc renders) as its description. Rendered as MyST python-domain directives.

def _comments(src: str) -> dict[int, str]:
    "line number -> trailing comment text."
    out = {}
    try:
        for t in tokenize.generate_tokens(io.StringIO(src).readline):
            if t.type == tokenize.COMMENT: out[t.start[0]] = t.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError, SyntaxError): pass
    return out

def _param_comments(args: list[ast.arg], defaults: dict[str, ast.expr], comments: dict[int, str]) -> dict[str, str]:
    "A comment belongs to the last parameter that ends on its line."
    last: dict[int, str] = {}
    for a in args:
        end = defaults[a.arg] if a.arg in defaults else a
        last[end.end_lineno] = a.arg
    return {name: comments[line] for line, name in last.items() if comments.get(line)}

def _all_args(a: ast.arguments) -> tuple[list[ast.arg], dict[str, ast.expr]]:
    pos = a.posonlyargs + a.args
    defaults = {x.arg: d for x, d in zip(pos[len(pos) - len(a.defaults):], a.defaults)}
    defaults.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    return pos + ([a.vararg] if a.vararg else []) + a.kwonlyargs + ([a.kwarg] if a.kwarg else []), defaults

def _fn_sig(node, drop_first: bool, comments: dict[int, str]) -> tuple[str, dict[str, str], str | None]:
    "(signature text, parameter comments, return comment) of a def, as written."
    a = copy.deepcopy(node.args)
    if drop_first:
        if a.posonlyargs: a.posonlyargs.pop(0)
        elif a.args: a.args.pop(0)
    args, defaults = _all_args(a)
    sig = f"({ast.unparse(a)})" + (f" -> {ast.unparse(node.returns)}" if node.returns else "")
    pc = _param_comments(args, defaults, comments)
    ret = None
    if node.returns is not None and (c := comments.get(node.returns.end_lineno)) and node.returns.end_lineno not in {
            (defaults.get(x.arg) or x).end_lineno for x in args}: ret = c
    return sig, pc, ret

def _decorators(node) -> set[str]:
    return {ast.unparse(d.func if isinstance(d, ast.Call) else d).split(".")[-1] for d in node.decorator_list}

class ModuleAPI:
    "The public API of one exported module, read statically from its source file."
    def __init__(self, module: str, path: Path):
        self.module, self.path = module, path
        self.src = path.read_text() if path.exists() else ""
        try: self.tree = ast.parse(self.src)
        except SyntaxError: self.tree = ast.Module(body=[], type_ignores=[])
        self.comments = _comments(self.src)
        self.defs: dict[str, ast.AST] = {}
        self.all: list[str] = []
        for n in self.tree.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): self.defs[n.name] = n
            elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if isinstance(t, ast.Name):
                        if t.id == "__all__":
                            try: self.all = list(ast.literal_eval(n.value))
                            except ValueError: pass
                        else: self.defs[t.id] = n
        self.doc = ast.get_docstring(self.tree) or ""

    def _fields(self, cls: ast.ClassDef, seen=()) -> list[tuple[str, str, str | None]]:
        "(name, `name: type = default` text, comment) of a dataclass / pydantic model, parents first."
        out = []
        for b in cls.bases:                      # fields inherited from classes of this module
            if isinstance(b, ast.Name) and isinstance(self.defs.get(b.id), ast.ClassDef) and b.id not in seen:
                out += self._fields(self.defs[b.id], seen + (cls.name,))
        for n in cls.body:
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and not n.target.id.startswith("_") \
               and n.target.id != "model_config" and "ClassVar" not in ast.unparse(n.annotation):
                txt = f"{n.target.id}: {ast.unparse(n.annotation)}" + (f" = {ast.unparse(n.value)}" if n.value else "")
                out = [f for f in out if f[0] != n.target.id] + [(n.target.id, txt, self.comments.get(n.end_lineno))]
        return out

    def _is_record(self, cls: ast.ClassDef) -> bool:
        if "dataclass" in _decorators(cls): return True
        for b in cls.bases:
            name = ast.unparse(b).split(".")[-1]
            if name == "BaseModel" or isinstance(self.defs.get(name), ast.ClassDef) and self._is_record(self.defs[name]): return True
        return False

    def render(self, name: str, no_index: bool = False) -> str:
        "MyST markdown for one public name (function, class with its public methods, or constant)."
        node = self.defs.get(name)
        opts = f":module: {self.module}\n" + (":no-index:\n" if no_index else "")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sig, pc, ret = _fn_sig(node, False, self.comments)
            return _directive("py:function", name + sig, opts + (":async:\n" if isinstance(node, ast.AsyncFunctionDef) else ""),
                              _body(ast.get_docstring(node), pc, ret))
        if isinstance(node, ast.ClassDef):
            pc, ret = {}, None
            if self._is_record(node):
                fields = self._fields(node)
                sig = "(" + ", ".join(f[1] for f in fields) + ")"
                pc = {f[0]: f[2] for f in fields if f[2]}
            elif (init := next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)):
                sig, pc, _ = _fn_sig(init, True, self.comments)
            else: sig = ""
            bases = [ast.unparse(b) for b in node.bases if ast.unparse(b) not in ("object",)]
            body = _body(ast.get_docstring(node), pc, None)
            if bases: body = f"Bases: {', '.join(f'`{b}`' for b in bases)}\n\n" + body
            members, ni = [], ":no-index:\n" if no_index else ""
            for m in node.body:
                if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) or m.name.startswith("_"): continue
                deco = _decorators(m)
                if "property" in deco or "cached_property" in deco:
                    t = f":type: {ast.unparse(m.returns)}\n" if m.returns else ""
                    members.append(_directive("py:property", m.name, t + ni, _body(ast.get_docstring(m), {}, None)))
                    continue
                sig_m, pc_m, ret_m = _fn_sig(m, "staticmethod" not in deco, self.comments)
                kind = ":classmethod:\n" if "classmethod" in deco else ":staticmethod:\n" if "staticmethod" in deco else ""
                members.append(_directive("py:method", m.name + sig_m, kind + ni, _body(ast.get_docstring(m), pc_m, ret_m)))
            return _directive("py:class", name + sig, opts, "\n\n".join([body] + members))
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            v = ast.unparse(node.value)
            v = v if len(v) <= 70 else v[:67] + "..."
            v = " ".join(v.split()).replace("`", "'")
            return _directive("py:data", name, opts, "\n\n".join(x for x in [f"`` = {v} ``", self.comments.get(node.end_lineno)] if x))
        return ""

def _body(doc: str | None, params: dict[str, str], ret: str | None) -> str:
    fields = [f":param {k}: {v}" for k, v in params.items()] + ([f":returns: {ret}"] if ret else [])
    return "\n\n".join(x for x in [doc or "", "\n".join(fields)] if x)

def _directive(name: str, arg: str, opts: str, body: str) -> str:
    n = max([3] + [len(m) + 1 for m in re.findall(r"`{3,}", body)])
    return f"{'`' * n}{{{name}}} {arg}\n{opts}\n{body}\n{'`' * n}"

def _defined(body: str) -> list[str]:
    "Names a code cell defines at top level (functions, classes, assignments), in order."
    try: tree = ast.parse(body)
    except SyntaxError: return []
    out = []
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): out.append(n.name)
    return out

# ---------------------------------------------------------------- links

_FENCE = re.compile(r"^(```|~~~)", re.M)
_LINK = re.compile(r"(!?\[(?:[^\[\]]|\[[^\]]*\])*\])\(\s*<?([^)\s>]+)>?(\s+\"[^\"]*\")?\s*\)")

def _segments(md: str):
    "Split markdown into (is_code_fence, text) pieces so links in code blocks stay as written."
    out, pos, inside = [], 0, False
    for m in _FENCE.finditer(md):
        out.append((inside, md[pos:m.start()])); pos, inside = m.start(), not inside
    out.append((inside, md[pos:]))
    return out

def _rel(target: Path, page: Path) -> str: return Path(os.path.relpath(target, page.parent)).as_posix()

class Site:
    "Stages the Sphinx sources for the repository `root` into `src`."
    def __init__(self, root: Path, src: Path, nbs: Path | None = None, results: Path | None = None):
        self.root, self.src = root, src
        self.nbs, self.results = nbs or root / "nbs", results or root / "results"
        ini = configparser.ConfigParser(interpolation=None); ini.read(root / "settings.ini")
        s = ini["DEFAULT"] if "DEFAULT" in ini else {}
        self.lib = s.get("lib_name", "pace")
        self.repo_url = s.get("git_url", "").rstrip("/")
        self.branch = s.get("branch", "main")
        self.docs: dict[Path, Path] = {}        # repository file -> staged document
        self.pages: list[dict] = []              # the manifest
        self.modules: dict[str, Path] = {}       # module -> its notebook's staged path
        self.result_pages: dict[Path, Path] = {} # results folder -> its page
        self._apis: dict[str, ModuleAPI] = {}

    def api(self, module: str) -> ModuleAPI:
        if module not in self._apis:
            self._apis[module] = ModuleAPI(module, self.root / (module.replace(".", "/") + ".py"))
        return self._apis[module]

    # -- links: README, CONTRIBUTING and notebook markdown are written for the repository
    def link_target(self, target: str, origin: Path, page: Path) -> str:
        "A repository-relative link rewritten for the staged `page` (unchanged when it already works)."
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "/")): return target
        path, _, frag = target.partition("#")
        frag = f"#{frag}" if frag else ""
        p = (origin.parent / path).resolve()
        if p in self.docs: return _rel(self.docs[p], page) + frag
        if p.is_dir() and p in self.result_pages: return _rel(self.result_pages[p], page) + frag
        if p.name == "README.md" and p.parent in self.result_pages: return _rel(self.result_pages[p.parent], page) + frag  # shown on its folder's page
        try: rel = p.relative_to(self.root)
        except ValueError: return target
        if p.is_file():                          # any other file of the repository: shipped with the site
            dest = self.src / "_files" / rel
            dest.parent.mkdir(parents=True, exist_ok=True); shutil.copy2(p, dest)
            return "download:" + _rel(dest, page)
        if p.is_dir() and self.repo_url: return f"{self.repo_url}/tree/{self.branch}/{rel.as_posix()}"
        return target                            # missing: sphinx -W reports it

    def rewrite(self, md: str, origin: Path, page: Path, code_links: bool = False, absolute: bool = False) -> str:
        "Links of `md` (written at `origin`) for `page`; `absolute`: from the site's root (`/...`), for a file that is included."
        if absolute: page = self.src / "index.md"
        def fix(m):
            t = self.link_target(m.group(2), origin, page)
            if absolute and t != m.group(2) and not t.startswith(("#", "/")):
                t = ("download:/" + t[len("download:"):]) if t.startswith("download:") else "/" + t
            if t.startswith("download:"):            # a file, not a page: an image shows it, a link downloads it
                t = t[len("download:"):]
                if m.group(1).startswith("!"): return f"{m.group(1)}({t})"
                text = re.sub(r"[`<>]", "", m.group(1)[1:-1]) or Path(t).name
                return f"{{download}}`{text} <{t}>`"
            return f"{m.group(1)}({t}{m.group(3) or ''})"
        root = "/" if absolute else ""
        def code(m):                             # `nbs/00_data.ipynb`, `pace.data` -> links
            t = m.group(1)
            if (d := self.docs.get((origin.parent / t).resolve())) is not None and t.endswith((".ipynb", ".md")):
                return f"[`{t}`]({root}{_rel(d, page)})"
            if t in self.modules: return f"[`{t}`]({root}{_rel(self.src / 'api' / (t.split('.', 1)[1] + '.md'), page)})"
            return m.group(0)
        out = []
        for fenced, text in _segments(md):
            if not fenced:
                text = _LINK.sub(fix, text)
                if code_links: text = re.sub(r"(?<![\[`])`([\w./-]+)`(?![\]`])", code, text)
            out.append(text)
        return "".join(out)

    # -- the pieces
    def notebooks(self) -> list[tuple[str, list[Path]]]:
        "Sections in reading order: ('Notebooks', nbs/*.ipynb), then one per sub-folder of nbs/."
        def ok(p: Path) -> bool: return not any(part.startswith(("_", ".")) for part in p.relative_to(self.nbs).parts)
        top = sorted((p for p in self.nbs.glob("*.ipynb") if ok(p)), key=lambda p: (p.stem != "index", p.name))
        secs = [("Notebooks", top)] if top else []
        for d in sorted(p for p in self.nbs.iterdir() if p.is_dir() and ok(p)):
            nbs = sorted(p for p in d.rglob("*.ipynb") if ok(p) and ".ipynb_checkpoints" not in p.parts)
            if nbs: secs.append((d.name.replace("_", " ").capitalize(), nbs))
        return secs

    def stage_notebook(self, nb_path: Path, kind: str) -> dict:
        nb = json.loads(nb_path.read_text())
        dest = self.docs[nb_path.resolve()]
        rel = nb_path.relative_to(self.root).as_posix()
        module = None
        for c in nb["cells"]:
            if c["cell_type"] == "code" and (d := split_directives(_src(c))[0]).get("default_exp"):
                module = f"{self.lib}.{d['default_exp'].split()[0]}"
        api = self.api(module) if module else None
        shown = " ".join(_src(c) for c in nb["cells"] if c["cell_type"] == "code")
        cells, titled = [], False
        for c in nb["cells"]:
            c = dict(c, metadata=dict(c.get("metadata", {})))
            if c["cell_type"] == "markdown":
                c["source"] = self.rewrite(_src(c), nb_path, dest)
                cells.append(c)
                if not titled and re.search(r"^#\s", c["source"], re.M):
                    titled = True
                    note = f"*Notebook `{rel}`*"
                    if module: note += f" · *API:* {{doc}}`{module} </api/{module.split('.', 1)[1]}>`"
                    cells.append(_md(note))
                continue
            if c["cell_type"] != "code": cells.append(c); continue
            d, body = split_directives(_src(c))
            show_in, show_out = cell_view(c)
            tags = set(c["metadata"].get("tags", []))
            if not show_in and not show_out: continue
            if not show_in: tags.add("remove-input")
            if not show_out: tags.add("remove-output")
            c["metadata"]["tags"] = sorted(tags)
            c["source"] = body
            c["outputs"] = [_clean_output(o) for o in c.get("outputs", [])]
            if show_in or any(_visible_output(o) for o in c.get("outputs", [])): cells.append(c)
            if "export" in d or "exports" in d:  # nbdev shows an exported symbol's signature (show_doc)
                for name in _defined(body):
                    if api is None or name not in api.all or re.search(rf"show_doc\(\s*{re.escape(name)}\b", shown): continue
                    if doc := api.render(name, no_index=True): cells.append(_md(doc))
        if kind == "experiment": cells += self.experiment_results(nb, nb_path, dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        for i, c in enumerate(cells): c.setdefault("id", f"cell-{i}")   # nbformat 4.5: every cell has an id
        meta = dict(nb.get("metadata", {}))      # jupytext-made notebooks may name no language: highlight as Python
        meta.setdefault("kernelspec", {"display_name": "python3", "language": "python", "name": "python3"})
        meta.setdefault("language_info", {"name": "python"})
        dest.write_text(json.dumps(dict(nb, metadata=meta, cells=cells, nbformat=4, nbformat_minor=max(5, nb.get("nbformat_minor", 5))), indent=1))
        return {"doc": dest.relative_to(self.src).with_suffix("").as_posix(), "kind": kind, "source": rel,
                "title": nb_title(nb, nb_path.stem), "module": module, "output_cells": output_cells(nb)}

    def experiment_results(self, nb: dict, nb_path: Path, dest: Path) -> list[dict]:
        "Markdown cells that include the tables an experiment's default parameters wrote into results/."
        params = next((c for c in nb["cells"] if c["cell_type"] == "code" and "parameters" in c.get("metadata", {}).get("tags", [])), None)
        if params is None: return []
        dirs = []
        try: tree = ast.parse(split_directives(_src(params))[1])
        except SyntaxError: return []
        for n in tree.body:
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
                p = (nb_path.parent / n.value.value).resolve()
                if p.is_dir() and p in self.result_pages: dirs.append(p)
        cells = []
        for p in dirs:
            page = self.result_pages[p]
            rel = p.relative_to(self.root).as_posix()
            cells.append(_md(
                          f"## In `{rel}/`\nWhat this notebook wrote with its default parameters "
                          f"(all formats on the [results page]({_rel(page, dest)})):"))
            cells.append(_md(self.result_body(p, dest, level=3)))
        return cells

    def result_folders(self) -> list[Path]:
        if not self.results.is_dir(): return []
        found = set()
        for f in self.results.rglob("*"):
            if f.is_file() and f.suffix in RESULT_EXTS and "index" not in f.relative_to(self.results).parts:
                found.add(f.parent)
        return sorted(found)

    def result_files(self, folder: Path) -> list[Path]:
        return sorted(f for f in folder.iterdir() if f.is_file() and f.suffix in RESULT_EXTS)

    def result_body(self, folder: Path, page: Path, level: int = 2) -> str:
        files = self.result_files(folder)
        images = {f.stem for f in files if f.suffix in IMAGE_EXTS}
        # a figure's caption file (name.md beside name.png) points at its image relatively: shown with the image below
        tables = [f for f in files if f.suffix == ".md" and f.name != "README.md" and f.stem not in images]
        if any(f.name == "tables.md" for f in tables): tables = [f for f in tables if f.name == "tables.md"]
        parts = []
        for f in files:
            staged = self.src / "_results" / f.relative_to(self.results)
            staged.parent.mkdir(parents=True, exist_ok=True); shutil.copy2(f, staged)
            if f.name == "README.md":                # included into pages at several depths: links from the site's root
                staged.write_text(self.rewrite(f.read_text(), f, staged, code_links=True, absolute=True))
        readme = folder / "README.md"
        if readme.exists(): parts.append(f"```{{include}} {_rel(self.src / '_results' / readme.relative_to(self.results), page)}\n:heading-offset: {level - 1}\n```")
        for f in tables:                         # a table file with its own heading keeps it, one level down
            titled = re.match(r"\s*#", f.read_text())
            head = "" if titled else f"{'#' * level} {f.stem.replace('_', ' ')}\n\n"
            parts.append(f"{head}```{{include}} {_rel(self.src / '_results' / f.relative_to(self.results), page)}\n:heading-offset: {level - 1 if titled else level}\n```")
        for f in files:
            if f.suffix in IMAGE_EXTS:
                cap = f.with_suffix(".md")
                if cap.is_file(): parts.append(cap.read_text().split("\n\n")[0].strip())
                parts.append(f"![{f.stem}]({_rel(self.src / '_results' / f.relative_to(self.results), page)})")
        dl = [f"{{download}}`{f.name} <{_rel(self.src / '_results' / f.relative_to(self.results), page)}>`" for f in files]
        if dl: parts.append("Files: " + " · ".join(dl))
        return "\n\n".join(parts)

    def guide_pages(self) -> list[Path]:
        "docs/guide/*.md, in the order of the README's last link to each (its list of them), then the others by name."
        d = self.root / "docs" / "guide"
        if not d.is_dir(): return []
        pages = sorted(d.glob("*.md"))
        readme = (self.root / "README.md").read_text() if (self.root / "README.md").exists() else ""
        order = {}
        for m in _LINK.finditer(readme):
            p = (self.root / m.group(2).partition("#")[0]).resolve()
            order[p] = m.start()
        return sorted(pages, key=lambda p: (order.get(p.resolve(), float("inf")), p.name))

    def stage(self) -> list[dict]:
        if self.src.exists(): shutil.rmtree(self.src)
        self.src.mkdir(parents=True)
        sections = self.notebooks()
        for _, nbs in sections:                  # every document's place first, so links resolve
            for p in nbs: self.docs[p.resolve()] = self.src / p.relative_to(self.root)
        for p in [p for _, nbs in sections for p in nbs]:
            for c in json.loads(p.read_text())["cells"]:
                if c["cell_type"] == "code" and (m := split_directives(_src(c))[0].get("default_exp")):
                    self.modules[f"{self.lib}.{m.split()[0]}"] = self.docs[p.resolve()]
        self.docs[(self.root / "README.md").resolve()] = self.src / "index.md"
        if (self.root / "CONTRIBUTING.md").exists(): self.docs[(self.root / "CONTRIBUTING.md").resolve()] = self.src / "contributing.md"
        guide = self.guide_pages()
        for g in guide: self.docs[g.resolve()] = self.src / "guide" / g.name
        folders = self.result_folders()
        for f in folders: self.result_pages[f.resolve()] = self.src / "results" / (f.relative_to(self.results).as_posix().replace("/", "--") + ".md")

        toc: list[tuple[str, list[str]]] = []
        if guide:
            (self.src / "guide").mkdir()
            for g in guide:
                text = self.rewrite(g.read_text(), g, self.src / "guide" / g.name, code_links=True)
                (self.src / "guide" / g.name).write_text(text)
                self.pages.append({"doc": f"guide/{g.stem}", "kind": "page", "source": g.relative_to(self.root).as_posix(),
                                   "title": nb_title({"cells": [{"cell_type": "markdown", "source": text}]}, g.stem)})
            toc.append(("Guide", [f"guide/{g.stem}" for g in guide]))
        for name, nbs in sections:
            kind = "experiment" if name.lower() == "experiments" else "notebook"
            entries = []
            for p in nbs:
                info = self.stage_notebook(p, kind)
                num = re.match(r"^(\d+[a-z]?)_", p.stem)
                label = "Overview" if p.stem == "index" and kind == "notebook" else (f"{num.group(1)} · " if num else "") + info["title"]
                entries.append(f"{label} <{info['doc']}>"); self.pages.append(info)
            toc.append((name, entries))

        api = []
        for module, nb_doc in self.modules.items():
            name = module.split(".", 1)[1]
            page = self.src / "api" / f"{name}.md"; page.parent.mkdir(exist_ok=True)
            mod = self.api(module)
            entries = "\n\n".join(e for n in mod.all if (e := mod.render(n)))
            page.write_text(f"# `{module}`\n\n{mod.doc}\n\nExported from {{doc}}`/{nb_doc.relative_to(self.src).with_suffix('').as_posix()}` "
                            f"(`{nb_doc.relative_to(self.src).as_posix()}`) into `{self.lib}/{name.replace('.', '/')}.py`; "
                            f"edit the notebook, never the `.py`.\n\n{entries}\n")
            api.append(f"{module} <api/{name}>")
            self.pages.append({"doc": f"api/{name}", "kind": "api", "source": f"{self.lib}/{name.replace('.', '/')}.py",
                               "title": module})
        if api: toc.append(("API reference", api))

        res = []
        for f in folders:
            page = self.result_pages[f.resolve()]
            rel = f.relative_to(self.root).as_posix()
            page.parent.mkdir(exist_ok=True)
            page.write_text(f"# `{rel}/`\n\n{self.result_body(f, page)}\n")
            res.append(f"{f.relative_to(self.results).as_posix()} <results/{page.stem}>")
            self.pages.append({"doc": f"results/{page.stem}", "kind": "results", "source": rel, "title": rel})
        if res: toc.append(("Results", res))

        if (c := self.root / "CONTRIBUTING.md").exists():
            (self.src / "contributing.md").write_text(self.rewrite(c.read_text(), c, self.src / "contributing.md", code_links=True))
            toc.append(("Project", ["contributing"]))
            self.pages.append({"doc": "contributing", "kind": "page", "source": "CONTRIBUTING.md", "title": "Working on pace"})

        readme = self.root / "README.md"
        home = self.rewrite(readme.read_text(), readme, self.src / "index.md", code_links=True)
        trees = "".join(f"\n```{{toctree}}\n:hidden:\n:caption: {cap}\n\n" + "\n".join(entries) + "\n```\n" for cap, entries in toc)
        (self.src / "index.md").write_text(home.rstrip() + "\n" + trees)
        self.pages.insert(0, {"doc": "index", "kind": "home", "source": "README.md", "title": nb_title(
            {"cells": [{"cell_type": "markdown", "source": home}]}, "home")})
        return self.pages

MATHJAX_PARTS = ["tex-mml-chtml.js", "output/chtml.js", "output/chtml", "input", "a11y", "ui", "adaptors", "sre"]

def copy_mathjax(dest: Path):
    "MathJax 3 (docs/conf.py's mathjax_path) from the django-static-mathjax wheel: only what tex-mml-chtml loads."
    import importlib.util
    spec = importlib.util.find_spec("mathjax")
    es5 = Path(spec.origin).parent / "static" / "mathjax" / "es5" if spec and spec.origin else None
    if es5 is None or not (es5 / "tex-mml-chtml.js").exists():
        print("django-static-mathjax is missing (pip install -e '.[docs]'): math will not be typeset", file=sys.stderr); return
    for part in MATHJAX_PARTS:
        src, dst = es5 / part, dest / part
        if src.is_dir(): shutil.copytree(src, dst, dirs_exist_ok=True)
        elif src.exists(): dst.parent.mkdir(parents=True, exist_ok=True); shutil.copy2(src, dst)
    if (lic := es5.parent / "LICENSE").exists(): shutil.copy2(lic, dest / "LICENSE")

def build(out: Path = DEFAULT_OUT, root: Path = ROOT, nbs: Path | None = None, results: Path | None = None,
          strict: bool = True, quiet: bool = True) -> Path:
    "Stage and build the site; returns the HTML folder (its manifest is `MANIFEST` in it)."
    out = Path(out).resolve()
    src, html, doctrees = out / "src", out / "html", out / "doctrees"
    staged_at = time.time()                        # sources read from here on: the check flags notebooks edited later
    pages = Site(Path(root).resolve(), src, nbs, results).stage()
    for d in (html, doctrees):
        if d.exists(): shutil.rmtree(d)
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(CONF_DIR), "-d", str(doctrees), "-j", "auto"]
    if strict: cmd += ["-W", "--keep-going"]
    if quiet: cmd += ["-q"]
    env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
    r = subprocess.run(cmd + [str(src), str(html)], cwd=root, env=env)
    if r.returncode: raise SystemExit(f"sphinx-build failed (exit {r.returncode}); sources staged in {src}")
    copy_mathjax(html / "_static" / "mathjax")
    for p in pages: p["html"] = p["doc"] + ".html"
    (html / MANIFEST).write_text(json.dumps({"staged_at": staged_at, "pages": pages}, indent=1))
    return html

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="build folder (default: build/docs); the site is OUT/html")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository to build (default: this one)")
    ap.add_argument("--no-strict", action="store_true", help="do not fail on Sphinx warnings")
    ap.add_argument("--check", action="store_true", help="then check the site in headless Chromium (scripts/check_docs.py)")
    ap.add_argument("--shots", type=Path, default=None, help="with --check: save screenshots in this folder")
    a = ap.parse_args(argv)
    try: import sphinx, myst_nb, furo  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"{e.name} is missing: install the docs extra first: pip install -e '.[docs]'")
    t = time.time()
    html = build(a.out, root=a.root, strict=not a.no_strict)
    print(f"site built in {time.time() - t:.0f}s: {html / 'index.html'}")
    if a.check:
        sys.path.insert(0, str(Path(__file__).parent))
        import check_docs
        raise SystemExit(check_docs.main([str(html), "--root", str(a.root)] + (["--shots", str(a.shots)] if a.shots else [])))

if __name__ == "__main__": main()
