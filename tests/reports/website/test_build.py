"""The site as files: what it keeps, what it lists, how big it grows, what it exports, and that a site that
cannot be written never costs the run."""

from __future__ import annotations

import html
import json
from dataclasses import replace
from pathlib import Path
import re
import shutil

import pytest

from benchmarks.busbw import bus_factor
from reports.nightly.job import add_bisection, publish_site
from reports.render.matrix import cell_text, matrix
from tests.pytest_run import ROOT
from reports.website.build import MARKER, PAGE_LIMIT, SiteError, build_site, site_beside
from reports.website.export import BENCHMARK_ACTION, NCCL_TESTS
from reports.website.matrix import failure_anchor
from selfcheck.site_size import generate
from reports.store.bisection import Bisection, Decision, Trial
from reports.store.runs import Runs, load_results

from .conftest import FAILED_TEST, KEEP, REFUSED, REGRESSED


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_the_default_runs_get_their_site_in_reports_site():
    assert site_beside(Runs()) == ROOT / "reports" / "site"
    assert site_beside(Runs(Path("/shared/ddpc-runs"))) == Path("/shared/ddpc-runs-site")


def test_the_main_job_writes_the_site_after_each_run(smoke_run):
    root = smoke_run.parent
    site = site_beside(Runs(root))
    assert site == root.parent / f"{root.name}-site", site
    listed = json.loads((site / MARKER).read_text())
    assert listed["runs"] == [smoke_run.name], listed
    index = (site / "index.html").read_text()
    assert "Latest run: " in index and smoke_run.name in index, index[:2000]


def test_each_setup_keeps_its_last_runs_and_smoke_runs_are_never_drawn(site, nightly):
    kept = json.loads((site.out / MARKER).read_text())["runs"]
    expected = sorted([*nightly.smoke, *nightly.nccl, *nightly.gloo[-KEEP:]])
    assert kept == expected, f"got {kept}, but should keep the last {KEEP} of each setup: {expected}"
    assert not (site.out / "runs" / nightly.gloo[0]).exists(), "a run past --keep should have no page"
    histories = sorted(p.name for p in (site.out / "history").glob("*.html") if p.name != "index.html")
    assert len(histories) == 2, f"got history pages {histories}, but should be one per setup but smoke's"
    drawn = set(re.findall(r'data-run="([^"]+)"', "".join((site.out / "history" / h).read_text()
                                                         for h in histories)))
    assert drawn == {*nightly.nccl, *nightly.gloo[-KEEP:]}, f"drawn: {sorted(drawn)}"


def test_a_run_that_cannot_be_read_is_listed_with_why_and_breaks_nothing(site, nightly):
    assert site.unreadable and site.unreadable[0].name == nightly.corrupt, site.unreadable
    index = text_of((site.out / "index.html").read_text())
    assert "Runs that cannot be read: 1" in index and nightly.corrupt in index, index[:1500]
    assert "should be JSON" in index, "the index should say why the run cannot be read"
    assert f"Latest run: {nightly.latest}" in index, "the newest readable run is the latest"


def test_every_page_stays_under_the_stated_size(site):
    over = {page: size for page, size in site.pages.items() if size > PAGE_LIMIT}
    assert not over, f"pages over {PAGE_LIMIT} bytes: {over}"


def test_the_environment_diff_names_what_changed(site, nightly):
    page = (site.out / "runs" / nightly.latest / "index.html").read_text()
    rows = dict(re.findall(r'<tr class="changed"><td>([^<]+)</td><td>([^<]*)</td>', page))
    assert rows.get("torch") == "2.13.0+cpu", f"torch moved 2.13.0+cpu -> 2.14.0+cpu: got changed rows {rows}"
    assert rows.get("NCCL_ALGO") == "Ring", f"NCCL_ALGO was set the night before only: got {rows}"
    assert rows.get("project commit") == f"{0xa0 + 3:040x}", rows
    assert "python -m reports --smoke" in page and f"git checkout {0xa0 + 4:040x}" in page, (
        "the page should give the command and the commit that reproduce the run")


