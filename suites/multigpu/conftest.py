"""The multigpu suite: its tests get the harness's options and the ``ranks`` fixture, the compositions to run
(``--compositions``, ``--case``), the search past them (``--explore``), and known faults below the
implementations marked where a case meets them (``known_issues``)."""

import json
from pathlib import Path

import pytest

from datamodel import to_json
from suites.impls.support import why_not
from suites.multigpu.harness import plugin as harness_plugin

from . import covering, space
from .cases import params
from .records import COMPOSED, STEPS
from .known_issues import IMMUNE, avg_over_one_rank, nccl_version

EXPLORE = "suites/multigpu/test_explore.py"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    harness_plugin.register(pluginmanager)
    group = parser.getgroup("compositions", "compositions of the configuration space (suites/multigpu/space.py)")
    group.addoption("--compositions", choices=(*covering.STRENGTHS.values(), "none"), default="pairwise",
                    help="the covering array to run: every pair of axis values (default), every three, or none (a "
                         "session that runs the other tests again at another world size)")
    group.addoption("--case", default=None, metavar="AXIS=VALUE,...",
                    help="run this one composition only, e.g. 'world=1,microbatches=2' (the axes it moves from the "
                         "base; steps=N trains N steps instead of 3): a finding's reproduction line names it")
    group.addoption("--explore", type=int, default=None, metavar="N",
                    help="run only the search: the triples covering array, then compositions hypothesis draws, N "
                         "drawn from them in all (shrinking a failure runs more); each failure shrunk to the axes "
                         "that must combine")
    group.addoption("--explore-seconds", type=float, default=None, metavar="S",
                    help="with --explore: stop drawing new compositions after S seconds")
    group.addoption("--explore-seed", type=int, default=None, metavar="N",
                    help="with --explore: hypothesis' seed, which also picks the triple the search starts at; the "
                         "same seed, database and budget run the same compositions (default: hypothesis picks one)")
    group.addoption("--explore-db", default=".hypothesis/explore", metavar="DIR",
                    help="with --explore: hypothesis' example database, which keeps every failure and tries it "
                         "first next time (default .hypothesis/explore)")
    group.addoption("--explore-report", default=None, metavar="PATH",
                    help="with --explore: write what it ran and found to PATH as JSON")
    group.addoption("--compositions-report", default=None, metavar="PATH",
                    help="write how much of the space the compositions that ran cover, for this implementation, to "
                         "PATH as JSON (the main job's report reads it)")


def pytest_configure(config: pytest.Config) -> None:
    spelled, explore = config.getoption("case"), config.getoption("explore")
    if explore is not None and explore < 1:
        raise pytest.UsageError(f"--explore: got {explore}, but should be a number of compositions of at least 1")
    seconds = config.getoption("explore_seconds")
    if seconds is not None and not seconds > 0:
        raise pytest.UsageError(f"--explore-seconds: got {seconds:g}, but should be a positive number of seconds")
    seed = config.getoption("explore_seed")
    if seed is not None and seed < 0:
        raise pytest.UsageError(f"--explore-seed: got {seed}, but should be a whole number of at least 0")
    if explore is not None and spelled is not None:
        raise pytest.UsageError("--case and --explore: got both, but should be one: --case runs one composition, "
                                "--explore searches")
    for option in ("explore_report", "compositions_report"):
        report = config.getoption(option)
        if report is not None and not Path(report).resolve().parent.is_dir():
            raise pytest.UsageError(f"--{option.replace('_', '-')}: got {report!r}, but should be a file in a folder "
                                    "that exists")

    if spelled is not None and config.getoption("compositions") == "none":
        raise pytest.UsageError("--case and --compositions none: got both, but --case runs a composition")
    try:
        config._ddpc_composition = space.parse_case(spelled) if spelled is not None else None
        if spelled is None and config.getoption("compositions") != "none":
            covering.stored()  # a stale file is refused before anything runs; one composition or none needs none
    except ValueError as exc:
        raise pytest.UsageError(f"--case: {exc}" if spelled is not None and "compositions.json" not in str(exc)
                                else str(exc)) from exc
    except FileNotFoundError as exc:
        raise pytest.UsageError(str(exc)) from exc


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name == Path(EXPLORE).name and config.getoption("explore") is None:
        return True  # the search runs when asked for, on its own
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "composition" not in metafunc.fixturenames:
        return
    one = metafunc.config._ddpc_composition
    if metafunc.config.getoption("explore"):
        cases = []  # the search runs alone
    elif one is not None:
        labels, steps = one
        cases = [space.case_of(labels, steps or STEPS)]
    elif metafunc.config.getoption("compositions") == "none":
        cases = []
    else:
        name = metafunc.config.getoption("compositions")
        strength = next(n for n, label in covering.STRENGTHS.items() if label == name)
        own = covering.for_implementation(space.supported_by(metafunc.config._ddpc_impl), strength)
        cases = [space.case_of(labels) for labels in covering.rows(name) + own]
    metafunc.parametrize("composition", params(cases))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only = COMPOSED if config._ddpc_composition is not None else EXPLORE if config.getoption("explore") else None
    if only is not None:
        path, _, function = only.partition("::")
        kept = [item for item in items if item.path.name == Path(path).name and item.path.parent.name == "multigpu"
                and (not function or getattr(item, "originalname", item.name) == function)]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
    _skip_where_the_transport_is_refused(config, items)
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


