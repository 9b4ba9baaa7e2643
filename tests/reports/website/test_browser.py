"""The site as a person sees it, in a real browser (Debian's chromium, driven by Playwright, from file://):
every page loads clean, every link and image resolves, each chart holds each kept run, hover tells the
interval and the commit, the index shows the planted regression, and the layout holds at a laptop's width and
a phone's (the screenshots are written for CI to keep, and to look at)."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

from reports.store.runs import load_results

from .checks import broken_links, chart_problems, charts, open_page, page_problems, pages
from .conftest import KEEP, REGRESSED

WIDTHS = {"laptop": 1280, "phone": 390}


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        """Each request goes unlogged."""


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    """Where the screenshots go: $DDPC_ARTIFACTS/site-screenshots when set (CI keeps it), else a temporary
    folder."""
    artifacts = os.environ.get("DDPC_ARTIFACTS")
    if not artifacts:
        return tmp_path_factory.mktemp("site-screenshots")
    folder = Path(artifacts) / "site-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def history_page_of(site, run: str) -> Path:
    return next(p for p in (site.out / "history").glob("*.html") if p.name != "index.html" and
                f'data-run="{run}"' in p.read_text())


def test_every_page_loads_from_disk_with_no_error_and_no_failed_request(site, browser):
    found = {p.relative_to(site.out).as_posix(): page_problems(browser, p) for p in pages(site.out)}
    assert len(found) >= 10, sorted(found)
    assert not any(found.values()), {page: problems for page, problems in found.items() if problems}


def test_pages_load_over_http_as_from_disk(site, nightly, browser):
    """Any static host serves it: over http:// the pages fetch nothing that fails either."""
    handler = functools.partial(QuietHandler, directory=str(site.out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        for path in ("index.html", f"runs/{nightly.latest}/index.html",
                     history_page_of(site, nightly.latest).relative_to(site.out).as_posix()):
            page, problems = open_page(browser, f"{base}/{path}")
            page.close()
            assert not problems, (path, problems)
    finally:
        server.shutdown()
        server.server_close()


def test_every_link_and_image_resolves(site):
    assert broken_links(site.out) == []


def test_each_history_chart_holds_each_kept_run_once(site, nightly, browser):
    for runs in (nightly.gloo[-KEEP:], nightly.nccl):
        page, problems = open_page(browser, history_page_of(site, runs[-1]).as_uri())
        found = charts(page)
        page.close()
        assert chart_problems(found, list(runs)) == [], chart_problems(found, list(runs))
        assert not problems, problems
        for chart in found:
            measured = [r for r in runs if chart["key"] in load_results(nightly.root / r).metrics]
            assert chart["points"] == measured, (chart["key"], chart["points"], measured)


def test_hovering_a_point_shows_its_interval_and_commit(site, nightly, browser):
    page, problems = open_page(browser, history_page_of(site, nightly.latest).as_uri())
    point = page.locator(f'figure[data-key="{REGRESSED}"] g.pt[data-run="{nightly.latest}"]')
    point.hover()
    tip = page.locator("#tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    page.close()
    figure = load_results(nightly.root / nightly.latest).metrics[REGRESSED].figure
    low, high = figure.interval
    assert f"95% interval [{low:.4g}, {high:.4g}]" in text, text
    assert f"commit {(0xa0 + 4):040x}"[:19] in text and "gate: regression" in text, text
    assert not problems, problems


def test_the_index_shows_the_planted_regression(site, nightly, browser):
    page, problems = open_page(browser, (site.out / "index.html").as_uri())
    verdict = page.locator(".verdict").inner_text()
    regressions = page.locator("tr.row-regression").all_inner_texts()
    page.close()
    assert "FAIL" in verdict and f"gated regressions against {nightly.gloo[-2]}: 2" in verdict, verdict
    assert any(REGRESSED in row and "regression" in row for row in regressions), regressions
    assert not problems, problems


@pytest.mark.parametrize("width", WIDTHS)
def test_the_layout_holds_at_a_laptops_width_and_a_phones(site, nightly, browser, screenshots, width):
    """Nothing wider than the screen but the tables' own scrolling boxes; screenshots of the index, a run's
    page and a history page."""
    shown = {"index": site.out / "index.html", "run": site.out / "runs" / nightly.latest / "index.html",
             "history": history_page_of(site, nightly.latest)}
    for name, path in shown.items():
        page, problems = open_page(browser, path.as_uri(), width=WIDTHS[width], height=1000)
        overflow = page.evaluate("document.documentElement.scrollWidth")
        page.screenshot(path=str(screenshots / f"{name}-{width}.png"), full_page=name != "run")
        page.close()
        assert overflow <= WIDTHS[width], f"{name} at {WIDTHS[width]} px: the page is {overflow} px wide"
        assert not problems, problems
    assert all((screenshots / f"{name}-{width}.png").stat().st_size > 10_000 for name in shown)