def test_the_html_matrix_says_what_the_markdown_matrix_says_and_links_the_failing_checks(site, nightly):
    results = load_results(nightly.root / nightly.latest)
    grid = matrix(results.conformance)
    index = (site.out / "index.html").read_text()
    table = index[index.index('class="matrix"'):index.index("</table>", index.index('class="matrix"'))]
    cells = [text_of(c).strip() for c in re.findall(r'<td class="cell[^"]*"[^>]*>(.*?)</td>', table)]
    expected = [cell_text(c) for row in grid.rows for c in row.cells.values()]
    assert [re.sub(r"^\S+ | \[\d+\]$", "", c) for c in cells] == expected, (cells, expected)
    anchor = failure_anchor(grid.rows[0].label, "layout")
    assert f'href="runs/{nightly.latest}/index.html#{anchor}"' in table, "FAIL should link to the checks"
    run_page = (site.out / "runs" / nightly.latest / "index.html").read_text()
    assert f'id="{anchor}"' in run_page and FAILED_TEST in run_page, "the run's page should list the check"


def test_the_gate_shows_the_regression_first_with_its_figures(site, nightly):
    index = text_of((site.out / "index.html").read_text())
    gate = index[index.index("The gate against the previous run"):index.index("History Setup:")]
    assert "Regressions of gated metrics: 2" in gate and REGRESSED in gate, gate[:1500]
    assert "conformance/suites/layout/test_golden.py/reference/failed 0 1" in gate, gate[:1500]
    assert gate.index("Regressions of gated metrics") < gate.index("Improvements"), gate[:800]
    assert f"Against {nightly.gloo[-2]}" in gate, gate[:600]


def test_exports_follow_the_dashboards_formats(site, nightly):
    """github-action-benchmark's custom lists (the interval as the range) and nccl-tests' JSON columns; busbw
    over algbw is nccl-tests' bus factor, 2(n-1)/n for all-reduce and (n-1)/n for the others (to the 6 digits
    a figure keeps)."""
    folder = site.out / "runs" / nightly.latest
    results = load_results(nightly.root / nightly.latest)
    smaller = json.loads((folder / BENCHMARK_ACTION["lower"][1]).read_text())
    bigger = json.loads((folder / BENCHMARK_ACTION["higher"][1]).read_text())
    entry = next(e for e in smaller if e["name"].startswith(REGRESSED + " ["))
    low, high = results.metrics[REGRESSED].figure.interval
    assert entry["value"] == results.metrics[REGRESSED].value and entry["unit"] == "x", entry
    assert entry["range"] == f"[{low:.6g}, {high:.6g}]" and "95% interval" in entry["extra"], entry
    assert all(set(e) <= {"name", "unit", "value", "range", "extra"} for e in smaller + bigger)
    gated = {k for k, m in results.metrics.items() if m.gated}
    assert {e["name"].split(" [")[0] for e in smaller + bigger} == gated
    nccl = json.loads((folder / NCCL_TESTS).read_text())
    for doc in nccl["tests"]:
        for row in doc["results"]:
            assert {"size", "count", "type", "redop", "root", "out_of_place", "in_place"} <= set(row), row
            collective = row["experiment_name"].split("_perf")[0]
            for side in (row["out_of_place"], row["in_place"]):
                if side:
                    assert set(side) == {"time", "alg_bw", "bus_bw", "nwrong"}, side
                    factor = bus_factor(collective, doc["config"]["ranks"])
                    expected = pytest.approx(side["alg_bw"] * factor, rel=1e-5)
                    assert side["bus_bw"] == expected, (collective, side)
    assert len(nccl["tests"]) == len({(r.collective, r.policy) for r in results.benchmarks.busbw})


def test_the_run_page_shows_the_reproduction_and_the_compositions_once(site, nightly):
    """Above the report it embeds; the report leaves them out there."""
    name = nightly.gloo[-1]
    run = load_results(nightly.root / name).run
    page = text_of((site.out / "runs" / name / "index.html").read_text())
    assert run.command and page.count(run.command[-1]) == 1, "the command's last word, once"
    heading = "Compositions of the configuration space"
    assert page.count(heading) == 1, f"{heading!r}: got {page.count(heading)} times, but should be once"


