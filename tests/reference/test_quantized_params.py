"""The reference's quantized params: the shared buffer's lifecycle refuses every step taken in the wrong state,
naming the bucket and both states; upstream's bucket-group rule; two optimizers each gather their own buffers;
the refusals of DDPConfig; the extent of the param view over the grad memory."""

import dataclasses
import math

import pytest
import torch

from reference.config import DDPConfig
from reference.ddp import DistributedDataParallel
from reference.layout import LayoutConfig, ParamSpec, plan_buffer
from reference.optimizer import ChainedOptimizer, ReferenceOptimizer
from reference.param_gather import BufferStateError
from suites.multigpu.models import batch, loss_fn, make_model

REUSE = DDPConfig(policy="padded", bucket_size=100, overlap_grad_reduce=True, grad_reduce_in_fp32=True,
                  fp8_param_gather=True, reuse_grad_buf_for_mxfp8_param_ag=True)


def sgd(params):
    return torch.optim.SGD(params, lr=0.1)


def built(config: DDPConfig, group, recipe: str = "mxfp8"):
    model = make_model(dtype=torch.bfloat16, quantized=recipe)
    ddp = DistributedDataParallel(model, config, group)
    return model, ddp, ReferenceOptimizer(ddp, sgd)


def one_step(ddp, opt, step: int = 0) -> None:
    tokens, labels = batch(7, step, 0, 0)
    loss_fn(ddp(tokens), labels).backward()
    ddp.finish_grad_sync()
    opt.step()


def test_a_gather_of_buckets_no_optimizer_staged_is_refused_naming_the_bucket(group):
    _, ddp, _ = built(REUSE, group)
    with pytest.raises(BufferStateError, match=r"bucket 0: gathering its params while it is holding grads, but should "
                                               r"be staged"):
        ddp.start_param_sync()


def test_staging_while_the_grads_are_unread_is_refused(group):
    _, ddp, opt = built(REUSE, group)
    tokens, labels = batch(7, 0, 0, 0)
    loss_fn(ddp(tokens), labels).backward()
    with pytest.raises(BufferStateError, match="staging the masters while the buffer holds grads the optimizer has "
                                               "not read"):
        opt.stage()


def test_a_zero_of_staged_params_is_refused(group):
    _, ddp, opt = built(REUSE, group)
    one_step(ddp, opt)
    ddp.zero_grad_buffer()
    opt.stage()
    with pytest.raises(BufferStateError, match=r"zeroing the buffer while it is staged, but should be holding grads "
                                               r"or consumed"):
        ddp.zero_grad_buffer()


def check_in_flight(ctx) -> str:
    """With gathers overlapped, ``zero_grad`` stages and starts them; a second zero, or a backward that skipped the
    forward's wait, meets them in flight."""
    config = DDPConfig(**{**REUSE.as_dict(), "overlap_param_gather": True})
    model = make_model(dtype=torch.bfloat16, quantized="mxfp8")
    ddp = DistributedDataParallel(model, config, ctx.group)
    opt = ReferenceOptimizer(ddp, sgd)
    one_step(ddp, opt)
    opt.zero_grad()
    said = []
    with pytest.raises(BufferStateError) as zeroed:
        ddp.zero_grad_buffer()
    said.append(str(zeroed.value))
    tokens, labels = batch(7, 1, 0, ctx.rank)
    with pytest.raises(BufferStateError) as grad:
        loss_fn(ddp.module(tokens), labels).backward()  # the module itself: no forward pre-hook waits
    said.append(str(grad.value))
    ddp.finish_param_sync()
    return "\n".join(said)


def test_a_zero_or_a_grad_while_a_gather_is_in_flight_is_refused(ranks):
    said = ranks.run(check_in_flight)[0]
    assert "zeroing the buffer while it is gathering" in said, said
    assert "a grad written into bucket" in said and "while it is gathering" in said, said


def test_quantized_buckets_are_grouped_as_upstreams_partition_buckets(group):
    _, ddp, _ = built(REUSE, group)
    fp8 = next(b for b in ddp.buffers if b.layout.recipe)
    groups = [[(m.buffer is fp8, m.bucket.index) for m in g.members] for g in ddp.bucket_groups]
    assert groups[:-1] == [[(True, i)] for i in range(len(fp8.buckets) - 1)], groups
    others = [(False, b.index) for buf in ddp.buffers if buf is not fp8 for b in buf.buckets]
    assert groups[-1] == [(True, len(fp8.buckets) - 1), *others], groups


