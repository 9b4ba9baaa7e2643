"""Quantized params gathered by a distributed optimizer, and MXFP8's reuse of the grad buffer for that gather.

For any implementation that maps the knobs ``fp8_param_gather`` and
``reuse_grad_buf_for_mxfp8_param_ag`` (``protocol.KNOBS``; the others skip
with their reason). The model's linear weights are held quantized, per
tensor (fp8) or in 32-element blocks (mxfp8); each check rests on the design
(docs/reference.md, "Quantized params") and the suite's own quantizer
(``quantized.py``), never on the implementation's:

- after every step every quantized param holds exactly the quantization of its
  master (MXFP8: of the master rounded to bf16, as it is gathered), per-tensor
  FP8 scaled by the amax of the whole param, the same bytes on every rank; and
  the values the model computes with are those bytes' values, every other
  param its master rounded to its dtype (bytes right and values stale would
  train a wrong model): for the dense model in each shape, the experts (each
  expert initialised at a scale of its own, so an amax taken across experts is
  far off), and one-rank shard groups (instances);
- the reuse changes nothing: with it and without it, the reduced grads and the
  masters are equal bit for bit, step after step, with microbatches, the
  gathers overlapped with the forward or not;
- a forced gather (evaluation, a checkpoint) right after a step leaves every
  weight as it was: it must stage the masters again, whatever the memory holds;
- where the gather went through the grad memory, that memory is zero again
  before backward writes the next grads.
"""

import dataclasses

import pytest
import torch

from suites.impls import load_implementation
from suites.impls.protocol import HoldsQuantizedParams, ShardsMasters, SyncsParams

from . import quantized
from .models import held_quantized
from .moe import Topology
from .cases import MID, Case, params
from .bounds import agreed
from .sides import UnderTest, global_token_count

pytestmark = pytest.mark.requires("ddp", "optimizer")


def _case(name: str, recipe: str, policy: str = "padded", **changes) -> Case:
    return Case(name, policy, bf16=True, quantized=recipe, steps=3, **changes)


CASES = [
    _case("fp8", "fp8"),
    _case("fp8-fp32-grads-overlapped", "fp8", overlap_param_gather=True),
    _case("fp8-deep-one-rank-shards", "fp8", shape="deep", instances=2, bucket_size=MID),
    _case("fp8-experts-ep2", "fp8", moe=Topology(2, 1), world=2),
    _case("mxfp8", "mxfp8"),
    _case("mxfp8-bf16-grads", "mxfp8", fp32_grads=False),
    _case("mxfp8-odd-one-bucket", "mxfp8", shape="odd", bucket_size=None),
    _case("mxfp8-experts-ep1", "mxfp8", moe=Topology(1, 2), world=2),
    _case("mxfp8-reuse", "mxfp8", reuse=True),
    _case("mxfp8-reuse-bf16-grads-microbatches", "mxfp8", reuse=True, fp32_grads=False, microbatches=2),
    _case("mxfp8-reuse-overlapped", "mxfp8", reuse=True, overlap_param_gather=True),
    _case("mxfp8-reuse-overlapped-one-bucket", "mxfp8", reuse=True, overlap_param_gather=True, bucket_size=None),
    _case("mxfp8-reuse-high-busbw-adam", "mxfp8", reuse=True, policy="high-busbw", optimizer="adam",
          bucket_size=MID),
]
REUSED = [c for c in CASES if c.reuse]


def whole_masters(ctx, side: UnderTest) -> dict[str, torch.Tensor]:
    """Every param's fp32 master put together from the pieces each rank steps (the same on every rank), under the
    oracle's names (an expert's local name means another expert on another rank)."""
    mine = [(name, first, values.detach().cpu().clone()) for name, first, values in side.opt.master_shards()]
    everyone: list = [None] * ctx.world_size
    torch.distributed.all_gather_object(everyone, mine, group=ctx.control_group)
    whole: dict[str, torch.Tensor] = {}
    for rank, pieces in enumerate(everyone):
        for name, first, values in pieces:
            name = side.global_name(name, rank)
            flat = whole.setdefault(name, torch.zeros(0))
            if flat.numel() < first + values.numel():
                flat = whole[name] = torch.cat([flat, torch.zeros(first + values.numel() - flat.numel())])
            flat[first:first + values.numel()] = values
    return whole


def storage_bytes(storage) -> dict[str, list]:
    """A quantized param's bytes and scales as lists, whatever holds them."""
    if hasattr(storage, "scale_inv"):
        return {"data": storage.data.reshape(-1).tolist(), "scale_inv": float(storage.scale_inv)}
    out = {"rowwise": (storage.rowwise.data.tolist(), storage.rowwise.scales.tolist())}
    if storage.colwise is not None:
        out["colwise"] = (storage.colwise.data.tolist(), storage.colwise.scales.tolist())
    return out