def test_a_refused_figure_is_a_gap_that_says_why(site, nightly):
    history = next(p for p in (site.out / "history").glob("*.html")
                   if p.name != "index.html" and nightly.gloo[-1] in p.read_text())
    page = history.read_text()
    chart = page[page.index(f'data-key="{REFUSED}"'):]
    chart = chart[:chart.index("</svg>")]
    gap = re.search(rf'<g class="gap" data-run="{nightly.gloo[2]}"[^>]*><title>(.*?)</title>', chart, re.S)
    assert gap and "refused: measurement failure: planted" in gap.group(1), chart[:3000]


def test_a_folder_that_is_not_a_site_is_never_overwritten(tmp_path, nightly):
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    with pytest.raises(SiteError, match="--out: got .*mine, which holds something other than a site"):
        build_site(Runs(nightly.root), keep)
    assert (keep / "notes.txt").read_text() == "mine"
    with pytest.raises(SiteError, match="inside the runs directory"):
        build_site(Runs(nightly.root), nightly.root / "site")


def test_a_site_that_cannot_be_written_is_a_warning_and_the_run_stands(tmp_path, capsys):
    root = tmp_path / "runs"
    root.mkdir()
    blocked = site_beside(Runs(root))
    blocked.mkdir()
    (blocked / "other.txt").write_text("not a site")
    publish_site(Runs(root))
    assert "warning: the site was not written (SiteError: --out:" in capsys.readouterr().err


def test_the_measured_nights_show_their_step_where_it_began(real_runs, tmp_path):
    """``python -m selfcheck.site_size``'s nights (a 20% step in the first gated figure halfway) in a site: its
    chart marks the step at the night it began, and only there."""
    pytest.importorskip("ruptures", reason="the trend finds its change points with ruptures")
    source = real_runs / sorted(p.name for p in real_runs.iterdir() if p.is_dir())[-1]
    names = generate(source, Runs(tmp_path / "runs"), 6)
    built = build_site(Runs(tmp_path / "runs"), tmp_path / "site")
    first = min(k for k, m in load_results(source).metrics.items() if m.gated and m.figure is not None)
    page = next(built.out.glob("history/*-*.html")).read_text()
    chart = page[page.index(f'data-key="{first}"'):]
    chart = chart[:chart.index("</svg>")]
    assert re.findall(r'<g class="step" data-run="([^"]+)"', chart) == [names[3]], chart[:2000]
    assert "step: regression begins here" in chart or "step: improvement begins here" in chart


def test_a_nights_bisection_is_on_its_page(tmp_path, nightly):
    """Added to the written run as the job adds it, which keeps everything else the run holds."""
    root = tmp_path / "runs"
    shutil.copytree(nightly.root, root)
    names = nightly.gloo
    decision = Decision("moved", 1.101, (1.08, 1.12), 0.0002, ((1.0, 1.01), (0.99, 1.0)), ((1.1, 1.11), (1.09, 1.1)))
    trials = (Trial("b" * 40, "the bad end", decision, 1, 20.0),
              Trial("c" * 40, "planted: does not import", None, 1, 5.0, "exit 1, no run written: ImportError"),
              Trial("d" * 40, "planted: 10% slower", decision, 1, 20.0))
    found = Bisection("a" * 40, "b" * 40, "step_time/reference/ratio_to_torch_ddp", 0.05, "found", "d" * 40,
                      "planted: 10% slower", trials=trials, command=("python", "-m", "reports.bisect"))
    store = Runs(root)
    before = store.load(names[-1])
    add_bisection(root / names[-1], found)
    after = store.load(names[-1])
    assert after.bisection == found and after.plots and replace(after, bisection=None) == before, (
        "the bisection added, and nothing else changed")
    assert "## Bisection: which commit moved it" in (root / names[-1] / "report.md").read_text()
    built = build_site(store, tmp_path / "site")
    page = text_of((built.out / "runs" / names[-1] / "index.html").read_text())
    assert page.count("Bisection: which commit moved it") == 1, "shown above the report, and not again in it"
    assert f"first moved at {'d' * 12} planted: 10% slower" in page
    assert "exit 1, no run written: ImportError" in page and "3 benchmark runs of the commits measured" in page, page[:3000]
    assert "Bisection" not in text_of((built.out / "runs" / names[-2] / "index.html").read_text())
