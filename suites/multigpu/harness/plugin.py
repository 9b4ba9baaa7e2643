"""The harness as a pytest plugin: options, report header, the ``ranks`` fixture, set-up and tear-down.

``suites/multigpu/conftest.py`` registers it for that suite. To use ``ranks``
elsewhere, load it with ``-p suites.multigpu.harness.plugin``; under torchrun
that also loads it before the session starts, so ranks other than 0 are quiet
from the first line even when pytest is pointed above ``suites/multigpu``.
"""

from __future__ import annotations

import pytest

from ranks.context import Transport
from ranks.joining import tensors_of, tensors_on
from ranks.startup import Settings

from .fixture import Launcher, Ranks
from .plain import PlainLauncher
from .options import add_options, settings_from
from .silence import log_dir, silence
from .torchrun import TorchrunLauncher

_SETTINGS = pytest.StashKey[Settings]()
_LAUNCHER = pytest.StashKey[Launcher]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def register(pluginmanager: pytest.PytestPluginManager) -> None:
    """For a conftest's ``pytest_addoption``: load this plugin unless ``-p`` already did.

    A non-root conftest may not use ``pytest_plugins``.
    """
    import sys

    me = sys.modules[__name__]
    if not pluginmanager.is_registered(me):
        pluginmanager.register(me, __name__)


@pytest.hookimpl(trylast=True)  # after the terminal reporter and junitxml exist, so silence() finds them
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "world_size(n): run this test's checks on n ranks under plain pytest; under torchrun the test "
        "is skipped unless torchrun started n processes",
    )
    settings = config.stash[_SETTINGS] = settings_from(config)
    if settings.mode == "torchrun":
        launcher = TorchrunLauncher(settings)
        if launcher.rank != 0:
            silence(config, launcher.rank)
    else:
        launcher = PlainLauncher(settings)
    config.stash[_LAUNCHER] = launcher


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings, launcher = config.stash[_SETTINGS], config.stash[_LAUNCHER]
    backend = launcher.backend(settings.world_size)
    tensors = tensors_on(backend, settings.device)
    lines = [
        (
            f"multigpu: {settings.mode} mode, world size {settings.world_size}, backend {backend}"
            + (f" over {tensors} tensors (ranks share the GPUs)" if tensors != tensors_of(backend) else "")
        ),
        (
            f"  timeouts: collectives {settings.pg_timeout:g} s (--pg-timeout), "
            f"each check {settings.rank_timeout:g} s (--rank-timeout)"
        ),
    ]
    if settings.mode == "torchrun" and settings.world_size > 1:
        lines.append(f"  rank 0 reports; the other ranks log to {log_dir()}")
    return lines


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[_LAUNCHER].on_collected([item.nodeid for item in session.items])


def pytest_unconfigure(config: pytest.Config) -> None:
    launcher = config.stash.get(_LAUNCHER, None)
    if launcher is not None:
        launcher.close()


def world_size_of(item: pytest.Item) -> int:
    """The ranks a test runs on: its ``world_size`` marker, else the session's."""
    marker = item.get_closest_marker("world_size")
    return marker.args[0] if marker else item.config.stash[_SETTINGS].world_size


def backend_of(config: pytest.Config, world_size: int) -> str:
    """The backend the harness gives ``world_size`` ranks."""
    return config.stash[_LAUNCHER].backend(world_size)


def transport_of(config: pytest.Config, world_size: int) -> Transport:
    """The backend the harness gives ``world_size`` ranks, and where their tensors live."""
    backend = backend_of(config, world_size)
    return Transport(backend, tensors_on(backend, config.stash[_SETTINGS].device))


@pytest.fixture
def ranks_at(request: pytest.FixtureRequest):
    """``ranks_at(n)``: ``n`` ranks, for a test that decides its world sizes as it runs; under torchrun only
    torchrun's world size is there (``torchrun_world_size``)."""
    settings = request.config.stash[_SETTINGS]

    def at(world_size: int) -> Ranks:
        if settings.mode == "torchrun" and world_size != settings.world_size:
            raise ValueError(f"world size: got {world_size}, but torchrun started {settings.world_size} processes")
        return Ranks(request.config.stash[_LAUNCHER], world_size, request.node)

    return at


def torchrun_world_size(config: pytest.Config) -> int | None:
    """The world size torchrun started, or None under plain pytest (any world size can be spawned)."""
    settings = config.stash[_SETTINGS]
    return settings.world_size if settings.mode == "torchrun" else None


@pytest.fixture
def ranks(request: pytest.FixtureRequest) -> Ranks:
    """Runs a check on every rank: ``ranks.run(check, *args)``; ``ranks.world_size`` ranks."""
    settings = request.config.stash[_SETTINGS]
    world_size = world_size_of(request.node)
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size marker: got {world_size!r}, but should be a whole number of at least 1")
    if settings.mode == "torchrun" and world_size != settings.world_size:
        pytest.skip(f"needs world size {world_size}, got {settings.world_size} from torchrun")
    return Ranks(request.config.stash[_LAUNCHER], world_size, request.node)
