#!/usr/bin/env python3
"""Check the built docs site in a real browser (headless Chromium), offline.

    .venv/bin/python scripts/check_docs.py [build/docs/html] [--shots /tmp/docs_shots]
    (or: .venv/bin/python scripts/build_docs.py --check)

Serves the site on 127.0.0.1, opens pages in Debian's `chromium` (apt-get install chromium) with
a fresh profile and no network, reads the DOM Chromium rendered, and fails (exit 1) when
- a page of the site's manifest is missing (every notebook, API, results page: HTTP 200);
- the home page or the module page does not load, or lacks its expected heading;
- a link, stylesheet, script or image does not resolve on the site (HTTP 404, or a `#fragment`
  with no such id), or a page loads anything from outside the site (it must work offline):
  on the DOM Chromium built for the home page, the module page and the first experiment page,
  and on every page of the site as served;
- a page with math ($...$) shows it untypeset (MathJax did not run);
- a notebook page shows fewer outputs than its source notebook has: for every notebook page the
  number of rendered output blocks (`div.cell_output` with content) is compared with the code
  cells of the .ipynb in nbs/ that have outputs and are not hidden by an nbdev directive.
With --shots DIR it saves PNG screenshots of the home page and the module page.
Exit status 2 when no Chromium is found.
"""
from __future__ import annotations
import argparse, functools, http.server, json, os, shutil, subprocess, sys, tempfile, threading, time
from html.parser import HTMLParser
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import urljoin, urlsplit, unquote
from urllib.request import urlopen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_docs import DEFAULT_OUT, MANIFEST, ROOT, output_cells  # noqa: E402

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                  "--disable-extensions", "--hide-scrollbars", "--mute-audio"]

def find_chromium(explicit: str | None = None) -> str | None:
    for c in [explicit, os.environ.get("CHROMIUM")] + ["chromium", "chromium-browser", "google-chrome", "chrome"]:
        if c and (p := shutil.which(c)): return p
    return None

class Page(HTMLParser):
    "What the check needs from a DOM: headings, ids, links and resources, notebook output blocks."
    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.h1, self.ids, self.links, self.resources = [], set(), [], []
        self.outputs = self.filled_outputs = self.math = self.mathjax = 0
        self._stack, self._h1, self._out = [], None, []   # open tags; h1 text; per open output block: [depth, has content]
        self.feed(html); self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"): self.ids.add(a["id"])
        if tag == "a" and a.get("name"): self.ids.add(a["name"])
        if tag == "a" and a.get("href"): self.links.append(a["href"])
        if tag == "link" and a.get("href") and {"stylesheet", "icon"} & set((a.get("rel") or "").split()): self.resources.append(a["href"])
        if tag in ("script", "img", "iframe") and a.get("src"): self.resources.append(a["src"])
        if tag == "img":
            for o in self._out: o[1] = True
        if tag in ("br", "img", "meta", "link", "input", "hr", "source", "wbr", "area", "col", "embed", "param", "track"): return
        self._stack.append(tag)
        if tag == "h1": self._h1 = []
        cls = (a.get("class") or "").split()
        if tag in ("span", "div") and "math" in cls: self.math += 1
        if any(c.startswith("MathJax") for c in cls) or tag == "mjx-container": self.mathjax += 1
        if tag == "div" and "cell_output" in (a.get("class") or "").split():
            self.outputs += 1; self._out.append([len(self._stack), False])

    def handle_endtag(self, tag):
        if tag not in self._stack: return
        while self._stack:
            t = self._stack.pop()
            if self._out and self._out[-1][0] > len(self._stack):
                self.filled_outputs += self._out.pop()[1]
            if t == "h1" and self._h1 is not None:
                self.h1.append(" ".join("".join(self._h1).split()).rstrip("#¶ ")); self._h1 = None
            if t == tag: break

    def handle_data(self, data):
        if self._h1 is not None: self._h1.append(data)
        if data.strip():
            for o in self._out: o[1] = True

