"""Plain pytest: the parent drives one worker pool per world size and restarts it when state is suspect.

A failure that broke the group (a collective timed out or lost a peer), or
that only some ranks saw (the others may have left a collective behind),
gets the next test fresh ranks. When every rank failed cleanly, as when the
implementation under test computes wrong values, the ranks are kept: a suite
run against a broken implementation then costs no restart per failing test.

Pools outlive a pytest session: they are kept per process (``WARM``, closed
at exit), and every task names the implementation under test, so several
sessions run in one process (the suite-strength runs of every broken
implementation) share warm ranks instead of starting their own.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from ranks.address import Address
from ranks.joining import pick_backend
from ranks.outcome import Outcome
from ranks.pool import PoolError, WorkerPool, warm_up
from ranks.rewrite import rewritten_modules
from ranks.startup import Settings
from ranks.worker import Task
from suites.impls import REGISTRY

WARM: dict[Settings, WorkerPool] = {}  # pools by their settings (the implementation left out), kept per process


def close_warm_pools() -> None:
    for key in list(WARM):
        WARM.pop(key).close()


atexit.register(close_warm_pools)


class PlainLauncher:
    mode = "plain"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        warm_up(self._preload())  # the fork server imports torch while the session collects

    def _preload(self) -> tuple[str, ...]:
        """The implementation under test's module where it is registered (never a user's: it may do anything at
        import), for the fork server to import once."""
        registered = REGISTRY.get(self.settings.impl_spec)
        return (registered.partition(":")[0],) if registered else ()

    def backend(self, world_size: int) -> str:
        return pick_backend(world_size, self.settings.device)

    def on_collected(self, nodeids: list[str]) -> None:
        pass  # the parent is the only process that collects

    def run(
        self, world_size: int, fn: Callable[..., Any], address: Address, args: tuple, kwargs: dict
    ) -> list[Outcome]:
        key = replace(self.settings, world_size=world_size, impl_spec="")
        pool = self._pool(key)
        task = Task(address, args, kwargs, rewritten_modules(), self.settings.impl_spec)
        try:
            outcomes = pool.run(task, str(address))
        except BaseException:
            self._discard(key)
            raise
        if needs_fresh_ranks(outcomes):
            self._discard(key)
        return outcomes

    def close(self) -> None:
        """Pools stay warm for the next session of this process; ``close_warm_pools`` ends them at exit."""

    def _pool(self, key: Settings) -> WorkerPool:
        if key not in WARM:
            pool = WorkerPool(key, self.backend(key.world_size))
            try:
                pool.start(rewritten_modules(), preload=self._preload())
            except PoolError as exc:
                pool.close(graceful=False)
                pytest.fail(str(exc), pytrace=False)
            except BaseException:
                pool.close(graceful=False)
                raise
            WARM[key] = pool
        return WARM[key]

    def _discard(self, key: Settings) -> None:
        WARM.pop(key).close(graceful=False)


def needs_fresh_ranks(outcomes: list[Outcome]) -> bool:
    failed = [o for o in outcomes if o.kind == "failed"]
    if not failed:
        return False
    return len(failed) < len(outcomes) or any(o.broke_group for o in failed)
