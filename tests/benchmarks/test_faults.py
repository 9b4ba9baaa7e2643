"""A benchmark that raises leaves the others' records and fails the run as an error, never losing what finished."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import pytest

from benchmarks import suite
from benchmarks.registry import BenchmarkFault
from reports.comparison.verdict import decide
from reports.store.model import decode, encode
from tests.reports.builders import results


@dataclass(frozen=True)
class Fake:
    name: str
    raises: bool = False
    on_ranks: bool = True
    relaunched: bool = False

    def run(self, *args) -> list:
        if self.raises:
            raise RuntimeError(f"{self.name} broke")
        return [self.name]

    def check(self, records) -> None:
        pass


@pytest.fixture
def three(monkeypatch):
    """Three benchmarks on the ranks (the middle one raises) and two in one process (the first raises)."""
    fakes = [Fake("first"), Fake("middle", raises=True), Fake("last"),
             Fake("lone-broken", raises=True, on_ranks=False), Fake("lone", on_ranks=False)]
    monkeypatch.setattr(suite, "BENCHMARKS", fakes)
    monkeypatch.setattr(suite, "first_rank_of_node", lambda ctx: False)
    return fakes


def test_on_a_rank_the_benchmarks_before_a_fault_are_kept_and_none_after_it_runs(three):
    out = suite._on_every_rank(SimpleNamespace(rank=1), None, ["first", "middle", "last"])
    assert out["first"] == ["first"] and "middle" not in out and "last" not in out, out
    assert out["fault"] == BenchmarkFault("middle", 1, "RuntimeError: middle broke", ("last",)), out["fault"]


def test_the_ranks_keep_what_every_rank_finished(three, monkeypatch):
    def ranks(function, world_size, settings, names, journal, device):
        return [function(SimpleNamespace(rank=r), settings, names, journal) for r in range(world_size)]

    monkeypatch.setattr(suite, "run_on_ranks", ranks)
    done = suite.run_rank_benchmarks(SimpleNamespace(launches=1), 2, progress=lambda _: None)
    assert done["first"] == ["first"] and "middle" not in done and "last" not in done, done
    assert [f.rank for f in done["faults"]] == [0, 1]


def test_in_one_process_a_fault_does_not_stop_the_next_benchmark(three):
    done = suite.run_single_process_benchmarks(None, progress=lambda _: None)
    assert done["lone"] == ["lone"] and "lone-broken" not in done, done
    assert done["faults"] == [BenchmarkFault("lone-broken", None, "RuntimeError: lone-broken broke", ())]


def test_a_fault_is_an_error_of_the_verdict_that_names_it_and_survives_the_file():
    fault = BenchmarkFault("overlap", 0, "RuntimeError: NaN scale on the wrong device", ("step_time",))
    run = results(benchmark_faults=(fault,))
    verdict = decide(run, fail_on_regression=False)
    [line] = [line for line in verdict.lines if line.kind == "benchmarks"]
    assert verdict.exit_code == 2 and line.status == "error", verdict
    assert "overlap raised on rank 0" in line.text and "step_time did not run" in line.text, line.text
    assert decode(encode(replace(run, verdict=verdict))).benchmark_faults == (fault,)
    assert not [line for line in decide(results(), False).lines if line.kind == "benchmarks"]


def test_under_torchrun_a_fault_still_ends_the_job(three, monkeypatch):
    # its ranks return their results over the control group, which another rank may still be using
    monkeypatch.setattr(suite, "launched_by_torchrun", lambda: True)
    with pytest.raises(RuntimeError, match="middle broke"):
        suite._on_every_rank(SimpleNamespace(rank=0), None, ["first", "middle", "last"])


def test_a_failed_relaunch_keeps_the_earlier_launches_and_says_which_launch(monkeypatch):
    monkeypatch.setattr(suite, "BENCHMARKS", [Fake("steps", relaunched=True)])
    monkeypatch.setattr(suite, "first_rank_of_node", lambda ctx: False)
    launches = []

    def ranks(function, world_size, settings, *args, device):
        launches.append(function)
        if len(launches) == 2:
            raise RuntimeError("rank 1 failed\nTraceback (most recent call last):\nValueError: boom")
        return [function(SimpleNamespace(rank=r), settings, *args) for r in range(world_size)]

    monkeypatch.setattr(suite, "run_on_ranks", ranks)
    done = suite.run_rank_benchmarks(SimpleNamespace(launches=3), 2, progress=lambda _: None)
    [fault] = done["faults"]
    assert done["steps"] == ["steps"] and len(launches) == 2, (done, launches)
    assert fault.relaunch == 2 and fault.error.startswith("RuntimeError: ValueError: boom"), fault
    [line] = [line for line in decide(results(benchmark_faults=(fault,)), False).lines if line.kind == "benchmarks"]
    assert "launch 2" in line.text and "earlier launches' kept" in line.text, line.text


class Died(BaseException):
    """A rank's process dying: no ``except Exception`` on the rank sees it."""


