"""What a person would find wrong with a built site, as checks: a link or an image that leads nowhere, a page
that logs an error or fails a request, a chart that lacks a run. The browser checks drive Debian's chromium
through Playwright; each check is proven by a site broken on purpose (test_checks.py)."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

CHROMIUM = Path(os.environ.get("DDPC_CHROMIUM", "/usr/bin/chromium"))
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run"]
REFERENCES = {"a": "href", "img": "src", "link": "href", "script": "src"}


class _Page(HTMLParser):
    """A page's ids and every reference it makes (the element, the attribute, the value)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.references: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"])
        attribute = REFERENCES.get(tag)
        if attribute and found.get(attribute):
            self.references.append((tag, found[attribute]))


def parsed(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


def pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def broken_links(site: Path) -> list[str]:
    """Every reference of every page that leads out of the folder, to the network, to no file or to no id."""
    site = site.resolve()
    cache: dict[Path, _Page] = {}

    def page_of(path: Path) -> _Page:
        if path not in cache:
            cache[path] = parsed(path)
        return cache[path]

    problems = []
    for path in pages(site):
        for tag, value in page_of(path).references:
            where = f"{path.relative_to(site)}: <{tag}> {value}"
            parts = urlsplit(value)
            if parts.scheme or parts.netloc:
                problems.append(f"{where} reaches outside the site")
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if site not in target.parents and target != site:
                problems.append(f"{where} leads outside the site's folder")
            elif not target.is_file():
                problems.append(f"{where} leads to no file")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in page_of(target).ids:
                problems.append(f"{where} leads to no id {parts.fragment!r}")
    return problems


def launch_browser():
    """(playwright, browser), or a skip that says what is missing."""
    if not CHROMIUM.is_file():
        pytest.skip(f"no chromium at {CHROMIUM}: `apt-get install chromium` (or set DDPC_CHROMIUM) to run "
                    "the browser tests")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: `pip install -r requirements.txt` to run the browser tests")
    playwright = sync_playwright().start()
    return playwright, playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)


def open_page(browser, url: str, width: int = 1280, height: int = 900):
    """A page loaded from ``url`` and every problem it met: console errors, uncaught exceptions, failed
    requests."""
    page = browser.new_page(viewport={"width": width, "height": height})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console error: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed request: {r.url} ({r.failure})"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(url, wait_until="load")
    return page, problems


def page_problems(browser, path: Path) -> list[str]:
    """What loading the page from file:// went wrong, with images that did not load."""
    page, problems = open_page(browser, path.resolve().as_uri())
    broken = page.eval_on_selector_all("img", "els => els.filter(i => !(i.complete && i.naturalWidth > 0))"
                                              ".map(i => i.getAttribute('src'))")
    problems += [f"image did not load: {src}" for src in broken]
    page.close()
    return problems


def charts(page) -> list[dict]:
    """Each chart on the page: its key, its slot count, the runs with a point and the runs with a gap."""
    return page.eval_on_selector_all("svg.chart", """els => els.map(e => ({
        key: e.dataset.key, slots: Number(e.dataset.slots),
        points: [...e.querySelectorAll('.pt')].map(p => p.dataset.run),
        gaps: [...e.querySelectorAll('.gap')].map(p => p.dataset.run)}))""")


def chart_problems(found: list[dict], runs: list[str]) -> list[str]:
    """Every chart should hold each of ``runs`` once, as a point or a gap, in order, and nothing else."""
    problems = []
    for chart in found:
        held = chart["points"] + chart["gaps"]
        for run in runs:
            if held.count(run) != 1:
                problems.append(f"chart {chart['key']}: run {run} appears {held.count(run)} times, but "
                                "should once (a point or a gap)")
        extra = sorted(set(held) - set(runs))
        if extra:
            problems.append(f"chart {chart['key']}: got runs {extra}, which the site does not keep for it")
        if chart["slots"] != len(runs):
            problems.append(f"chart {chart['key']}: got {chart['slots']} slots, but should be {len(runs)}")
    if not found:
        problems.append("no chart on the page")
    return problems
