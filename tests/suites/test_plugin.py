"""The suites' plugin at the end of a session: a suite of which nothing ran says so, in one line, with why."""

import shlex
from types import SimpleNamespace

from suites.impls import load_implementation
from suites.plugin import nothing_checked

from tests.pytest_run import run_pytest

FACTORY = "wrap:fixtures.examples.torch_ddp_factory:factory"


def test_the_layout_suite_against_a_factory_says_nothing_of_its_level_was_checked():
    proc = run_pytest("suites/layout", "-q", "--impl", FACTORY, in_process=True)
    assert proc.returncode == 0, proc.stdout[-2000:]  # skips are no failures: pytest's own exit status
    assert " passed" not in proc.stdout, f"got passes: {proc.stdout[-500:]}, but should be all skipped"
    line = f"nothing of the layout level could be checked: {FACTORY} does not provide it (levels: checkpoint, ddp)"
    assert line in proc.stdout, proc.stdout[-1500:]


def test_the_multirank_suite_against_an_implementation_without_ddp_says_so():
    proc = run_pytest("suites/multigpu", "-q", "--impl", "tests.fakes.layout_only", in_process=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    line = "nothing of the ddp level could be checked: layout-only-fake does not provide it (levels: layout)"
    assert line in proc.stdout, proc.stdout[-1500:]


def test_a_run_that_checked_something_adds_no_line():
    proc = run_pytest("suites/layout/test_golden.py", "-q", "-k", "notes_example", "--impl", "reference", in_process=True)
    assert proc.returncode == 0 and " passed" in proc.stdout, proc.stdout[-2000:]
    assert "nothing of the" not in proc.stdout, proc.stdout[-1500:]


def reports(category: str, *nodeids: str) -> dict[str, list]:
    return {category: [SimpleNamespace(nodeid=n) for n in nodeids]}


LAYOUT = ("suites/layout/test_a.py::test_x", "suites/layout/test_b.py::test_y")
MULTIGPU = ("suites/multigpu/test_c.py::test_z",)


def test_an_unavailable_implementation_is_named_with_its_reason():
    impl = load_implementation("tests.fakes.unavailable")
    got = nothing_checked(impl, reports("skipped", *LAYOUT), set(LAYOUT))
    assert got == ["nothing of the layout level could be checked: unavailable-fake is unavailable here (the "
                   "fake peer library is not installed)"], got


def test_checks_skipped_each_for_its_own_reason_are_counted():
    impl = load_implementation("reference")
    got = nothing_checked(impl, {**reports("skipped", *LAYOUT), **reports("passed", *MULTIGPU)},
                          set(LAYOUT + MULTIGPU))
    assert got == ["nothing of the layout level could be checked: all 2 of its checks were skipped, each for "
                   "its own reason (pytest -rs lists them)"], got


def test_tests_that_are_no_checks_of_the_implementation_do_not_count():
    """The harness's own tests run without the implementation: their passes do not make the suite checked."""
    impl = load_implementation("tests.fakes.layout_only")
    harness = "suites/multigpu/test_harness.py::test_ring"
    stats = {**reports("skipped", *MULTIGPU), **reports("passed", harness)}
    got = nothing_checked(impl, stats, set(MULTIGPU))
    assert got == ["nothing of the ddp level could be checked: layout-only-fake does not provide it (levels: "
                   "layout)"], got
    assert nothing_checked(impl, {**reports("skipped", *MULTIGPU), **reports("xfailed", *MULTIGPU)},
                           set(MULTIGPU)) == []


def test_every_failed_multirank_check_prints_the_line_that_runs_it_alone():
    """A named case by its node id, a composition by its --case spelling; each line, run, fails the same check."""
    spec = "fixtures.broken.no_scaling"
    proc = run_pytest("suites/multigpu/test_vs_torch_ddp.py", "--impl", spec, "-k", "test_matches_torch_ddp and "
                      "allreduce-overlap-tiny", in_process=True)
    named = f"pytest 'suites/multigpu/test_vs_torch_ddp.py::test_matches_torch_ddp[allreduce-overlap-tiny]' --impl {spec}"
    assert proc.returncode == 1 and "rerun it alone" in proc.stdout and named in proc.stdout, proc.stdout[-1500:]
    proc = run_pytest("suites/multigpu", "--impl", spec, "--case", "microbatches=2,steps=2", in_process=True)
    composed = f"pytest suites/multigpu --impl {spec} --case 'microbatches=2,steps=2'"
    assert proc.returncode == 1 and composed in proc.stdout, proc.stdout[-1500:]
    again = run_pytest(*shlex.split(named)[1:], in_process=True)
    assert again.returncode == 1 and "1 failed" in again.stdout, again.stdout[-1500:]
