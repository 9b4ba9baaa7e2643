"""Run a suite against one implementation in a child pytest and summarise its JUnit XML.

A child process per run keeps implementations from sharing imported state.
The child gets a clean environment: under torchrun (``torchrun -m reports``)
this process is a rank of a job, and a child that inherited torchrun's
variables would start as a rank of that job too and wait for peers that have
moved on. It spawns its own ranks instead, as many as it is told.

``in_process=True`` runs the session here instead (``pytest.main``, the same
clean environment for its duration): the suite-strength runs of many broken
implementations, which differ in nothing imported at start, then share one
interpreter and its warm ranks instead of starting both for each.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from collections.abc import Iterator
from pathlib import Path

import pytest

from ranks.joining import visible_devices_before_hiding
from ranks.startup import ALLOW_WORLD_SIZE_ENV, WORLD_SIZE_ENV, outside_torchrun
from ranks.worker import die_with_parent


from .families import Counting, frozen_families, tally
from suites.junit import CRASH_RERUN, IMPLEMENTATION, LEVEL

from .records import Failure, SuiteRun

ROOT = Path(__file__).resolve().parents[2]


def multigpu(suite: str) -> bool:
    """Whether a suite path is the multi-rank suite or a part of it (where its composition options exist)."""
    return Path(suite).parts[:2] == ("suites", "multigpu")


def child_environment(world_size: int | None = None, allow_world_size: bool = False) -> dict[str, str]:
    """This process's environment without torchrun's variables, with the GPUs it hid from itself visible
    again, and ``world_size`` ranks for the multi-rank suite."""
    env = outside_torchrun(os.environ)
    hidden, visible = visible_devices_before_hiding()
    if hidden:
        env.pop("CUDA_VISIBLE_DEVICES", None)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
    if world_size is not None:
        env[WORLD_SIZE_ENV] = str(world_size)
    if allow_world_size:
        env[ALLOW_WORLD_SIZE_ENV] = "1"
    return env


def run_suite(suite: str, impl: str, extra_args: list[str] | None = None, world_size: int | None = None,
              in_process: bool = False, allow_world_size: bool = False, first: Path | None = None) -> SuiteRun:
    """``pytest <suite> --impl <impl>`` in a child process, or here (``in_process``), with ``world_size`` ranks
    for the multi-rank suite; outcomes read back from JUnit XML. ``first``: a folder whose packages the child
    imports before the environment's (a peer's older release, reports/conformance/releases.py)."""
    return run_suites([suite], impl, extra_args, world_size, in_process, allow_world_size, first)[0]


def run_suites(suites: list[str], impl: str, extra_args: list[str] | None = None, world_size: int | None = None,
               in_process: bool = False, allow_world_size: bool = False, first: Path | None = None
               ) -> list[SuiteRun]:
    """Several suites against one implementation in one pytest session (one interpreter, one import of the
    implementation: 10-15 s a session on 2 cores), each test counted in the suite whose path holds it."""
    if first is not None and in_process:
        raise ValueError("first: a folder imported first needs a child process, but in_process was asked for")
    with tempfile.TemporaryDirectory() as tmp:
        xml_path = Path(tmp) / "junit.xml"
        args = [*suites, f"--impl={impl}", f"--junitxml={xml_path}", "-p", "no:cacheprovider", *(extra_args or [])]
        run = pytest_in_process if in_process else _pytest_child
        env = child_environment(world_size, allow_world_size)
        if first is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(first), env.get("PYTHONPATH"))))
        code, stdout, stderr = run(args, env)
        outcomes = {suite: Outcomes() for suite in suites}
        implementation, provided = "", ()
        if xml_path.exists():
            implementation, provided = _read_junit(xml_path, outcomes)
        elif code not in (0, 5):
            for each in outcomes.values():
                each.count("errors")
                each.failures.append(Failure("", f"pytest exited {code}: {(stderr or stdout).strip()[-500:]}"))
    return [each.run(suite, impl, implementation, _exit_code(code, each, len(suites)), provided)
            for suite, each in outcomes.items()]


def _exit_code(code: int, outcomes: "Outcomes", suites: int) -> int:
    """The session's exit code as one suite of it would have had it: what a failure or an empty collection of
    another suite decided is not this one's (a crash of the session is every suite's)."""
    if suites == 1 or code not in (0, 1, 5):
        return code
    if outcomes.failing():
        return 1
    return 0 if any(outcomes.counts.values()) else 5


@dataclass
class Outcomes:
    """A suite run's outcomes as its JUnit XML is read, test by test."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTED, 0))
    seconds: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    failed_ids: list[str] = field(default_factory=list)
    crashed_ids: list[str] = field(default_factory=list)
    crash_reruns: list[str] = field(default_factory=list)
    skip_reasons: dict[str, int] = field(default_factory=dict)
    families: dict[str, Counting] = field(default_factory=dict)

    def count(self, outcome: str) -> None:
        self.counts[outcome] += 1

    def failing(self) -> bool:
        """Whether a test failed or errored."""
        return any(self.counts[outcome] for outcome in FAILING)

    def run(self, suite: str, impl: str, implementation: str, exit_code: int, provided: tuple[str, ...] = ()
            ) -> SuiteRun:
        return SuiteRun(suite, impl, implementation, provided, **self.counts, seconds=self.seconds, failures=tuple(self.failures),
                        failed_ids=tuple(self.failed_ids), crashed_ids=tuple(self.crashed_ids),
                        skip_reasons=self.skip_reasons, families=frozen_families(self.families), exit_code=exit_code,
                        crash_reruns=tuple(self.crash_reruns))


