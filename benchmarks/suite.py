"""All multi-rank benchmarks in one launch (one set of rank processes), with a smoke mode.

Smoke mode runs each benchmark once on tiny inputs: it proves the code paths
and the correctness checks, and its timings mean nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from . import busbw, overlap
from .launch import BenchContext, run_on_ranks
from .step_time import summarize, time_steps


@dataclass(frozen=True)
class BenchConfig:
    world_size: int = 2
    smoke: bool = False
    smallest: int = 2**10  # bytes
    largest: int = 2**24
    rounds: int = 40  # step-time rounds
    overlap_rounds: int = 15
    model: dict = field(default_factory=lambda: {"width": 1024, "depth": 6, "batch": 32})

    @classmethod
    def smoke_test(cls, world_size: int = 2) -> "BenchConfig":
        return cls(world_size=world_size, smoke=True, smallest=2**10, largest=2**16, rounds=2,
                   overlap_rounds=1, model={"width": 64, "depth": 2, "batch": 4})


def _all(ctx: BenchContext, config: BenchConfig) -> dict:
    sizes = busbw.geometric_sizes(config.smallest, config.largest)
    records = busbw.sweep(ctx, sizes, smoke=config.smoke)
    harness = busbw.bare_loop_overhead(ctx, iters=1 if config.smoke else 50, rounds=1 if config.smoke else 5)
    warmup = 0 if config.smoke else 2
    overlap_rows = overlap.measure(ctx, rounds=config.overlap_rounds, warmup=warmup, **config.model)
    step_args = dict(config.model, rounds=config.rounds, warmup=warmup, overlap=True)
    return {"busbw": records, "harness_overhead": harness, "overlap": overlap_rows,
            "step_times": time_steps(ctx, step_args), "step_args": step_args}


def run_all(config: BenchConfig) -> dict:
    """Rank 0's view of every benchmark (every rank gets the same records)."""
    out = run_on_ranks(_all, config.world_size, config)[0]
    step = summarize(out.pop("step_times"), out.pop("step_args"), config.world_size)
    return {**out, "busbw_average": busbw.averages(out["busbw"]), "step_time": step,
            "config": asdict(config)}
