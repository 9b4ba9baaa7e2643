"""The bisection: ``git bisect run`` drives the search over the commits between good and bad; each step measures
the commit ``git bisect`` checked out against the good commit, side by side, and answers with git's exit codes
(0 the same as good, 1 moved, 125 cannot tell or cannot run). Every commit is checked out in a worktree of its
own under a temporary folder: the user's working tree and branch are never touched, and the worktrees are removed
afterwards, also when the search is interrupted."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

from datamodel import from_json, to_json

from ..store.bisection import Bisection, Trial
from .decide import decidable, decide
from .measure import MeasureError, Measurement

TOOL_ROOT = Path(__file__).resolve().parents[2]
SAME, MOVED, SKIP, ABORT = 0, 1, 125, 128
"""``git bisect run``'s exit codes: good, bad, skip, and stop the search."""
STOPPED = "stopped.txt"
"""Where a step that stops the search says why, beside the plan."""


class BisectError(RuntimeError):
    """The search cannot go on: a revision that does not resolve, the good commit that cannot be measured, git."""


@dataclass(frozen=True)
class Plan:
    """A search's settings, as the step processes read them."""

    good_tree: str
    measurement: Measurement
    threshold: float
    budget: int
    """The most benchmark runs of one commit (each beside one of the good commit) before it stays unknown."""
    log: str
    """JSON lines, one ``Trial`` per commit measured."""
    good_runs: str
    """JSON lines, one run of the good commit each: kept over the whole search, so that every commit is judged
    against all of them (one run of a commit is enough once the good commit's runs show their spread)."""


def git(*args: str, cwd: Path) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BisectError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def resolve(repo: Path, good: str, bad: str) -> tuple[str, str]:
    """The two commits, refused up front when they do not resolve or good is not an ancestor of bad."""
    commits = []
    for name, rev in (("--good", good), ("--bad", bad)):
        try:
            commits.append(git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=repo))
        except BisectError:
            raise BisectError(f"{name}: got {rev!r}, but should be a commit of {repo}") from None
    good_sha, bad_sha = commits
    if good_sha == bad_sha:
        raise BisectError(f"--good and --bad: got {good!r} and {bad!r}, both {good_sha[:12]}, but should differ")
    if subprocess.run(["git", "merge-base", "--is-ancestor", good_sha, bad_sha], cwd=repo).returncode != 0:
        raise BisectError(f"--good: got {good!r} ({good_sha[:12]}), but should be an ancestor of --bad {bad!r}")
    return good_sha, bad_sha


@contextmanager
def worktree(repo: Path, commit: str, where: Path) -> Iterator[Path]:
    """A detached checkout of ``commit`` at ``where``, removed on the way out however the search ends."""
    git("worktree", "add", "--detach", "--quiet", str(where), commit, cwd=repo)
    try:
        yield where
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=repo, capture_output=True)
        shutil.rmtree(where, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=repo, capture_output=True)


def trial(plan: Plan, tree: Path) -> Trial:
    """``tree``'s commit against the good one: a run of each, interleaved (their order alternating), until the
    answer is moved or same, or the budget is spent; judged against every run of the good commit so far."""
    commit = git("rev-parse", "HEAD", cwd=tree)
    subject = git("log", "-1", "--format=%s", cwd=tree)
    good_tree, good_log = Path(plan.good_tree), Path(plan.good_runs)
    good = [tuple(json.loads(line)) for line in good_log.read_text().splitlines()] if good_log.exists() else []
    candidate: list[tuple[float, ...]] = []
    decision = None
    start, earlier = time.monotonic(), len(good)
    for run in range(1, plan.budget + 1):
        for side in ((good_tree, tree) if (run + earlier) % 2 else (tree, good_tree)):
            try:
                samples = plan.measurement.run(side)
            except MeasureError as exc:
                if side == good_tree:
                    raise BisectError(f"the good commit could not be measured: {exc}") from None
                return Trial(commit, subject, None, run - 1, time.monotonic() - start, str(exc))
            if side == good_tree:
                good.append(samples)
                with open(good_log, "a") as kept:
                    kept.write(json.dumps(samples) + "\n")
            else:
                candidate.append(samples)
        if not decidable(good, candidate):
            continue
        decision = decide(good, candidate, plan.threshold)
        if decision.outcome != "unknown":
            return Trial(commit, subject, decision, run, time.monotonic() - start)
    return Trial(commit, subject, decision, plan.budget, time.monotonic() - start)


