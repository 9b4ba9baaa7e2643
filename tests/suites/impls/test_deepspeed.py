"""The DeepSpeed adapter's own logic: its config mapping, its skips, the op build kept out, reads that fail fast.

The mapping and skip checks need no DeepSpeed; the rest skip with the reason
when it is not installed.
"""

import contextlib
import copy
import time

import pytest
import torch
import torch.distributed as dist

from reference.config import DDPConfig
from suites.impls.deepspeed import SHM_OP, bf16_fp32_accumulation, implementation as zero2, round_robin, zero1, zero3
from suites.impls.support import why_not
from suites.multigpu.models import batch, loss_fn, make_model

needs_deepspeed = pytest.mark.skipif(bool(zero2.unavailable), reason=f"deepspeed: {zero2.unavailable}")
FAST = 30.0  # seconds: well inside the process-group timeout


def test_buckets_overlap_and_clipping_map_onto_zero_options():
    model = make_model()
    ds = zero2.engine_config(model, DDPConfig(overlap_grad_reduce=True, bucket_size=100), None)
    assert ds["zero_optimization"] == {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 100,
                                       "allgather_bucket_size": 100}, ds
    assert ds["gradient_accumulation_steps"] == 1 and ds["gradient_clipping"] == 0.0, ds
    assert "bf16" not in ds and "gradient_allreduce_op" not in ds, ds
    one = zero1.engine_config(model, DDPConfig(disable_bucketing=True), 0.05)
    numel = sum(p.numel() for p in model.parameters())
    assert one["zero_optimization"]["reduce_bucket_size"] == numel and one["gradient_clipping"] == 0.05, one


def test_bf16_and_per_token_losses_map_onto_deepspeed_options():
    model = make_model(dtype=torch.bfloat16)
    bf16 = zero2.engine_config(model, DDPConfig(overlap_grad_reduce=True), None)
    assert bf16["bf16"] == {"enabled": True} and bf16["communication_data_type"] == "bf16", bf16
    reason = why_not(zero2, DDPConfig(overlap_grad_reduce=True, grad_reduce_in_fp32=True))
    assert reason and "stage_1_and_2.py:1511-1512" in reason, (
        f"grad_reduce_in_fp32: got {reason!r}, but should be refused: ZeRO rounds fp32 sums back into bf16 grads")
    summed = zero2.engine_config(make_model(), DDPConfig(overlap_grad_reduce=True, calculate_per_token_loss=True), None)
    assert summed["gradient_allreduce_op"] == "sum", summed


@pytest.mark.parametrize("peer, config, knob", [
    (zero2, DDPConfig(policy="padded", overlap_grad_reduce=True), "policy"),
    (zero2, DDPConfig(overlap_grad_reduce=False), "overlap_grad_reduce=False"),
    (zero1, DDPConfig(overlap_grad_reduce=True), "overlap_grad_reduce=True"),
    (zero2, DDPConfig(overlap_grad_reduce=True, average_in_collective=True), "average_in_collective"),
    (zero2, DDPConfig(overlap_grad_reduce=True, buckets_per_group=2), "buckets_per_group"),
    (zero3, DDPConfig(overlap_grad_reduce=True, calculate_per_token_loss=True), "calculate_per_token_loss"),
])
def test_unsupported_names_the_knob_and_what_zero_does(peer, config, knob):
    reason = why_not(installed(peer), config)
    assert reason and reason.startswith(f"{knob}: "), f"{peer.name}: got {reason!r}, but should name {knob}"
    assert "ZeRO" in reason, f"{peer.name}: got {reason!r}, but should say what ZeRO does instead"


