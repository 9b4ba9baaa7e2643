"""A process group that forwards every collective to a real one and records it.

What the suites hand an implementation is a ``RecordingGroup`` over the group
under test (gloo or NCCL). Every collective the implementation issues through
it, launched from Python or from C++ (torch's DDP reducer calls its process
group through pybind's trampoline, which dispatches to these Python methods),
is forwarded unchanged to the real group, and the work it returns is handed
back as it is: async handles, coalesced launches and their futures behave
exactly as without the recorder. Each call is recorded as a ``Collective``:
what it does (kind, reduce op), the tensors it reads and writes (storage,
element offset, element count, dtype), when it was launched and, where the
backend says so truthfully (gloo: its future completes when the data is in;
NCCL completes futures at enqueue), when it completed.

The group is made through ``torch.distributed.new_group`` with a registered
backend whose creator returns the recorder, so torch knows it like any other
group (ranks, name, rank lookups, device meshes over it). With
``checksums`` on, a reduction also records the float64 sum and sum of
squares of what it reduces, read at launch: enough to check the scaling and
that every gradient element is reduced exactly once, without knowing the
layout.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.distributed as dist

from compat.private_torch import forward_coalescing, register_backend_once, show_backend_behind
from reference.process_groups import new_group

BACKEND = "ddpc_recording"
_pending: list[dist.ProcessGroup] = []  # the group to wrap, while new_group runs
_registration = threading.Lock()
_recorders: dict[dist.ProcessGroup, "RecordingGroup"] = {}


@dataclass(frozen=True)
class TensorRef:
    """Where a collective's tensor lives: its storage, element offset and count, dtype and device."""

    storage: int
    offset: int
    numel: int
    dtype: str
    device: str

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorRef":
        return cls(t.untyped_storage().data_ptr(), t.storage_offset(), t.numel(), str(t.dtype).removeprefix("torch."),
                   t.device.type)

    @property
    def end(self) -> int:
        return self.offset + self.numel


@dataclass
class Collective:
    kind: str
    """all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, barrier, gather, scatter, send, recv."""
    reduce_op: str | None
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...]
    group_size: int
    launched_s: float
    """``time.perf_counter()`` at launch."""
    completed_s: float | None = None
    """``time.perf_counter()`` when the backend completed it; None where it does not say (NCCL's futures complete
    at enqueue and are not read; gloo's reduce-scatter has none)."""
    coalesced: bool = False
    sum: float | None = None
    sum_of_squares: float | None = None

    @property
    def reduces(self) -> bool:
        return self.kind in REDUCTIONS

    @property
    def numel(self) -> int:
        return sum(t.numel for t in self.inputs)


REDUCTIONS = ("all_reduce", "reduce_scatter", "reduce")

# Process-group method -> (kind, position of the argument it reads, position of the one it writes, coalesced).
# Both torch 2.13's names and the older ones, so whichever the caller uses is recorded.
METHODS: dict[str, tuple[str, int | None, int | None, bool]] = {
    "allreduce": ("all_reduce", 0, 0, False),
    "allreduce_coalesced": ("all_reduce", 0, 0, True),
    "reduce": ("reduce", 0, 0, False),
    "reduce_scatter": ("reduce_scatter", 1, 0, False),
    "reduce_scatter_single": ("reduce_scatter", 1, 0, False),
    "_reduce_scatter_base": ("reduce_scatter", 1, 0, False),
    "reduce_scatter_single_coalesced": ("reduce_scatter", 1, 0, True),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter", 1, 0, True),
    "allgather": ("all_gather", 1, 0, False),
    "all_gather_single": ("all_gather", 1, 0, False),
    "_allgather_base": ("all_gather", 1, 0, False),
    "allgather_coalesced": ("all_gather", 1, 0, True),
    "all_gather_single_coalesced": ("all_gather", 1, 0, True),
    "allgather_into_tensor_coalesced": ("all_gather", 1, 0, True),
    "broadcast": ("broadcast", 0, 0, False),
    "alltoall": ("all_to_all", 1, 0, False),
    "alltoall_base": ("all_to_all", 1, 0, False),
    "all_to_all_single": ("all_to_all", 1, 0, False),
    "gather": ("gather", 1, 0, False),
    "scatter": ("scatter", 1, 0, False),
    "barrier": ("barrier", None, None, False),
    "send": ("send", 0, None, False),
    "recv": ("recv", None, 0, False),
    "recv_anysource": ("recv", None, 0, False),
}


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in an argument: a tensor, or (nested) lists of them."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)


REDUCE_OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")