def exit_code(t: Trial) -> int:
    if t.decision is None or t.decision.outcome == "unknown":
        return SKIP
    return MOVED if t.decision.outcome == "moved" else SAME


def step(plan_file: Path) -> int:
    """One ``git bisect run`` step, in the worktree git checked out (the current folder)."""
    plan = from_json(Plan, json.loads(plan_file.read_text()))
    try:
        t = trial(plan, Path.cwd())
    except BisectError as exc:
        Path(plan.log).with_name(STOPPED).write_text(str(exc))
        return ABORT
    with open(plan.log, "a") as log:
        log.write(json.dumps(to_json(t)) + "\n")
    print(f"[bisect] {line(t)}", file=sys.stderr, flush=True)
    return exit_code(t)


def bisect(repo: Path, good: str, bad: str, measurement: Measurement, threshold: float, budget: int,
           command: tuple[str, ...] = (), say: Callable[[str], None] = lambda line: None) -> Bisection:
    """Find the first commit between ``good`` and ``bad`` at which the figure moved."""
    good, bad = resolve(repo, good, bad)
    found = Bisection(good, bad, measurement.metric, threshold, "unknown", None, None, command=command)
    with tempfile.TemporaryDirectory(prefix="ddpc-bisect-") as tmp:
        tmp = Path(tmp)
        plan = Plan(str(tmp / "good"), measurement, threshold, budget, str(tmp / "trials.jsonl"),
                    str(tmp / "good-runs.jsonl"))
        with worktree(repo, good, tmp / "good"), worktree(repo, bad, tmp / "search") as search:
            say(f"measuring the bad end {bad[:12]} against the good {good[:12]}")
            end = trial(plan, search)
            say(line(end))
            if end.decision is None:
                raise BisectError(f"the bad commit could not be measured: {end.failed}")
            found = replace(found, trials=(end,))
            if end.decision.outcome != "moved":
                return replace(found, outcome="no move" if end.decision.outcome == "same" else "unknown")
            plan_file = tmp / "plan.json"
            plan_file.write_text(json.dumps(to_json(plan)))
            git("bisect", "start", bad, good, cwd=search)
            try:
                _run_steps(search, plan_file)
                first = git("rev-parse", "--verify", "--quiet", "refs/bisect/bad", cwd=search)
            finally:
                subprocess.run(["git", "bisect", "reset", "--quiet"], cwd=search, capture_output=True)
            trials = (end, *_read_trials(Path(plan.log)))
    return _conclude(repo, replace(found, trials=trials), first, good)


def _run_steps(search: Path, plan_file: Path) -> None:
    """``git bisect run`` over this tool's step (``-P``: the step is this checkout's, not the commit's); the steps
    say each commit's answer on stderr, git's own words go to a log beside the plan."""
    step_command = [sys.executable, "-P", "-m", "reports.bisect.step", str(plan_file)]
    with open(plan_file.with_name("git-bisect.log"), "w") as log:
        code = subprocess.run(["git", "bisect", "run", *step_command], cwd=search, stdout=log,
                              env={**os.environ, "PYTHONPATH": str(TOOL_ROOT)}).returncode
    stopped = plan_file.with_name(STOPPED)
    if stopped.exists():
        raise BisectError(stopped.read_text())
    # Any other end, "only skipped commits left" among them, leaves refs/bisect/bad where the search stood: the
    # skipped commits before it are the answer's candidates (``_conclude``).
    if code != 0 and not git("for-each-ref", "refs/bisect/bad", cwd=search):
        raise BisectError(f"git bisect run stopped (exit {code}) with no bad commit: "
                          + plan_file.with_name("git-bisect.log").read_text().strip()[-300:])


