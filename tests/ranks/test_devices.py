"""Where ranks compute: NCCL with a GPU each, gloo over CUDA tensors where ranks share GPUs, gloo on the CPU.

The GPU counts are the node's as torch reports them, replaced here, so the
choice is checked on a machine without a GPU; the CUDA runs themselves are
``reports.gpu_check``'s.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from ranks import joining
from ranks.startup import Settings
from reports.comparison.comparable import why_not_comparable
from reports.store.upgrade import upgrade


@pytest.fixture
def gpus(monkeypatch):
    def have(count: int) -> None:
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    return have


@pytest.mark.parametrize("count, ranks, device, want", [
    (8, 8, "auto", "nccl"), (8, 8, "cuda", "nccl"), (1, 1, "auto", "nccl"),
    (1, 2, "auto", "gloo"), (1, 2, "cuda", "gloo"), (8, 8, "cpu", "gloo"), (0, 2, "auto", "gloo"),
])
def test_backend_follows_the_gpus_each_rank_has(gpus, count, ranks, device, want):
    gpus(count)
    got = joining.pick_backend(ranks, device)
    assert got == want, f"got {got} for {ranks} ranks on {count} GPUs with device {device}, but should be {want}"


def test_ranks_share_the_gpus_in_turn_under_gloo_over_cuda(gpus):
    gpus(2)
    got = [str(joining.rank_device("gloo", "cuda", r)) for r in range(5)]
    want = ["cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0"]
    assert got == want, f"got {got}, but should be {want}"
    assert str(joining.rank_device("nccl", "auto", 3)) == "cuda:3", "NCCL: a GPU of its own"
    assert str(joining.rank_device("gloo", "auto", 3)) == "cpu", "gloo by default: the CPU"


def test_cuda_without_a_gpu_is_a_clear_error(gpus):
    gpus(0)
    with pytest.raises(ValueError, match="got cuda, but this node has no GPU"):
        joining.pick_backend(2, "cuda")


def test_an_unknown_device_is_refused():
    with pytest.raises(ValueError, match=r"device: got 'gpu', but should be one of auto, cpu, cuda"):
        Settings("plain", 2, 60.0, 120.0, "reference", device="gpu")


def _results(backend: str, tensors: str | None, schema: int = 4):
    """A run on an H100 node with its tensors on ``tensors`` (None: a run that did not record it)."""
    run = {"name": "r", "backend": backend, "world_size": 2, "mode": "plain", "smoke": False}
    setup = {"backend": backend, "world_size": 2, "mode": "plain", "nodes": 1, "smoke": False, "method": 4,
             "devices": ["1 x NVIDIA H100 80GB HBM3"]}
    if tensors:
        run["tensors"] = setup["tensors"] = tensors
    return upgrade({"schema": schema, "run": {**run, "setup": setup}, "metrics": {}})


def test_gloo_over_cuda_is_a_setup_of_its_own():
    cpu, cuda = _results("gloo", "cpu"), _results("gloo", "cuda")
    assert why_not_comparable(cpu, cuda) == "tensors cpu -> cuda", why_not_comparable(cpu, cuda)
    label = cuda.run.setup.label()
    assert label.startswith("gloo over cuda, 2 ranks"), label
    assert cpu.run.setup.label().startswith("gloo, 2 ranks"), cpu.run.setup.label()


def test_a_run_that_did_not_record_its_tensors_had_them_where_its_backend_keeps_them():
    older = _results("gloo", None, schema=3)
    assert why_not_comparable(older, _results("gloo", "cpu")) is None, "gloo then meant the CPU"
    assert why_not_comparable(older, _results("gloo", "cuda")) == "tensors cpu -> cuda"


def test_gloo_launches_the_buckets_of_a_group_one_by_one_on_cuda_tensors(group):
    """gloo's allreduce_coalesced refuses CUDA tensors; on the CPU it coalesces."""
    from reference.bucket_group import coalesces

    assert coalesces(group, torch.device("cpu")), "gloo coalesces CPU tensors"
    assert not coalesces(group, torch.device("cuda", 0)), "gloo cannot coalesce CUDA tensors"
