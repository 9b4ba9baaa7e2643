"""A plain-mode rank: a spawned process that joins the group once, then runs checks by name.

It talks to the parent over one pipe: ``ready`` once it has joined the group
(or ``error``), then one ``Outcome`` per pickled ``Task`` until it reads
``None`` or the pipe closes. It never outlives the parent.
"""

from __future__ import annotations

import ctypes
import dataclasses
import faulthandler
import multiprocessing.forkserver
import os
import pickle
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

from .address import Address, resolve
from .outcome import Outcome, call_check
from .rewrite import rewrite_on_import
from .startup import Settings


class Task(NamedTuple):
    address: Address
    args: tuple
    kwargs: dict[str, Any]
    rewrite: frozenset[str]
    """Modules to import with assertion rewriting (see ``rewrite``)."""
    impl_spec: str | None = None
    """The implementation under test for this task (``RankContext.impl_spec``); None keeps the pool's. A warm
    pool serves pytest sessions of different implementations."""


def main(
    rank: int,
    settings: Settings,
    backend: str,
    store_path: str,
    rewrite: frozenset[str],
    conn: Connection,
    parent: int,
) -> None:
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it kills us
    # Where a stuck rank waits is what explains a hang; the parent asks for it before it kills the rank.
    faulthandler.register(STACK_SIGNAL, file=open(stack_path(store_path, rank), "w"), all_threads=False)
    # A rank that dies of a signal (a heap glibc finds corrupt, a segfault in a peer's native code) leaves every
    # thread's Python stack, which the parent reports with the death.
    faulthandler.enable(file=open(crash_path(store_path, rank), "w"), all_threads=True)
    os.environ["OMP_NUM_THREADS"] = str(settings.threads)
    import torch
    import torch.distributed as dist

    from .joining import join, leave

    torch.set_num_threads(settings.threads)
    rewrite_on_import(rewrite)
    try:
        store = dist.FileStore(store_path, settings.world_size)
        ctx = join(settings, rank=rank, local_rank=rank, backend=backend, store=store)
    except Exception:  # noqa: BLE001 - any reason is reported to the parent
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready",))
    while (raw := _receive(conn)) is not None:
        try:
            task = pickle.loads(raw)
        except Exception:  # noqa: BLE001 - any reason fails the test, not the worker
            conn.send(
                Outcome.failed(rank, f"rank {rank} could not unpickle the task:\n{traceback.format_exc()}")
            )
            continue
        if task is None:
            break
        outcome = _run(ctx, task)
        sys.stdout.flush()  # the check's output lands in the parent's capture before the test ends
        sys.stderr.flush()
        conn.send(outcome)
    leave()


STACK_SIGNAL = signal.SIGUSR1
"""The signal on which a rank writes its Python stack to ``stack_path``."""


def stack_path(store_path: str, rank: int) -> str:
    """Where ``rank`` writes its stack, beside the pool's store."""
    return os.path.join(os.path.dirname(store_path), f"stack-{rank}")


def crash_path(store_path: str, rank: int) -> str:
    """Where ``rank`` writes its threads' stacks if a signal kills it, beside the pool's store."""
    return os.path.join(os.path.dirname(store_path), f"crash-{rank}")


def _receive(conn: Connection) -> bytes | None:
    try:
        return conn.recv_bytes()
    except EOFError:  # the parent went away
        return None


def _run(ctx, task: Task) -> Outcome:
    rewrite_on_import(task.rewrite)
    if task.impl_spec is not None:
        ctx = dataclasses.replace(ctx, impl_spec=task.impl_spec)
    try:
        fn = resolve(task.address)
    except Exception:  # noqa: BLE001 - any reason fails the test, not the worker
        return Outcome.failed(
            ctx.rank, f"rank {ctx.rank} could not import {task.address}:\n{traceback.format_exc()}"
        )
    return call_check(fn, ctx, task.args, task.kwargs, keep_warnings=True)


def die_with_parent(parent: int) -> None:
    """Linux: get SIGKILL when the process that started this one dies (the parent, or the fork server that ends
    with it), even if it is killed before it can clean up; leave at once if ``parent`` is already gone."""
    release_fork_server()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        os._exit(1)
    if os.getppid() == 1:  # whoever forked this one died before the line above took effect
        os._exit(1)


def release_fork_server() -> None:
    """Let the fork server end with the job. It hands every child it forks the job's end of its liveness pipe (so
    a child could fork through it too), and it stays up while any holder lives; a rank that holds it then keeps
    alive the server its PDEATHSIG is tied to. A job stopped between starting two ranks left the first waiting
    to join, with the server, until the startup timeout (60 s or more). Ranks fork nothing through the server."""
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        os.close(fd)
        server._forkserver_alive_fd = None
