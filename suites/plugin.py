"""pytest plugin: choose the implementation under test and decide, at collection, what it cannot run.

``--impl NAME`` (or ``DDPC_IMPL``) picks the implementation; the report header
names it and its version, with the lines of its ``report_lines()`` where it has
one. This is the one place where tests are skipped for what the implementation
lacks, with the reason (``suites.impls.support.why_not``, which reads the
implementation's table ``lacks``), in this order:

1. the implementation is unavailable here (e.g. not installed);
2. a capability level named in the test's ``requires`` marker is missing;
3. a configuration the test needs cannot be expressed: every configuration
   named in ``requires`` and every parametrized value that is one (a
   ``LayoutConfig``, a ``DDPConfig``, or a need that asks itself, such as a
   multigpu ``Case``);
4. its expectation list (``fixtures/expectations/<name>.toml``, or the file
   of the name in its optional ``expectations`` attribute, for peers sharing
   one) skips or xfails the test, for what its table cannot say.

A suite of which nothing ran (every test skipped) says so in one line at the
end of the session, with why: skips are not failures, so the exit status
stays pytest's, but a run that checked nothing must not read as a pass.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest
import torch
from _pytest.junitxml import xml_key
from hypothesis import HealthCheck, Phase, settings

from ranks.startup import DEVICE_ENV, DEVICES
from reference.config import DDPConfig
from reference.layout import LayoutConfig

from .expectations import Expectation, load_expectations
from .impls import load_implementation
from .impls.protocol import CAPABILITIES, ReportsLines, SharesExpectations
from .impls.support import AsksItself, levels, provides, why_not
from .junit import IMPLEMENTATION, LEVEL
from .multigpu.records import COMPOSED

IMPL_ENV = "DDPC_IMPL"
PROFILE_ENV = "DDPC_HYPOTHESIS_PROFILE"
SUITE_LEVELS = {"suites/layout": "layout", "suites/multigpu": "ddp"}
"""Each suite (its directory) and the level it is about, which the end-of-session line names."""
RAN = ("passed", "failed", "xfailed", "xpassed", "error")
"""pytest's outcome categories of a test that ran (not skipped)."""

