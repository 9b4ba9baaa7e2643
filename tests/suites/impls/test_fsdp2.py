"""FSDP2's own layout rule, which the bucketed-buffer layout suite does not describe, checked on 3 ranks.

``fully_shard`` shards every param on dim 0 like ``torch.chunk``: with ``c =
ceil(rows / world)`` rows per chunk, rank ``r`` holds rows ``[r*c, min((r+1)*c,
rows))``, so the last ranks may hold fewer rows or none; every row is held
exactly once and the shards gather back to the param. TinyLM's dim-0 sizes
(37, 48, 24) are not multiples of 3, so the uneven cases occur.
"""

import pytest
import torch

from reference.config import DDPConfig
from suites.impls.fsdp2 import implementation as fsdp2
from suites.multigpu.models import make_model

WORLD = 3


def check_dim0_chunks(ctx) -> dict[str, int]:
    model = make_model().to(ctx.device)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    fsdp2.wrap(model, DDPConfig(overlap_grad_reduce=True), ctx.group)
    held = {}
    for name, param in model.named_parameters():
        rows = before[name].shape[0]
        chunk = -(-rows // ctx.world_size)
        want = max(0, min(rows, (ctx.rank + 1) * chunk) - ctx.rank * chunk)
        local = param.to_local()
        assert local.shape[0] == want, f"{name}: rank {ctx.rank} holds {local.shape[0]} rows, but should hold {want}"
        if want:
            assert torch.equal(local, before[name][ctx.rank * chunk : ctx.rank * chunk + want]), (
                f"{name}: rank {ctx.rank}'s rows are not rows {ctx.rank * chunk}.. of the param")
        assert torch.equal(param.full_tensor(), before[name]), f"{name}: the shards do not gather to the param"
        held[name] = local.shape[0]
    return held


@pytest.mark.world_size(WORLD)
def test_each_param_is_chunked_on_dim_0_and_every_row_held_once(ranks):
    held = ranks.run(check_dim0_chunks)
    rows = {n: p.shape[0] for n, p in make_model().named_parameters()}
    for name, total in rows.items():
        got = sum(h[name] for h in held)
        assert got == total, f"{name}: rows held over all ranks: got {got}, but should be {total}"
    assert [h["embed.weight"] for h in held] == [13, 13, 11], held  # 37 rows: 13 + 13 + 11


def check_params_after_forward(ctx, name: str) -> bool:
    """Whether fc1's weight is held whole (unsharded) between the forward and the backward."""
    from suites.impls import load_implementation
    from suites.multigpu.models import batch

    model = make_model().to(ctx.device)
    ddp = load_implementation(name).wrap(model, DDPConfig(overlap_grad_reduce=True), ctx.group)
    ddp(batch(7, 0, 0, ctx.rank)[0].to(ctx.device))
    weight = model.fc1.weight
    return not hasattr(weight, "to_local") and tuple(weight.shape) == (48, 24)


def test_reshard_after_forward_false_keeps_the_gathered_params_until_backward(ranks):
    """``--impl fsdp2-no-reshard`` turns FSDP2's own knob: after the forward a unit's params stay whole, where
    FSDP2's default reshards them (and gathers them again for the backward)."""
    assert ranks.run(check_params_after_forward, "fsdp2") == [False, False]
    assert ranks.run(check_params_after_forward, "fsdp2-no-reshard") == [True, True]


def check_hsdp_grad_over_the_mean(ctx) -> float:
    """A bias-free Linear of ones under ``--impl fsdp2-hsdp`` (sum of outputs as the loss, told to sum and divide):
    rank r's input is r + 1 everywhere, so every element of the reduced weight grad should be the mean over ranks,
    (world + 1) / 2, worked by hand; the ratio of what FSDP2 reduces to it, exact in fp32."""
    from suites.impls.fsdp2 import hybrid_sharded

    model = torch.nn.Linear(4, 4, bias=False).to(ctx.device)
    torch.nn.init.ones_(model.weight)
    hybrid_sharded.wrap(model, DDPConfig(overlap_grad_reduce=True), ctx.group)
    model(torch.full((1, 4), ctx.rank + 1.0, device=ctx.device)).sum().backward()
    grad = model.weight.grad.full_tensor()
    ratios = (grad / ((ctx.world_size + 1) / 2)).unique()
    assert ratios.numel() == 1, f"rank {ctx.rank}: got ratios {ratios.tolist()}, but every element should agree"
    return float(ratios.item())


@pytest.mark.world_size(4)
def test_hsdp_over_two_shards_divides_by_the_factor_once(ranks):
    """Two replicas of two shards: reduce-scattered, all-reduced, divided once by the factor (4)."""
    assert ranks.run(check_hsdp_grad_over_the_mean) == [1.0] * 4


def test_hsdp_over_one_shard_divides_by_the_factor_twice(ranks):
    """A finding (docs/peers.md): two replicas of one shard each. The one-rank reduce-scatter is a copy divided by
    the factor (``_fsdp_collectives.py:625-631`` in torch 2.13), and summing for the communication then divides by
    it again after the all-reduce (``:686``, its factor from ``_get_gradient_divide_factors``, ``:855-869``): the
    grads are half what they should be. When this fails, torch has fixed it: update the finding and its
    expectations (``fixtures/expectations/fsdp2-hsdp.toml``)."""
    assert ranks.run(check_hsdp_grad_over_the_mean) == [0.5, 0.5], "expected the finding: got another ratio"
