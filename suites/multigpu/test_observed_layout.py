"""The layout read from the ``main_grad`` views an implementation leaves on its params, checked against the rules.

A Megatron-style wrapper keeps every grad of a dtype in one buffer and
points each ``param.main_grad`` at its slice: the views' offsets are its
layout, whatever it declares. Read right after wrapping:

- params lie in reverse order of ``parameters()``, without overlap, and
  under a distributed-optimizer policy each starts on a multiple of 64
  elements (docs/rules.md, section 1);
- the layout is the one declared (an adapter's buffers; a factory's, from the
  reference planner for the policy and bucket size it declares or is
  told): any difference is listed param by param.

Implementations whose grads are not views into a shared buffer (torch DDP's
``param.grad``) skip with that reason.
"""

from __future__ import annotations

import pytest

from compat.private_torch import view_base
from suites.impls import load_implementation
from suites.layout.assertions import is_distributed

from .cases import TINY, Case, params
from .observe import declared_layouts
from .sides import UnderTest

pytestmark = pytest.mark.requires("ddp")

PARAM_ALIGNMENT = 64  # elements (docs/rules.md, section 1), written out here, not imported from the reference
CASES = [Case("allreduce", bucket_size=TINY, grad_sync_only=True, steps=1),
         Case("distopt", "padded", bucket_size=TINY, grad_sync_only=True, steps=1),
         Case("distopt-tied-embedding", "padded", bucket_size=TINY, tied=True, grad_sync_only=True, steps=1)]


def views(side) -> dict[int, list[tuple[int, int, str]]]:
    """(start, end, name) of each param's ``main_grad`` in its buffer, per buffer (storage), by start; skips
    when the grads are not views into a buffer shared by several params."""
    by_storage: dict[int, list[tuple[int, int, str]]] = {}
    for name, param in side.model.named_parameters():
        grad = getattr(param, "main_grad", None)
        base, unknowable = view_base(grad) if grad is not None else (None, None)
        if unknowable:
            pytest.skip(unknowable)
        if base is None:
            pytest.skip(f"{name}.main_grad is not a view into a gradient buffer after wrapping: there is no "
                        "layout to read")
        start = grad.storage_offset() - base.storage_offset()
        by_storage.setdefault(grad.untyped_storage().data_ptr(), []).append((start, start + grad.numel(), name))
    if all(len(v) == 1 for v in by_storage.values()):
        pytest.skip("every main_grad has a storage of its own: no shared buffer to read a layout from")
    return {k: sorted(v) for k, v in by_storage.items()}


def check_views_in_reverse_order_and_aligned(ctx, case: Case) -> None:
    side = UnderTest(case, ctx, load_implementation(ctx.impl_spec))
    order = [name for name, _ in side.model.named_parameters()]
    for placed in views(side).values():
        names = [name for _, _, name in placed]
        indices = [order.index(n) for n in names]
        assert indices == sorted(indices, reverse=True), (
            f"params in a buffer, by offset: got {names}, but should be in reverse order of parameters()")
        for (_, end, name), (start, _, after) in zip(placed, placed[1:]):
            assert end <= start, f"{after} starts at {start}, but should start after {name} ends ({end})"
        if is_distributed(case.policy):
            bad = [(name, start) for start, _, name in placed if start % PARAM_ALIGNMENT]
            assert not bad, (f"param starts under {case.policy!r}: got {bad}, but should be multiples of "
                             f"{PARAM_ALIGNMENT} elements")


def check_views_are_the_declared_layout(ctx, case: Case) -> None:
    impl = load_implementation(ctx.impl_spec)
    side = UnderTest(case, ctx, impl)
    observed = {name: (start, end) for placed in views(side).values() for start, end, name in placed}
    declared = declared_layouts(side.ddp)
    if declared is None:
        pytest.skip(f"{impl.name} declares no layout to compare with (a factory declares one with factory.policy "
                    "and factory.bucket_size, or by taking the configuration)")
    diff = [f"  {name}: got [{observed[name][0]}, {observed[name][1]}), but should be [{start}, {end}) "
            f"(bucket {bucket})"
            for layout in declared for name, (start, end, bucket) in sorted(layout.param_index_map.items(),
                                                                            key=lambda kv: kv[1][0])
            if observed.get(name) != (start, end)]
    assert not diff, "main_grad offsets against the declared layout, param by param:\n" + "\n".join(diff)


@pytest.mark.parametrize("case", params(CASES))
def test_main_grad_views_lie_in_reverse_order_and_aligned(ranks, impl, case):
    ranks.run(check_views_in_reverse_order_and_aligned, case)


@pytest.mark.parametrize("case", params(CASES))
def test_main_grad_views_are_the_declared_layout(ranks, impl, case):
    ranks.run(check_views_are_the_declared_layout, case)
