"""The main job says, as each phase starts, about how long it has left, and keeps what each phase took; a slow night
cuts the search and the strength phase to end by the deadline."""

import time

import pytest

from reports.nightly.clock import Clock, earlier_phases, first_run_plan, fit_to_deadline
from reports.conformance.records import StrengthPhase
from reports.render.report import build_report
from reports.store.model import PhaseTime, encode
from reports.store.runs import Runs, dump_json
from tests.reports.builders import results


def test_each_phase_says_what_is_left_of_the_plan_and_the_phases_are_kept_in_order():
    said = []
    clock = Clock({"benchmarks": 300.0, "suites": 240.0, "search": 120.0, "strength": 30.0}, "as run X took",
                  said.append)
    clock.phase("benchmarks", "benchmarks")
    clock.phase("suites", "suites")
    time.sleep(0.05)
    clock.phase("strength", "strength")
    assert said == ["benchmarks (about 12 min left in the job, as run X took)",
                    "suites (about 6 min left in the job, as run X took)",
                    "strength (about 30 s left in the job, as run X took)"], said
    times = clock.times()
    assert [t.phase for t in times] == ["benchmarks", "suites", "strength"] and times[1].seconds >= 0.05, times


def test_a_first_run_plans_from_the_budgets_and_leaves_out_what_does_not_run():
    plan = first_run_plan(100.0, 6, 160.0, 6, None)
    assert set(plan) == {"benchmarks", "suites", "search", "report"}, plan
    assert plan["benchmarks"] > 100.0 and plan["search"] > 160.0, plan


def test_the_plan_comes_from_the_newest_run_of_this_kind_that_timed_its_phases(tmp_path):
    runs = Runs(tmp_path)
    timed = results("20261101T000000Z", phases=(PhaseTime("benchmarks", 400.0), PhaseTime("suites", 250.0)))
    smoke = results("20261102T000000Z", smoke=True, phases=(PhaseTime("benchmarks", 10.0),))
    untimed = results("20261103T000000Z")
    for run in (timed, smoke, untimed):
        runs.write(run.run.name, {"results.json": dump_json(encode(run))})
    assert earlier_phases(runs, 2, smoke=False) == ("20261101T000000Z", {"benchmarks": 400.0, "suites": 250.0})
    assert earlier_phases(runs, 2, smoke=True)[0] == "20261102T000000Z"
    assert earlier_phases(runs, 3, smoke=False) is None


SEARCH = {"reference": 60.0, "torch": 10.0, "fsdp2": 10.0}


# Worked by hand with the first run's estimates: the report 30 s, a search's start 12 s, the strength phase's 10 s.
# All of it: (60+12) + (10+12) + (10+12) + (60+10) = 186 s, with the report 216 s.
@pytest.mark.parametrize("left, search, strength, cuts", [
    (250.0, SEARCH, 60.0, ()),
    (200.0, {"reference": 60.0}, 60.0, ("no search of torch, fsdp2",)),  # 72 + 70 = 142 of 170
    (170.0, {"reference": 60.0}, 58.0, ("no search of torch, fsdp2", "the strength phase measures 58 s")),
    (110.0, {"reference": 58.0}, 0.0, ("no search of torch, fsdp2", "the strength phase measures nothing, its rows "
                                       "carried over", "each search the verdict covers takes 58 s")),  # 80 - 10 - 12
    (70.0, {"reference": 18.0}, 0.0, ("no search of torch, fsdp2", "the strength phase measures nothing, its rows "
                                      "carried over", "each search the verdict covers takes 18 s")),  # 40 - 10 - 12
    (40.0, {}, 0.0, ("no search of torch, fsdp2", "the strength phase measures nothing, its rows carried over",
                     "no search of reference")),  # 10 - 10 - 12 < 10; the strength phase's start fits in 10
    (35.0, {}, None, ("no search of torch, fsdp2", "the strength phase measures nothing, its rows carried over",
                      "no search of reference", "no strength phase")),
])
def test_the_deadline_cuts_the_peers_search_then_the_strength_then_the_covered_search(left, search, strength, cuts):
    fitted = fit_to_deadline(left, SEARCH, ("reference",), 60.0)
    assert (fitted.search, fitted.strength, fitted.cuts) == (search, strength, cuts), fitted


def test_a_strength_phase_left_no_time_says_so_and_one_not_run_says_why():
    measured_none = StrengthPhase(catalogue=55, measured=0, carried=0, seconds=0.0, budget=0.0, proven_by="t")
    text = build_report(results(strength_phase=measured_none))
    assert "No rows: the phase measured 0 of the 55 entries in its 0 s, and no earlier run" in text, text[:2000]
    assert "or no time left before the deadline" in build_report(results()), "a phase that did not run says why"