COUNTED = ("passed", "failed", "skipped", "xfailed", "errors")
FAILING = ("failed", "errors")


def _pytest_child(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """pytest in a child that dies with this process (a killed job leaves no suite running behind it)."""
    parent = os.getpid()
    proc = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT, capture_output=True, text=True, env=env,
                          preexec_fn=lambda: die_with_parent(parent))
    return proc.returncode, proc.stdout, proc.stderr


def pytest_in_process(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """``pytest.main`` in this process, in ``env`` and the repository root; the hypothesis profile it loads is
    put back after (it is global), and its terminal output is returned."""
    from hypothesis import settings

    profile = getattr(settings, "_current_profile", None)
    out = io.StringIO()
    with _environment(env), contextlib.chdir(ROOT), contextlib.redirect_stdout(out), _fresh_test_modules():
        code = pytest.main(args)
    if profile:
        settings.load_profile(profile)
    return int(code), out.getvalue(), ""


@contextlib.contextmanager
def _fresh_test_modules() -> Iterator[None]:
    """The session imports its test modules anew: hypothesis keeps, on each test function, the choices it has
    explored, and a second session of a module this process ran already would look for new ones only (a
    strength run took 18 s after the same module's tests, 1 s alone)."""
    tests = {name: module for name, module in sys.modules.items()
             if Path(getattr(module, "__file__", None) or "x").name.startswith("test_")}
    for name in tests:
        del sys.modules[name]
    try:
        yield
    finally:
        sys.modules.update(tests)


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    before = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


def _read_junit(path: Path, results: dict[str, Outcomes]) -> tuple[str, tuple[str, ...]]:
    """Each test's outcome into the suite that holds it; returns the implementation and the levels it provides, as
    the session recorded them (``suites.junit``)."""
    root = ET.parse(path).getroot()
    properties = [(p.get("name"), p.get("value") or "") for suite in root.iter("testsuite")
                  for held in suite.findall("properties") for p in held]  # the session's, not a test's
    for case in root.iter("testcase"):
        result = _suite_of(_node_id(case), results)
        result.seconds += float(case.get("time", 0))
        outcome, note = "passed", ""
        result.crash_reruns += [p.get("value") or "" for p in case.iter("property") if p.get("name") == CRASH_RERUN]
        for child in case:
            if child.tag == "skipped":
                outcome = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
                note = (child.get("message") or "").removeprefix("Skipped: ")
                if outcome == "skipped":
                    result.skip_reasons[note] = result.skip_reasons.get(note, 0) + 1
            elif child.tag in ("failure", "error"):
                note = (child.get("message") or "").splitlines()[0] if child.get("message") else ""
                outcome = "failed" if child.tag == "failure" else "errors"
                result.failures.append(Failure(_node_id(case), (child.get("message") or "")[:300]))
                result.failed_ids.append(_node_id(case))
                if crashed(child.get("message") or "", child.text or ""):
                    result.crashed_ids.append(_node_id(case))
        result.count(outcome)
        tally(result.families, _node_id(case), "failed" if outcome == "errors" else outcome, note)
    implementation = next((value for name, value in properties if name == IMPLEMENTATION), "")
    return implementation, tuple(value for name, value in properties if name == LEVEL)


def _suite_of(node_id: str, results: dict[str, Outcomes]) -> Outcomes:
    """The outcomes of the suite whose path holds a test (the only suite, when there is one)."""
    if len(results) == 1:
        return next(iter(results.values()))
    path = Path(node_id.split("::")[0]).parts
    return next((r for suite, r in results.items() if path[:len(Path(suite).parts)] == Path(suite).parts),
                next(iter(results.values())))


_RAISED = re.compile(r"^(?:E\s+)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)):", re.M)


def crashed(message: str, text: str) -> bool:
    """Whether a failure is a crash: the last exception it reports is not an ``AssertionError`` (a check that
    failed) but another (a ``TypeError`` in the code under test, a broken import, ...)."""
    raised = _RAISED.findall(text) or _RAISED.findall(message)
    return bool(raised) and raised[-1].rsplit(".", 1)[-1] not in ("AssertionError", "Failed")


def _node_id(case) -> str:
    """JUnit's ``suites.layout.test_x`` + ``test_y[p]`` back to ``suites/layout/test_x.py::test_y[p]``."""
    return f"{case.get('classname').replace('.', '/')}.py::{case.get('name')}"
