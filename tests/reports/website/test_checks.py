"""Each check of the browser tests catches what it is there for: a site broken on purpose (a file gone, a
chart point dropped, a script that throws) makes it report the breakage."""

from __future__ import annotations

import re
import shutil

from .checks import broken_links, chart_problems, charts, open_page, page_problems
from .conftest import KEEP


def test_a_broken_link_is_caught(site, nightly, browser, tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(site.out, broken)
    run = broken / "runs" / nightly.latest
    plot = next(run.glob("*.png"))
    plot.unlink()
    (broken / "history" / "index.html").unlink()
    found = broken_links(broken)
    assert any(f"<img> {plot.name} leads to no file" in p for p in found), found
    assert any("history/index.html leads to no file" in p for p in found), found
    assert any(plot.name in p for p in page_problems(browser, run / "index.html")), "the browser should too"


def test_a_link_to_a_missing_anchor_is_caught(site, tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(site.out, broken)
    index = broken / "index.html"
    index.write_text(index.read_text().replace('id="gate"', 'id="gone"'))
    (broken / "extra.html").write_text('<a href="index.html#gate">x</a><a href="https://example.com/">y</a>')
    found = broken_links(broken)
    assert any("leads to no id 'gate'" in p for p in found), found
    assert any("reaches outside the site" in p for p in found), found


def test_a_chart_with_a_missing_point_is_caught(site, nightly, browser, tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(site.out, broken)
    history = next(p for p in (broken / "history").glob("*.html")
                   if p.name != "index.html" and nightly.latest in p.read_text())
    dropped = nightly.gloo[-2]
    text = history.read_text()
    point = rf'<a href="[^"]*"><g class="pt" data-run="{dropped}".*?</g></a>'
    text, count = re.subn(point, "", text, count=1, flags=re.S)
    assert count == 1, "the point to drop should be there"
    history.write_text(text)
    page, _ = open_page(browser, history.as_uri())
    found = charts(page)
    page.close()
    problems = chart_problems(found, list(nightly.gloo[-KEEP:]))
    assert any(f"run {dropped} appears 0 times" in p for p in problems), problems


def test_a_javascript_error_is_caught(site, browser, tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(site.out, broken)
    index = broken / "index.html"
    index.write_text(index.read_text().replace("</body>", "<script>undefined_fn()</script></body>"))
    problems = page_problems(browser, index)
    assert any("undefined_fn" in p for p in problems), problems