settings.register_profile(
    "ci",
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("default", max_examples=100, deadline=None)
# Which tests fail is what a suite-strength run measures, not the smallest failing example.
settings.register_profile(
    "strength",
    parent=settings.get_profile("ci"),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.register_profile(
    "nightly", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ddp-conformance")
    group.addoption(
        "--impl",
        default=os.environ.get(IMPL_ENV, "reference"),
        help=f"implementation under test: a registered name or a module path "
        f"(default: ${IMPL_ENV} or 'reference')",
    )
    group.addoption(
        "--device",
        default=os.environ.get(DEVICE_ENV, "auto"),
        choices=DEVICES,
        help=f"where tensors live: the buffer-level checks allocate on cuda or the cpu (auto: cpu); the "
        f"multi-rank suite's ranks run NCCL on CUDA where each has a GPU (auto, cuda), gloo over CUDA tensors "
        f"where ranks share GPUs (cuda), gloo on the CPU otherwise (auto, cpu) (default: ${DEVICE_ENV} or auto)",
    )
    group.addoption(
        "--only",
        action="append",
        default=[],
        metavar="NODEID_PATTERN",
        help="repeatable: run only the tests whose node id matches one of these fnmatch patterns",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(*needs): capability levels (names) and configurations (LayoutConfig, DDPConfig) "
        "a test needs the implementation to provide",
    )
    if not config.getoption("hypothesis_profile", None):
        default = "ci" if os.environ.get("CI") else "default"
        settings.load_profile(os.environ.get(PROFILE_ENV, default))
    try:
        config._ddpc_impl = load_implementation(config.getoption("impl"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc
    config._ddpc_device = _device(config.getoption("device"))


def _device(name: str) -> torch.device:
    """Where the buffer-level checks allocate."""
    if name == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError(f"--device: got {name!r}, but should be cpu or auto on a machine without a GPU "
                                f"(CUDA available here: {torch.cuda.is_available()})")
    return torch.device("cuda" if name == "cuda" else "cpu")


def pytest_report_header(config: pytest.Config) -> list[str]:
    impl = config._ddpc_impl
    lines = [f"implementation under test: {impl.name} {impl.version} (levels: {_levels(impl)})"]
    if config._ddpc_device.type != "cpu":
        lines.append(f"buffers allocated on: {config._ddpc_device}")
    if impl.unavailable:
        lines.append(f"  unavailable here: {impl.unavailable}")
    lines += [f"  {line}" for line in (impl.report_lines() if isinstance(impl, ReportsLines) else [])]
    lines.append(f"hypothesis profile: {settings._current_profile}")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    """The implementation and its levels as properties of the JUnit XML, where one is written (``suites.junit``)."""
    xml = session.config.stash.get(xml_key, None)
    if xml is None:
        return
    impl = session.config._ddpc_impl
    xml.add_global_property(IMPLEMENTATION, f"{impl.name} {impl.version}")
    for level in sorted(levels(impl)):
        xml.add_global_property(LEVEL, level)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _keep_only(config, items)
    impl = config._ddpc_impl
    name = impl.expectations if isinstance(impl, SharesExpectations) else impl.name
    expectations = load_expectations(name, version=impl.version)
    used: set[Expectation] = set()
    config._ddpc_checks = {item.nodeid for item in items if "impl" in getattr(item, "fixturenames", ())}
    for item in items:
        if item.nodeid not in config._ddpc_checks:
            continue
        reason = missing_capability(impl, item)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
            continue
        for exp in expectations:
            if exp.matches(item.nodeid):
                used.add(exp)
                reason = f"{impl.name} expectation: {exp.reason}"
                item.add_marker(pytest.mark.skip(reason=reason) if exp.kind == "skip"
                                else pytest.mark.xfail(reason=reason, run=exp.run))
    _warn_unmatched(config, items, [e for e in expectations if e not in used])


def _keep_only(config: pytest.Config, items: list[pytest.Item]) -> None:
    patterns = config.getoption("only")
    if not patterns:
        return
    kept = [i for i in items if any(fnmatch.fnmatchcase(i.nodeid, p) for p in patterns)]
    config.hook.pytest_deselected(items=[i for i in items if i not in kept])
    items[:] = kept


def missing_capability(impl, item: pytest.Item) -> str | None:
    """Why ``impl`` cannot run ``item`` (unavailable, a missing level, an inexpressible configuration)."""
    needs = [need for marker in item.iter_markers("requires") for need in marker.args]
    for level in (n for n in needs if isinstance(n, str)):
        if level not in CAPABILITIES:
            raise pytest.UsageError(
                f"{item.nodeid}: requires({level!r}): got an unknown level, but should be one of "
                f"{', '.join(CAPABILITIES)}"
            )
    levels_first = sorted(needs, key=lambda need: not isinstance(need, str))
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec else ()
    configurations = [p for p in params if isinstance(p, (LayoutConfig, DDPConfig, AsksItself))]
    needs = [None, *levels_first, *configurations]
    return next(filter(None, (why_not(impl, need) for need in needs)), None)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """One line per suite of which nothing ran, with why (module docstring)."""
    checks = getattr(config, "_ddpc_checks", set())  # none where collection stopped early
    for line in nothing_checked(config._ddpc_impl, terminalreporter.stats, checks):
        terminalreporter.write_line(line, yellow=True, bold=True)


def nothing_checked(impl, stats: dict[str, list], checks: set[str]) -> list[str]:
    """For each suite (``SUITE_LEVELS``) some check of which (a test of the implementation, ``checks``) was
    collected and none ran, why nothing of it could be checked: the implementation lacks the suite's level,
    is unavailable, or every check skipped for its own reason."""
    def suite(report) -> str | None:
        if report.nodeid not in checks:
            return None
        return next((s for s in SUITE_LEVELS if report.nodeid.startswith(f"{s}/")), None)

    skipped = {suite(r) for r in stats.get("skipped", [])} - {None}
    ran = {suite(r) for category in RAN for r in stats.get(category, [])}
    lines = []
    for name in sorted(skipped - ran):
        level = SUITE_LEVELS[name]
        if impl.unavailable:
            why = f"{impl.name} is unavailable here ({impl.unavailable})"
        elif not provides(impl, level):
            why = f"{impl.name} does not provide it (levels: {_levels(impl)})"
        else:
            count = len({r.nodeid for r in stats["skipped"] if suite(r) == name})
            why = f"all {count} of its checks were skipped, each for its own reason (pytest -rs lists them)"
        lines.append(f"nothing of the {level} level could be checked: {why}")
    return lines


def _levels(impl) -> str:
    return ", ".join(sorted(levels(impl))) or "none"


def _warn_unmatched(config: pytest.Config, items, unmatched: list[Expectation]) -> None:
    """Warn of an entry that names no collected test, where its file was collected or is gone. An entry over the
    compositions is exempt: it names a region of the space, which this release's rows need not enter but its
    search may (the search skips what the list records)."""
    collected_files = {item.nodeid.split("::")[0] for item in items}
    root = Path(config.rootpath)
    composed_file = COMPOSED.split("::")[0]
    for exp in unmatched:
        path = exp.test.split("::")[0]
        if path == composed_file:
            continue
        if path in collected_files or not (root / path).exists():
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    f"expectation {exp.kind} {exp.test!r} for {config._ddpc_impl.name} matches no "
                    "collected test: remove it or fix its node id"
                ),
                stacklevel=2,
            )


@pytest.fixture(scope="session")
def impl(pytestconfig: pytest.Config):
    """The implementation under test."""
    return pytestconfig._ddpc_impl


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> torch.device:
    """Where the buffer-level checks allocate (``--device``)."""
    return pytestconfig._ddpc_device
