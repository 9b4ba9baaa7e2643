"""Plain-mode ranks: one worker process per rank, started once and reused by every test.

Starting a rank by spawning it costs an ``import torch`` (2 to 4 s each on 2
cores, where four ranks import at once), so ranks are forked from a server
process that imported torch once (multiprocessing's forkserver, its preload):
after the first pool of a process, a pool of four starts in 0.07 s instead of
4 s. Ranks are forked from that server, which did nothing but this import,
never from the parent, whose threads and state a fork would copy; spawn
remains where there is no forkserver. Running a check
on a warm pool costs a pipe round trip. The parent never joins the process
group itself, so it can always time out, kill and report a stuck or dead rank.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import pickle
import shutil
import signal
import tempfile
import time
from multiprocessing.connection import Connection, wait

from . import worker
from .outcome import Outcome
from .startup import Settings

STRAGGLER_GRACE = 5.0
"""Seconds the other ranks get to answer once one rank has failed a check or died. A rank that failed (or died)
before a collective leaves its peers waiting in it until the group's timeout (60 s by default): a failing run of a
peer whose check raised on one rank took 69 s. Past the grace they are killed (the test fails anyway, by the failed rank's
traceback) and the pool is restarted."""
PRELOAD = ["ranks.joining", "ranks.worker"]
"""What the server imports before it forks ranks: torch and torch.distributed, through these."""


def _start_method() -> multiprocessing.context.BaseContext:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context("forkserver")


_CONTEXT = _start_method()


def warm_up(preload: tuple[str, ...] = ()) -> None:
    """Start the fork server now: it imports torch and ``preload`` in a process of its own while this one goes on
    (collecting tests, parsing a model), instead of the first pool waiting for that import. A server already
    running keeps its preload; nothing where there is no fork server."""
    if isinstance(_CONTEXT, multiprocessing.context.ForkServerContext):
        _CONTEXT.set_forkserver_preload([*PRELOAD, *preload])
        multiprocessing.forkserver.ensure_running()


class PoolError(RuntimeError):
    """The pool could not be started."""


class WorkerPool:
    def __init__(self, settings: Settings, backend: str) -> None:
        self.settings, self.backend, self.world_size = settings, backend, settings.world_size
        self._dir = tempfile.mkdtemp(prefix=f"ddpc-multigpu-ws{self.world_size}-")
        self._store = os.path.join(self._dir, "store")  # the ranks' FileStore; their stack files lie beside it
        self._conns: list[Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []

    def start(self, rewrite: frozenset[str], preload: tuple[str, ...] = ()) -> None:
        """Start the ranks and wait until every one has joined the group; raises PoolError otherwise.
        ``preload``: modules the fork server imports besides torch, when it starts (the first pool of a process
        starts it): the implementation under test, which every rank imports."""
        warm_up(preload)
        for rank in range(self.world_size):
            parent_end, child_end = _CONTEXT.Pipe()
            proc = _CONTEXT.Process(
                target=worker.main,
                args=(
                    rank,
                    self.settings,
                    self.backend,
                    self._store,
                    rewrite,
                    child_end,
                    os.getpid(),
                ),
                name=f"ddpc-rank-{rank}",
            )
            proc.start()
            child_end.close()
            self._conns.append(parent_end)
            self._procs.append(proc)
        self._expect("ready", self.settings.startup_timedelta.total_seconds() + 5.0)

    def run(self, task: worker.Task, name: str) -> list[Outcome]:
        """Every rank's outcome of ``task``; a rank that dies or overruns --rank-timeout fails."""
        payload = pickle.dumps(task)
        for rank, conn in enumerate(self._conns):
            try:
                conn.send_bytes(payload)
            except OSError:
                pass  # a dead rank; reported below
        replies = self._collect(time.monotonic() + self.settings.rank_timeout, grace=STRAGGLER_GRACE)
        failed = next((f"rank {r} failed" for r, reply in sorted(replies.items()) if reply.kind == "failed"), None)
        dead = next((r for r in range(self.world_size) if r not in replies and not self._procs[r].is_alive()), None)
        failed = failed or (None if dead is None else f"rank {dead} died")
        return [replies.get(rank) or self._unanswered(rank, name, failed) for rank in range(self.world_size)]

    def _unanswered(self, rank: int, name: str, failed: str | None) -> Outcome:
        """The outcome of a rank that did not answer: it died, overran --rank-timeout, or was still running when
        the grace after another rank failed or died (``failed`` says which) ran out. Its ranks are not reused."""
        self._procs[rank].join(0.1)
        if failed is not None and self._procs[rank].exitcode is None:
            why = (f"rank {rank} was still running {name} {STRAGGLER_GRACE:g} s after {failed} (waiting, "
                   "most likely, in a collective that rank never joined), so it is killed")
        else:
            why = self._missing(rank, f"running {name}", self.settings.rank_timeout)
        code = self._procs[rank].exitcode
        stack = self._stack(rank) if code is None else self._crash(rank)
        died_of = signal.Signals(-code).name if code is not None and code < 0 else None
        return Outcome.failed(rank, f"{why}; the pool is restarted for the next test{stack}", broke_group=True,
                              signal=died_of)

    def close(self, graceful: bool = True) -> None:
        """Stop every rank: ask them to leave (if ``graceful``), then kill whatever is left."""
        if graceful:
            for conn in self._conns:
                try:
                    conn.send_bytes(pickle.dumps(None))
                except OSError:
                    pass
            deadline = time.monotonic() + 5.0
            for proc in self._procs:
                proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
            proc.join(5.0)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []
        shutil.rmtree(self._dir, ignore_errors=True)

    def _collect(self, deadline: float, stop_on_trouble: bool = False, grace: float | None = None) -> dict[int, object]:
        """Replies by rank until every rank has answered or died, or ``deadline`` passes.

        ``stop_on_trouble``: return as soon as one rank dies or answers ``error``. ``grace``: once one rank has
        answered a failed ``Outcome`` or died without answering, wait at most this long for the others.
        """
        replies: dict[int, object] = {}
        pending = set(range(self.world_size))
        while pending:
            died = any(r not in replies for r in set(range(self.world_size)) - pending)
            if grace is not None and (died or any(isinstance(r, Outcome) and r.kind == "failed"
                                                  for r in replies.values())):
                deadline, grace = min(deadline, time.monotonic() + grace), None
            waitables = {self._conns[r]: r for r in pending} | {self._procs[r].sentinel: r for r in pending}
            ready = wait(list(waitables), timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            for rank in {waitables[obj] for obj in ready}:
                conn = self._conns[rank]
                try:
                    if conn.poll():
                        replies[rank] = conn.recv()
                except (EOFError, OSError):
                    pass
                pending.discard(rank)  # answered, or died without answering
                reply = replies.get(rank)
                if stop_on_trouble and (reply is None or reply[0] == "error"):
                    return replies
        return replies

    def _expect(self, what: str, seconds: float) -> None:
        replies = self._collect(time.monotonic() + seconds, stop_on_trouble=True)
        bad = [r for r in range(self.world_size) if not (r in replies and replies[r][0] == what)]
        if not bad:
            return
        # A rank that failed or died explains the others, which only wait for it.
        rank = next((r for r in bad if r in replies or not self._procs[r].is_alive()), bad[0])
        reply = replies.get(rank)
        detail = reply[1] if reply else self._missing(rank, "starting", seconds)
        raise PoolError(
            f"could not start rank {rank} of {self.world_size} (backend {self.backend}):\n{detail}"
        )

    def _missing(self, rank: int, doing: str, seconds: float) -> str:
        """Why ``rank`` did not answer: it died, or it is still busy (and ``close`` kills it)."""
        proc = self._procs[rank]
        proc.join(0.1)  # a dead rank's exit code is there at once; a busy one is not worth waiting for
        if proc.exitcode is not None:
            of = f" of {signal.Signals(-proc.exitcode).name}" if proc.exitcode < 0 else ""
            return f"rank {rank} died{of} (exit code {proc.exitcode}) while {doing}"
        return (
            f"rank {rank} was still {doing} after {seconds:g} s, so it is killed (timeouts: "
            f"--pg-timeout={self.settings.pg_timeout:g} s, --rank-timeout={self.settings.rank_timeout:g} s)"
        )

    def _crash(self, rank: int) -> str:
        """The stacks a rank killed by a signal wrote as it died (``faulthandler``), or nothing."""
        try:
            with open(worker.crash_path(self._store, rank)) as f:
                text = f.read().rstrip()
        except OSError:
            return ""
        return f"\nits threads' stacks as it died:\n{text}" if text else ""

    def _stack(self, rank: int) -> str:
        """Where the live ``rank`` is stuck: the stack it writes on ``worker.STACK_SIGNAL``, or nothing when it
        writes none within a second."""
        path = worker.stack_path(self._store, rank)
        try:
            os.kill(self._procs[rank].pid, worker.STACK_SIGNAL)
        except ProcessLookupError:
            return ""
        deadline, text, latest = time.monotonic() + 1.0, "", ""
        while time.monotonic() < deadline and not (latest and latest == text):  # until written, no longer growing
            text = latest
            time.sleep(0.05)
            try:
                with open(path) as f:
                    latest = f.read()
            except OSError:
                return ""
        return f"\nits stack when killed:\n{latest.rstrip()}" if latest else ""
