"""What an implementation communicates, observed from outside (``observe``), checked against the rules.

No adapter needed: a factory of three lines gets these checks, and so does
every adapter, whose claims (its declared layout) are checked against what
it is seen to do.

- **each gradient element is reduced exactly once, with one scaling**: at
  launch, the sum and the sum of squares of everything a step reduces equal
  the rank's own gradients' (from a plain copy of the model) times the
  scaling: ``1/dp`` before a SUM, nothing before an AVG (or a SUM divided
  afterwards). An element reduced twice, or not at all, or scaled twice,
  moves the sums. Where the configuration asks for ``average_in_collective``
  the reduction must be an AVG;
- **buckets as declared**: the reductions of a step, in launch order, are the
  declared buckets (each buffer's, in bucket order, where bucket 0 holds the
  last params and launches first), by size and, where the reduced tensors
  are views of the declared buffer, by offset;
- **sizes the policy demands**: under a distributed-optimizer policy every
  reduced bucket is a multiple of the policy's divisor (docs/rules.md,
  section 1) and a reduce-scatter gives each rank an equal shard.
"""

from __future__ import annotations

import math

import pytest

from suites.impls import load_implementation
from suites.layout.assertions import expected_divisor, is_distributed
from suites.multigpu.harness import requires_peers

from .cases import MID, TINY, Case, params
from .observe import declared_layouts, flat_inputs, local_grads, observe_step, requires_observed
from .sides import UnderTest, global_token_count

pytestmark = pytest.mark.requires("ddp")

SYNC = dict(grad_sync_only=True, steps=1, bucket_size=TINY)
SCALING = [Case("allreduce", **SYNC), Case("allreduce-avg-in-collective", average_in_collective=True, **SYNC),
           Case("distopt", "padded", **SYNC),
           Case("distopt-avg-in-collective", "padded", average_in_collective=True, **SYNC)]
BUCKETS = [Case("allreduce-tiny", **SYNC), Case("allreduce-mid", **{**SYNC, "bucket_size": MID}),
           Case("distopt-tiny", "padded", **SYNC), Case("distopt-mid", "padded", **{**SYNC, "bucket_size": MID})]
POLICIES = [Case("distopt-padded", "padded", **SYNC), Case("distopt-high-busbw", "high-busbw", **SYNC),
            Case("distopt-shard-aligned", "shard-aligned", **{**SYNC, "bucket_size": MID})]


def _observed(ctx, case: Case, step: int = 0, checksums: bool = False):
    """The implementation's side and the record of its step ``step`` (after the earlier ones)."""
    requires_peers(ctx)  # one rank has nothing to exchange, so an implementation may launch nothing at all
    impl = load_implementation(ctx.impl_spec)
    side = UnderTest(case, ctx, impl)
    for earlier in range(step):
        side.sync(side.backward(earlier, global_token_count(case, earlier, ctx.world_size)))
        side.zero_grad()
    for recorder in side.recorders:
        recorder.checksums = checksums
    record = observe_step(side, step, global_token_count(case, step, ctx.world_size))
    return impl, side, requires_observed(record, impl)


