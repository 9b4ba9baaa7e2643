"""Quantized weights' fp32 masters seeded either way: the single-process check follows what an implementation says,
and accepts either seeding from one that says nothing; a seeding no one chooses (zeros) fails, and so does a seeding
other than the one an implementation says.

The model keeps each quantized weight's value before quantization (``seeding=high-precision``), so seeding from it
and from the quantized values give masters apart by the quantization's error at step 0.
"""

import pytest

from fixtures.broken.masters_seeded_from_zeros import ZeroSeeded
from reference.optimizer import ReferenceOptimizer
from suites.impls.reference import ReferenceImplementation
from suites.multigpu.space import case_of
from suites.multigpu.training import train_against_single_process


class Seeding(ReferenceImplementation):
    """The reference, saying ``says`` of its seeding (None: nothing) and seeding its masters by ``optimizer_cls``
    (from the kept init, or, with ``seed_from_init=False``, from the quantized values)."""

    def __init__(self, says, optimizer_cls=ReferenceOptimizer, from_init: bool = True) -> None:
        self.master_seeding, self.optimizer_cls, self.from_init = says, optimizer_cls, from_init

    def make_optimizer(self, ddp, make_optimizer, max_grad_norm=None, norm_type=2.0, grad_norm_skip_threshold=None):
        return self.optimizer_cls(ddp, make_optimizer, max_grad_norm, norm_type, grad_norm_skip_threshold,
                                  seed_from_init=self.from_init)


IMPLEMENTATIONS = {
    "says nothing, seeds from the kept init": (Seeding(None), True),
    "says nothing, seeds from the quantized values": (Seeding(None, from_init=False), True),
    "says nothing, seeds from zeros": (Seeding(None, ZeroSeeded), False),
    "says the kept init, seeds from it": (Seeding("high-precision-init"), True),
    "says the quantized values, seeds from them": (Seeding("dequantized", from_init=False), True),
    "says the quantized values, seeds from the kept init": (Seeding("dequantized"), False),
    "says the kept init, seeds from the quantized values": (Seeding("high-precision-init", from_init=False), False),
}


def check_seeding(ctx, which: str, recipe: str) -> str | None:
    case = case_of({"policy": "padded", "precision": "bf16", "quantized": recipe, "seeding": "high-precision"},
                   steps=2)
    try:
        train_against_single_process(ctx, IMPLEMENTATIONS[which][0], case)
    except AssertionError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("recipe", ["fp8", "mxfp8"])
@pytest.mark.parametrize("which", list(IMPLEMENTATIONS))
def test_masters_seeded_as_said_or_either_way_when_unsaid(ranks, which, recipe):
    failures = ranks.run(check_seeding, which, recipe)
    passes = IMPLEMENTATIONS[which][1]
    if passes:
        assert failures == [None] * ranks.world_size, f"{which}: got failures {failures}, but should pass"
    else:
        assert all(f is not None and "step 0" in f for f in failures), (
            f"{which}: got {failures}, but should fail at step 0 on every rank")
