"""Where bf16 gradients are summed in fp32, the sums are exactly the ones worked out here from each rank's grads.

The comparisons against torch DDP and one process allow bf16's tolerance,
which hides one rounding more or less. These checks compute the expected
bits from every rank's own gradients (a plain bf16 model on each rank's
batch, gathered over the control group), step by step as upstream describes
the knob (docs/rules.md, section 6), and compare bitwise:

- ``reduce_scatter_with_fp32_accumulation``: each element is the sum over the
  ranks, in fp32 (``torch.sum``), of the ranks' grads scaled by 1/dp in bf16,
  rounded once to bf16. At four ranks a plain bf16 reduce-scatter rounds
  differently;
- ``param_name_patterns_for_fp32_local_accumulation``: a matching param's
  microbatch grads add up in fp32 and are rounded once before the reduction
  (the others add up in bf16, rounding after every microbatch); both are then
  scaled by 1/dp in bf16 and summed over two ranks, one rounding. Its fp32
  ``main_grad`` starts at zero, like the buffer's views: the first backward
  adds onto it, zeroed or not.
"""

import pytest
import torch
import torch.distributed as dist

from ranks.recording import recording
from suites.impls import load_implementation

from .cases import Case, params
from .bounds import agreed, assert_close
from .models import batch, loss_fn, make_model
from .sides import UnderTest, local_model

pytestmark = pytest.mark.requires("ddp")

BF16 = dict(bf16=True, fp32_grads=False, grad_sync_only=True, steps=1)
REDUCE_SCATTER = [Case("distopt-bf16-fp32-reduce-scatter", "padded", fp32_reduce_scatter=True, **BF16),
                  Case("distopt-bf16-fp32-reduce-scatter-4", "padded", fp32_reduce_scatter=True, world=4, **BF16)]
LOCAL = [Case("allreduce-fp32-local-all", fp32_local=("all",), microbatches=3, **BF16),
         Case("distopt-fp32-local-weights", "padded", fp32_local=("*.weight",), microbatches=3, **BF16)]


def local_grads(ctx, case: Case, in_fp32) -> dict[str, torch.Tensor]:
    """This rank's grads over the case's microbatches, from a plain bf16 model: added in fp32 for the params
    ``in_fp32(name)`` names, in bf16 (one rounding per microbatch) for the others, then rounded to bf16."""
    model = make_model(case.tied, torch.bfloat16).to(ctx.device)
    total: dict[str, torch.Tensor] = {}
    for micro in range(case.microbatches):
        tokens, labels = (t.to(ctx.device) for t in batch(case.seed, 0, micro, ctx.rank))
        model.zero_grad(set_to_none=True)
        loss_fn(model(tokens), labels).backward()
        for name, param in model.named_parameters():
            grad = param.grad.float() if in_fp32(name) else param.grad
            total[name] = grad.clone() if name not in total else total[name] + grad
    return {name: grad.to(torch.bfloat16) for name, grad in total.items()}


