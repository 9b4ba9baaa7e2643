"""The torch DDP adapter against torch DDP itself: its plan equals the buckets a live DDP launches.

The live side is read independently of the adapter, from a comm hook that
records ``bucket.parameters()`` as torch launches each bucket (one rank, gloo).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from reference.config import DDPConfig
from reference.layout import LayoutConfig
from suites.impls import load_implementation, torch_ddp
from suites.impls.megatron_core import implementation as megatron
from suites.impls.support import why_not
from suites.layout.strategies import models, setups
from suites.params import plan_specs

impl = torch_ddp.implementation


def linear_stack(*widths: int, bias: bool = False) -> torch.nn.Sequential:
    """A chain whose grads become ready in exactly reverse ``parameters()`` order."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(a, b, bias=bias) for a, b in zip(widths, widths[1:])]
    return torch.nn.Sequential(*layers)


def live_buckets(model: torch.nn.Module, steps: int = 2, **ddp_kw) -> list[list[list[str]]]:
    """For each step, the buckets torch DDP launches, in launch order, as param names."""
    names = {p: n for n, p in model.named_parameters()}
    ddp = torch.nn.parallel.DistributedDataParallel(model, **ddp_kw)
    seen: list[list[tuple[int, list[str]]]] = []

    def record(state, bucket):
        seen[-1].append((bucket.index(), [names[p] for p in bucket.parameters()]))
        return default_hooks.allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, record)
    for _ in range(steps):
        seen.append([])
        ddp(torch.randn(2, model[0].in_features)).sum().backward()
    return [[params for _, params in sorted(step)] for step in seen]


def planned_buckets(record) -> list[list[str]]:
    """A layout record's buckets as param names in offset order."""
    buckets = [[] for _ in record.bucket_indices]
    for name, (_, _, b) in sorted(record.param_index_map.items(), key=lambda kv: kv[1][0]):
        buckets[b].append(name)
    return buckets


def cap_mb(elements: int) -> float:
    return elements * 4 / 2**20


def test_registry_loads_the_torch_adapter():
    loaded = load_implementation("torch")
    assert loaded is impl, (
        f"load_implementation('torch'): got {loaded!r}, but should be torch_ddp.implementation"
    )
    assert (loaded.version, loaded.capabilities) == (torch.__version__, frozenset({"layout", "ddp", "checkpoint"})), (
        f"(version, capabilities): got {(loaded.version, loaded.capabilities)}"
    )


@pytest.mark.parametrize("bucket_size", [100, 600, 5000])
def test_plan_equals_live_rebuilt_buckets(group, bucket_size):
    """From the second step on, torch launches exactly the planned buckets (grads ready in reverse order)."""
    model = linear_stack(16, 32, 32, 4, bias=True)
    (record,) = impl.plan(model.named_parameters(), LayoutConfig(bucket_size=bucket_size))
    live = live_buckets(model, bucket_cap_mb=cap_mb(bucket_size))
    assert live[1] == planned_buckets(record), (
        f"torch DDP's buckets at step 2: got {live[1]}, but the plan says {planned_buckets(record)}"
    )


def test_wrapped_layout_uses_torchs_default_first_bucket(group):
    """bucket_size None: torch's 25 MiB cap with a 1 MiB first bucket, as a live default DDP shows."""
    model = linear_stack(*[300] * 7)  # six 90,000-element fp32 weights: 360,000 bytes each
    live = live_buckets(linear_stack(*[300] * 7))
    wrapped = impl.wrap(model, DDPConfig(overlap_grad_reduce=True), group)
    want = [["5.weight", "4.weight", "3.weight"], ["2.weight", "1.weight", "0.weight"]]
    assert live[1] == want, f"live default buckets at step 2: got {live[1]}, but should be {want}"
    got = planned_buckets(wrapped.buffers[0].layout)
    assert got == want, f"wrapped layout with torch's default cap: got {got}, but should be {want}"


def test_first_step_is_one_bucket_in_parameters_order(group):
    """torch 2.13 builds its reducer with the limit [sys.maxsize]: step 1 reduces everything at once."""
    model = linear_stack(8, 8, 8, 8)
    live = live_buckets(model, bucket_cap_mb=cap_mb(10))
    want = [[n for n, _ in model.named_parameters()]]
    assert live[0] == want, f"step 1 buckets: got {live[0]}, but should be {want}"


def test_find_unused_parameters_keeps_the_construction_assignment(group):
    """Documented difference: with find_unused_parameters=True torch walks forward, then reverses buckets."""
    model = linear_stack(*[95] * 11)  # 10 x Linear(95, 95, bias=False), 9025 elements each
    (record,) = impl.plan(model.named_parameters(), LayoutConfig(bucket_size=20000))
    live = live_buckets(model, bucket_cap_mb=cap_mb(20000), find_unused_parameters=True)
    layers = [[f"{i}.weight" for i in group_] for group_ in ([9], [6, 7, 8], [3, 4, 5], [0, 1, 2])]
    assert live[1] == layers, f"find_unused_parameters=True buckets: got {live[1]}, but should be {layers}"
    planned = [[f"{i}.weight" for i in group_] for group_ in ([9, 8, 7], [6, 5, 4], [3, 2, 1], [0])]
    assert planned_buckets(record) == planned, f"plan: got {planned_buckets(record)}, but should be {planned}"


