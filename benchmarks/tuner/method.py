"""Which bucket size: the candidates, each one's predicted backward, the recommendation, and its check.

The method, for one model at one data-parallel size (docs/tuning.md):

- **candidates** (``candidate_sizes``): bucket sizes doubling from
  ``GRID_START`` elements up to the model's size, one bucket per buffer,
  upstream's default ``max(40M, 1M * dp)``, and torch DDP's 25 MiB in
  elements of the grad dtype;
- **prediction** (``predict``): each candidate is planned and one backward
  simulated (``benchmarks.tuner.schedule``): per-param compute, each bucket's
  collective read off a measured curve at its padded size, the
  implementation's launch cost per bucket and the contention between
  collectives and compute, all measured. What a candidate is judged by is
  ``exposed``: the step minus the compute, i.e. everything the gradient sync
  adds to the backward (launches, the slowdown of contention, and the
  communication the backward did not hide);
- **recommendation** (``recommend``): the candidate with the smallest
  exposed time; every candidate within ``TOLERANCE`` (5%) of it is in its
  range;
- **verification** (``verify``): where the method can be measured, three
  sizes (the recommendation, one far smaller, one far larger) are predicted
  and measured side by side, round by round; a prediction more than
  ``TARGET`` (10%) off its measurement, or a recommendation measured slower
  than another size beyond noise, leaves the recommendation unverified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from reference.layout import LayoutConfig, ParamSpec, default_bucket_size, plan_layout

from .records import ROLES, Candidate, Check, Prediction, Recommendation, Verification, size_label
from .schedule import CollectiveTimes, ComputeSteps, Schedule, SimulatedBucket, simulate_layout

GRID_START = 1_000_000
"""Elements of the grid's smallest bucket: below 1M elements a collective is latency-bound anywhere."""
TORCH_DDP_BUCKET_BYTES = 25 * 2**20
CONTENTION_CAP = 0.9
TOLERANCE = 0.05
TARGET = 0.10
ORIGINS = {"grid": "grid", "upstream": "upstream's default max(40M, 1M x dp)", "torch": "torch DDP's 25 MiB",
           "one": "one bucket per buffer"}


