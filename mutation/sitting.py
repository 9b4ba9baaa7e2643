"""One run of a session: the pending mutants in order, until a limit says stop, each result saved as it comes."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


def within_limits(done: int, elapsed_s: float, max_mutants: int | None, max_minutes: float | None) -> bool:
    """Whether another mutant may start: fewer than ``max_mutants`` done, under ``max_minutes`` since the start."""
    return (max_mutants is None or done < max_mutants) and (max_minutes is None or elapsed_s < 60 * max_minutes)


def run_sitting(pending: Sequence[str], run_one: Callable[[str], dict], record: Callable[[dict], None],
                max_mutants: int | None, max_minutes: float | None, started: float,
                clock: Callable[[], float] = time.monotonic) -> int:
    """Run and record pending mutants while the limits allow; returns how many were done."""
    done = 0
    for key in pending:
        if not within_limits(done, clock() - started, max_mutants, max_minutes):
            break
        result = run_one(key)
        record(result)
        done += 1
        print(f"[{done}/{len(pending)}] {result['outcome']} in {result['seconds']:.0f} s: {key}", flush=True)
    return done
