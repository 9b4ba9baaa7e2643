"""The main job's strength phase keeps its budget: it measures the entries never measured first, then the longest
ago, and carries every other row over from the run that measured it, naming that run."""

import time
from pathlib import Path

from fixtures.broken import catalogue
from reports.nightly import job
from reports.store.model import encode
from reports.store.runs import Runs, dump_json
from selfcheck import strength
from reports.conformance.records import StrengthRecord, SuiteRun
from selfcheck.strength import Caught, carried_rows, measure_strength
from tests.reports.builders import results

ENTRIES = catalogue()[:6]


def fake_measure(seconds: float):
    measured = []

    def measure(entry):
        measured.append(entry.name)
        time.sleep(seconds)
        return Caught(entry, [f"{entry.suite}/test_x.py::test_y"], 1, [])

    return measure, measured


def row(name: str, run: str | None) -> StrengthRecord:
    return StrengthRecord(broken=name, bug="b", suite="suites/multigpu", caught=True, expected_tests_failed=True,
                          failing_tests=1, crashed_tests=0, caught_by="test_x.py", measured_in=run)


def test_a_budget_measures_the_never_measured_first_then_the_oldest_and_carries_the_rest(monkeypatch):
    measure, measured = fake_measure(0.2)
    monkeypatch.setattr(strength, "measure", measure)
    carried = {e.name: row(e.name, run) for e, run in zip(ENTRIES[2:], ["20261102T0", "20261101T0", "20261103T0",
                                                                        "20261104T0"])}
    rows, phase = measure_strength(lambda _: None, budget=0.5, carried=carried, entries=ENTRIES)
    assert measured == [ENTRIES[0].name, ENTRIES[1].name], f"measured {measured}, but should be the never measured"
    assert phase.measured == 2 and phase.carried == 4 and phase.catalogue == 6, phase
    by_name = {r.broken: r for r in rows}
    assert [by_name[e.name].measured_in for e in ENTRIES] == [None, None, "20261102T0", "20261101T0", "20261103T0",
                                                             "20261104T0"], rows
    measure, measured = fake_measure(0.2)
    monkeypatch.setattr(strength, "measure", measure)
    measure_strength(lambda _: None, budget=0.5, carried=carried_rows(tuple(rows), "20261105T0"), entries=ENTRIES)
    assert measured == [ENTRIES[3].name, ENTRIES[2].name], f"measured {measured}, but should be the oldest next"


def test_without_a_budget_every_entry_is_measured(monkeypatch):
    measure, measured = fake_measure(0.0)
    monkeypatch.setattr(strength, "measure", measure)
    rows, phase = measure_strength(lambda _: None, entries=ENTRIES)
    assert measured == [e.name for e in ENTRIES] and phase.carried == 0 and all(r.measured_in is None for r in rows)


def test_a_three_axis_bug_the_pairs_miss_is_run_against_the_triples_and_says_so(monkeypatch):
    entry = next(e for e in catalogue() if e.meets and len(e.meets) == 3)
    asked = []

    def run_suite(suite, impl, args, in_process=False):
        asked.append(args)
        triples = "--compositions=triples" in args
        return SuiteRun(suite, impl, "", (), 0, int(triples), 0, 0, 0, 0.0, (), ("t[a]",) if triples else (), (), {}, {},
                        int(triples))

    monkeypatch.setattr(strength, "run_suite", run_suite)
    record = strength.measure(entry).record()
    assert record.caught and record.caught_in == "triples", record
    assert any(a.startswith("--only=suites/multigpu/test_compositions.py::") for a in asked[1]), asked[1]


def test_the_job_runs_the_phase_as_a_child_that_carries_the_earlier_rows_over(tmp_path):
    """The real child process, with a budget too small to measure any entry: every row comes from the newest run
    with strength rows, named by it."""
    earlier = results("20261101T000000Z", strength=tuple(row(e.name, None) for e in catalogue()))
    Runs(tmp_path).write(earlier.run.name, {"results.json": dump_json(encode(earlier))})
    rows, phase = job.run_strength(1e-9, tmp_path)
    assert phase is not None and phase.measured == 0 and phase.carried == len(catalogue()), phase
    assert {r.measured_in for r in rows} == {"20261101T000000Z"}, rows


def test_a_phase_that_fails_leaves_the_run_without_rows_and_says_so(monkeypatch, capsys):
    monkeypatch.setattr(job, "STRENGTH_MODULE", "selfcheck.no_such_module")
    assert job.run_strength(1.0, Path("/nonexistent")) == ((), None)
    assert "no strength rows" in capsys.readouterr().err
