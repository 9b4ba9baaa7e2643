"""Reading values whose every read is a collective, without letting one rank's error hang the others.

Some peers give the reduced gradient of a param only through a call that is
itself a collective (DeepSpeed's ``safe_get_full_grad`` all-reduces each
param's fragments). If such a call raises on one rank before its collective,
the other ranks wait in theirs until the process group times out. So each
batch of reads is first **rehearsed** on every rank with torch.distributed's
collectives stubbed out (the peer's own local code runs, nothing is sent),
the ranks agree over a group on what every rehearsal did, and only then do
the real reads run: a rank-local error, or ranks about to issue different
collectives, fails every rank at once.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Sequence

import torch
import torch.distributed as dist

COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce", "reduce_scatter_tensor")
TORCH_POINTS = [(dist, name) for name in COLLECTIVES if hasattr(dist, name)]
"""Where reads call their collectives: torch.distributed's functions (a peer that binds them elsewhere adds its own)."""


@contextlib.contextmanager
def collectives_stubbed(calls: list, points):
    """The functions at ``points`` record ``(name, shape, dtype)`` in ``calls`` and send nothing."""
    originals = [(owner, name, getattr(owner, name)) for owner, name in points]

    def stub(name):
        def call(tensor, *args, **kwargs):
            calls.append((name, tuple(getattr(tensor, "shape", ())), str(getattr(tensor, "dtype", ""))))
        return call

    for owner, name, _ in originals:
        setattr(owner, name, stub(name))
    try:
        yield
    finally:
        for owner, name, fn in originals:
            setattr(owner, name, fn)


def rehearse(reads: Sequence[tuple[str, Callable[[], torch.Tensor]]], points) -> tuple[str | None, list]:
    """Run every read with collectives stubbed: (the first error, or None; the collectives each read issued)."""
    signatures = []
    for name, read in reads:
        calls: list = []
        try:
            with collectives_stubbed(calls, points):
                read()
        except Exception as exc:  # reported to every rank, then raised there
            return f"reading {name!r} raised {type(exc).__name__}: {exc}", signatures
        signatures.append((name, calls))
    return None, signatures


def read_on_every_rank(reads: Sequence[tuple[str, Callable[[], torch.Tensor]]], group, points=TORCH_POINTS,
                       what: str = "reduced gradients") -> list[torch.Tensor]:
    """``[read() for _, read in reads]``, the same on every rank of ``group``, or an error on all of them.

    ``group``: a group every rank reaches (the control group): it carries one
    ``all_gather_object`` of each rank's rehearsal before any real read.
    ``points``: the ``(owner, function name)`` pairs through which the reads
    call their collectives, stubbed during the rehearsal.
    """
    error, signatures = rehearse(reads, points)
    everyone: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, (error, signatures), group=group)
    failed = [(rank, err) for rank, (err, _) in enumerate(everyone) if err is not None]
    if failed:
        rank, err = failed[0]
        raise RuntimeError(f"{what}: on rank {rank}, {err}; no rank issued the reads' collectives")
    for rank, (_, theirs) in enumerate(everyone):
        if theirs != everyone[0][1]:
            differ = next(a[0] for a, b in zip(everyone[0][1], theirs) if a != b)
            raise RuntimeError(
                f"{what}: reading {differ!r} issues different collectives on rank 0 and rank {rank} "
                f"({dict(everyone[0][1])[differ]} vs {dict(theirs)[differ]}), but should issue the same on "
                "every rank; no rank issued them"
            )
    return [read() for _, read in reads]