class Checker:
    def __init__(self, site: Path, chromium: str, root: Path = ROOT, timeout: float = 90):
        self.site, self.chromium, self.root, self.timeout = site, chromium, root, timeout
        m = json.loads((site / MANIFEST).read_text())
        self.manifest, self.staged_at = m["pages"], m.get("staged_at", 0)
        self.failures: list[str] = []
        self.report: list[str] = []
        self._profile = tempfile.mkdtemp(prefix="pace-docs-chromium-")
        handler = functools.partial(_QuietHandler, directory=str(site))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self._static: dict[str, tuple[int, Page | None]] = {}

    def close(self):
        self.httpd.shutdown(); self.httpd.server_close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def fail(self, msg: str): self.failures.append(msg); print("FAIL", msg, flush=True)

    # -- the browser
    def chromium_run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.chromium, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", *args],
                              capture_output=True, text=True, timeout=self.timeout)

    def render(self, url: str) -> Page | None:
        "The DOM Chromium built for `url` (scripts run for up to 3 s of virtual time); None, and a failure, if it could not."
        try: r = self.chromium_run("--virtual-time-budget=3000", "--dump-dom", url)
        except subprocess.TimeoutExpired: self.fail(f"chromium took over {self.timeout}s on {url}"); return None
        if r.returncode or "<html" not in r.stdout.lower():
            self.fail(f"chromium could not render {url} (exit {r.returncode}): {r.stderr.strip()[-500:]}"); return None
        return Page(r.stdout)

    def screenshot(self, url: str, path: Path, size: str = "1400,1100"):
        path.parent.mkdir(parents=True, exist_ok=True)
        r = self.chromium_run(f"--window-size={size}", "--virtual-time-budget=3000", f"--screenshot={path}", url)
        if r.returncode or not path.exists() or path.stat().st_size < 1000:
            self.fail(f"screenshot of {url} failed: {r.stderr.strip()[-300:]}")
        else: print(f"screenshot {path} ({url[len(self.base):]})", flush=True)

    # -- HTTP (what the browser would get following a link)
    def fetch(self, url: str) -> tuple[int, Page | None]:
        key = url.split("#")[0]
        if key not in self._static:
            try:
                with urlopen(key, timeout=30) as r:
                    body = r.read()
                    page = Page(body.decode("utf-8", "replace")) if "html" in r.headers.get("Content-Type", "") else None
                    self._static[key] = (r.status, page)
            except HTTPError as e: self._static[key] = (e.code, None)
            except URLError: self._static[key] = (0, None)
        return self._static[key]

    def url(self, doc_html: str) -> str: return urljoin(self.base, doc_html)

    # -- the checks
    def check_pages_exist(self):
        missing = [p["html"] for p in self.manifest if self.fetch(self.url(p["html"]))[0] != 200]
        for m in missing: self.fail(f"missing page: {m} (in the site's manifest, HTTP {self.fetch(self.url(m))[0]})")
        self.report.append(f"pages in the manifest: {len(self.manifest)}, all served: {not missing}")

    def check_links(self, url: str, page: Page):
        n = 0
        for kind, refs in (("link", page.links), ("resource", page.resources)):
            for ref in refs:
                if ref.startswith(("mailto:", "javascript:", "data:")): continue
                target = urljoin(url, ref)
                if not target.startswith(self.base):
                    if kind == "resource": self.fail(f"{url[len(self.base):]} loads {ref} from outside the site (offline site)")
                    continue
                n += 1
                status, tpage = (200, page) if target.split("#")[0] == url.split("#")[0] else self.fetch(target)
                if status != 200: self.fail(f"{url[len(self.base):]}: broken {kind} {ref} (HTTP {status})"); continue
                frag = unquote(urlsplit(target).fragment)
                if frag and tpage is not None and frag not in tpage.ids:
                    self.fail(f"{url[len(self.base):]}: link {ref}: no #{frag} in {target.split('#')[0][len(self.base):]}")
        return n

    def expected_outputs(self, p: dict) -> int | None:
        src = self.root / p["source"]
        return output_cells(json.loads(src.read_text())) if src.exists() else None

    def check_outputs(self, p: dict, page: Page, how: str) -> str:
        exp = self.expected_outputs(p)
        if exp is None: return f"{p['source']}: source notebook gone"
        if page.filled_outputs < exp:
            stale = (self.root / p["source"]).stat().st_mtime > self.staged_at
            self.fail(f"{p['html']} is shown without outputs: {page.filled_outputs} rendered output block(s), "
                      f"{exp} code cell(s) with outputs in {p['source']}"
                      + (" (the notebook changed after the build: rebuild)" if stale else ""))
        note = " (more than the notebook has now: it changed after the build)" if page.filled_outputs > exp else ""
        return f"{p['html']}: outputs {page.filled_outputs}/{exp} ({how}){note}"

    def run(self, module: str | None = None, shots: Path | None = None) -> int:
        t = time.time()
        self.check_pages_exist()
        nbs = [p for p in self.manifest if p["kind"] in ("notebook", "experiment")]
        mods = [p for p in nbs if p.get("module")]
        if module: mods = [p for p in mods if module in (p["doc"], p["source"], p["module"], Path(p["source"]).stem)] or mods[:0]
        if not mods: self.fail(f"no module page{' ' + repr(module) if module else ''} in the site"); return 1
        mod = next((p for p in mods if (self.expected_outputs(p) or 0) > 0), mods[0]) if not module else mods[0]
        home = self.manifest[0]
        exps = [p for p in nbs if p["kind"] == "experiment"][:1]
        rendered: dict[str, Page] = {}
        for p, want in [(home, home["title"]), (mod, mod["title"])] + [(e, e["title"]) for e in exps]:
            url = self.url(p["html"])
            status, _ = self.fetch(url)
            if status != 200: self.fail(f"{p['html']} does not load (HTTP {status})"); continue
            if (page := self.render(url)) is None: continue
            rendered[p["html"]] = page
            if not any(h.lower().startswith(want.lower()) for h in page.h1):
                self.fail(f"{p['html']}: expected heading {want!r}, found {page.h1}")
            n = self.check_links(url, page)
            self.report.append(f"{p['html']}: HTTP 200, h1 {page.h1[:1]}, {n} internal links/resources resolve")
        n = 0                                        # every page as served: links and resources
        for p in self.manifest:
            if (page := self.fetch(self.url(p["html"]))[1]) is not None: n += self.check_links(self.url(p["html"]), page)
        self.report.append(f"all {len(self.manifest)} pages as served: {n} internal links/resources checked")
        for p in nbs:                                # outputs: every notebook page against its .ipynb
            static = self.fetch(self.url(p["html"]))[1]
            if static is None: continue              # missing: already reported
            if p["html"] in rendered: how, page = "chromium", rendered[p["html"]]
            elif (self.expected_outputs(p) or 0) > 0 or static.math: how, page = "chromium", self.render(self.url(p["html"]))
            else: how, page = "served html", static
            if page is None: continue                # chromium failed: already reported
            line = self.check_outputs(p, page, how)
            if how == "chromium" and page.math:      # math must be typeset by the site's own MathJax
                if not page.mathjax: self.fail(f"{p['html']}: {page.math} math element(s) not typeset by MathJax")
                line += f", math {page.math} typeset"
            self.report.append(line)
        if shots:
            self.screenshot(self.url(home["html"]), shots / "home.png")
            self.screenshot(self.url(mod["html"]), shots / f"module_{Path(mod['source']).stem}.png")
        print("\n".join(self.report))
        print(f"docs check: {len(self.failures)} failure(s), {len(rendered)} pages link-checked in Chromium, "
              f"{len(nbs)} notebook pages compared with their notebooks, {time.time() - t:.0f}s")
        return 1 if self.failures else 0

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", nargs="?", type=Path, default=DEFAULT_OUT / "html", help="the built site (default build/docs/html)")
    ap.add_argument("--shots", type=Path, help="save screenshots of the home page and the module page here")
    ap.add_argument("--module", help="the module page to check (notebook stem, doc or module name; default: the first with outputs)")
    ap.add_argument("--chromium", help="browser executable (default: $CHROMIUM or chromium on PATH)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository the site was built from (its notebooks)")
    a = ap.parse_args(argv)
    if not (a.site / MANIFEST).exists():
        print(f"no built site at {a.site} (run scripts/build_docs.py first)", file=sys.stderr); return 1
    exe = find_chromium(a.chromium)
    if not exe:
        print("no Chromium found: apt-get install chromium (or set CHROMIUM=/path/to/chrome)", file=sys.stderr); return 2
    c = Checker(a.site.resolve(), exe, root=a.root.resolve())
    try: return c.run(a.module, a.shots)
    finally: c.close()

if __name__ == "__main__": sys.exit(main())
