"""The design notes' quantitative claims, each set against what a run measured, with a verdict.

One row per claim (rules as data: ``CLAIMS``). The verdict compares the
claimed range with the measured figure's 95% interval of the median:
**holds** when they overlap, **does not hold here** when the interval lies
wholly outside, **not measurable** when the claim rests on a mechanism the
backend lacks, **not measured** when the run did not measure it, and **not
assessed** in a smoke run, each with why. Decided when the run is written,
and stored with it as a typed outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from benchmarks.bucket_size import BucketSizeRecord
from benchmarks.busbw import BusbwRecord, gated_cells
from benchmarks.padding import NOTES_CLAIMS
from benchmarks.stats import Figure, describe

from ..store.model import ClaimVerdict, Results

PADDING_NOTE = "design note: gradient buffer padding"
OVERLAP_NOTE = "design note: gradient bucketing and overlap"
BUCKETING_NOTE = "design note: gradient bucketing in DDP"
BUCKET_SIZE_NOTE = OVERLAP_NOTE  # its "Bucket size" section: the sweet spot, too small, too large
CLAIM_SIZES_MB = (40.0, 80.0)


@dataclass(frozen=True)
class Measured:
    what: str
    figure: Figure | None = None
    value: float | None = None
    """A computed, exact value (from the planner), when there is no sampled figure."""
    missing: str = ""
    """Why nothing was measured, when nothing was."""
    span: tuple[float, float] | None = None
    """A computed range (the bucket sizes within 5% of the best), when the claim is about a range."""

    def interval(self) -> tuple[float, float] | None:
        if self.figure is not None:
            return self.figure.bounds
        if self.span is not None:
            return self.span
        return None if self.value is None else (self.value, self.value)

    def shown(self) -> str:
        if self.figure is not None:
            return describe(self.figure)
        if self.span is not None:
            return f"{self.span[0]:.4g} to {self.span[1]:.4g}"
        return "" if self.value is None else f"{self.value:.4g}"


@dataclass(frozen=True)
class Claim:
    source: str
    text: str
    low: float
    high: float
    measure: Callable[[Results], Measured]
    needs_backend: str | None = None
    why_backend: str = ""

    def judge(self, results: Results) -> ClaimVerdict:
        measured = self.measure(results)
        outcome, why = (("not assessed", "a smoke run's timings mean nothing") if results.run.setup.smoke
                        else self.outcome(measured, results.run.setup.backend))
        return ClaimVerdict(self.source, self.text, f"{measured.what}: {measured.shown()}".rstrip(": "), outcome, why)

    def outcome(self, measured: Measured, backend: str) -> tuple[str, str]:
        interval = measured.interval()
        if interval is None:
            return "not measured", measured.missing
        if self.needs_backend and backend != self.needs_backend:
            return "not measurable", self.why_backend
        if interval[1] < self.low or interval[0] > self.high:
            return "does not hold", ""
        return "holds", ""


def _figure(record, figure: Figure | None, what: str, absent: str) -> Measured:
    """A record's figure, or why there is none: no such record in the run (``absent``), or the figure refused."""
    if record is None:
        return Measured("", missing=absent)
    if figure is None:
        return Measured("", missing=f"refused: {record.refused}")
    return Measured(what, figure)


def _padding_ratio(collective: str) -> Callable[[Results], Measured]:
    def measure(results: Results) -> Measured:
        records: tuple[BusbwRecord, ...] = results.benchmarks.busbw
        top = next((r for r in gated_cells(records) if r.collective == collective and r.policy == "high-busbw"),
                   None)
        return _figure(top, top and top.effective_ratio_to_unpadded,
                       top and f"{collective}, effective busbw ratio to unpadded at {top.size_bytes:,} B",
                       "no bus-bandwidth sweep in this run")
    return measure


def _overlap(results: Results) -> Measured:
    record = next((r for r in results.benchmarks.overlap if r.mode == "emulated" and r.impl == "reference"), None)
    return _figure(record, record and record.efficiency, "the reference's emulated-compute overlap efficiency",
                   "no emulated overlap measurement of the reference in this run")


def _bucketing(size_class: str) -> Callable[[Results], Measured]:
    def measure(results: Results) -> Measured:
        record = next((r for r in results.benchmarks.bucketing if r.model.size_class == size_class), None)
        return _figure(record, record and record.speedup,
                       record and f"{record.model.params / 1e6:.1f}M params, per-param all-reduce step over bucketed",
                       f"no {size_class} model is benchmarked: a step of one would not fit the run's time on this "
                       "machine")
    return measure


def _shard_cache(results: Results) -> Measured:
    rows = {r.name: r for r in results.benchmarks.shard_cache}
    cached, resliced = rows.get("test_cached_shard_views"), rows.get("test_resliced_shard_views")
    if cached is None or resliced is None:
        return Measured("", missing="the shard-caching benchmark did not run (smoke mode times nothing)")
    a, b = cached.time_ms, resliced.time_ms
    separated = a.bounds[1] < b.bounds[0]
    return Measured(f"64 buckets' shard views per step: cached {describe(a)} ms, re-sliced {describe(b)} ms; "
                    "intervals apart (1 = yes)", value=1.0 if separated else 0.0)


def _typical_overhead(results: Results) -> Measured:
    rows = [r for r in results.overhead if (r.model, r.dp) in NOTES_CLAIMS and r.policy == "padded"]
    if not rows:
        return Measured("", missing="no padding-overhead table in this run")
    return Measured("padding of the four listed (model, dp) rows under upstream's padded policy, in bytes "
                    "(table below)", value=float(sum(r.padding_bytes_bf16 for r in rows)))