def test_two_optimizers_each_gather_the_buffers_they_stage(group):
    """Dense and expert-like buffers under two optimizers (upstream's chained DistOpts): one that stepped gathers only
    what it staged, so the other's buckets are never gathered before their masters are in (NVIDIA/Megatron-LM#4800)."""
    model, ddp, _ = built(REUSE, group)
    quantized = [b for b in ddp.buffers if b.layout.recipe]
    plain = [b for b in ddp.buffers if not b.layout.recipe]
    first, second = ReferenceOptimizer(ddp, sgd, buffers=quantized), ReferenceOptimizer(ddp, sgd, buffers=plain)
    tokens, labels = batch(7, 0, 0, 0)
    loss_fn(ddp(tokens), labels).backward()
    ddp.finish_grad_sync()
    first.step()
    second.step()
    for name, storage in ddp.quantized_storage().items():
        master = next(v for n, _, v in first.master_shards() if n == name)
        want = storage.__class__.quantize(master.to(torch.bfloat16).float().reshape(storage.shape))
        assert torch.equal(storage.rowwise.data, want.rowwise.data), name


@pytest.mark.parametrize("changes, says", [
    (dict(reuse_grad_buf_for_mxfp8_param_ag=True), "reuse_grad_buf_for_mxfp8_param_ag: got True without "
                                                   "fp8_param_gather"),
    (dict(fp8_param_gather=True), "fp8_param_gather: got True with policy 'packed', but should be set only with a "
                                  "distributed-optimizer policy"),
    (dict(fp8_param_gather=True, policy="padded", buckets_per_group=2), "buckets_per_group: got 2 with "
                                                                        "fp8_param_gather, but should be 1"),
])
def test_what_upstream_refuses_is_refused_naming_the_field(changes, says):
    with pytest.raises(ValueError, match=says):
        DDPConfig(**changes)


def test_the_param_view_covers_half_an_fp32_buffer_rounded_up_and_all_of_a_bf16_one():
    layout = plan_buffer([ParamSpec("w", (95,), torch.bfloat16)], LayoutConfig(), torch.uint8, torch.float32)
    assert layout.numel == 95 and layout.param_view_elements() == math.ceil(95 / 2) == 48
    bf16 = plan_buffer([ParamSpec("w", (95,), torch.bfloat16)], LayoutConfig(), torch.uint8, torch.bfloat16)
    assert bf16.param_view_elements() == 95


def test_the_planned_bytes_of_the_reuse_are_the_buffers_allocated(group):
    """What the planner says the buffers take is what the tensors' storages hold."""
    for reuse in (False, True):
        config = DDPConfig(**{**REUSE.as_dict(), "reuse_grad_buf_for_mxfp8_param_ag": reuse})
        _, ddp, _ = built(config, group)
        for buf in ddp.buffers:
            storages = {buf.grad_data.untyped_storage().data_ptr(): buf.grad_data.untyped_storage().nbytes()}
            if buf.param_data is not None:
                storages[buf.param_data.untyped_storage().data_ptr()] = buf.param_data.untyped_storage().nbytes()
            assert sum(storages.values()) == buf.layout.memory().total, (reuse, buf.describe())


@pytest.mark.parametrize("first_zeroed", ["quantized", "plain"])
def test_two_optimizers_each_zero_only_their_own_buffers(group, first_zeroed):
    """An optimizer's zero_grad zeroes its own buffers and leaves the other's grads (and, at several ranks, the
    gathers in flight through its grad memory) alone, in either order."""
    model, ddp, _ = built(dataclasses.replace(REUSE, overlap_param_gather=True), group)
    owned = {"quantized": [b for b in ddp.buffers if b.layout.recipe],
             "plain": [b for b in ddp.buffers if not b.layout.recipe]}
    optimizers = {kind: ReferenceOptimizer(ddp, sgd, buffers=bufs) for kind, bufs in owned.items()}
    tokens, labels = batch(7, 0, 0, 0)
    loss_fn(ddp(tokens), labels).backward()
    ddp.finish_grad_sync()
    for optimizer in optimizers.values():
        optimizer.step()
    other = next(kind for kind in owned if kind != first_zeroed)
    held = [b.grad_data.clone() for b in owned[other]]
    assert any(h.count_nonzero() for h in held)
    optimizers[first_zeroed].zero_grad()
    for buf, before in zip(owned[other], held):
        assert torch.equal(buf.grad_data, before), (
            f"the {other} optimizer's buffer after the {first_zeroed} one's zero_grad: got "
            f"{int((buf.grad_data != before).sum())} elements changed, but should be untouched")
    assert all(b.grad_data.count_nonzero() == 0 for b in owned[first_zeroed] if b.lifecycle is None)
    optimizers[other].zero_grad()
    ddp(tokens)  # the gathers the zero_grads started come in


@pytest.mark.parametrize("order, says", [
    (("dense",), r"chained_optimizers: got \('dense',\), but should name dense and expert once each"),
    (("dense", "dense"), r"chained_optimizers: got \('dense', 'dense'\), but should name dense and expert once each"),
    (("dense", "expert"), "chained_optimizers: got a model with no expert buffer, but should have both kinds"),
])
def test_a_chain_that_is_not_dense_and_expert_once_each_is_refused_naming_the_field(group, order, says):
    _, ddp, _ = built(REUSE, group)
    with pytest.raises(ValueError, match=says):
        ChainedOptimizer(ddp, order, lambda buffers: ReferenceOptimizer(ddp, sgd, buffers=buffers))