def check_each_element_reduced_once(ctx, case: Case) -> str:
    _, _, reductions = _observed(ctx, case, checksums=True)
    ops = sorted({c.reduce_op for c in reductions})
    assert len(ops) == 1, f"reduce ops in one step: got {ops}, but should be one"
    op = ops[0]
    if case.average_in_collective:
        assert op == "AVG", f"reduce op with average_in_collective: got {op}, but should be AVG"
    assert op in ("SUM", "AVG"), f"reduce op of the gradients: got {op}, but should be SUM or AVG"
    local = [g.double() for g in local_grads(case, ctx).values()]
    want_sum, want_squares = sum(float(g.sum()) for g in local), sum(float(g.square().sum()) for g in local)
    scale = sum(float(g.abs().sum()) for g in local)
    got_sum, got_squares = sum(c.sum for c in reductions), sum(c.sum_of_squares for c in reductions)
    factors = {"SUM": {"1/dp before the SUM": 1 / ctx.world_size, "a SUM divided afterwards": 1.0},
               "AVG": {"AVG": 1.0}}[op]
    for pattern, factor in factors.items():
        if math.isclose(got_squares, factor**2 * want_squares, rel_tol=1e-5) and \
                abs(got_sum - factor * want_sum) <= 1e-5 * factor * scale:
            return pattern
    implied = math.sqrt(got_squares / want_squares) if want_squares else math.inf
    dtypes = sorted({t.dtype for c in reductions for t in c.inputs})
    raise AssertionError(
        f"what one step reduced ({len(reductions)} {op} reductions in {', '.join(dtypes)}): got sum {got_sum:.6g} and sum of squares "
        f"{got_squares:.6g}, but should be this rank's own gradients (sum {want_sum:.6g}, squares "
        f"{want_squares:.6g}) scaled by {' or '.join(f'{f:.4g} ({p})' for p, f in factors.items())}: every "
        f"element reduced exactly once. The squares imply a scaling of {implied:.4g} (a reduction in a narrower dtype than "
        f"the grads' rounds them: a scaling within its precision of 1 is that)")


def check_buckets_as_declared(ctx, case: Case) -> None:
    impl, side, reductions = _observed(ctx, case, step=1)  # step 1: torch and megatron settle after step 0
    declared = declared_layouts(side.ddp)
    if declared is None:
        pytest.skip(f"{impl.name} declares no bucket layout (a factory declares one with factory.bucket_size and "
                    "factory.policy, or by taking the configuration)")
    inputs = flat_inputs(reductions)
    for layout in declared:
        dtype = str(layout.grad_dtype).removeprefix("torch.")
        want = [end - start for start, end in layout.bucket_indices]
        got = [t.numel for t in inputs if t.dtype == dtype]
        others = {t.dtype for t in inputs} - {dtype}
        seen = "".join(f"; reduced in {o}: {[t.numel for t in inputs if t.dtype == o]}" for o in sorted(others))
        assert got == want, (f"{dtype} buckets reduced in one step, in launch order: got sizes {got}, but should be "
                             f"the declared buckets {want} (bucket 0, with the last params, first){seen}")
    for buf in side.ddp.buffers:
        base = buf.grad_data
        mine = [t for t in inputs if t.storage == base.untyped_storage().data_ptr()]
        if mine:  # the reductions work on the buffer itself: their offsets are the declared buckets'
            got = [t.offset - base.storage_offset() for t in mine]
            want = [start for start, _ in buf.layout.bucket_indices]
            assert got == want, f"offsets of the reduced buckets in the buffer: got {got}, but should be {want}"


def check_sizes_the_policy_demands(ctx, case: Case) -> None:
    assert is_distributed(case.policy), case.policy
    _, _, reductions = _observed(ctx, case)
    for c in reductions:
        divisor = expected_divisor(case.policy, c.group_size)
        for t in c.inputs:
            assert t.numel % divisor == 0, (
                f"{c.kind} of {t.numel} elements under {case.policy!r}: got a bucket of {t.numel}, but should be a "
                f"multiple of {divisor} (remainder {t.numel % divisor})")
        if c.kind == "reduce_scatter":
            shards = sorted({t.numel for t in c.outputs})
            assert shards == [c.numel // c.group_size // max(1, len(c.outputs))] or \
                sum(t.numel for t in c.outputs) * c.group_size == c.numel, (
                f"reduce-scatter shards: got {shards} of {c.numel} elements over {c.group_size} ranks, but should "
                f"be equal shards of {c.numel // c.group_size}")


@pytest.mark.parametrize("case", params(SCALING))
def test_each_gradient_element_is_reduced_once_with_one_scaling(ranks, impl, case):
    ranks.run(check_each_element_reduced_once, case)


@pytest.mark.parametrize("case", params(BUCKETS))
def test_buckets_are_reduced_as_declared(ranks, impl, case):
    ranks.run(check_buckets_as_declared, case)


@pytest.mark.parametrize("case", params(POLICIES))
def test_collective_sizes_are_what_the_policy_demands(ranks, impl, case):
    ranks.run(check_sizes_the_policy_demands, case)
