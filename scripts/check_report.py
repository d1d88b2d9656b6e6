#!/usr/bin/env python3
"""Check a run's report page (`pace report`) in a real browser (headless Chromium), offline.

    .venv/bin/python scripts/check_report.py RUN_DIR [--query ID] [--shots build/report]

Writes the run's report into a temporary folder (the run folder is left as it is), opens it in Debian's `chromium`
(the same flags as scripts/check_docs.py: fresh profile, no network) and fails (exit 1) when
- the page does not load, or shows another number of queries or method cards than results.jsonl has;
- a filter does not work: the page is opened with the filters in its link (`#method=...`, `#label=...`,
  `#verdict=...`, `#query=...`, as `report.html` reads them) and the visible queries and cards must be exactly
  those of results.jsonl that pass them;
- the page writes to the console (an error, a warning, a log line) or loads anything (it must be self-contained).
With --shots DIR it saves a screenshot of the whole page and one of one query's cards (`--query`, default the first
query), its funnel with the gold facts marked. Exit status 2 when no Chromium is found.
"""
from __future__ import annotations
import argparse, json, shutil, subprocess, sys, tempfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_docs import CHROMIUM_FLAGS, find_chromium  # noqa: E402


class Shown(HTMLParser):
    "The visible query sections and method cards of a rendered report (an element with `hidden` is not shown)."
    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.queries, self.cards, self.shown_text, self.resources = [], [], "", []
        self._stack, self._in_shown = [], False   # per open section/div: hidden?
        self.feed(html); self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "img", "iframe", "link") and (a.get("src") or a.get("href")):
            self.resources.append(a.get("src") or a.get("href"))
        if tag not in ("section", "div", "span"): return
        hidden = "hidden" in a or any(self._stack)
        self._stack.append(hidden)
        cls = (a.get("class") or "").split()
        if tag == "section" and "query" in cls and not hidden: self.queries.append(a["id"][2:])
        if tag == "div" and "card" in cls and not hidden: self.cards.append(a.get("data-method"))
        if tag == "span" and a.get("id") == "shown": self._in_shown = True

    def handle_endtag(self, tag):
        if tag in ("section", "div", "span") and self._stack: self._stack.pop()
        if tag == "span": self._in_shown = False

    def handle_data(self, data):
        if self._in_shown: self.shown_text += data


class Check:
    def __init__(self, chromium: str, timeout: float = 90):
        self.chromium, self.timeout, self.failures = chromium, timeout, []
        self.profile = tempfile.mkdtemp(prefix="pace-report-chromium-")

    def fail(self, msg: str): self.failures.append(msg); print("FAIL", msg, flush=True)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.chromium, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
                               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000", *args],
                              capture_output=True, text=True, timeout=self.timeout)

    def console(self, r: subprocess.CompletedProcess, url: str):
        lines = [l for l in r.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
        if lines: self.fail(f"{url}: the page wrote to the console: {lines[:3]}")

    def render(self, url: str) -> Shown | None:
        r = self.run("--dump-dom", url)
        self.console(r, url)
        if r.returncode or "<html" not in r.stdout.lower():
            self.fail(f"chromium could not render {url} (exit {r.returncode}): {r.stderr.strip()[-300:]}"); return None
        return Shown(r.stdout)

    def screenshot(self, url: str, path: Path, size: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        r = self.run(f"--window-size={size}", f"--screenshot={path}", url)
        self.console(r, url)
        if r.returncode or not path.exists() or path.stat().st_size < 1000: self.fail(f"no screenshot of {url}")
        else: print(f"screenshot {path}", flush=True)


def expected(rows: list[dict], verdict, method=None, label=None, typ=None, v=None, query=None):
    "The (query ids, card methods) a filter must leave visible, in page order."
    keep = [r for r in rows if (method is None or r["method"] in method) and (v is None or verdict(r) == v)
            and (label is None or r["label"] == label) and (typ is None or str(r.get("situation_type")) == typ)
            and (query is None or r["query_id"] == query)]
    return sorted({r["query_id"] for r in keep}), Counter(r["method"] for r in keep)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a folder written by pace run")
    ap.add_argument("--query", help="the query whose cards the second screenshot shows (default: the first)")
    ap.add_argument("--method", action="append", help="the methods in that screenshot (default: all)")
    ap.add_argument("--shots", type=Path, help="save screenshots here")
    ap.add_argument("--chromium", help="browser executable (default: $CHROMIUM or chromium on PATH)")
    a = ap.parse_args(argv)
    exe = find_chromium(a.chromium)
    if not exe: print("no Chromium found: apt-get install chromium (or set CHROMIUM=/path/to/chrome)", file=sys.stderr); return 2
    from pace.eval.report import write_report, verdict
    rows = [json.loads(l) for l in (a.run_dir / "results.jsonl").read_text().splitlines() if l.strip()]
    out = Path(tempfile.mkdtemp(prefix="pace-report-"))
    c = Check(exe)
    try:
        page = write_report(a.run_dir, out=out / "report.html")
        base = page.resolve().as_uri()
        q = a.query or rows[0]["query_id"]
        m0 = rows[0]["method"]
        vs = Counter(map(verdict, rows)).most_common(1)[0][0]
        cases = [({}, {}), ({"method": m0}, {"method": {m0}}), ({"verdict": vs}, {"v": vs}),
                 ({"label": rows[0]["label"]}, {"label": rows[0]["label"]}),
                 ({"type": str(rows[0].get("situation_type"))}, {"typ": str(rows[0].get("situation_type"))}),
                 ({"query": q}, {"query": q})]
        for link, want in cases:
            frag = "&".join(f"{k}={v}" for k, v in link.items())
            url = base + (f"#{frag}" if frag else "")
            s = c.render(url)
            if s is None: continue
            qs, cards = expected(rows, verdict, **want)
            if sorted(s.queries) != qs: c.fail(f"#{frag}: {len(s.queries)} queries shown, expected {len(qs)}")
            if Counter(s.cards) != cards: c.fail(f"#{frag}: cards {dict(Counter(s.cards))}, expected {dict(cards)}")
            n_all = len({r['query_id'] for r in rows})
            if s.shown_text.strip() != f"{len(qs)} of {n_all} queries shown": c.fail(f"#{frag}: counter says {s.shown_text!r}")
            if s.resources: c.fail(f"the page loads {s.resources[:3]}")
            print(f"ok #{frag or '(no filter)'}: {len(s.queries)} queries, {len(s.cards)} cards", flush=True)
        if a.shots:
            c.screenshot(base, a.shots / "report.png", "1400,1400")
            ms = ",".join(a.method) if a.method else ""
            c.screenshot(base + f"#query={q}" + (f"&method={ms}" if ms else ""), a.shots / f"report-{q}.png", "1500,1300")
    finally:
        shutil.rmtree(out, ignore_errors=True); shutil.rmtree(c.profile, ignore_errors=True)
    if c.failures: print(f"{len(c.failures)} problem(s) in the report of {a.run_dir}", file=sys.stderr); return 1
    print(f"report of {a.run_dir}: loads, filters work, no console output")
    return 0


if __name__ == "__main__": sys.exit(main())
