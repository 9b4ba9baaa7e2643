"""The bisection on a copy of this project with 16 commits: one makes the trend's change-point detection 10% slower,
another makes that module fail to import (and the next one mends it). Each commit is measured by
``measure_trend.py``: the commit's function against a control copy, pair by pair, whose ratio varies by a few
tenths of a percent between runs here (the step ratio of the nightly job, by about 1.3%: the gate check bisects
that one, ``--part bisect``). ``git bisect run`` finds the slow commit in at most 6 benchmark runs (2 of the bad
end, then one a commit), names the broken one as skipped, and leaves the user's checkout and worktrees as they
were; a range with no slowdown answers that no commit moved the figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reports.bisect.measure import Measurement
from reports.bisect.search import BisectError, _conclude, bisect, resolve
from reports.store.bisection import Bisection, Decision, Trial
from selfcheck.planted import BROKEN_AT, SLOW_AT, SLOW_SUBJECT, git, planted_history, slower_function
from tests.pytest_run import ROOT

SERIES = Path("reports/comparison/series.py")
MEASURE = ("{python}", "tests/reports/bisect/measure_trend.py", "{out}", str(ROOT / SERIES))
METRIC = "bisect/change_points_ratio"
pytestmark = pytest.mark.timing  # the commits' ratios, which a test on the other core would move


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, dict[int, str]]:
    repo = tmp_path_factory.mktemp("project")
    return repo, planted_history(repo, ROOT, SERIES, slower_function("change_points", 0.10))


def test_the_slow_commit_is_found_and_the_broken_one_skipped_and_named(history):
    repo, shas = history
    before = (git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain"), git(repo, "worktree", "list"))
    proc = subprocess.run([sys.executable, "-m", "reports.bisect", "--repo", str(repo), "--good", shas[1],
                           "--bad", shas[16], "--command", " ".join(MEASURE), "--metric", METRIC, "--threshold", "0.05",
                           "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1) and proc.stdout, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    trials = {t["commit"]: t for t in found["trials"]}
    assert found["outcome"] == "found" and found["first_moved"] == shas[SLOW_AT], (
        f"got {found['outcome']} at {found['first_moved'] or found['candidates']}, but should be found at commit "
        f"{SLOW_AT} ({shas[SLOW_AT]}):\n{proc.stderr[-3000:]}")
    assert trials[shas[SLOW_AT]]["subject"] == SLOW_SUBJECT
    skipped = [t for t in found["trials"] if t["failed"]]
    assert [t["commit"] for t in skipped] == [shas[BROKEN_AT]] and "planted: this commit does not import" in \
        skipped[0]["failed"], skipped
    ratio = trials[shas[SLOW_AT]]["decision"]["ratio"]
    assert 1.07 < ratio < 1.13, f"the slow commit's ratio to good: got {ratio}, but should be near 1.10"
    runs = sum(t["runs"] for t in found["trials"])
    assert runs <= 6, f"benchmark runs of the commits measured: got {runs}, but should be at most 6"
    after = (git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain"), git(repo, "worktree", "list"))
    assert after == before, "the checkout, its status and its worktrees are as they were"


def test_a_range_without_a_slowdown_moved_nothing(history):
    repo, shas = history
    found = bisect(repo, shas[1], shas[7], Measurement(MEASURE, METRIC), threshold=0.05, budget=4)
    assert found.outcome == "no move" and found.first_moved is None and len(found.trials) == 1, found


@pytest.mark.parametrize("good, bad, message", [
    ("no-such-rev", "HEAD", "--good: got 'no-such-rev', but should be a commit of"),
    ("HEAD", "HEAD~3", "--good: got 'HEAD' .*, but should be an ancestor of --bad 'HEAD~3'"),
    ("HEAD", "HEAD", "--good and --bad: got 'HEAD' and 'HEAD'"),
])
def test_revisions_are_checked_before_any_work(history, good, bad, message):
    repo, _ = history
    with pytest.raises(BisectError, match=message):
        resolve(repo, good, bad)


def test_skipped_commits_just_before_the_first_moved_one_make_the_answer_ambiguous(history):
    """As git ends when only skipped commits are left: the first moved commit could be any of them or it."""
    repo, shas = history
    unknown = Decision("unknown", 1.05, (0.95, 1.12), 0.1, ((1.0,), (1.0,)), ((1.05,), (1.05,)))
    moved = Decision("moved", 1.5, (1.4, 1.6), 1e-9, ((1.0,), (1.0,)), ((1.5,), (1.5,)))
    trials = (Trial(shas[16], "bad end", moved, 2, 1.0), Trial(shas[10], "note 10", unknown, 4, 1.0),
              Trial(shas[11], "note 11", unknown, 4, 1.0), Trial(shas[SLOW_AT], SLOW_SUBJECT, moved, 2, 1.0))
    found = _conclude(repo, Bisection(shas[1], shas[16], METRIC, 0.2, "unknown", None, None, trials=trials),
                      shas[SLOW_AT], shas[1])
    assert found.outcome == "ambiguous" and found.candidates == (shas[10], shas[11], shas[SLOW_AT]), found
    found = _conclude(repo, Bisection(shas[1], shas[16], METRIC, 0.2, "unknown", None, None, trials=trials[:1] +
                                      trials[3:]), shas[SLOW_AT], shas[1])
    assert found.outcome == "found" and found.first_moved == shas[SLOW_AT], found
