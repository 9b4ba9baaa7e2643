"""How big the site grows: runs generated from a real one, the site built over them, its size measured.

``python -m selfcheck.site_size --from RUN_DIR --runs 30 --runs 365`` copies
a real run's results through the model (``dataclasses.replace``, written with
``datamodel.to_json``): each copy a night of its own (its name, its commit,
its figures' samples drawn afresh around the real medians, a slow drift and a
step halfway, its comparison with the night before and its verdict decided
as the main job decides them, the real run's plots and report beside it), then builds
the site over them with the default ``--keep`` and says what it wrote. The
tests make their history the same way.
"""

from __future__ import annotations

import gzip
import random
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

from benchmarks.stats import Figure
from cli import Count, Parser

from reports.comparison.changes import compare
from reports.comparison.verdict import decide
from reports.store.arguments import RunFolder
from reports.store.model import Results, encode
from reports.store.runs import Runs, dump_json, load_results
from reports.website.build import DEFAULT_KEEP, build_site

SAMPLES = 12


def resampled(figure: Figure, scale: float, rng: random.Random) -> Figure:
    """Samples around the figure's median times ``scale`` (2% spread; 0.01 absolute for efficiencies)."""
    centre = figure.median * scale
    spread = 0.01 if figure.spread_kind == "absolute" else 0.02 * abs(centre)
    return Figure.of([centre + rng.gauss(0, spread) for _ in range(SAMPLES)], figure.unit, figure.better,
                     figure.spread_kind)


def night(results: Results, name: str, *, scale: Callable[[str], float] = lambda key: 1.0, seed: int = 0,
          commit: str | None = None, setup: Mapping | None = None) -> Results:
    """A copy of ``results`` as the run ``name``, not a smoke run: every figure drawn afresh around its median
    times ``scale(key)``; comparison, trend and verdict left for ``judge``."""
    rng = random.Random(seed)
    run = results.run
    new_setup = replace(run.setup, smoke=False, **(setup or {}))
    run = replace(run, name=name, setup=new_setup, commit=commit or run.commit)
    metrics = {}
    for key, metric in results.metrics.items():
        if metric.figure is not None:
            figure = resampled(metric.figure, scale(key), rng)
            metric = replace(metric, value=figure.median, figure=figure)
        metrics[key] = metric
    return replace(results, run=run, metrics=metrics, comparison=None, trend=(), verdict=None)


def judge(results: Results, previous: Results | None) -> Results:
    """The comparison with ``previous`` and the verdict, as the main job decides them."""
    comparison = compare(previous and previous.run.name, previous and previous.metrics, results.metrics)
    results = replace(results, comparison=comparison)
    return replace(results, verdict=decide(results, fail_on_regression=False))


def save(results: Results, runs: Runs, plots_from: Path | None = None, report: bool = False) -> Path:
    """Write the run as the main job does: its results.json from the model, the plots of the run at
    ``plots_from`` beside it, and (``report``) that run's report.md, of a real night's size though not this
    copy's (without it the site rebuilds the report from the results)."""
    files: dict[str, str | bytes] = {"results.json": dump_json(encode(results))}
    for name in [*results.plots, *(["report.md"] if report else [])] if plots_from else ():
        source = Path(plots_from) / name
        if source.is_file():
            files[name] = source.read_bytes()
    return runs.write(results.run.name, files)


def generate(source: Path, runs: Runs, nights: int, start: datetime | None = None) -> list[str]:
    """``nights`` runs made from the run at ``source``, one a day, each judged against the one before; a 20%
    step in the first gated figure halfway."""
    base = load_results(source)
    start = start or datetime(2026, 1, 1, 2, 0, tzinfo=timezone.utc)
    first = next((k for k, m in sorted(base.metrics.items()) if m.gated and m.figure is not None), None)
    previous, names = None, []
    for day in range(nights):
        name = (start + timedelta(days=day)).strftime("%Y%m%dT%H%M%SZ")
        drift = 1 + 0.01 * ((day % 7) - 3) / 3
        step = 1.2 if day >= nights // 2 else 1.0
        made = night(base, name, scale=lambda key: drift * (step if key == first else 1.0), seed=day,
                     commit=f"{day:07x}{'0' * 33}")
        made = judge(made, previous)
        save(made, runs, plots_from=source, report=True)
        previous = made
        names.append(name)
    return names


def measure(source: Path, counts: Sequence[int], keep: int = DEFAULT_KEEP) -> list[str]:
    lines = []
    for count in counts:
        with tempfile.TemporaryDirectory() as tmp:
            runs = Runs(Path(tmp) / "runs")
            generate(source, runs, count)
            started = time.monotonic()
            built = build_site(runs, Path(tmp) / "site", keep)
            seconds = time.monotonic() - started
            page, size = built.largest_page
            sizes = sorted(built.pages.values())
            history = max(v for k, v in built.pages.items()
                          if k.startswith("history/") and k != "history/index.html")
            run_page = built.pages[f"runs/{built.runs[-1]}/index.html"]
            zipped = len(gzip.compress((built.out / "index.html").read_bytes()))
            lines.append(f"{count} runs, --keep {keep}: {len(built.runs)} kept, {len(built.files)} files, "
                         f"{built.total / 1e6:.1f} MB in {seconds:.0f} s; pages {sizes[0] / 1e3:.0f}-"
                         f"{size / 1e3:.0f} kB (largest {page}); index "
                         f"{built.pages['index.html'] / 1e3:.0f} kB ({zipped / 1e3:.0f} kB gzipped), history "
                         f"page {history / 1e3:.0f} kB, a run page {run_page / 1e3:.0f} kB")
    return lines


def parser() -> Parser:
    p = Parser(prog="python -m selfcheck.site_size", description=__doc__)
    p.add_argument("--from", dest="source", type=RunFolder(), required=True, help="a real run's directory")
    p.add_argument("--runs", type=Count(1, 3650, unit="of nights"), action="append",
                   help="repeatable: how many nights (default 30, 365)")
    p.add_argument("--keep", type=Count(1, unit="of runs"), default=DEFAULT_KEEP,
                   help=f"as the site's --keep (default {DEFAULT_KEEP})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for line in measure(args.source, args.runs or [30, 365], args.keep):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
