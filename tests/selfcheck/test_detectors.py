"""The change-point measurement: series drawn from the stored runs' rounds, steps planted where it says, and a
detector that sees nothing or cries wolf scored as such."""

import numpy as np
import pytest

from selfcheck.detectors import AT, NIGHTS, STEPS, nights, rounds_of, score
from reports.store.runs import Runs
from tests.pytest_run import ROOT

POOL = rounds_of(Runs(ROOT / "fixtures" / "runs").readable())


def test_a_planted_step_moves_every_night_from_its_night_on():
    flat, stepped = (nights(np.random.default_rng(1), POOL, *args) for args in ((), (0.10, 40)))
    ratios = [b.value / a.value for a, b in zip(flat, stepped)]
    assert ratios[:40] == pytest.approx([1.0] * 40) and ratios[40:] == pytest.approx([1.1] * (NIGHTS - 40))
    assert all(p.interval[0] <= p.value <= p.interval[1] for p in flat)


def test_a_blind_detector_finds_nothing_and_a_wolf_crier_is_counted():
    blind = score("blind", lambda points: (), POOL, tries=4)
    assert blind.found == {step: 0 for step in STEPS} and blind.false_per_100 == 0
    wolf = score("wolf", lambda points: tuple(range(5, NIGHTS, 5)), POOL, tries=4)
    assert wolf.false_per_100 == pytest.approx(19.0) and all(wolf.found[step] == 4 for step in STEPS), wolf
    assert set(AT) <= set(range(5, NIGHTS, 5)), "the wolf crier's change points meet every planted night"


def test_too_few_rounds_are_refused():
    with pytest.raises(ValueError, match="no/such: got 0 rounds in the runs, but should be at least 6"):
        rounds_of([], "no/such")