def candidate_sizes(total_elements: int, dp: int, element_bytes: int, smallest: int = GRID_START
                    ) -> tuple[Candidate, ...]:
    """The grid (doubling from ``smallest`` while below ``total_elements``), upstream's default, torch DDP's
    25 MiB in elements of ``element_bytes``, and one bucket; ascending, one bucket last, equal sizes
    merged."""
    for field, value in (("total_elements", total_elements), ("dp", dp), ("element_bytes", element_bytes),
                         ("smallest", smallest)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{field}: got {value!r}, but should be a positive integer")
    origins: dict[int, list[str]] = {}
    size = smallest
    while size < total_elements:
        origins.setdefault(size, []).append(ORIGINS["grid"])
        size *= 2
    origins.setdefault(default_bucket_size(dp), []).append(ORIGINS["upstream"])
    origins.setdefault(TORCH_DDP_BUCKET_BYTES // element_bytes, []).append(ORIGINS["torch"])
    return (*(Candidate(s, tuple(origins[s])) for s in sorted(origins)), Candidate(None, (ORIGINS["one"],)))


@dataclass(frozen=True)
class Inputs:
    """What a predicted backward rests on, every figure measured (or given by the user).

    ``contention_s_per_byte``: seconds of backward lost per byte a collective moves beside it. A
    collective of ``b`` bytes lasting ``t`` seconds so takes ``contention_s_per_byte * b / t`` of the
    backward's speed while it runs (at most ``CONTENTION_CAP``): a latency-bound collective, which moves
    few bytes for its time, contends little.
    """

    compute: ComputeSteps
    """(param name or None, seconds) in backward order."""
    collective_seconds: CollectiveTimes
    launch_cost_s: float
    contention_s_per_byte: float = 0.0

    def share(self, bucket: SimulatedBucket, seconds: float) -> float:
        """The share of the backward's speed ``bucket``'s collective takes while it runs."""
        if seconds <= 0:
            return 0.0
        return min(CONTENTION_CAP, self.contention_s_per_byte * bucket.size_bytes / seconds)

    def simulate(self, specs: Sequence[ParamSpec], config: LayoutConfig,
                 element_bytes: int | None = None) -> tuple[Schedule, int, int]:
        """The schedule of ``specs`` planned under ``config``, its bucket count and its padding (elements)."""
        layout = plan_layout(specs, config)
        schedule = simulate_layout(layout, self.compute, self.collective_seconds,
                                   launch_cost_s=self.launch_cost_s,
                                   contention=self.share if self.contention_s_per_byte else 0.0,
                                   element_bytes=element_bytes)
        padding = sum(buf.numel for buf in layout.buffers) - sum(s.numel for s in specs)
        return schedule, len(schedule.buckets), padding


def predict(specs: Sequence[ParamSpec], config: LayoutConfig, candidate: Candidate, inputs: Inputs,
            element_bytes: int | None = None) -> Prediction:
    """``candidate``'s layout under ``config`` (its bucket size replaced) and its simulated backward."""
    schedule, buckets, padding = inputs.simulate(specs, replace(config, bucket_size=candidate.bucket_size),
                                                 element_bytes)
    params = sum(s.numel for s in specs)
    ms = 1e3
    return Prediction(
        bucket_size=candidate.bucket_size, origins=candidate.origins, buckets=buckets, padding=padding,
        padding_pct=100.0 * padding / params, compute_ms=schedule.compute_s * ms,
        launch_ms=schedule.launch_s * ms, slowed_ms=max(0.0, round(schedule.slowed_s * ms, 9)),
        unhidden_ms=schedule.exposed_s * ms,
        exposed_ms=(schedule.step_s - schedule.compute_s) * ms, step_ms=schedule.step_s * ms,
        share=(schedule.step_s - schedule.compute_s) / schedule.step_s if schedule.step_s else 0.0)


def predict_all(specs: Sequence[ParamSpec], config: LayoutConfig, candidates: Iterable[Candidate],
                inputs: Inputs, element_bytes: int | None = None,
                progress: Callable[[int, int], None] = lambda done, total: None) -> tuple[Prediction, ...]:
    """Every candidate's prediction; ``progress(done, total)`` after each."""
    candidates = list(candidates)
    out = []
    for candidate in candidates:
        out.append(predict(specs, config, candidate, inputs, element_bytes))
        progress(len(out), len(candidates))
    return tuple(out)


def recommend(predictions: Sequence[Prediction], tolerance: float = TOLERANCE) -> Recommendation:
    """The smallest exposed time (the smaller size on a tie) and the sizes within ``tolerance`` of it."""
    if not predictions:
        raise ValueError("predictions: got none, but a recommendation needs at least one candidate")
    best = min(predictions, key=lambda p: (p.exposed_ms, _order(p.bucket_size)))
    bound = best.exposed_ms * (1 + tolerance)
    within = sorted({p.bucket_size for p in predictions if p.exposed_ms <= bound}, key=_order)
    return Recommendation(best.bucket_size, best.exposed_ms, tolerance, tuple(within))


def verification_sizes(candidates: Iterable[int | None], recommended: int | None) -> dict[str, int | None]:
    """The sizes a verification measures, by role: the recommendation, the smallest candidate (far smaller)
    and one bucket (far larger); a role whose size is the recommendation's own is left out."""
    sizes = sorted(set(candidates), key=_order)
    roles = {ROLES[0]: recommended, ROLES[1]: sizes[0], ROLES[2]: sizes[-1]}
    return {role: size for role, size in roles.items() if role == ROLES[0] or size != recommended}


def verify(checks: Sequence[Check], target: float = TARGET) -> Verification:
    """Verified when every check's median error is within ``target`` and no other size's measured interval
    lies wholly below the recommendation's; otherwise unverified, and why."""
    problems = [f"{c.role} ({size_label(c.bucket_size)}) predicted {c.predicted_ms.median:.4g} ms, "
                f"measured {c.measured_ms.median:.4g} ms: off by {c.error.median:+.1%}, beyond the "
                f"±{target:.0%} target" for c in checks if c.missed(target)]
    recommended = next((c for c in checks if c.role == ROLES[0]), None)
    if recommended is None:
        problems.append("the recommended size was not measured")
    else:
        low = recommended.measured_ms.bounds[0]
        problems += [f"{c.role} ({size_label(c.bucket_size)}) measured faster than the recommendation beyond "
                     f"noise ({c.measured_ms.median:.4g} ms against {recommended.measured_ms.median:.4g} ms)"
                     for c in checks if c is not recommended and c.measured_ms.bounds[1] < low]
    held = [f"{c.role} ({size_label(c.bucket_size)}) within ±{target:.0%}: {c.error.median:+.1%}"
            for c in checks if not c.missed(target)]
    if problems:
        return Verification(tuple(checks), target, False, tuple(problems), "; ".join(held))
    return Verification(tuple(checks), target, True, (),
                        f"every prediction within ±{target:.0%} of its measurement ({'; '.join(held)}), and no "
                        "size measured faster than the recommendation beyond noise")


def _order(bucket_size: int | None) -> float:
    return math.inf if bucket_size is None else bucket_size