def test_the_bf16_optimizer_variant_runs_only_what_asks_for_fp32_grads():
    bf16 = make_model(dtype=torch.bfloat16)
    ds = bf16_fp32_accumulation.engine_config(bf16, DDPConfig(grad_reduce_in_fp32=True), None)
    assert ds["data_types"] == {"grad_accum_dtype": "fp32"} and ds["communication_data_type"] == "fp32", ds
    assert ds["zero_optimization"]["stage"] == 1, ds
    assert why_not(installed(bf16_fp32_accumulation), DDPConfig(grad_reduce_in_fp32=True)) is None
    reason = why_not(installed(bf16_fp32_accumulation), DDPConfig())
    assert reason and reason.startswith("grad_reduce_in_fp32=False: "), reason


def test_each_stage_runs_what_it_can_express():
    assert why_not(installed(zero2), DDPConfig(overlap_grad_reduce=True, bucket_size=100)) is None
    per_token = DDPConfig(overlap_grad_reduce=True, calculate_per_token_loss=True)
    assert why_not(installed(zero2), per_token) is None
    assert why_not(installed(zero1), DDPConfig(overlap_grad_reduce=False)) is None
    assert why_not(installed(zero3), DDPConfig(overlap_grad_reduce=True, bucket_size=100)) is None


def installed(peer):
    """``peer`` as where deepspeed imports: its table is asked whether or not deepspeed is installed here."""
    here = copy.copy(peer)
    here.unavailable = None
    return here


def test_zero3_partitions_every_param():
    ds = zero3.engine_config(make_model(), DDPConfig(overlap_grad_reduce=True), None)
    assert ds["zero_optimization"]["stage3_param_persistence_threshold"] == 0, ds
    assert zero3.expectations == "deepspeed" and zero1.expectations == "deepspeed-zero1"


def check_zero3_params_are_partitioned_and_read_whole(ctx) -> None:
    model, plain = make_model(), make_model()
    ddp = zero3.wrap(model, DDPConfig(overlap_grad_reduce=True), ctx.group, ctx.control_group)
    zero3.make_optimizer(ddp, lambda ps: torch.optim.SGD(ps, lr=0.1))
    held = {name: param.numel() for name, param in model.named_parameters()}
    assert set(held.values()) == {0}, f"ZeRO-3 params held whole outside forward: got {held}, but should be none"
    for name, whole in ddp.whole_params().items():
        assert torch.equal(whole, dict(plain.named_parameters())[name]), f"{name}: gathered param differs"


def check_zero3_keeps_its_linear_to_its_forward(ctx) -> None:
    import torch.nn.functional as F
    from deepspeed.runtime.zero.linear import zero3_linear_wrap

    torch_linear, seen = F.linear, []
    ddp = zero3.wrap(make_model(), DDPConfig(overlap_grad_reduce=True), ctx.group, ctx.control_group)
    hook = ddp.module.register_forward_pre_hook(lambda *_: seen.append(F.linear))
    tokens, labels = batch(1, 0, 0, ctx.rank)
    loss_fn(ddp(tokens), labels).backward()
    hook.remove()
    assert seen == [zero3_linear_wrap], f"linear inside ZeRO-3's forward: got {seen}, but should be DeepSpeed's"
    assert F.linear is torch_linear, f"torch.nn.functional.linear after: got {F.linear}, but should be torch's"


def check_no_op_is_built(ctx) -> None:
    import deepspeed
    from deepspeed.comm import comm as ds_comm

    ddp = zero2.wrap(make_model(), DDPConfig(overlap_grad_reduce=True), ctx.group, ctx.control_group)
    tokens, labels = batch(1, 0, 0, ctx.rank)
    start = time.monotonic()
    loss_fn(ddp(tokens), labels).backward()
    took = time.monotonic() - start
    assert deepspeed.ops.__compatible_ops__[SHM_OP] is False
    assert ds_comm.cdb.shm_comm_op is None, "DeepSpeed's comm backend: got a shared-memory op, but should build none"
    assert took < FAST, f"first initialize and step: got {took:.1f}s, but should be under {FAST}s (no C++ build)"


