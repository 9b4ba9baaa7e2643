"""A user runs the suites against a factory of their own, from their own repository: the suites are named by their
path in this checkout, the factory is imported from the current directory (``python -m pytest`` puts it on the
path), and the result is what a run from this checkout gives, a pass or the same failure."""

import subprocess
import sys
import textwrap

from tests.pytest_run import ROOT

FACTORY = """
from torch.nn.parallel import DistributedDataParallel


def factory(module, process_group):
    return DistributedDataParallel(module, process_group=process_group)
"""
FORGETS_TO_AVERAGE = """
import torch
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel


def summing(state, bucket):
    return allreduce_hook(state, bucket).then(lambda fut: fut.value() * state.size())


def factory(module, process_group):
    ddp = DistributedDataParallel(module, process_group=process_group)
    ddp.register_comm_hook(process_group, summing)
    return ddp
"""
NO_NO_SYNC = """
import torch
from torch.nn.parallel import DistributedDataParallel


class Hidden(torch.nn.Module):
    \"\"\"torch DDP behind a forward of its own, without no_sync.\"\"\"

    def __init__(self, module, process_group):
        super().__init__()
        self.inner = DistributedDataParallel(module, process_group=process_group)

    def forward(self, *args):
        return self.inner(*args)


def factory(module, process_group):
    return Hidden(module, process_group)
"""
CHECKS = ["-k", "test_grad_sync_matches_torch_ddp and (allreduce-overlap-tiny or allreduce-microbatches)"]


def run_from(folder, suite: str, spec: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", suite, "--impl", spec, *CHECKS,
                           *extra],
                          cwd=folder, capture_output=True, text=True, timeout=300)


def test_the_suite_runs_from_another_repository_against_a_factory_there(tmp_path):
    (tmp_path / "my_ddp.py").write_text(textwrap.dedent(FACTORY))
    (tmp_path / "my_broken_ddp.py").write_text(textwrap.dedent(FORGETS_TO_AVERAGE))
    suite = str(ROOT / "suites" / "multigpu" / "test_vs_torch_ddp.py")
    passing = run_from(tmp_path, suite, "wrap:my_ddp:factory")
    assert passing.returncode == 0 and "2 passed" in passing.stdout, passing.stdout[-2000:]
    failing = run_from(tmp_path, suite, "wrap:my_broken_ddp:factory")
    assert failing.returncode == 1 and "2 failed" in failing.stdout, failing.stdout[-2000:]
    assert "but should be bitwise equal" in failing.stdout and "Error: " not in failing.stdout.replace(
        "AssertionError: ", ""), "it should fail by a check, not crash: " + failing.stdout[-2000:]
    assert "rerun it alone" in failing.stdout and "--impl wrap:my_broken_ddp:factory" in failing.stdout
    (tmp_path / "my_plain_ddp.py").write_text(textwrap.dedent(NO_NO_SYNC))
    lacking = run_from(tmp_path, suite, "wrap:my_plain_ddp:factory", "-rs")
    assert lacking.returncode == 0 and "1 passed, 1 skipped" in lacking.stdout, lacking.stdout[-2000:]
    assert "Hidden has no no_sync()" in lacking.stdout, "the microbatches' case should skip, saying why"