def _skip_where_the_transport_is_refused(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A check on ranks is skipped, with the implementation's reason, where it cannot run over the ranks' backend
    with their tensors where they are (megatron-core over gloo with CUDA tensors)."""
    for item in items:
        if not {"ranks", "ranks_at"} & set(getattr(item, "fixturenames", ())):
            continue
        reason = why_not(config._ddpc_impl, harness_plugin.transport_of(config, harness_plugin.world_size_of(item)))
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """Which compositions ran (passed or failed, not skipped), for ``--compositions-report``; and, for every check
    that failed, the one line that runs it again alone, with the same implementation."""
    outcome = yield
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("composition") if callspec else None
    report = outcome.get_result()
    if case is not None and report.when == "call" and (report.passed or report.failed) and not hasattr(report,
                                                                                                    "wasxfail"):
        item.config.stash.setdefault(RAN, {})[item.nodeid] = space.parse(case.name)
    if report.failed and report.when == "call":
        report.sections.append(("rerun it alone", rerun_line(item, case)))


def rerun_line(item: pytest.Item, case) -> str:
    """The command that runs one failed check alone: a composition by its ``--case`` spelling (and its steps), any
    other by its node id; with the implementation, the device and the world size of this session (under torchrun,
    torchrun with as many processes), from where it ran (outside this checkout: ``python -m pytest``, which imports
    a factory from there, and the suite's full path)."""
    config = item.config
    impl = config.getoption("impl", "reference")
    extra = f" --world-size {config.getoption('world_size')}" if config.getoption("world_size") else ""
    device = f" --device {config.getoption('device')}" if config.getoption("device", "auto") != "auto" else ""
    here = Path.cwd().resolve() == config.rootpath.resolve()
    command = "pytest" if here else "python -m pytest"
    processes = harness_plugin.torchrun_world_size(config)
    if processes is not None:
        command, extra = f"torchrun --nproc-per-node={processes} -m pytest", ""
    extra += device
    if case is not None:
        steps = f",steps={case.steps}" if case.steps != STEPS else ""
        suite = "suites/multigpu" if here else str(config.rootpath / "suites" / "multigpu")
        return f"{command} {suite} --impl {impl} --case '{case.name}{steps}'{extra}"
    test = item.nodeid if here else f"{item.path}::{item.nodeid.split('::', 1)[1]}"
    return f"{command} '{test}' --impl {impl}{extra}"


RAN = pytest.StashKey[dict[str, dict[str, str]]]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("compositions_report")
    name = session.config.getoption("compositions")
    if path is None or name == "none" or session.config._ddpc_composition is not None or \
            session.config.getoption("explore"):
        return  # a covering array's coverage: not one composition's, nor the search's
    strength = next(n for n, label in covering.STRENGTHS.items() if label == name)
    expressible = covering.runnable(space.supported_by(session.config._ddpc_impl))
    coverage = covering.coverage(name, list(session.config.stash.get(RAN, {}).values()), strength, expressible)
    Path(path).write_text(json.dumps(to_json(coverage), indent=1) + "\n")
