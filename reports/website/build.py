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
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Sequence

from ..comparison.series import by_setup
from ..render.trend import PLOT_PREFIX
from ..store.model import Results
from ..store.runs import SkippedRunWarning, readable_runs, run_names
from ..store.writer import DEFAULT_ROOT
from .context import Context, setup_page_name
from .export import export_files
from .history import histories
from .history_page import history_index, history_page
from .index_page import index_page, runs_page
from .run_page import run_page

Run = tuple[str, Results]
DEFAULT_KEEP = 120
"""Runs of each setup the site keeps: four months of nights."""
PAGE_LIMIT = 2_000_000
"""Bytes no page of the site passes at the default --keep (docs/nightly.md measures it)."""
MARKER = "site.json"
GENERATOR = "python -m reports.site"
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
    unreadable: list[tuple[str, str]] = field(default_factory=list)

    @property
    def pages(self) -> dict[str, int]:
        return {name: size for name, size in self.files.items() if name.endswith(".html")}

    @property
    def total(self) -> int:
        return sum(self.files.values())

    @property
    def largest_page(self) -> tuple[str, int]:
        return max(self.pages.items(), key=lambda item: item[1])


def site_beside(runs_root: Path) -> Path:
    """Where the site of a runs directory goes: ``reports/site`` for the default one, else beside it, named
    after it (/shared/ddpc-runs -> /shared/ddpc-runs-site). Never inside it, where a folder reads as a run."""
    root = Path(runs_root).absolute()
    if root == DEFAULT_ROOT.absolute():
        return DEFAULT_SITE
    return root.parent / f"{root.name}-site"


def read_runs(root: Path) -> tuple[list[Run], list[tuple[str, str]]]:
    """Every readable run, oldest first, and every run that cannot be read, with why."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedRunWarning)
        runs = readable_runs(root)
    for w in caught:
        if not issubclass(w.category, SkippedRunWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    reasons = [str(w.message) for w in caught if issubclass(w.category, SkippedRunWarning)]
    read = {name for name, _ in runs}
    unreadable = []
    for name in run_names(root):
        if name not in read:
            why = next((r.removeprefix(f"skipped run {name}: ") for r in reasons
                        if r.startswith(f"skipped run {name}: ")), "cannot be read")
            unreadable.append((name, why))
    return runs, unreadable


def kept_runs(runs: Sequence[Run], keep: int) -> list[Run]:
    """The last ``keep`` runs of each setup, oldest first."""
    kept = [run for group in by_setup(runs).values() for run in group[-keep:]]
    return sorted(kept, key=lambda run: run[0])


def previous_run(name: str, results: Results, runs: Sequence[Run]) -> Run | None:
    """The run this one was compared with, else the newest earlier run of its setup."""
    against = results.comparison.against if results.comparison else None
    earlier = [(n, r) for n, r in runs if n < name and r.run.setup == results.run.setup]
    named = [run for run in earlier if run[0] == against]
    return (named or earlier or [None])[-1]


def _check_out(root: Path, out: Path) -> None:
    root, out = Path(root).absolute(), Path(out).absolute()
    if out == root or root in out.parents:
        raise SiteError(f"--out: got {out}, inside the runs directory {root}, but should be outside it (a "
                        "folder there reads as a run)")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise SiteError(f"--out: got {out}, which holds something other than a site (no {MARKER}), but "
                        "should be a new or empty folder, or a site written by `python -m reports.site`")


def _write(folder: Path, rel: str, content: str | bytes, built: Built) -> None:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(data)
    built.files[rel] = len(data)


def _plots(root: Path, name: str, results: Results) -> list[str]:
    """The run's plots that are on disk, as safe relative paths; not the trend's, which the history pages draw
    (a third of a run's plots, and each a picture of the past)."""
    found = []
    for plot in results.plots:
        rel = PurePosixPath(plot)
        if rel.name.startswith(PLOT_PREFIX):
            continue
        if not rel.is_absolute() and ".." not in rel.parts and (Path(root) / name / rel).is_file():
            found.append(rel.as_posix())
    return found


def _write_site(folder: Path, root: Path, runs: list[Run], kept: list[Run], unreadable: list[tuple[str, str]],
                built: Built, keep: int) -> None:
    setup_histories = histories(kept)
    pages: dict[str, str] = {}
    for h in setup_histories:
        pages[h.setup] = setup_page_name(h.setup, set(pages.values()))
    built_at = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    ctx = Context(built_at, frozenset(n for n, _ in kept), pages)
    for asset in ASSETS:
        _write(folder, asset, (STATIC / asset).read_bytes(), built)
    for name, results in kept:
        plots = _plots(root, name, results)
        for plot in plots:
            _write(folder, f"runs/{name}/{plot}", (Path(root) / name / plot).read_bytes(), built)
        for file, text in export_files(results).items():
            _write(folder, f"runs/{name}/{file}", text, built)
        report = Path(root) / name / "report.md"
        _write(folder, f"runs/{name}/index.html",
               run_page(name, results, previous_run(name, results, runs),
                        report.read_text() if report.is_file() else None, plots, ctx), built)
    for h in setup_histories:
        _write(folder, f"history/{pages[h.setup]}", history_page(h, ctx), built)
    _write(folder, "history/index.html", history_index(setup_histories, ctx), built)
    _write(folder, "runs.html", runs_page(kept, ctx), built)
    _write(folder, "index.html", index_page(kept, setup_histories, unreadable, ctx), built)
    manifest = {"generator": GENERATOR, "built": ctx.built, "keep": keep, "runs": [n for n, _ in kept],
                "setups": pages, "unreadable": [{"run": n, "why": w} for n, w in unreadable]}
    _write(folder, MARKER, json.dumps(manifest, indent=1), built)


def build_site(root: Path, out: Path, keep: int = DEFAULT_KEEP) -> Built:
    """The site of the runs under ``root``, written to ``out`` (replacing the site there)."""
    if keep < 1:
        raise SiteError(f"--keep: got {keep}, but should be at least 1")
    _check_out(root, out)
    out = Path(out).absolute()
    runs, unreadable = read_runs(root)
    kept = kept_runs(runs, keep)
    built = Built(out, runs=[n for n, _ in kept], unreadable=unreadable)
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(fresh, ignore_errors=True)
    try:
        _write_site(fresh, root, runs, kept, unreadable, built, keep)
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
