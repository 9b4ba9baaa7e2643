"""The nightly job's --bisect: which regressions it bisects, with which benchmark, and why it will not."""

from dataclasses import replace

import pytest

from datamodel import to_json
from reports.bisect.regression import benchmark_of, why_not
from reports.store.model import Change, Comparison
from reports.store.runs import Runs, dump_json
from tests.reports.builders import overlap_record, results

KEY = "overlap/emulated/reference/efficiency"


def regressed(commit: str | None, previous_commit: str | None, tmp_path, status: str = "regression"):
    runs = Runs(tmp_path)
    before = results("20260101T000000Z", benchmarks={"overlap": [overlap_record()]})
    before = replace(before, run=replace(before.run, commit=previous_commit))
    runs.write(before.run.name, {"results.json": dump_json(to_json(before))})
    change = Change(KEY, 0.6, 0.4, "", "higher", -0.33, status, 0.05, True, "mann-whitney", 0.001, 0.002, True)
    now = results("20260102T000000Z", benchmarks={"overlap": [overlap_record()]},
                  comparison=Comparison(before.run.name, (), 0.1, 0.05, (change,)))
    return replace(now, run=replace(now.run, commit=commit)), runs


def test_the_benchmark_that_made_the_figure_is_the_one_run():
    now = results(benchmarks={"overlap": [overlap_record()]})
    assert KEY in now.metrics and benchmark_of(now, KEY) == "overlap"
    assert benchmark_of(now, "no/such/metric") is None


@pytest.mark.parametrize("commit, previous, status, why", [
    ("a" * 40, "b" * 40, "unchanged", "the gate found no gated regression"),
    ("a" * 40 + "+dirty", "b" * 40, "regression", "its tree had uncommitted changes"),
    (None, "b" * 40, "regression", "this run's commit is unknown"),
    ("a" * 40, None, "regression", "the previous run 20260101T000000Z has no clean commit"),
    ("a" * 40, "a" * 40, "regression", "the previous run is of the same commit"),
])
def test_what_cannot_be_bisected_says_why(tmp_path, commit, previous, status, why):
    now, runs = regressed(commit, previous, tmp_path, status)
    assert why in (why_not(now, runs) or ""), why_not(now, runs)


def test_a_regression_between_two_clean_commits_is_bisected(tmp_path):
    now, runs = regressed("a" * 40, "b" * 40, tmp_path)
    assert why_not(now, runs) is None
