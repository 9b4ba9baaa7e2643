"""The main job the ways a cluster launches it: one rank, torchrun on one node, two nodes.

Each run is a smoke run (at one rank every multi-rank benchmark on tiny
inputs, under torchrun the two cheapest; the single-process ones do not
depend on the launch) and must exit 0. At one rank and under torchrun it
runs the multi-rank suite narrowed to a few checks, with passing suite tests
counted, never 0 tests run: under torchrun the suite runs once, from rank 0,
with ranks of its own, as it does on two nodes (whose own test is of the
nodes' records; ``tests/ranks/test_multinode.py`` runs the suite across two
nodes).
"""

from __future__ import annotations

import subprocess
import sys

from benchmarks import BENCHMARKS
from reports.store.model import Results
from reports.store.runs import Runs, load_results
from tests.pytest_run import ROOT
from tests.ranks.test_multinode import two_nodes

SUITE_CHECKS = ["suites/multigpu/test_harness.py::*", "*::test_matches_torch_ddp[[]allreduce-overlap-tiny]"]
SUITE = ["--no-strength", "--explore-seconds", "0", "--impl", "reference", "--suite", "suites/multigpu",
         *(f"--pytest-arg=--only={p}" for p in SUITE_CHECKS)]
CHEAP = ["--benchmark", "busbw", "--benchmark", "harness_overhead"]
ON_RANKS = [arg for b in BENCHMARKS if b.on_ranks for arg in ("--benchmark", b.name)]
TIMEOUT = 300


def results_of(out) -> Results:
    return load_results(Runs(out).latest())


def assert_suite_ran(results: Results, world_size: int) -> None:
    [suite] = results.conformance
    assert suite.passed >= 3 and suite.failed == 0 and suite.errors == 0, suite
    assert results.suite_world_size == world_size, results.suite_world_size


def test_one_rank_runs_every_multi_rank_benchmark_and_the_suite(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "reports", "--smoke", "--world-size", "1", *ON_RANKS, *SUITE,
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = results_of(tmp_path)
    assert results.run.setup.world_size == 1 and results.run.setup.mode == "plain", results.run
    assert_suite_ran(results, 1)
    assert all(r.busbw_gbps is None and r.algbw_gbps for r in results.benchmarks.busbw), "busbw is null at one rank"
    assert {r.mode for r in results.benchmarks.overlap} == {"emulated", "real"}
    assert all(results.records(b.name) for b in BENCHMARKS if b.on_ranks), "every multi-rank benchmark ran at one rank"


def test_torchrun_runs_the_suite_once_from_rank_0(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           "-m", "reports", "--smoke", *CHEAP, *SUITE, "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = results_of(tmp_path)
    assert results.run.setup.mode == "torchrun" and results.run.setup.world_size == 2, results.run
    assert results.run.command[0] == "torchrun", results.run.command
    assert_suite_ran(results, 2)
    assert proc.stdout.count("## Summary") == 1, "only rank 0 writes and prints the report"


def test_two_nodes_record_every_node(tmp_path):
    node0, node1 = two_nodes("-m", "reports", "--smoke", *CHEAP, "--no-suites", "--no-strength", "--explore-seconds",
                             "0", "--out", str(tmp_path))
    assert node0.returncode == 0 and node1.returncode == 0, node0.stdout[-3000:] + node1.stdout[-3000:]
    results = results_of(tmp_path)
    assert results.run.setup.nodes == 2 and results.run.setup.world_size == 2, results.run
    assert [(n.node_rank, n.first_rank) for n in results.nodes] == [(0, 0), (1, 1)], results.nodes
    assert all(n.hardware.host.hostname for n in results.nodes)
    assert sum(r.wrong for r in results.benchmarks.busbw) == 0