def reduce_op_of(args: tuple) -> str | None:
    """The reduce op named by the call's options object, e.g. "SUM" or "AVG"."""
    for arg in args:
        op = getattr(arg, "reduceOp", None)
        if op is not None:
            return next((name for name in REDUCE_OPS if hasattr(dist.ReduceOp, name)
                         and op == getattr(dist.ReduceOp, name)), "UNKNOWN")
    return None


class RecordingGroup(dist.ProcessGroup):
    """``inner``'s collectives, forwarded as they are and recorded in ``collectives``."""

    def __init__(self, inner: dist.ProcessGroup, rank: int, size: int) -> None:
        super().__init__(rank, size)
        self.inner = inner
        self.checksums = False
        """Record the sum and sum of squares of what each reduction reduces (reads the values at launch)."""
        self._group_name = self._group_desc = ""
        self.collectives: list[Collective] = []

    # Names and descriptions live in a group's backends, and a Python group has none: keep them here.
    # (The C++ names: torch calls them through pybind's trampoline.)
    def getBackendName(self) -> str:  # noqa: N802
        return self.inner.name()

    def getGroupName(self) -> str:  # noqa: N802
        return self._group_name

    def setGroupName(self, name: str) -> None:  # noqa: N802
        self._group_name = name

    def getGroupDesc(self) -> str:  # noqa: N802
        return self._group_desc

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        self._group_desc = desc

    @property
    def bound_device_id(self):
        return self.inner.bound_device_id

    def _start_coalescing(self, device):
        return forward_coalescing(self.inner, "start", device)

    def _end_coalescing(self, device):
        return forward_coalescing(self.inner, "end", device)

    def clear(self) -> None:
        """Forget what was recorded."""
        self.collectives = []

    def _forward(self, method: str, args: tuple, kwargs: dict):
        kind, reads, writes, coalesced = METHODS[method]
        inputs = list(tensors_in(args[reads])) if reads is not None and reads < len(args) else []
        outputs = list(tensors_in(args[writes])) if writes is not None and writes < len(args) else []
        event = Collective(kind, reduce_op_of(args) if kind in REDUCTIONS else None,
                           tuple(TensorRef.of(t) for t in inputs), tuple(TensorRef.of(t) for t in outputs),
                           self.size(), time.perf_counter(), coalesced=coalesced)
        if self.checksums and event.reduces and inputs:
            values = torch.cat([t.detach().reshape(-1).double() for t in inputs])
            event.sum, event.sum_of_squares = float(values.sum()), float(values.square().sum())
        self.collectives.append(event)
        work = getattr(self.inner, method)(*args, **kwargs)
        if self.inner.name() != "nccl":  # NCCL completes a work's future when it is enqueued
            _when_done(work, lambda: setattr(event, "completed_s", time.perf_counter()))
        return work


def _when_done(work, mark) -> None:
    """Call ``mark`` when ``work`` completes, where its future says so; nothing otherwise."""
    try:
        work.get_future().add_done_callback(lambda _: mark())
    except (AttributeError, RuntimeError, TypeError):
        pass


def _method(name: str):
    def forward(self, *args, **kwargs):
        return self._forward(name, args, kwargs)
    forward.__name__ = name
    return forward


for _name in METHODS:
    setattr(RecordingGroup, _name, _method(_name))


def _create(store, rank: int, size: int, timeout) -> RecordingGroup:
    return RecordingGroup(_pending[-1], rank, size)


def _register() -> None:
    with _registration:
        register_backend_once(BACKEND, _create, ["cpu", "cuda"])


def forget_recorders() -> None:
    """Drop the recorders (their groups are destroyed with the process group)."""
    _recorders.clear()


def recording(group: dist.ProcessGroup) -> RecordingGroup:
    """The recorder over ``group``, known to torch like any group of the same ranks; made once per process (by
    the group's members only), and shared: ``clear()`` it before a stretch you want to read on its own."""
    if group not in _recorders:
        _recorders[group] = _made_over(group)
    return _recorders[group]


def _made_over(group: dist.ProcessGroup) -> RecordingGroup:
    _register()
    _pending.append(group)
    try:
        made = new_group(dist.get_process_group_ranks(group), backend=BACKEND, use_local_synchronization=True)
    finally:
        _pending.pop()
    if not isinstance(made, RecordingGroup):
        raise RuntimeError(f"recording: got a {type(made).__name__} from new_group, but should be a RecordingGroup "
                           "(this torch does not return a Python process group from a backend's creator)")
    # torch sees the real backend behind the recorder: get_backend names it (gloo, nccl), and C++ that asks the
    # group for its backend object (torch DDP's logger) gets it, so an implementation takes the path it would
    # take without the recorder. Collectives still go through the recorder's methods.
    show_backend_behind(made, group)
    return made
