"""Compositions of the configuration space train like one process on the global batch.

Bugs of bucketed data parallelism live where features meet, so these cases
are not picked one axis at a time: ``space.py`` declares the axes, their
values and the rules between them, and ``covering.py`` keeps a covering
array over them, in which every pair of axis values the rules allow meets in
at least one case (``--compositions triples``: every three). An
implementation that lacks some values skips the cases that use them, with
the reason, and gets cases of its own besides, over the values it supports
(``covering.for_implementation``). Each case is
named by the axes it moves away from the base, and ``--case`` runs one
(``pytest suites/multigpu --case 'world=1,microbatches=2'``); ``--explore N``
searches further (``test_explore.py``).
"""

import pytest

from suites.impls import load_implementation

from .cases import Case
from .training import train_against_single_process

pytestmark = pytest.mark.requires("ddp")


def check_composition(ctx, case: Case) -> int:
    return train_against_single_process(ctx, load_implementation(ctx.impl_spec), case)


def test_composition_trains_like_one_process(ranks, impl, composition: Case):
    steps = ranks.run(check_composition, composition)
    assert steps == [composition.steps] * ranks.world_size, f"steps compared per rank: got {steps}"