def check_bf16_optimizer_steps_by_the_reduced_sum_of_microbatches(ctx) -> tuple[str, list[float]]:
    """Zero weights, lr 1, a sum loss: every weight's step is the mean over ranks of its microbatches' summed
    inputs, 26 here (0.18.x gives each rank's partition its own last microbatch: 25 and 27)."""
    model = torch.nn.Linear(8, 4, bias=False).to(torch.bfloat16)
    torch.nn.init.zeros_(model.weight)
    ddp = bf16_fp32_accumulation.wrap(model, DDPConfig(grad_reduce_in_fp32=True), ctx.group, ctx.control_group)
    optimizer = bf16_fp32_accumulation.make_optimizer(ddp, lambda ps: torch.optim.SGD(ps, lr=1.0))
    for microbatch in range(2):  # rows of 1 + rank + 10 * microbatch: 2 (2 rank + 12) summed, 26 on average
        inputs = torch.full((2, 8), 1.0 + ctx.rank + 10 * microbatch, dtype=torch.bfloat16)
        with ddp.no_sync() if microbatch == 0 else contextlib.nullcontext():
            ddp(inputs).sum().backward()
    ddp.finish_grad_sync()
    optimizer.step()
    return type(ddp.engine.optimizer).__name__, sorted(set((-model.weight.detach().float()).flatten().tolist()))


def check_make_optimizer_after_forward_is_refused(ctx) -> str:
    ddp = zero2.wrap(make_model(), DDPConfig(overlap_grad_reduce=True), ctx.group, ctx.control_group)
    ddp(batch(1, 0, 0, ctx.rank)[0])
    with pytest.raises(RuntimeError) as info:
        zero2.make_optimizer(ddp, lambda ps: torch.optim.SGD(ps, lr=0.1))
    return str(info.value)


def check_round_robin_read_fails_every_rank_fast(ctx) -> str:
    ddp = round_robin.wrap(make_model(), DDPConfig(overlap_grad_reduce=True, bucket_size=100), ctx.group,
                           ctx.control_group)
    tokens, labels = batch(7, 0, 0, ctx.rank)
    loss_fn(ddp(tokens), labels).backward()
    ddp.finish_grad_sync()
    start = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        ddp.buffers[0].grad_data
    took = time.monotonic() - start
    assert took < FAST, f"time to fail: got {took:.1f}s, but should be under {FAST}s"
    dist.barrier(group=ctx.group)  # every rank got here: none is left waiting in a collective
    return str(info.value)


@needs_deepspeed
def test_initialize_builds_no_cpp_op(ranks):
    ranks.run(check_no_op_is_built)


@needs_deepspeed
def test_zero3_params_are_partitioned_and_read_whole(ranks):
    ranks.run(check_zero3_params_are_partitioned_and_read_whole)


@needs_deepspeed
def test_zero3_keeps_its_linear_to_its_forward(ranks):
    """DeepSpeed replaces torch.nn.functional.linear process-wide; other models must not run it."""
    ranks.run(check_zero3_keeps_its_linear_to_its_forward)


@needs_deepspeed
def test_the_bf16_optimizer_accumulates_microbatches_through_the_engines_boundary(ranks):
    for optimizer, steps in ranks.run(check_bf16_optimizer_steps_by_the_reduced_sum_of_microbatches):
        assert optimizer == "BF16_Optimizer", f"the engine's optimizer: got {optimizer}, but should be BF16_Optimizer"
        assert steps == [26.0], f"the steps: got {steps}, but should be 26 for every weight (the reduced sum)"


@needs_deepspeed
def test_make_optimizer_after_the_first_forward_is_refused(ranks):
    for message in ranks.run(check_make_optimizer_after_forward_is_refused):
        assert "DeepSpeed takes the optimizer in deepspeed.initialize" in message, message


@needs_deepspeed
def test_round_robin_read_fails_every_rank_fast(ranks):
    """The finding's failure mode (docs/peers.md): one rank's size mismatch, reported on every rank."""
    for message in ranks.run(check_round_robin_read_fails_every_rank_fast):
        assert "raised RuntimeError: The size of tensor a" in message, message