def _read_trials(log: Path) -> tuple[Trial, ...]:
    if not log.exists():
        return ()
    return tuple(from_json(Trial, json.loads(line)) for line in log.read_text().splitlines() if line.strip())


def _conclude(repo: Path, found: Bisection, first: str, good: str) -> Bisection:
    """Name the first moved commit, or the commits it may be when skipped ones stand before it; say when the
    figure moved again after it."""
    measured = {t.commit: t for t in found.trials}
    between = git("rev-list", "--ancestry-path", f"{good}..{first}", cwd=repo).split()
    # rev-list lists newest first: walk back from the first bad commit over the skipped ones before it
    candidates = [first]
    for commit in between[1:]:
        t = measured.get(commit)
        if t is None or exit_code(t) != SKIP:
            break
        candidates.append(commit)
    if len(candidates) > 1:
        return replace(found, outcome="ambiguous", candidates=tuple(reversed(candidates)))
    subject = git("log", "-1", "--format=%s", first, cwd=repo)
    return replace(found, outcome="found", first_moved=first, subject=subject,
                   several_steps=_moved_again(found, measured.get(first)))


def _moved_again(found: Bisection, first: Trial | None) -> bool:
    """Whether the bad end differs from the first moved commit (both measured against good): the figure moved
    in more than one step."""
    end = found.trials[0]
    if first is None or first.decision is None or end.commit == first.commit:
        return False
    again = decide(first.decision.candidate, end.decision.candidate, found.threshold)
    return again.outcome == "moved"


def line(t: Trial) -> str:
    """A commit's answer in one line."""
    return f"{t.commit[:12]} {t.subject}: " + (t.decision.describe() if t.decision else f"skipped: {t.failed}")


OUTCOMES = {"found": "first moved at",
            "no move": "no commit moved the figure: the bad end measured the same as the good",
            "unknown": "could not tell within the budget", "ambiguous": "the first moved commit is one of"}
"""Each answer in words, for the text and the site alike."""
SEVERAL_STEPS = "the figure moved again after the first moved commit: the bad end differs from it"
"""Said, in the text and on the site, when the first moved commit is not the whole move."""


def span(b: Bisection) -> str:
    """What was searched, in words: the figure, the two ends and the threshold."""
    return f"{b.metric} between {b.good[:12]} (good) and {b.bad[:12]} (bad), threshold {b.threshold:.1%}"


def cost(b: Bisection) -> str:
    """What the search spent, in words."""
    return (f"{b.runs} benchmark runs of the commits measured ({len(b.trials)} commits), each beside a run of the "
            f"good commit; {len(b.skipped)} skipped")


def text(b: Bisection) -> str:
    """The answer in words: the first moved commit, the figure before and after, what it cost."""
    head = OUTCOMES[b.outcome] + {"found": f" {b.first_moved} {b.subject}",
                                  "ambiguous": " " + ", ".join(c[:12] for c in b.candidates)}.get(b.outcome, "")
    lines = [f"{span(b)}: {head}"]
    if b.outcome == "found":
        first = next(t for t in b.trials if t.commit == b.first_moved)
        if first.decision is not None:
            lines.append(f"  before and after: {first.decision.good_median:.4g} -> {first.decision.candidate_median:.4g}"
                         f" (ratio {first.decision.ratio:.4g} [{first.decision.interval[0]:.4g}, "
                         f"{first.decision.interval[1]:.4g}])")
        if b.several_steps:
            lines.append(f"  {SEVERAL_STEPS}")
    for t in b.skipped:
        lines.append(f"  skipped {t.commit[:12]} {t.subject}: {t.failed}")
    lines.append(f"  {cost(b)}")
    if b.command:
        lines.append(f"  reproduce: {shlex.join(b.command)}")
    return "\n".join(lines)


FILE = "bisection.json"
"""Where ``python -m reports.bisect --out`` writes a bisection, beside ``bisection.md`` (the nightly job keeps its
bisection in the run: ``Results.bisection``)."""


def save(found: Bisection, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FILE).write_text(json.dumps(to_json(found), indent=1) + "\n")
    (folder / "bisection.md").write_text(f"# Bisection of {found.metric}\n\n```\n{text(found)}\n```\n")
