"""A rank never outlives the job that started it, whenever the job dies."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import HAS_PROC, alive
from tests.pytest_run import ROOT

# A job that starts one rank of two through the fork server, as a pool does, and dies before it starts the other:
# the rank waits to join for the startup timeout (60 s or more) unless it ends with the job.
_JOB = """
import os, sys, tempfile, time
from ranks import pool, worker
from ranks.startup import Settings
settings = Settings(mode="plain", world_size=2, pg_timeout=60, rank_timeout=120, impl_spec="reference")
pool.warm_up()
parent_end, child_end = pool._CONTEXT.Pipe()
rank = pool._CONTEXT.Process(target=worker.main, args=(0, settings, "gloo",
    os.path.join(tempfile.mkdtemp(), "store"), frozenset(), child_end, os.getpid()))
rank.start()
print(rank.pid, flush=True)
time.sleep(float(sys.argv[1]))  # the rank is importing torch or waiting to join
os._exit(0)
"""


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to see whether the rank lives")
def test_a_rank_waiting_to_join_ends_with_the_job(tmp_path):
    out = tmp_path / "out"  # a file, not a pipe: a surviving rank would hold a pipe open and stall the run
    with out.open("w") as stdout:
        job = subprocess.run([sys.executable, "-c", _JOB, "3"], cwd=ROOT, stdout=stdout, stderr=subprocess.STDOUT,
                             timeout=60)
    assert job.returncode == 0, out.read_text()
    rank = int(out.read_text().split()[0])
    deadline = time.monotonic() + 15  # the server's torch import, then the kill; not the 60 s startup timeout
    while alive(rank) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(rank), (f"rank {rank} still alive 15 s after its job died, but should end with it "
                              "(it waits to join until the startup timeout)")


def _dies_on_rank_1_while_rank_0_waits(ctx) -> None:
    from reference.process_groups import new_group

    if ctx.rank == 1:
        os.abort()
    new_group(backend="gloo")  # rank 0 waits in the store for rank 1 to join, until the group's timeout


def test_a_rank_that_dies_ends_the_others_wait_after_the_grace_not_the_timeout():
    from ranks import RanksFailed, run_on_ranks
    from ranks.pool import STRAGGLER_GRACE

    start = time.monotonic()
    with pytest.raises(RanksFailed) as failed:
        run_on_ranks(_dies_on_rank_1_while_rank_0_waits, 2, timeout=120.0, pg_timeout=60.0)
    seconds = time.monotonic() - start
    by_rank = {o.rank: o.detail for o in failed.value.failed}
    assert "rank 1 died of SIGABRT" in by_rank[1], by_rank
    assert "rank 0 was still running" in by_rank[0] and "after rank 1 died" in by_rank[0], by_rank
    assert seconds < 30, (f"got {seconds:.0f} s, but rank 0 should be killed {STRAGGLER_GRACE:g} s after rank 1 "
                          "died, not wait out the 60 s group timeout")
