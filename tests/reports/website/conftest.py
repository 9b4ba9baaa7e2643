"""A site built from real runs of the project, and from copies of them edited through the model: a history of
two setups, a refused figure, a planted regression and a planted failing check, and a run that cannot be
read."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from benchmarks.measurable import FAILURE, Refusal
from benchmarks.registry import Metric
from reports.conformance.families import FamilyTally
from reports.conformance.records import Failure
from reports.website.build import Built, build_site
from selfcheck.site_size import judge, night, save
from reports.store.model import Results
from reports.store.runs import Runs, load_results

from .checks import launch_browser

KEEP = 4
REGRESSED = "step_time/reference/ratio_to_torch_ddp"
REFUSED = "padding_ratio/all_reduce/padded"
NCCL = {"backend": "nccl", "tensors": "cuda", "world_size": 8, "devices": ("8 x NVIDIA H100 80GB HBM3",)}
FAILED_TEST = "suites/layout/test_golden.py::test_planted_failure"


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory, smoke_run) -> Path:
    """Two smoke runs in one runs root: the session's run of the main job, and the same written again an hour
    later through the model (with its plots and report), as a second night of the same code would be."""
    root = tmp_path_factory.mktemp("nightly") / "runs"
    shutil.copytree(smoke_run, root / smoke_run.name)
    first = load_results(smoke_run)
    later = (datetime.strptime(smoke_run.name[:16], "%Y%m%dT%H%M%SZ") + timedelta(hours=1)).strftime("%Y%m%dT%H%M%SZ")
    save(replace(first, run=replace(first.run, name=later)), Runs(root), smoke_run, report=True)
    return root


@dataclass(frozen=True)
class Nightly:
    root: Path
    smoke: tuple[str, ...]
    gloo: tuple[str, ...]
    """Nights of the real runs' setup, not smoke: the third has a refused figure, the last a planted
    regression and a failing check, and its node a newer torch and one NCCL_* variable less."""
    nccl: tuple[str, ...]
    corrupt: str

    @property
    def latest(self) -> str:
        return self.gloo[-1]


def refused(results: Results) -> Results:
    """The all-reduce's padded-to-unpadded ratio at the largest size, in place (a gated figure) refused, as
    the benchmark refuses a figure."""
    refusal = Refusal(FAILURE, "planted: the ratio's denominator is within its noise", "more rounds")
    largest = max(r.requested_count for r in results.benchmarks.busbw)
    cell = ("all_reduce", "padded", "in-place", largest)
    busbw = tuple(replace(r, effective_ratio_to_unpadded=None, refused=refusal)
                  if (r.collective, r.policy, r.placement, r.requested_count) == cell else r
                  for r in results.benchmarks.busbw)
    metrics = {k: m for k, m in results.metrics.items() if k != REFUSED}
    return replace(results, benchmarks=replace(results.benchmarks, busbw=busbw), metrics=metrics)


def failing(results: Results) -> Results:
    """One check of the golden suite failing."""
    suite = results.conformance[0]
    layout = suite.families["layout"]
    suite = replace(suite, passed=suite.passed - 1, failed=1, failed_ids=(FAILED_TEST,),
                    failures=(Failure(FAILED_TEST, "got 3, but should be 4"),),
                    families={**suite.families, "layout": FamilyTally(
                        layout.passed - 1, 1, layout.skipped, layout.xfailed, layout.reasons,
                        "test_planted_failure: got 3, but should be 4")}, exit_code=1)
    key = f"conformance/{suite.suite}/{suite.impl}/failed"
    metrics = {**results.metrics, key: Metric.count(1, "tests", "lower", True)}
    return replace(results, conformance=(suite, *results.conformance[1:]), metrics=metrics)


def new_environment(results: Results, torch: str, nccl_env: dict) -> Results:
    node = results.nodes[0]
    hardware = replace(node.hardware, torch=replace(node.hardware.torch, torch=torch))
    return replace(results, nodes=(replace(node, hardware=hardware, nccl_env=nccl_env), *results.nodes[1:]))


@pytest.fixture(scope="session")
def nightly(real_runs, tmp_path_factory) -> Nightly:
    root = tmp_path_factory.mktemp("history") / "runs"
    smoke = tuple(Runs(real_runs).names())
    for name in smoke:
        shutil.copytree(real_runs / name, root / name)
    base = load_results(real_runs / smoke[-1])
    start = datetime.strptime(smoke[-1][:16], "%Y%m%dT%H%M%SZ") + timedelta(days=1)
    names = [(start + timedelta(days=d)).strftime("%Y%m%dT%H%M%SZ") for d in range(9)]
    previous = None
    for day, name in enumerate(names[:3]):
        made = judge(night(base, name, seed=100 + day, setup=NCCL, commit=f"{day + 1:040x}"), previous)
        save(made, Runs(root), real_runs / smoke[-1])
        previous = made
    previous = None
    for day, name in enumerate(names[3:8]):
        made = night(base, name, seed=day, commit=f"{0xa0 + day:040x}",
                     scale=lambda key: 1.6 if key == REGRESSED and day == 4 else 1.0)
        if day == 2:
            made = refused(made)
        if day == 3:
            made = new_environment(made, "2.13.0+cpu", {"NCCL_ALGO": "Ring"})
        if day == 4:
            made = new_environment(failing(made), "2.14.0+cpu", {})
        made = judge(made, previous)
        save(made, Runs(root), real_runs / smoke[-1])
        previous = made
    corrupt = names[8]
    (root / corrupt).mkdir()
    (root / corrupt / "results.json").write_text("{not json")
    return Nightly(root, smoke, tuple(names[3:8]), tuple(names[:3]), corrupt)


@pytest.fixture(scope="session")
def site(nightly, tmp_path_factory) -> Built:
    """The site of the nightly runs, keeping the last four of each setup."""
    return build_site(Runs(nightly.root), tmp_path_factory.mktemp("site") / "site", keep=KEEP)


@pytest.fixture(scope="session")
def browser():
    playwright, launched = launch_browser()
    yield launched
    launched.close()
    playwright.stop()
