"""The harness's command-line options and how they combine with the launch environment.

Checked once at configure time, so a bad value is a usage error before any
process starts rather than a confusing hang later.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest

from ranks.capacity import world_size_problem
from ranks.startup import ALLOW_WORLD_SIZE_ENV, DEFAULT_WORLD_SIZE, WORLD_SIZE_ENV, Settings, launched_by_torchrun


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("multigpu", "multi-process harness (suites/multigpu)")
    group.addoption(
        "--world-size",
        type=int,
        default=None,
        help=f"ranks to start under plain pytest (default: ${WORLD_SIZE_ENV} or {DEFAULT_WORLD_SIZE}); "
        "under torchrun the world size is torchrun's",
    )
    group.addoption(
        "--allow-world-size",
        action="store_true",
        default=bool(os.environ.get(ALLOW_WORLD_SIZE_ENV)),
        help="start --world-size ranks even past what this machine's cores and memory hold "
        f"(default: set by ${ALLOW_WORLD_SIZE_ENV})",
    )
    group.addoption(
        "--pg-timeout",
        type=float,
        default=60.0,
        help="seconds a collective waits for the other ranks before it fails (default 60)",
    )
    group.addoption(
        "--rank-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for every rank to finish one check, larger than --pg-timeout (default 120)",
    )
    group.addoption(
        "--crash-reruns",
        type=int,
        default=1,
        help="times a check whose rank died of a signal (SIGSEGV, SIGABRT) runs again on fresh ranks under plain "
        "pytest; each rerun is said in a warning and the JUnit XML (default 1; 0: the crash fails the test)",
    )


def settings_from(config: pytest.Config, environ: Mapping[str, str] = os.environ) -> Settings:
    """The settings for this session; raises ``pytest.UsageError`` naming the bad value."""
    pg_timeout = config.getoption("pg_timeout")
    rank_timeout = config.getoption("rank_timeout")
    if pg_timeout <= 0:
        raise pytest.UsageError(
            f"--pg-timeout: got {pg_timeout:g}, but should be a positive number of seconds"
        )
    if rank_timeout <= pg_timeout:
        raise pytest.UsageError(
            f"--rank-timeout: got {rank_timeout:g} s, but should be larger than --pg-timeout "
            f"({pg_timeout:g} s), so a rank stuck in a collective reports its own timeout first"
        )
    crash_reruns = config.getoption("crash_reruns")
    if crash_reruns < 0:
        raise pytest.UsageError(f"--crash-reruns: got {crash_reruns}, but should be 0 or more")
    requested = config.getoption("world_size")
    if launched_by_torchrun(environ):
        mode, world_size = "torchrun", int(environ["WORLD_SIZE"])
        if requested is not None and requested != world_size:
            raise pytest.UsageError(
                f"--world-size: got {requested}, but torchrun started {world_size} processes; "
                "drop the option or match --nproc-per-node"
            )
    else:
        mode, world_size = "plain", _plain_world_size(requested, environ)
        problem = world_size_problem(world_size, config.getoption("allow_world_size"), "--allow-world-size")
        if problem:
            raise pytest.UsageError(problem)
    return Settings(mode, world_size, pg_timeout, rank_timeout, config.getoption("impl", "reference"),
                    device=config.getoption("device", "auto"), crash_reruns=crash_reruns)


def _plain_world_size(requested: int | None, environ: Mapping[str, str]) -> int:
    source, value = "--world-size", requested
    if value is None and WORLD_SIZE_ENV in environ:
        source, raw = f"${WORLD_SIZE_ENV}", environ[WORLD_SIZE_ENV]
        try:
            value = int(raw)
        except ValueError:
            raise pytest.UsageError(f"{source}: got {raw!r}, but should be a whole number") from None
    if value is None:
        return DEFAULT_WORLD_SIZE
    if value < 1:
        raise pytest.UsageError(f"{source}: got {value}, but should be at least 1")
    return value
