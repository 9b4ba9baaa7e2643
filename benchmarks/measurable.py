"""Figures that have nothing to measure in a setup: null, with the reason, never a number.

A figure about communication needs communication. At one rank nothing
crosses a bus: a collective over one rank is a local copy at most, so an
overlap efficiency, a bucketing speed-up or a bus bandwidth has no
denominator there. Such a figure is recorded as null with this reason; the
metrics leave it out (nothing is gated or trended) and the claims table says
"not measured" with the reason.
"""

from __future__ import annotations


def lone_rank(world_size: int, what: str) -> str | None:
    """Why a figure about communication ``what`` (e.g. "to hide") has nothing to measure, or None."""
    if world_size == 1:
        return f"one rank: nothing is communicated, so there is no communication {what}"
    return None
