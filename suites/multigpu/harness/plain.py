"""Plain pytest: the parent drives one worker pool per world size and restarts it when state is suspect.

A failure that broke the group (a collective timed out or lost a peer), or
that only some ranks saw (the others may have left a collective behind),
gets the next test fresh ranks. When every rank failed cleanly, as when the
implementation under test computes wrong values, the ranks are kept: a suite
run against a broken implementation then costs no restart per failing test.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from ranks.address import Address
from ranks.groups import pick_backend
from ranks.outcome import Outcome
from ranks.pool import PoolError, WorkerPool
from ranks.rewrite import rewritten_modules
from ranks.settings import Settings
from ranks.worker import Task


class PlainLauncher:
    mode = "plain"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pools: dict[int, WorkerPool] = {}
        atexit.register(self.close)  # a backstop: pytest_unconfigure closes the pools first

    def backend(self, world_size: int) -> str:
        return pick_backend(world_size)

    def on_collected(self, nodeids: list[str]) -> None:
        pass  # the parent is the only process that collects

    def run(
        self, world_size: int, fn: Callable[..., Any], address: Address, args: tuple, kwargs: dict
    ) -> list[Outcome]:
        pool = self._pool(world_size)
        try:
            outcomes = pool.run(Task(address, args, kwargs, rewritten_modules()), str(address))
        except BaseException:
            self._discard(world_size)
            raise
        if needs_fresh_ranks(outcomes):
            self._discard(world_size)
        return outcomes

    def close(self) -> None:
        for world_size in list(self._pools):
            self._pools.pop(world_size).close()

    def _pool(self, world_size: int) -> WorkerPool:
        if world_size not in self._pools:
            pool = WorkerPool(replace(self.settings, world_size=world_size), self.backend(world_size))
            try:
                pool.start(rewritten_modules())
            except PoolError as exc:
                pool.close(graceful=False)
                pytest.fail(str(exc), pytrace=False)
            except BaseException:
                pool.close(graceful=False)
                raise
            self._pools[world_size] = pool
        return self._pools[world_size]

    def _discard(self, world_size: int) -> None:
        self._pools.pop(world_size).close(graceful=False)


def needs_fresh_ranks(outcomes: list[Outcome]) -> bool:
    failed = [o for o in outcomes if o.kind == "failed"]
    if not failed:
        return False
    return len(failed) < len(outcomes) or any(o.broke_group for o in failed)