def expected_bytes(recipe: str, master: torch.Tensor, shape) -> dict[str, list]:
    """What a param whose master is ``master`` must hold, by the suite's quantizer."""
    if recipe == "fp8":
        data, scale_inv = quantized.per_tensor(master.tolist(), float(master.abs().max()))
        return {"data": data, "scale_inv": scale_inv}
    gathered = master.to(torch.bfloat16).float().reshape(shape)
    return quantized.mx(gathered.tolist() if gathered.dim() == 2 else gathered.reshape(-1).tolist())


def trained(ctx, impl, case: Case, steps: int):
    """The implementation under test after ``steps`` steps, each finished as a training loop finishes it."""
    side = UnderTest(case, ctx, impl)
    for step in range(steps):
        side.sync(side.backward(step, global_token_count(case, step, ctx.world_size)))
        side.step()
        side.finish_step(step)
    return side


def _requires_protocols(side) -> None:
    missing = [p.__name__ for p, obj in ((HoldsQuantizedParams, side.ddp), (ShardsMasters, side.opt))
               if not isinstance(obj, p)]
    if missing:
        pytest.skip(f"the implementation's handles do not offer {', '.join(missing)} (suites/impls/protocol.py)")


def check_quantized_params_are_their_masters(ctx, case: Case) -> int:
    impl = load_implementation(ctx.impl_spec)
    side = UnderTest(case, ctx, impl)
    _requires_protocols(side)
    names = {side.global_name(name, ctx.rank): name for name, _ in side.model.named_parameters()}
    quantizes = sorted(name for name in names if held_quantized(name, case.model_shape))
    checked = 0
    for step in range(case.steps):
        side.sync(side.backward(step, global_token_count(case, step, ctx.world_size)))
        side.step()
        side.finish_step(step)
        masters, stored = whole_masters(ctx, side), side.ddp.quantized_storage()
        got = {side.global_name(name, ctx.rank): storage_bytes(s) for name, s in stored.items()}
        values = side.params()
        everyone: list = [None] * ctx.world_size
        torch.distributed.all_gather_object(everyone, got, group=ctx.control_group)

        def compare() -> None:
            assert sorted(got) == quantizes, f"quantized params: got {sorted(got)}, but should be {quantizes}"
            for name, held in got.items():
                want = expected_bytes(case.quantized, masters[name], values[name].shape)
                for part in want:
                    assert held[part] == want[part], (
                        f"step {step} rank {ctx.rank} {name} {part}: got bytes other than the quantization of its "
                        f"master ({_first_difference(held[part], want[part])}), but should be those")
                others = [r for r, theirs in enumerate(everyone) if theirs.get(name, held) != held]
                assert not others, f"step {step} {name}: ranks {others} hold other bytes than rank {ctx.rank}"
            for name, value in values.items():
                want = (expected_values(case.quantized, masters[name], value.shape) if name in got
                        else masters[name].reshape(value.shape)).to(value.dtype)
                wrong = value.detach().cpu().float() != want.float()
                assert not wrong.any(), (
                    f"step {step} rank {ctx.rank} {name}: got {int(wrong.sum())} of {wrong.numel()} values the model "
                    f"computes with other than {'its quantized bytes' if name in got else 'its master in its dtype'} "
                    f"hold (largest gap {(value.detach().cpu().float() - want.float()).abs().max():.3g}), but should "
                    "be those")

        agreed(ctx, compare)
        checked += len(got)
    return checked


def expected_values(recipe: str, master: torch.Tensor, shape) -> torch.Tensor:
    """What a param whose master is ``master`` computes with, by the suite's quantizer, before it is rounded to the
    param's dtype."""
    if recipe == "fp8":
        values = quantized.per_tensor_values(master.tolist(), float(master.abs().max()))
        return torch.tensor(values).reshape(shape)
    rows = master.to(torch.bfloat16).float().reshape(shape[0], -1)
    return torch.tensor(quantized.mx_values(rows.tolist())).reshape(shape)


def _first_difference(got, want) -> str:
    flat_got, flat_want = _flat(got), _flat(want)
    for i, (a, b) in enumerate(zip(flat_got, flat_want)):
        if a != b:
            return f"element {i}: got {a}, but should be {b}"
    return f"lengths {len(flat_got)} and {len(flat_want)}"


def _flat(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flat(item)]
    return [value]


@pytest.mark.parametrize("case", params(CASES))
def test_quantized_params_hold_the_quantization_of_their_masters_on_every_rank(ranks, impl, case):
    checked = ranks.run(check_quantized_params_are_their_masters, case)
    assert all(n > 0 for n in checked), f"quantized params checked per rank: got {checked}, but should be some"


