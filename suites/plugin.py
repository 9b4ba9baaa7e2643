"""pytest plugin: choose the implementation under test and decide, at collection, what it cannot run.

``--impl NAME`` (or ``DDPC_IMPL``) picks the implementation; the report header
names it and its version, with the lines of its ``report_lines()`` where it has
one. This is the one place where tests are skipped for what the implementation
lacks, with the reason, in this order:

1. the implementation is unavailable here (e.g. not installed);
2. a capability level named in the test's ``requires`` marker is missing;
3. a configuration the test needs cannot be expressed: every configuration
   named in ``requires`` and every parametrized value that is one (a
   ``LayoutConfig``, a ``DDPConfig``, or anything with ``unsupported_by(impl)``,
   such as a multigpu ``Case``) is put to the implementation's ``unsupported``;
4. its expectation list (``fixtures/expectations/<name>.toml``, or the file
   of the name in its optional ``expectations`` attribute, for peers sharing
   one) skips or xfails the test, for what ``unsupported`` cannot say.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, Phase, settings

from ranks.settings import DEVICE_ENV, DEVICES
from reference.config import DDPConfig
from reference.layout import LayoutConfig

from .expectations import Expectation, load_expectations
from .impls import load_implementation
from .impls.protocol import CAPABILITIES, knobs_used, undeclared_knobs

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
    levels = ", ".join(sorted(impl.capabilities))
    lines = [f"implementation under test: {impl.name} {impl.version} (levels: {levels})"]
    if config._ddpc_device.type != "cpu":
        lines.append(f"buffers allocated on: {config._ddpc_device}")
    if impl.unavailable:
        lines.append(f"  unavailable here: {impl.unavailable}")
    lines += [f"  {line}" for line in getattr(impl, "report_lines", list)()]
    lines.append(f"hypothesis profile: {settings._current_profile}")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _keep_only(config, items)
    impl = config._ddpc_impl
    expectations = load_expectations(getattr(impl, "expectations", impl.name), version=impl.version)
    used: set[Expectation] = set()
    for item in items:
        if "impl" not in getattr(item, "fixturenames", ()):
            continue
        reason = missing_capability(impl, item)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
            continue
        for exp in expectations:
            if exp.matches(item.nodeid):
                used.add(exp)
                mark = pytest.mark.skip if exp.kind == "skip" else pytest.mark.xfail
                item.add_marker(mark(reason=f"{impl.name} expectation: {exp.reason}"))
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
    if impl.unavailable:
        return f"{impl.name}: {impl.unavailable}"
    needs = [need for marker in item.iter_markers("requires") for need in marker.args]
    for level in (n for n in needs if isinstance(n, str)):
        if level not in CAPABILITIES:
            raise pytest.UsageError(
                f"{item.nodeid}: requires({level!r}): got an unknown level, but should be one of "
                f"{', '.join(CAPABILITIES)}"
            )
        if level not in impl.capabilities:
            return f"{impl.name} does not provide the {level!r} level ({CAPABILITIES[level]})"
    callspec = getattr(item, "callspec", None)
    configurations = [n for n in needs if not isinstance(n, str)]
    configurations += list(callspec.params.values()) if callspec else []
    for need in configurations:
        reason = unsupported_configuration(impl, need)
        if reason:
            return reason
    return None


def unsupported_configuration(impl, need) -> str | None:
    """``impl``'s reason for not expressing ``need``, if ``need`` is a configuration at all: an upstream knob it
    does not map, or its own ``unsupported``."""
    if isinstance(need, (LayoutConfig, DDPConfig)):
        return undeclared_knobs(impl, knobs_used(need)) or impl.unsupported(need)
    ask = getattr(need, "unsupported_by", None)
    return ask(impl) if callable(ask) else None


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


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> torch.device:
    """Where the buffer-level checks allocate (``--device``)."""
    return pytestconfig._ddpc_device
