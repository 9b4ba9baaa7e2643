"""One rank's result of one check, and the rule that turns every rank's results into the test's.

Both launch modes produce the same ``Outcome`` per rank and settle them the
same way: any failure fails the test with every failing rank's traceback,
otherwise any skip skips it, otherwise the test gets the return values.
"""

from __future__ import annotations

import pickle
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

# Words in the errors a collective raises when its peers did not answer in
# time or went away; after one of those the group under test is unusable.
_BROKEN_GROUP_WORDS = ("timed out", "timeout", "connection closed", "connection reset", "pair closure")


@dataclass(frozen=True)
class Outcome:
    rank: int
    kind: str
    """``passed``, ``failed``, ``skipped`` or ``xfailed``."""
    detail: str = ""
    """The traceback of a failure, the reason of a skip or xfail."""
    value: Any = None
    broke_group: bool = False
    """The failure left the group under test unusable (a collective timed out or lost a peer)."""
    warnings: tuple[tuple[str, type[Warning], str, int], ...] = ()
    """Warnings a pool worker caught, as (message, category, filename, lineno), for the parent to re-issue."""
    signal: str | None = None
    """The signal the rank's process died of (``SIGSEGV``, ``SIGABRT``: it crashed below Python), or None."""

    @classmethod
    def failed(cls, rank: int, detail: str, broke_group: bool = False, signal: str | None = None) -> Outcome:
        return cls(rank, "failed", detail, broke_group=broke_group, signal=signal)


class RankCrashWarning(UserWarning):
    """A rank's process died of a signal, and the check ran again on fresh ranks (``--crash-reruns``)."""


def call_check(
    fn: Callable[..., Any], ctx: Any, args: tuple, kwargs: dict, keep_warnings: bool = False
) -> Outcome:
    """Run ``fn(ctx, *args, **kwargs)`` and report how it ended; only KeyboardInterrupt escapes.

    ``keep_warnings``: catch the check's warnings into the outcome (a pool worker has no pytest to
    report them; ``settle`` re-issues them in the test, where pytest's filters and summary apply).
    """
    if not keep_warnings:
        return _call(fn, ctx, args, kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = _call(fn, ctx, args, kwargs)
    kept = tuple((str(w.message), w.category, w.filename, w.lineno) for w in caught)
    return replace(outcome, warnings=kept) if _picklable(kept) else outcome


def _call(fn: Callable[..., Any], ctx: Any, args: tuple, kwargs: dict) -> Outcome:
    rank = ctx.rank
    try:
        value = fn(ctx, *args, **kwargs)
    except pytest.skip.Exception as exc:
        return Outcome(rank, "skipped", exc.msg)
    except pytest.xfail.Exception as exc:
        return Outcome(rank, "xfailed", exc.msg)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a check's SystemExit or pytest.fail is its failure too
        return Outcome.failed(rank, _format(exc), broke_group=_breaks_group(exc))
    if not _picklable(value):
        return Outcome.failed(
            rank,
            f"{fn.__qualname__} returned a {type(value).__name__}, but should return a picklable "
            "value (ranks send their results to each other)",
        )
    return Outcome(rank, "passed", value=value)


def settle(outcomes: list[Outcome], name: str) -> list[Any]:
    """Fail, skip or xfail the current test as the ranks' outcomes say, else return their values by rank."""
    for message, category, filename, lineno in dict.fromkeys(w for o in outcomes for w in o.warnings):
        warnings.warn_explicit(message, category, filename, lineno)
    failures = [o for o in outcomes if o.kind == "failed"]
    if failures:
        ranks = ", ".join(str(o.rank) for o in failures)
        sections = "".join(f"\n---------- rank {o.rank} ----------\n{o.detail.rstrip()}\n" for o in failures)
        pytest.fail(f"{name} failed on rank {ranks} of world size {len(outcomes)}\n{sections}", pytrace=False)
    skips = [o for o in outcomes if o.kind == "skipped"]
    if skips:
        raise _skip_at_test(_reason(skips, len(outcomes)))
    xfails = [o for o in outcomes if o.kind == "xfailed"]
    if xfails:
        pytest.xfail(_reason(xfails, len(outcomes)))
    return [o.value for o in sorted(outcomes, key=lambda o: o.rank)]


def _skip_at_test(reason: str) -> BaseException:
    """A skip reported at the test's location, as a skip marker's is, rather than at this line."""
    try:
        return pytest.skip.Exception(reason, _use_item_location=True)
    except TypeError:  # pragma: no cover - pytest dropped the keyword
        return pytest.skip.Exception(reason)


def _reason(hits: list[Outcome], world_size: int) -> str:
    reasons = {o.detail for o in hits}
    if len(hits) == world_size and len(reasons) == 1:
        return reasons.pop()
    return "; ".join(f"rank {o.rank}: {o.detail}" for o in hits)


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - pickling raises many kinds of error
        return False
    return True


def _format(exc: BaseException) -> str:
    # Leave out call_check's own frame: the traceback starts in the check.
    tb = exc.__traceback__.tb_next if exc.__traceback__ else None
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _breaks_group(exc: BaseException) -> bool:
    import torch.distributed as dist

    if isinstance(exc, dist.DistError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(word in text for word in _BROKEN_GROUP_WORDS)