def check_reuse_changes_nothing(ctx, reused: Case) -> int:
    impl = load_implementation(ctx.impl_spec)
    plain = dataclasses.replace(reused, name=f"{reused.name}-without", reuse=False)
    a, b = UnderTest(reused, ctx, impl), UnderTest(plain, ctx, impl)
    _requires_protocols(a)
    for step in range(reused.steps):
        total = global_token_count(reused, step, ctx.world_size)
        for side in (a, b):
            side.sync(side.backward(step, total))
        grads = [[(n, g.detach().clone()) for n, g, _ in side.reduced_grads()] for side in (a, b)]
        for side in (a, b):
            side.step()
            side.finish_step(step)
        masters = [whole_masters(ctx, side) for side in (a, b)]

        def compare() -> None:
            for (name, got), (_, want) in zip(*grads):
                assert torch.equal(got, want), (f"step {step} rank {ctx.rank} reduced grad of {name}: got "
                                                f"{(got.float() - want.float()).abs().max():.3g} away from the run "
                                                "without the reuse, but should be equal bit for bit")
            for name, got in masters[0].items():
                assert torch.equal(got, masters[1][name]), (
                    f"step {step} master of {name}: got {(got - masters[1][name]).abs().max():.3g} away from the run "
                    "without the reuse, but should be equal bit for bit")

        agreed(ctx, compare)
    return reused.steps


@pytest.mark.parametrize("case", params(REUSED))
def test_the_reuse_trains_bit_for_bit_like_a_buffer_of_its_own(ranks, impl, case):
    assert ranks.run(check_reuse_changes_nothing, case) == [case.steps] * ranks.world_size


def check_forced_sync_changes_nothing(ctx, case: Case) -> int:
    impl = load_implementation(ctx.impl_spec)
    side = trained(ctx, impl, case, 1)
    if not isinstance(side.opt, SyncsParams):
        pytest.skip("the optimizer offers no sync_params (protocol.SyncsParams): no forced gather to check")
    _requires_protocols(side)
    if case.overlap_param_gather and case.reuse:
        side.ddp(torch.zeros(1, 1, dtype=torch.long, device=ctx.device))
    before = {n: p.detach().clone() for n, p in side.model.named_parameters()}
    stored = {n: storage_bytes(s) for n, s in side.ddp.quantized_storage().items()}
    side.opt.sync_params()
    after = dict(side.model.named_parameters())
    stored_after = {n: storage_bytes(s) for n, s in side.ddp.quantized_storage().items()}

    def compare() -> None:
        for name, param in after.items():
            assert torch.equal(param, before[name]), (
                f"rank {ctx.rank} {name} after a forced gather: got {(param.float() - before[name].float()).abs().max():.3g} "
                "away from the weight it had, but should be unchanged (the gather must stage the masters again)")
        assert stored_after == stored, f"rank {ctx.rank}: a forced gather changed the quantized bytes"

    agreed(ctx, compare)
    return len(after)


@pytest.mark.parametrize("case", params(CASES))
def test_a_forced_gather_right_after_a_step_leaves_every_weight_unchanged(ranks, impl, case):
    ranks.run(check_forced_sync_changes_nothing, case)


def check_gathered_memory_is_zero_before_backward(ctx, case: Case) -> int:
    impl = load_implementation(ctx.impl_spec)
    side = trained(ctx, impl, case, 1)
    if case.overlap_param_gather:
        side.ddp(torch.zeros(1, 1, dtype=torch.long, device=ctx.device))
    views = [(buf, b) for buf in side.ddp.buffers if getattr(buf.layout, "reuses_grad_buffer", False)
             for b in buf.buckets]
    if not views:
        pytest.skip("no buffer of the implementation reports reusing its grad memory (layout.reuses_grad_buffer)")
    found = [(buf.grad_data.untyped_storage().data_ptr() == b.param_data.untyped_storage().data_ptr(),
              int((b.param_data != 0).sum())) for buf, b in views]

    def compare() -> None:
        for i, (same, nonzero) in enumerate(found):
            assert same, f"rank {ctx.rank} bucket {i}: its param view is not the grad buffer's memory"
            assert nonzero == 0, (f"rank {ctx.rank} bucket {i}: got {nonzero} nonzero param elements in the grad memory "
                                  "before backward, but should be none: the gathered params must be zeroed once used")

    agreed(ctx, compare)
    return len(views)


@pytest.mark.parametrize("case", params(REUSED))
def test_the_gathered_params_leave_the_grad_memory_zero_before_backward(ranks, impl, case):
    ranks.run(check_gathered_memory_is_zero_before_backward, case)
