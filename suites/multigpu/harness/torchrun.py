"""torchrun: every rank runs the whole session; checks run in-process and the ranks agree on each outcome.

Agreement, over a private gloo group with the longer --rank-timeout, keeps the
ranks' pytest sessions in step: a failure anywhere fails the test everywhere.
Once a collective has timed out the group under test is unusable for good, so
later tests fail at once with that reason instead of waiting on a broken group.

Every rank must collect the same tests in the same order; that is checked once
collection ends. Selections that depend on per-process state (--lf/--ff need
the cache, which this project's addopts disables; random-order plugins) break
it and are refused there rather than hanging later.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import torch.distributed as dist

from ranks.address import Address
from ranks.context import RankContext
from ranks.joining import join, leave, pick_backend, torchrun_store
from ranks.outcome import Outcome, call_check
from ranks.startup import Settings
from reference.process_groups import new_group


class TorchrunLauncher:
    mode = "torchrun"

    def __init__(self, settings: Settings, environ: Mapping[str, str] = os.environ) -> None:
        self.settings = settings
        self.rank = int(environ["RANK"])
        self.local_rank = int(environ["LOCAL_RANK"])
        self._backend = pick_backend(int(environ.get("LOCAL_WORLD_SIZE", settings.world_size)), settings.device)
        self._ctx: RankContext | None = None
        self._agreement: dist.ProcessGroup | None = None
        self._broken: str | None = None

    def backend(self, world_size: int) -> str:
        return self._backend

    def on_collected(self, nodeids: list[str]) -> None:
        """Join the group, then make sure every rank is about to run the same tests in the same order."""
        everyone: list[Any] = [None] * self.settings.world_size
        self._join()
        try:
            dist.all_gather_object(everyone, nodeids, group=self._agreement)
        except Exception as exc:
            raise pytest.UsageError(
                f"rank {self.rank} could not compare its collected tests with the other ranks "
                f"within --rank-timeout={self.settings.rank_timeout:g} s: {exc}"
            ) from exc
        for rank, theirs in enumerate(everyone):
            if theirs != nodeids:
                self._refuse(_collection_difference(self.rank, nodeids, rank, theirs))

    def run(
        self, world_size: int, fn: Callable[..., Any], address: Address, args: tuple, kwargs: dict
    ) -> list[Outcome]:
        if self._broken:
            pytest.fail(
                f"process group broken by an earlier timeout ({self._broken}); this test did not run",
                pytrace=False,
            )
        ctx = self._join()
        mine = call_check(fn, ctx, args, kwargs)
        everyone: list[Any] = [None] * self.settings.world_size
        try:
            dist.all_gather_object(everyone, mine, group=self._agreement)
        except Exception as exc:  # noqa: BLE001 - whatever the reason, the ranks are out of step
            self._broken = f"rank {self.rank} could not agree with its peers on {address}: {exc}"
            pytest.fail(f"{self._broken}\nthis rank's own outcome: {mine.kind}\n{mine.detail}", pytrace=False)
        if any(o.broke_group for o in everyone):
            self._broken = f"{address} timed out or lost a peer"
        return everyone

    def close(self) -> None:
        leave()

    def _join(self) -> RankContext:
        if self._ctx is None:
            try:
                store = torchrun_store(self.settings, self.rank)
                self._ctx = join(
                    self.settings,
                    rank=self.rank,
                    local_rank=self.local_rank,
                    backend=self._backend,
                    store=store,
                )
                self._agreement = new_group(backend="gloo", timeout=self.settings.rank_timedelta)
            except Exception as exc:
                raise pytest.UsageError(
                    f"rank {self.rank} of {self.settings.world_size} could not join the process group "
                    f"(backend {self._backend}, --pg-timeout={self.settings.pg_timeout:g} s): {exc}"
                ) from exc
        return self._ctx

    def _refuse(self, message: str) -> None:
        """Stop every rank's session as a usage error; only rank 0 says why, the others exit quietly."""
        if self.rank == 0:
            raise pytest.UsageError(message)
        pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)


def _collection_difference(me: int, mine: list[str], rank: int, theirs: list[str]) -> str:
    index = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
    return (
        f"collection differs between ranks: rank {rank} collected {len(theirs)} tests, rank {me} "
        f"collected {len(mine)}; at position {index} rank {rank} has {_at(theirs, index)}, but should have "
        f"{_at(mine, index)} like rank {me}. Every rank must collect the same tests in the same order "
        "(no rank-dependent parametrization or collection, no random ordering)"
    )


def _at(nodeids: list[str], index: int) -> str:
    return repr(nodeids[index]) if index < len(nodeids) else "nothing"
