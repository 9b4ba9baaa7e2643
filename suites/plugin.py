"""pytest plugin: choose the implementation under test and apply what it declares.

``--impl NAME`` (or ``DDPC_IMPL``) picks the implementation; tests that need a
capability level it lacks, or that its expectation list skips, are skipped
with the reason; the report header names it and its version.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from .expectations import Expectation, load_expectations
from .impls import load_implementation
from .impls.protocol import CAPABILITIES

IMPL_ENV = "DDPC_IMPL"
PROFILE_ENV = "DDPC_HYPOTHESIS_PROFILE"

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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "requires(*levels): the capability levels a test needs from the implementation"
    )
    if not config.getoption("hypothesis_profile", None):
        default = "ci" if os.environ.get("CI") else "default"
        settings.load_profile(os.environ.get(PROFILE_ENV, default))
    try:
        config._ddpc_impl = load_implementation(config.getoption("impl"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def pytest_report_header(config: pytest.Config) -> list[str]:
    impl = config._ddpc_impl
    levels = ", ".join(sorted(impl.capabilities))
    lines = [f"implementation under test: {impl.name} {impl.version} (levels: {levels})"]
    if impl.unavailable:
        lines.append(f"  unavailable here: {impl.unavailable}")
    lines.append(f"hypothesis profile: {settings._current_profile}")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    impl = config._ddpc_impl
    expectations = load_expectations(impl.name)
    used: set[Expectation] = set()
    for item in items:
        if "impl" not in getattr(item, "fixturenames", ()):
            continue
        if impl.unavailable:
            item.add_marker(pytest.mark.skip(reason=f"{impl.name}: {impl.unavailable}"))
            continue
        for marker in item.iter_markers("requires"):
            for level in marker.args:
                if level not in impl.capabilities:
                    reason = f"{impl.name} does not provide the {level!r} level ({CAPABILITIES[level]})"
                    item.add_marker(pytest.mark.skip(reason=reason))
        for exp in expectations:
            if exp.matches(item.nodeid):
                used.add(exp)
                mark = pytest.mark.skip if exp.kind == "skip" else pytest.mark.xfail
                item.add_marker(mark(reason=f"{impl.name} expectation: {exp.reason}"))
    _warn_unmatched(config, items, [e for e in expectations if e not in used])


def _warn_unmatched(config: pytest.Config, items, unmatched: list[Expectation]) -> None:
    collected_files = {item.nodeid.split("::")[0] for item in items}
    root = Path(config.rootpath)
    for exp in unmatched:
        path = exp.test.split("::")[0]
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
