"""Building the site: every run read through the store, the last runs of each setup kept, every page written
into a fresh folder that then takes the old one's place (a reader never sees half a site).

The site holds, for the last ``keep`` runs of each setup (smoke runs have
their pages but are never drawn): ``index.html`` (the latest run),
``history/`` (one page per setup), ``runs.html``, and ``runs/<run>/`` (its
page with the report the job wrote, rebuilt from the results where it is
missing; its plots but the trend's, which the history pages draw; its
exports); ``site.css``, ``site.js`` and ``favicon.svg`` are the site's
own; ``site.json`` says what was built from what. It needs no server and
fetches nothing: it opens from disk as it does from any static host.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Sequence

from ..comparison.series import by_setup
from ..render.trend import PLOT_PREFIX
from ..store.model import Results, Setup
from ..store.runs import DEFAULT_ROOT, Runs, Unreadable
from .context import Context, setup_page_name
from .export import export_files
from .history import histories
from .history_page import history_index, history_page
from .index_page import index_page, runs_page
from .run_page import run_page

DEFAULT_KEEP = 120
"""Runs of each setup the site keeps: four months of nights."""
PAGE_LIMIT = 2_000_000
"""Bytes no page of the site passes at the default --keep (docs/measurements/benchmarks.md measures it)."""
MARKER = "site.json"
GENERATOR = "python -m reports.website"
DEFAULT_SITE = DEFAULT_ROOT.parent / "site"
STATIC = Path(__file__).resolve().parent / "static"
ASSETS = ("site.css", "site.js", "favicon.svg")
"""The site's own files, from static/: its style, its one script, its icon (which a browser asks a host for)."""


class SiteError(ValueError):
    """A site that cannot be written where asked."""


@dataclass
class Built:
    """What a build wrote: every file with its size in bytes, the runs kept, the runs that cannot be read."""

    out: Path
    files: dict[str, int] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    unreadable: tuple[Unreadable, ...] = ()

    @property
    def pages(self) -> dict[str, int]:
        return {name: size for name, size in self.files.items() if name.endswith(".html")}

    @property
    def total(self) -> int:
        return sum(self.files.values())

    @property
    def largest_page(self) -> tuple[str, int]:
        return max(self.pages.items(), key=lambda item: item[1])


def site_beside(store: Runs) -> Path:
    """Where the site of a runs directory goes: ``reports/site`` for the default one, else beside it, named
    after it (/shared/ddpc-runs -> /shared/ddpc-runs-site). Never inside it, where a folder reads as a run."""
    root = store.root.absolute()
    if root == DEFAULT_ROOT.absolute():
        return DEFAULT_SITE
    return root.parent / f"{root.name}-site"


def kept_runs(runs: Sequence[Results], keep: int) -> list[Results]:
    """The last ``keep`` runs of each setup, oldest first."""
    kept = [run for group in by_setup(runs).values() for run in group[-keep:]]
    return sorted(kept, key=lambda run: run.run.name)


def previous_run(results: Results, runs: Sequence[Results]) -> Results | None:
    """The run this one was compared with, else the newest earlier run of its setup."""
    against = results.comparison.against if results.comparison else None
    earlier = [r for r in runs if r.run.name < results.run.name and r.run.setup == results.run.setup]
    named = [r for r in earlier if r.run.name == against]
    return (named or earlier or [None])[-1]


def _check_out(store: Runs, out: Path) -> None:
    root, out = store.root.absolute(), Path(out).absolute()
    if out == root or root in out.parents:
        raise SiteError(f"--out: got {out}, inside the runs directory {root}, but should be outside it (a "
                        "folder there reads as a run)")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise SiteError(f"--out: got {out}, which holds something other than a site (no {MARKER}), but "
                        "should be a new or empty folder, or a site written by `python -m reports.website`")


def _write(folder: Path, rel: str, content: str | bytes, built: Built) -> None:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(data)
    built.files[rel] = len(data)


def _plots(store: Runs, results: Results) -> dict[str, bytes]:
    """The run's plots, read through the store; not the trend's, which the history pages draw (a third of a run's
    plots, and each a picture of the past)."""
    return {rel: data for rel, data in store.plots(results).items()
            if not PurePosixPath(rel).name.startswith(PLOT_PREFIX)}


def _write_site(folder: Path, store: Runs, runs: Sequence[Results], kept: list[Results],
                unreadable: Sequence[Unreadable], built: Built, keep: int) -> None:
    setup_histories = histories(kept)
    pages: dict[Setup, str] = {}
    for h in setup_histories:
        pages[h.setup] = setup_page_name(h.setup.label(), set(pages.values()))
    built_at = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    ctx = Context(built_at, frozenset(r.run.name for r in kept), pages)
    for asset in ASSETS:
        _write(folder, asset, (STATIC / asset).read_bytes(), built)
    for results in kept:
        name = results.run.name
        plots = _plots(store, results)
        for plot, data in plots.items():
            _write(folder, f"runs/{name}/{plot}", data, built)
        for file, text in export_files(results).items():
            _write(folder, f"runs/{name}/{file}", text, built)
        _write(folder, f"runs/{name}/index.html", run_page(results, previous_run(results, runs), list(plots), ctx),
               built)
    for h in setup_histories:
        _write(folder, f"history/{pages[h.setup]}", history_page(h, ctx), built)
    _write(folder, "history/index.html", history_index(setup_histories, ctx), built)
    _write(folder, "runs.html", runs_page(kept, ctx), built)
    _write(folder, "index.html", index_page(kept, setup_histories, unreadable, ctx), built)
    manifest = {"generator": GENERATOR, "built": ctx.built, "keep": keep, "runs": [r.run.name for r in kept],
                "setups": {setup.label(): page for setup, page in pages.items()},
                "unreadable": [{"run": u.name, "why": u.why} for u in unreadable]}
    _write(folder, MARKER, json.dumps(manifest, indent=1), built)


def build_site(store: Runs, out: Path, keep: int = DEFAULT_KEEP) -> Built:
    """The site of the runs in ``store``, written to ``out`` (replacing the site there)."""
    if keep < 1:
        raise SiteError(f"--keep: got {keep}, but should be at least 1")
    _check_out(store, out)
    out = Path(out).absolute()
    reading = store.read()
    kept = kept_runs(reading.runs, keep)
    built = Built(out, runs=[r.run.name for r in kept], unreadable=reading.unreadable)
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(fresh, ignore_errors=True)
    try:
        _write_site(fresh, store, reading.runs, kept, reading.unreadable, built, keep)
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            out.rename(old)
            fresh.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            fresh.rename(out)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return built
