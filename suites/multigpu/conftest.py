"""The multigpu suite: its tests get the harness's options and the ``ranks`` fixture, the compositions to run
(``--compositions``, ``--case``), and known faults below the implementations marked where a case meets them
(``known_issues``)."""

import pytest

from suites.multigpu.harness import plugin as harness_plugin

from . import covering, space
from .cases import params
from .known_issues import IMMUNE, avg_over_one_rank, nccl_version

COMPOSED = "suites/multigpu/test_compositions.py::test_composition_trains_like_one_process"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    harness_plugin.register(pluginmanager)
    group = parser.getgroup("compositions", "compositions of the configuration space (suites/multigpu/space.py)")
    group.addoption("--compositions", choices=tuple(covering.STRENGTHS.values()), default="pairwise",
                    help="the covering array to run: every pair of axis values (default), or every three")
    group.addoption("--case", default=None, metavar="AXIS=VALUE,...",
                    help="run this one composition only, e.g. 'world=1,microbatches=2' (the axes it moves from "
                         "the base; a failure's reproduction line names it)")


def pytest_configure(config: pytest.Config) -> None:
    spelled = config.getoption("case")
    try:
        config._ddpc_composition = space.parse(spelled) if spelled is not None else None
        if spelled is None:
            covering.rows(config.getoption("compositions"))  # a stale file is refused before anything runs
    except (ValueError, FileNotFoundError) as exc:
        raise pytest.UsageError(f"--case: {exc}" if spelled is not None and "--case" not in str(exc) else str(exc))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "composition" not in metafunc.fixturenames:
        return
    one = metafunc.config._ddpc_composition
    chosen = [one] if one is not None else covering.rows(metafunc.config.getoption("compositions"))
    metafunc.parametrize("composition", params([space.case_of(labels) for labels in chosen]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config._ddpc_composition is not None:
        kept = [item for item in items if item.nodeid.startswith(COMPOSED)]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
    if config._ddpc_impl.name in IMMUNE:
        return
    version = None
    for item in items:
        callspec = getattr(item, "callspec", None)
        case = callspec.params.get("case", callspec.params.get("composition")) if callspec else None
        if case is None:
            continue
        world_size = harness_plugin.world_size_of(item)
        backend = harness_plugin.backend_of(config, world_size)
        if backend == "nccl" and version is None:
            version = nccl_version()
        reason = avg_over_one_rank(case, world_size, backend, version)
        if reason:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=False))
