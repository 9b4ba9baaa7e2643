"""The main job says, as each phase starts, about how long it has left, and keeps what each phase took; a slow night
cuts the search and the strength phase to end by the deadline."""

import time

import pytest

from reports.nightly.clock import Clock, earlier_phases, first_run_plan, fit_to_deadline
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
    (110.0, {"reference": 60.0}, None, ("no search of torch, fsdp2", "no strength phase")),  # 80 - 72 - 10 < 10
    (70.0, {"reference": 28.0}, None, ("no search of torch, fsdp2", "no strength phase",
                                       "each search the verdict covers takes 28 s")),  # 40 - 12
    (40.0, {}, None, ("no search of torch, fsdp2", "no strength phase", "no search of reference")),
])
def test_the_deadline_cuts_the_peers_search_then_the_strength_then_the_covered_search(left, search, strength, cuts):
    fitted = fit_to_deadline(left, SEARCH, ("reference",), 60.0)
    assert (fitted.search, fitted.strength, fitted.cuts) == (search, strength, cuts), fitted