def every_ranks(ctx, grads: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """Each rank's ``grads``, by rank (gathered over the control group, exactly: bf16 values fit in fp32)."""
    names = list(grads)
    mine = torch.cat([grads[n].float().reshape(-1) for n in names]).cpu()
    everyone = [torch.empty_like(mine) for _ in range(ctx.world_size)]
    dist.all_gather(everyone, mine, group=ctx.control_group)
    out = []
    for flat in everyone:
        pieces = flat.split([grads[n].numel() for n in names])
        out.append({n: p.view(grads[n].shape).to(torch.bfloat16) for n, p in zip(names, pieces)})
    return out


def scaled(grads: dict[str, torch.Tensor], world_size: int) -> dict[str, torch.Tensor]:
    """Scaled by 1/dp in bf16, as a bf16 buffer is before its collective."""
    return {n: g * (1.0 / world_size) for n, g in grads.items()}


def compare_owned(ctx, ours: UnderTest, expected: dict[str, torch.Tensor], what: str) -> None:
    def check() -> None:
        compared = 0
        for name, got, where in ours.reduced_grads():
            assert_close(got, expected[name].reshape(-1)[where], None, f"rank {ctx.rank} grad of {name} ({what})")
            compared += got.numel()
        assert compared, f"rank {ctx.rank}: got no reduced grad to compare, but should hold some"
    agreed(ctx, check)


def check_fp32_accumulating_reduce_scatter(ctx, case: Case) -> None:
    impl = load_implementation(ctx.impl_spec)
    ours = UnderTest(case, ctx, impl)
    ours.sync(ours.backward(0, 0))
    ranks = [scaled(g, ctx.world_size) for g in every_ranks(ctx, local_grads(ctx, case, lambda name: False))]
    expected = {n: torch.stack([r[n] for r in ranks]).sum(dim=0, dtype=torch.float32).to(torch.bfloat16)
                for n in ranks[0]}
    compare_owned(ctx, ours, expected, "fp32 sum over ranks of the scaled bf16 grads, rounded once")


def check_fp32_local_accumulation(ctx, case: Case) -> None:
    if ctx.world_size != 2:
        pytest.skip(f"the expected bf16 sum over ranks has one rounding order only at two ranks, got {ctx.world_size}")
    impl = load_implementation(ctx.impl_spec)
    ours = UnderTest(case, ctx, impl)
    ours.sync(ours.backward(0, 0))
    config = case.ddp_config()
    first, second = (scaled(g, 2) for g in every_ranks(ctx, local_grads(ctx, case, config.accumulates_in_fp32)))
    expected = {n: first[n] + second[n] for n in first}
    compare_owned(ctx, ours, expected, "microbatches added in fp32 where the patterns match, bf16 elsewhere")
    if case.policy == "packed":  # every rank holds every reduced grad: the fp32 main_grad gets all of it back
        agreed(ctx, lambda: [check_fp32_main_grad(ctx, name, param, expected[name])
                             for name, param in fp32_accumulating(ours.model, config, ctx.rank)])


def fp32_accumulating(model: torch.nn.Module, config, rank: int) -> list[tuple[str, torch.nn.Parameter]]:
    """The params ``config`` accumulates in an fp32 ``main_grad`` of their own; fails where none is, for a
    check over none of them would check nothing."""
    named = list(model.named_parameters())
    matching = [(name, param) for name, param in named if config.accumulates_in_fp32(name)]
    patterns = config.param_name_patterns_for_fp32_local_accumulation
    assert matching, (f"rank {rank} params matching {patterns}: got 0 of {len(named)} "
                      f"({', '.join(n for n, _ in named)}), but should check at least one")
    return matching


def check_fp32_main_grad(ctx, name: str, param: torch.Tensor, expected: torch.Tensor) -> None:
    got = param.main_grad
    assert got.dtype == torch.float32, f"rank {ctx.rank} {name}.main_grad dtype: got {got.dtype}, but should be float32"
    assert_close(got, expected.float(), None, f"rank {ctx.rank} {name}.main_grad after the sync (the reduced grad)")


def check_fp32_main_grads_are_zero(model: torch.nn.Module, config, rank: int) -> None:
    for name, param in fp32_accumulating(model, config, rank):
        nonzero = int((param.main_grad != 0).sum())
        assert nonzero == 0, (f"rank {rank} {name}.main_grad after wrap: got {nonzero} nonzero of "
                              f"{param.numel()} elements, but should be all zeros (a backward adds onto it)")


def check_fp32_main_grads_start_at_zero(ctx, case: Case) -> None:
    impl = load_implementation(ctx.impl_spec)
    model, config = local_model(case, ctx), case.ddp_config()
    impl.wrap(model, config, recording(ctx.group), ctx.control_group)  # and no zero_grad_buffer() yet
    agreed(ctx, lambda: check_fp32_main_grads_are_zero(model, config, ctx.rank))


@pytest.mark.parametrize("case", params(REDUCE_SCATTER))
def test_fp32_accumulating_reduce_scatter_sums_in_fp32(ranks, impl, case):
    ranks.run(check_fp32_accumulating_reduce_scatter, case)


@pytest.mark.parametrize("case", params(LOCAL))
def test_fp32_local_accumulation_rounds_once(ranks, impl, case):
    ranks.run(check_fp32_local_accumulation, case)


@pytest.mark.parametrize("case", params(LOCAL))
def test_fp32_main_grads_start_at_zero(ranks, impl, case):
    ranks.run(check_fp32_main_grads_start_at_zero, case)