def _memory_overhead(results: Results) -> Measured:
    rows = [r for r in results.overhead if r.policy == "high-busbw"]
    if not rows:
        return Measured("", missing="no padding-overhead table in this run")
    return Measured("largest padding under high-busbw over the catalogue's models and dp, % of params",
                    value=max(r.padding_pct for r in rows))


def _bucket_megabytes(upper_only: bool) -> Callable[[Results], Measured]:
    """The benchmark model's bucket sizes within 5% of the best, in MB (1e6 bytes): all of them, or the
    largest alone; with the measured shape beside them."""
    def measure(results: Results) -> Measured:
        record: BucketSizeRecord | None = next(iter(results.benchmarks.bucket_size), None)
        if record is None:
            return Measured("", missing="no bucket-size benchmark in this run (not selected)")
        if not record.verification.verified:
            return Measured("", missing=f"the prediction was not verified here ({record.verification.evidence()})")
        total = record.bucket_bytes(None) / 1e6
        if total <= CLAIM_SIZES_MB[-1] and results.run.setup.backend == "nccl":
            return Measured("", missing=f"the benchmark model holds {total:.3g} MB of grads in all: no "
                                        "bucket the claim is about fits in it; measured in shape only: "
                                        f"{_shape(record)}")
        rec = record.recommendation
        high = record.bucket_bytes(rec.high) / 1e6
        span = (high, high) if upper_only else (record.bucket_bytes(rec.low) / 1e6, high)
        what = "the largest bucket" if upper_only else "the bucket sizes"
        model = f"{record.model.depth} x Linear({record.model.width})"
        return Measured(f"{what} within 5% of the best predicted step, MB ({model}, {_shape(record)})",
                        span=span)
    return measure


def _shape(record: BucketSizeRecord) -> str:
    """What the measurement says of the claim's shape: the measured steps of the far sizes against the
    recommendation's."""
    checks = {c.role: c for c in record.verification.checks}
    best = checks.get("recommended")
    if best is None:
        return "the recommended size was not measured"
    slower = ", ".join(f"{role} {c.measured_ms.median / best.measured_ms.median - 1:+.1%}"
                       for role, c in checks.items() if role != "recommended")
    return (f"recommended {record.bucket_bytes(best.bucket_size) / 1e6:.3g} MB of a "
            f"{record.bucket_bytes(None) / 1e6:.3g} MB model; measured steps against it: "
            f"{slower or 'no other size'}")


NVLS = ("the gain comes from NCCL choosing its NVLS algorithm for 2**16-aligned buckets on NVLink "
        "switches; gloo has no such algorithm, so padding only adds bytes")

BUCKET_SIZE_NCCL = ("the claim is about large models' buckets over NCCL; gloo's curve and a toy model put "
                    "the best size elsewhere, so here only the shape is measured (see measured: the far "
                    "smaller and far larger sizes' steps against the recommended one's)")

CLAIMS = (
    *(Claim(PADDING_NOTE, f"padding buckets to 2**16 elements gives 2.1-2.7x bus bandwidth ({c})", 2.1, 2.7,
            _padding_ratio(c), needs_backend="nccl", why_backend=NVLS)
      for c in ("all_reduce", "reduce_scatter", "all_gather")),
    Claim(PADDING_NOTE, "high-busbw padding costs under 1% of memory", 0.0, 1.0, _memory_overhead),
    Claim(PADDING_NOTE, "typical overhead: 4 KB (7B, dp 8) to 4.5 MB (540B, dp 128) of padding; "
          "the range below is the four claims' sum in bytes", 4_096 + 160_000 + 1_200_000 + 4_500_000,
          4_096 + 160_000 + 1_200_000 + 4_500_000, _typical_overhead),
    Claim(OVERLAP_NOTE, "excellent overlap hides 85-95% of the communication", 0.85, 0.95, _overlap),
    Claim(BUCKETING_NOTE, "bucketing speeds a step up 1.2-1.5x for models under 10M params", 1.2, 1.5,
          _bucketing("small (<10M)")),
    Claim(BUCKETING_NOTE, "1.5-2x for models of 10M-100M params", 1.5, 2.0, _bucketing("medium (10M-100M)")),
    Claim(BUCKETING_NOTE, "2-3x for models over 100M params", 2.0, 3.0, _bucketing("large (>100M)")),
    Claim(OVERLAP_NOTE, "cached shard views save per-step CPU time (1 = the cached interval lies wholly below "
          "the re-sliced one)", 1.0, 1.0, _shard_cache),
    Claim(BUCKET_SIZE_NOTE, "buckets of about 40 MB are the sweet spot (MB = 1e6 bytes, as written; "
          "docs/errata.md: upstream's 40M counts elements)", CLAIM_SIZES_MB[0], CLAIM_SIZES_MB[0],
          _bucket_megabytes(False), needs_backend="nccl", why_backend=BUCKET_SIZE_NCCL),
    Claim(BUCKET_SIZE_NOTE, "buckets over 80 MB are too large (the largest size within 5% of the best is at "
          "most 80 MB)", 0.0, CLAIM_SIZES_MB[1], _bucket_megabytes(True), needs_backend="nccl",
          why_backend=BUCKET_SIZE_NCCL),
)


def judge_claims(results: Results) -> tuple[ClaimVerdict, ...]:
    return tuple(claim.judge(results) for claim in CLAIMS)
