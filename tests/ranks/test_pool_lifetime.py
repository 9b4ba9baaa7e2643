"""A rank never outlives the job that started it, whenever the job dies."""

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