def _ranks_that_die(launches: list, fail_at_start: int | None = None, signal: str | None = None):
    """``run_on_ranks`` over the ranks one after another in this process: a ``Died`` ends the launch as the pool
    reports a rank that exited (or, with ``signal``, was killed by it); launch ``fail_at_start`` fails before any
    rank begins."""
    from ranks import RanksFailed
    from ranks.outcome import Outcome

    how = f"of {signal} (exit code -6)" if signal else "(exit code 3)"

    def ranks(function, world_size, settings, names, journal, device):
        launches.append(list(names))
        if len(launches) == fail_at_start:
            raise RanksFailed("could not start rank 0 of 2")
        out = []
        for rank in range(world_size):
            try:
                out.append(function(SimpleNamespace(rank=rank), settings, names, journal))
            except Died:
                detail = f"rank {rank} died {how} while running the benchmarks\nits stacks"
                raise RanksFailed(detail, [Outcome.failed(rank, detail, broke_group=True, signal=signal)]) from None
        return out
    return ranks


@dataclass(frozen=True)
class Dies(Fake):
    times: int = 99
    deaths: list = field(default_factory=list)

    def run(self, ctx, settings) -> list:
        if ctx.rank == 1 and len(self.deaths) < self.times:
            self.deaths.append(ctx.rank)
            raise Died
        return [self.name]


def test_a_rank_that_dies_keeps_what_finished_and_fresh_ranks_run_the_rest(monkeypatch):
    monkeypatch.setattr(suite, "BENCHMARKS", [Fake("first"), Dies("dying"), Fake("last")])
    monkeypatch.setattr(suite, "first_rank_of_node", lambda ctx: False)
    launches: list = []
    monkeypatch.setattr(suite, "run_on_ranks", _ranks_that_die(launches))
    done = suite.run_rank_benchmarks(SimpleNamespace(launches=1), 2, progress=lambda _: None)
    assert launches == [["first", "dying", "last"], ["last"]], launches
    assert done["first"] == ["first"] and done["last"] == ["last"] and "dying" not in done, done
    [fault] = done["faults"]
    assert (fault.benchmark, fault.rank, fault.skipped) == ("dying", 1, ()), fault
    assert fault.error.startswith("RanksFailed: rank 1 died (exit code 3)"), fault.error
    assert not fault.recovered, "a rank that exited is the benchmark's own fault: it does not run again"


@pytest.mark.parametrize("times", [1, 2])
def test_a_benchmark_a_rank_crashed_in_runs_again_once_and_a_crash_that_did_not_come_back_is_reported(
        monkeypatch, times):
    monkeypatch.setattr(suite, "BENCHMARKS", [Fake("first"), Dies("dying", times=times), Fake("last")])
    monkeypatch.setattr(suite, "first_rank_of_node", lambda ctx: False)
    launches: list = []
    monkeypatch.setattr(suite, "run_on_ranks", _ranks_that_die(launches, signal="SIGSEGV"))
    done = suite.run_rank_benchmarks(SimpleNamespace(launches=1), 2, progress=lambda _: None)
    again = [["dying", "last"]] if times == 1 else [["dying", "last"], ["last"]]
    assert launches == [["first", "dying", "last"], *again], launches
    assert done["last"] == ["last"] and ("dying" in done) == (times == 1), done
    assert [f.recovered for f in done["faults"]] == [times == 1] * times, done["faults"]
    verdict = decide(results(benchmark_faults=tuple(done["faults"])), fail_on_regression=False)
    statuses = [line.status for line in verdict.lines if line.kind == "benchmarks"]
    assert statuses == (["reported"] if times == 1 else ["error", "error"]), verdict.lines
    assert verdict.exit_code == (0 if times == 1 else 2), verdict


def test_under_torchrun_a_rank_that_dies_still_ends_the_job(monkeypatch):
    monkeypatch.setattr(suite, "BENCHMARKS", [Fake("first"), Dies("dying"), Fake("last")])
    monkeypatch.setattr(suite, "first_rank_of_node", lambda ctx: False)
    monkeypatch.setattr(suite, "launched_by_torchrun", lambda: True)
    launches: list = []
    monkeypatch.setattr(suite, "run_on_ranks", _ranks_that_die(launches))
    with pytest.raises(RuntimeError, match="rank 1 died"):
        suite.run_rank_benchmarks(SimpleNamespace(launches=1), 2, progress=lambda _: None)
    assert launches == [["first", "dying", "last"]], launches


@pytest.mark.parametrize("fail_at_start", [1, 2])
def test_ranks_that_fail_before_any_benchmark(monkeypatch, fail_at_start):
    # the first launch: nothing finished, so the job fails as it did; a relaunch: what finished before is kept
    monkeypatch.setattr(suite, "BENCHMARKS", [Dies("dying"), Fake("next"), Fake("last")])
    monkeypatch.setattr(suite, "first_rank_of_node", lambda ctx: False)
    launches: list = []
    monkeypatch.setattr(suite, "run_on_ranks", _ranks_that_die(launches, fail_at_start))
    if fail_at_start == 1:
        with pytest.raises(RuntimeError, match="could not start"):
            suite.run_rank_benchmarks(SimpleNamespace(launches=1), 2, progress=lambda _: None)
        return
    done = suite.run_rank_benchmarks(SimpleNamespace(launches=1), 2, progress=lambda _: None)
    assert launches == [["dying", "next", "last"], ["next", "last"]], launches
    assert [(f.benchmark, f.skipped) for f in done["faults"]] == [("dying", ()), ("next", ("last",))], done
