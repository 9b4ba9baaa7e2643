"""A suite session's JUnit XML read back into its ``SuiteRun``: the session's properties apart from a test's."""

from reports.comparison.verdict import decide
from reports.conformance.suites import Outcomes, _read_junit
from suites.junit import CRASH_RERUN, IMPLEMENTATION, LEVEL
from tests.reports.builders import results

XML = f"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="2">
<properties><property name="{IMPLEMENTATION}" value="peer 1.0"/><property name="{LEVEL}" value="ddp"/></properties>
<testcase classname="suites.multigpu.test_x" name="test_a[1]" time="2.0">
<properties><property name="{CRASH_RERUN}" value="check_a: rank 1 died of SIGSEGV; run again on fresh ranks"/>
</properties></testcase>
<testcase classname="suites.multigpu.test_x" name="test_b" time="1.0"/>
</testsuite></testsuites>"""


def test_a_crash_rerun_is_kept_with_its_suite_run_and_said_beside_a_passing_verdict(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(XML)
    outcomes = {"suites/multigpu": Outcomes()}
    implementation, levels = _read_junit(path, outcomes)
    assert (implementation, levels) == ("peer 1.0", ("ddp",)), "a test's property is not the session's"
    run = outcomes["suites/multigpu"].run("suites/multigpu", "peer", implementation, 0, levels)
    assert (run.passed, run.status) == (2, "pass"), f"got {run.passed} passed, {run.status}: the rerun passed"
    assert run.crash_reruns == ("check_a: rank 1 died of SIGSEGV; run again on fresh ranks",), run.crash_reruns
    line = decide(results(conformance=(run,)), fail_on_regression=False, covers=("peer",)).lines[0]
    assert line.status == "pass" and "1 reruns after a rank died of a signal" in line.text, line
