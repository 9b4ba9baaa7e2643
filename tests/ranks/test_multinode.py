"""Two torchrun agents on one host, as two nodes: the suite and the main job work across nodes.

Each agent is one "node" with one process; they meet through torchrun's
static rendezvous (``--rdzv-backend=static`` with ``--node-rank`` and a fixed
master address and port), which has no store to race for: node 0 hosts the
store, node 1 connects to it. tests/reports/test_launch_forms.py runs the main job
the same way.
"""

from __future__ import annotations

import socket
import subprocess
import sys

from tests.pytest_run import ROOT

TIMEOUT = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes(*command: str) -> list[subprocess.CompletedProcess]:
    """Start both agents at once and wait for both; each node's output comes back."""
    port = free_port()
    agents = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={node}",
             "--nproc-per-node=1", "--rdzv-backend=static", "--master-addr=127.0.0.1", f"--master-port={port}",
             *command],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for node in (0, 1)
    ]
    results = []
    for node, agent in enumerate(agents):
        try:
            out, _ = agent.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            for a in agents:
                a.kill()
            raise AssertionError(f"node {node} did not finish within {TIMEOUT} s") from None
        results.append(subprocess.CompletedProcess(agent.args, agent.returncode, out))
    return results


def test_the_suite_runs_across_two_nodes():
    only = ["suites/multigpu/test_harness.py::*", "*::test_matches_torch_ddp[[]allreduce-overlap-tiny]",
            "*::test_matches_torch_ddp[[]distopt-overlap-tiny]", "*::test_no_sync_keeps_grads_local*"]
    node0, node1 = two_nodes("-m", "pytest", "suites/multigpu", "-p", "no:cacheprovider", "-q",
                             "--pg-timeout=60", *(f"--only={p}" for p in only))
    assert node0.returncode == 0 and node1.returncode == 0, node0.stdout[-3000:] + node1.stdout[-3000:]
    assert "8 passed" in node0.stdout, node0.stdout[-1500:]
