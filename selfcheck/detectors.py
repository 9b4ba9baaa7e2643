"""Which change-point detector the trend uses, measured: series of nights drawn from the real rounds of recorded
runs, steps of 1% to 10% planted at several nights, each detector's false change points per 100 nights and the
steps it finds (``python -m selfcheck.gate_check --part changepoints``; docs/measurements/gate.md, "the trend's change-point detectors").

A night is the median of ``ROUNDS`` rounds drawn from a smoothed bootstrap of a figure's rounds in the stored runs
(its pooled, median-normalized samples plus Gaussian noise of Silverman's bandwidth), with the 95% interval of
that median from its order statistics. A planted step multiplies every night from its night on; it is found when
a change point lands within ``WINDOW`` nights of it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from reports.store.model import Point
from reports.store.runs import Runs
from reports.comparison.series import change_points

NIGHTS, ROUNDS, WINDOW = 100, 15, 3
STEPS = (0.01, 0.025, 0.05, 0.10)
AT = (25, 50, 75, 90)
LOW, HIGH = 3, 11
"""Order statistics of 15 rounds that hold their median with 96% confidence."""
METRIC = "step_time/reference/ratio_to_torch_ddp"
FIXTURE_RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def rounds_of(runs: Sequence, key: str = METRIC) -> np.ndarray:
    """The rounds of ``key`` in every run that sampled it, each run's over its median, pooled."""
    pooled = [s / m.figure.median for r in runs for k, m in r.metrics.items()
              if k == key and m.figure is not None and len(m.figure.samples) >= 3 and m.figure.median
              for s in m.figure.samples]
    if len(pooled) < 6:
        raise ValueError(f"{key}: got {len(pooled)} rounds in the runs, but should be at least 6 to draw nights from")
    return np.asarray(pooled)


def nights(rng: np.random.Generator, pool: np.ndarray, step: float = 0.0, at: int | None = None) -> list[Point]:
    bandwidth = 1.06 * np.std(pool) * len(pool) ** -0.2
    draws = np.sort(rng.choice(pool, size=(NIGHTS, ROUNDS)) + rng.normal(0, bandwidth, (NIGHTS, ROUNDS)), axis=1)
    scale = np.where(np.arange(NIGHTS) >= (at if at is not None else NIGHTS), 1 + step, 1.0)
    return [Point(f"n{i:03d}", float(np.median(d) * k), (float(d[LOW] * k), float(d[HIGH] * k)))
            for i, (d, k) in enumerate(zip(draws, scale))]


def _sigma(values: np.ndarray) -> float:
    diffs = np.diff(values)
    return float(1.4826 * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2))


def _ruptures(method: str, model: str) -> Callable[[list[Point]], Sequence[int]]:
    def detect(points: list[Point]) -> Sequence[int]:
        import ruptures

        y = np.asarray([p.value for p in points])
        sigma = _sigma(y)
        pen = 2 * sigma * sigma * math.log(len(y)) if model == "l2" else 2 * sigma * math.log(len(y))
        return getattr(ruptures, method)(model=model, min_size=3, jump=1).fit(y).predict(pen=pen)[:-1]
    return detect


def _asv(points: list[Point]) -> Sequence[int]:
    from asv.step_detect import detect_steps

    return [left for left, *_ in detect_steps([p.value for p in points])[1:]]


DETECTORS: dict[str, Callable[[list[Point]], Sequence[int]]] = {
    "asv detect_steps": _asv,
    "ruptures Pelt, l2, BIC": _ruptures("Pelt", "l2"),
    "ruptures Binseg, l2, BIC": _ruptures("Binseg", "l2"),
    "ruptures Pelt, l1": _ruptures("Pelt", "l1"),
    "the trend's (Binseg, sigma floored by the intervals)": lambda points: change_points(points) or (),
}


@dataclass(frozen=True)
class DetectorScore:
    detector: str
    false_per_100: float
    """False change points per 100 nights of series with no step."""
    found: dict[float, int]
    """Step size -> series (of ``tries``) where a change point landed within ``WINDOW`` nights of it."""
    false_beside: dict[float, float]
    """Step size -> false change points per 100 nights beside the planted step."""
    tries: int
    ms_per_series: float
    missing: str = ""
    """Why it was not measured (its package is not installed), or empty."""


def score(name: str, detect: Callable[[list[Point]], Sequence[int]], pool: np.ndarray, tries: int,
          seed: int = 0) -> DetectorScore:
    rng = np.random.default_rng(seed)
    start = time.monotonic()
    try:
        false = sum(len(detect(nights(rng, pool))) for _ in range(tries))
    except ImportError as exc:
        return DetectorScore(name, math.nan, {}, {}, tries, math.nan, f"not installed ({exc.name})")
    found, beside = {}, {}
    for step in STEPS:
        hits = extra = 0
        for i in range(tries):
            at = AT[i % len(AT)]
            cps = detect(nights(rng, pool, step, at))
            near = [c for c in cps if abs(c - at) <= WINDOW]
            hits += bool(near)
            extra += len(cps) - min(len(near), 1)
        found[step], beside[step] = hits, 100 * extra / (tries * NIGHTS)
    seconds = time.monotonic() - start
    return DetectorScore(name, 100 * false / (tries * NIGHTS), found, beside, tries,
                         1e3 * seconds / (tries * (1 + len(STEPS))))


def measure(tries: int = 100, root: Path = FIXTURE_RUNS) -> list[DetectorScore]:
    pool = rounds_of(Runs(root).readable())
    return [score(name, detect, pool, tries) for name, detect in DETECTORS.items()]


def rows(scores: Sequence[DetectorScore]) -> list[dict]:
    made = []
    for s in scores:
        if s.missing:
            made.append({"detector": s.detector, "false per 100 nights": s.missing})
            continue
        made.append({"detector": s.detector, "false per 100 nights": f"{s.false_per_100:.2f}",
                     **{f"{step:.1%} found": f"{s.found[step]} of {s.tries}" for step in STEPS},
                     "false per 100 beside a step": f"{min(s.false_beside.values()):.2f}-"
                                                    f"{max(s.false_beside.values()):.2f}",
                     "ms a series": f"{s.ms_per_series:.0f}"})
    return made
