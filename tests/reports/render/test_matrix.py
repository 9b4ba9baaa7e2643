"""The conformance matrix: each test in one family, one cell per implementation and family, reasons cited once."""

from reports.conformance.families import family_of, tally
from reports.conformance.records import SuiteRun
from reports.conformance.suites import Outcomes
from reports.render.matrix import matrix_markdown


def result(impl: str, implementation: str, outcomes) -> SuiteRun:
    read = Outcomes()
    for nodeid, outcome, note in outcomes:
        tally(read.families, nodeid, outcome, note)
    return read.run("suites/multigpu", impl, implementation, 0, ("ddp",) if implementation else ())


def test_every_suite_test_module_has_a_family():
    from tests.pytest_run import ROOT as root

    modules = [p.relative_to(root).as_posix() for suite in ("suites/layout", "suites/multigpu")
               for p in (root / suite).glob("test_*.py")]
    assert [m for m in modules if family_of(f"{m}::test_x") == "other"] == [], "a test module with no family"
    assert family_of("suites/multigpu/test_vs_torch_ddp.py::test_grad_sync_matches_torch_ddp[x]") == "ddp numerics"
    assert family_of("suites/multigpu/test_vs_torch_ddp.py::test_matches_torch_ddp[x]") == "optimizer"


def test_cells_say_pass_fail_xfail_or_skip_and_cite_reasons_once():
    grad = "suites/multigpu/test_vs_torch_ddp.py::test_grad_sync_matches_torch_ddp"
    ok = result("reference", "reference 0.1.0", [
        (f"{grad}[a]", "passed", ""), (f"{grad}[b]", "xfailed", "a finding"),
        ("suites/multigpu/test_no_sync.py::t", "skipped", "no peers")])
    broken = result("x", "", [(f"{grad}[a]", "failed", "got 2, but should be 1"),
                              ("suites/multigpu/test_no_sync.py::t", "skipped", "no peers"),
                              ("suites/multigpu/test_overlap.py::t", "xfailed", "a finding")])
    text = matrix_markdown([ok, broken])
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if line.startswith("| ")]
    assert rows[1:] == [["reference 0.1.0", "pass 1, xfail 1", "skip [1]", "n/a"],
                        ["x", "FAIL 1 of 1 [2]", "skip [1]", "xfail 1 [3]"]], rows
    assert "1. no peers" in text and "2. test_grad_sync_matches_torch_ddp[a]: got 2, but should be 1" in text


def test_a_suite_run_reads_the_implementation_and_its_version_from_the_session():
    """The matrix labels rows by the name and version the session recorded: two megatron-core releases are two
    rows. Recorded even where nothing ran."""
    from reports.conformance.suites import run_suite
    from suites.impls import load_implementation
    from suites.impls.support import levels

    reference = load_implementation("reference")
    r = run_suite("suites/layout/test_order.py", "reference", ["--only=*test_nothing_matches_this*"], in_process=True)
    assert r.implementation == f"reference {reference.version}", f"got {r.implementation!r}, but should be its name "
    assert r.levels == tuple(sorted(levels(reference))), f"got levels {r.levels}, but should be what it provides"
    assert r.label == r.implementation
