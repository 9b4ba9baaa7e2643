"""The search past the covering arrays (``--explore N``, ``explore.py``): the triples, then hypothesis' draws.

Collected only with ``--explore``; it fails with one line per finding, each
the smallest composition that fails, and the command that reproduces it.
"""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from datamodel import to_json
from ranks.capacity import world_size_problem
from suites.expectations import Expectation, load_expectations
from suites.impls.protocol import SharesExpectations
from suites.multigpu.harness.plugin import backend_of, torchrun_world_size

from . import covering
from .explore import Budget, Explorer, Unsupported
from .known_issues import IMMUNE, avg_over_one_rank, nccl_version
from .records import composed_test
from .space import case_of, spell, supported_by
from .test_compositions import check_composition

pytestmark = pytest.mark.requires("ddp")

WORLDS = ("1", "2", "3", "4")


def test_explore(pytestconfig, impl, ranks_at):
    config = pytestconfig
    fixed = torchrun_world_size(config)
    worlds = (str(fixed),) if fixed else tuple(w for w in WORLDS if not world_size_problem(int(w), False, ""))

    supported = covering.runnable(supported_by(impl))

    def run(labels: dict[str, str], steps: int) -> str | None:
        case = case_of(labels, steps)
        if case.unsupported_by(impl):
            raise Unsupported(case.unsupported_by(impl))
        backend = backend_of(config, case.world)
        below = None if impl.name in IMMUNE else avg_over_one_rank(
            case, case.world, backend, nccl_version() if backend == "nccl" else None)
        if below:  # a known fault below the implementation, which the composition suite expects to fail
            raise Unsupported(below)
        try:
            ranks_at(case.world).run(check_composition, case)
        except pytest.skip.Exception as skipped:
            raise Unsupported(str(skipped)) from None
        except pytest.fail.Exception as failed:
            return str(failed)
        return None

    spec = config.getoption("impl")
    xfails = expected_failures(impl)

    def expected(labels: dict[str, str]) -> str | None:
        test = composed_test(spell(labels))
        return next((e.reason for e in xfails if e.matches(test)), None)

    explorer = Explorer(run, impl.name, worlds, supported, config.getoption("explore_db"),
                        seed=config.getoption("explore_seed"), expected=expected)
    triples = covering.rows("triples") + covering.for_implementation(supported_by(impl), 3)
    exploration = explorer.explore(triples, Budget(config.getoption("explore"), config.getoption("explore_seconds")))
    exploration = replace(exploration, expected=known_findings(xfails, exploration.findings),
                          asked=config.getoption("explore"), budget=config.getoption("explore_seconds"))
    report = config.getoption("explore_report")
    if report:
        Path(report).write_text(json.dumps(to_json(exploration), indent=1) + "\n")
    lines = [f"{f.reproduce(spec)}\n    the axes that must combine: {f.axes()}; {f.message}"
             for f in exploration.findings if f.composition not in exploration.expected]
    assert not lines, (f"{len(lines)} finding(s) in {exploration.triples} compositions of the triples and "
                       f"{exploration.searched} drawn by hypothesis:\n" + "\n".join(lines))


def expected_failures(impl) -> list[Expectation]:
    """The xfail entries of the implementation's expectation list that apply to its version."""
    name = impl.expectations if isinstance(impl, SharesExpectations) else impl.name
    return [e for e in load_expectations(name, version=impl.version) if e.kind == "xfail"]


def known_findings(xfails: list[Expectation], findings) -> dict[str, str]:
    """The findings the implementation's expectation list records as expected failures, with its reason: the
    composition's test, as ``--case`` would run it, matches an xfail entry (a shrunk finding may match where the
    composition it was found in did not)."""
    known = {}
    for finding in findings:
        hit = next((e for e in xfails if e.matches(finding.test())), None)
        if hit is not None:
            known[finding.composition] = hit.reason
    return known