def test_wrap_exposes_reduced_grads_as_main_grad_and_grad_data(group):
    model = linear_stack(6, 5, 3, bias=True)
    ddp = impl.wrap(model, DDPConfig(overlap_grad_reduce=True, bucket_size=20), group)
    with ddp.no_sync():
        ddp(torch.randn(4, 6)).sum().backward()
    for name, p in model.named_parameters():
        assert p.main_grad is p.grad, (
            f"{name}.main_grad inside no_sync: got a separate tensor, but should be {name}.grad itself"
        )
    ddp(torch.randn(4, 6)).sum().backward()
    ddp.finish_grad_sync()
    (buf,) = ddp.buffers
    assert buf.param_data is None, f"param_data: got {type(buf.param_data)}, but should be None (all-reduce)"
    for name, (start, end, _) in buf.layout.param_index_map.items():
        p = dict(model.named_parameters())[name]
        assert torch.equal(buf.grad_data[start:end], p.grad.reshape(-1)), (
            f"grad_data[{start}:{end}]: got other values, but should be {name}.grad"
        )
    ddp.zero_grad_buffer()
    left = [n for n, p in model.named_parameters() if p.grad is not None or hasattr(p, "main_grad")]
    assert not left, f"params with grad or main_grad after zero_grad_buffer: got {left}, but should be none"


@pytest.mark.parametrize(
    "config, needle",
    [
        (LayoutConfig(policy="padded"), "no 'padded' policy"),
        (LayoutConfig(grad_reduce_in_fp32=True), "no grad_reduce_in_fp32"),
        (DDPConfig(overlap_grad_reduce=False), "always overlaps"),
        (DDPConfig(overlap_grad_reduce=True, average_in_collective=True), "scaling each bucket by 1/world size"),
        (DDPConfig(overlap_grad_reduce=True, calculate_per_token_loss=True), "no per-token scaling"),
        (DDPConfig(overlap_grad_reduce=True, buckets_per_group=2), "got 2, but torch DDP launches each"),
        (DDPConfig(overlap_grad_reduce=True, grad_reduce_in_fp32=True), "no grad_reduce_in_fp32"),
        (DDPConfig(policy="high-busbw", overlap_grad_reduce=True), "no 'high-busbw' policy"),
    ],
)
def test_unsupported_configs_give_the_reason(config, needle):
    reason = why_not(impl, config)
    assert reason and needle in reason, (
        f"why_not(torch, {config}): got {reason!r}, but should mention {needle!r}"
    )


@pytest.mark.parametrize(
    "config", [LayoutConfig(bucket_size=7), DDPConfig(overlap_grad_reduce=True, disable_bucketing=True)]
)
def test_supported_configs_have_no_reason(config):
    reason = why_not(impl, config)
    assert reason is None, f"why_not(torch, {config}): got {reason!r}, but should be None"


def test_plan_rejects_distributed_optimizer_policies():
    with pytest.raises(ValueError, match="policy: got 'padded', but torch DDP supports only 'packed'"):
        impl.plan(linear_stack(4, 4).named_parameters(), LayoutConfig(policy="padded"))


def test_wrap_refuses_a_bucket_size_for_mixed_element_sizes():
    """torch's bucket_cap_mb is one byte limit: no value matches bucket_size elements of bf16 and fp32."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4).to(torch.bfloat16))
    with pytest.raises(ValueError, match=r"bucket_size: got params with element sizes \[2, 4\]"):
        impl.wrap(model, DDPConfig(overlap_grad_reduce=True, bucket_size=10), group=None)


@pytest.mark.skipif(bool(megatron.unavailable), reason=f"megatron-core: {megatron.unavailable}")
@settings(max_examples=40, deadline=None)
@given(model=models(), setup=setups())
def test_plan_equals_megatron_packed_without_fp32_grads(model, setup):
    """What the torch.toml xfails leave unchecked: with grad_reduce_in_fp32 off, every field agrees."""
    config = dataclasses.replace(setup, grad_reduce_in_fp32=False).config("packed")
    ours, theirs = plan_specs(impl, model, config), plan_specs(megatron, model, config)
    want_dtypes = list(dict.fromkeys((s.dtype, s.dtype) for s in model))
    got_dtypes = [(b.param_dtype, b.grad_dtype) for b in ours]
    assert got_dtypes == want_dtypes, f"record dtypes: got {got_dtypes}, but should be {want_dtypes}"
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        for field in ("numel", "numel_unpadded", "per_bucket_numel_unpadded", "param_index_map"):
            got, want = getattr(a, field), getattr(b, field)
            assert got == want, f"record {i} {field}: got {got}, but megatron-core says {want}"
        got, want = [tuple(x) for x in a.bucket_indices], [tuple(x) for x in b.bucket_indices]
        assert got == want, f"record {i} bucket_indices: got {got}, but megatron-core says {want}"
