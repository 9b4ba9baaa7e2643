"""What an implementation does not support, said one way: a table of ``Lack`` rows, each with its reason.

An adapter's ``lacks`` is that table, and every row is one of four kinds,
told apart by what it names:

- a capability level (``protocol.CAPABILITIES``) it does not provide;
- an upstream knob (``protocol.KNOBS``) it does not map (``unmapped`` writes
  a row for every knob outside the ones it maps, so that a knob added to
  ``KNOBS`` later is never assumed mapped by an adapter written before it);
- a configuration field (of ``LayoutConfig`` or ``DDPConfig``) whose value it
  cannot express: ``what`` names the field, or ``field=value`` for the one
  value it cannot take; ``when`` decides from the field's value otherwise.
  A row whose ``why`` is a function asks it (a factory's own ``unsupported``):
  it answers the reason, or None;
- a transport (``transport=gloo+cuda``, one of ``TRANSPORTS``) its collectives
  cannot run over: the ranks' backend and where their tensors live.

``why_not(impl, need)`` is the one question every skip and every refusal
asks: the suites' plugin at collection, a multigpu case, an adapter's
``wrap``. ``Declared`` gives an adapter the ``capabilities`` and ``knobs``
its table implies, for the report header and the benchmarks.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import logging
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence, runtime_checkable

from ranks.context import TRANSPORTS, Transport
from reference.config import DDPConfig
from reference.layout import LayoutConfig

from .protocol import CAPABILITIES, KNOBS, knobs_used

Config = LayoutConfig | DDPConfig
FIELDS = {f.name for config in (LayoutConfig, DDPConfig) for f in dataclasses.fields(config)}


@dataclass(frozen=True)
class Lack:
    """One thing an implementation does not support, and why (module docstring: the four kinds).

    ``why`` may quote the field's value as ``{value}`` (``{value!r}``).
    """

    what: str
    why: str | Callable[[Config], str | None]
    when: Callable[[Any], bool] | None = None

    def __post_init__(self) -> None:
        if callable(self.why):
            return
        field, has_value, value = self.what.partition("=")
        if field == "transport":
            if value not in TRANSPORTS or self.when is not None:
                raise ValueError(f"{self.what}: got a transport row, but should name one of {', '.join(TRANSPORTS)} "
                                 "after 'transport=', with no `when`")
        elif self.what in CAPABILITIES or self.what in KNOBS:
            if self.when is not None:
                raise ValueError(f"{self.what}: got a `when` for a level or knob, but should have none: "
                                 "a level is lacked whatever the configuration, a knob whenever it is turned")
        elif field not in FIELDS:
            raise ValueError(f"what: got {self.what!r}, but should be a level ({', '.join(CAPABILITIES)}), "
                             f"a knob ({', '.join(KNOBS)}) or a configuration field "
                             f"({', '.join(sorted(FIELDS))})")
        elif has_value and self.when is not None:
            raise ValueError(f"{self.what}: got both a value and a `when`, but should have one")
        elif has_value:
            ast.literal_eval(value)  # a value the row can compare with

    @property
    def kind(self) -> str:
        if callable(self.why):
            return "asked"
        if self.what.startswith("transport="):
            return "transport"
        return "level" if self.what in CAPABILITIES else "knob" if self.what in KNOBS else "field"

    def reason(self, config: Config) -> str | None:
        """Why ``config`` cannot be expressed, by this field or asked row; None where it does not apply."""
        if self.kind in ("level", "knob", "transport"):
            raise TypeError(f"{self.what}: a {self.kind} row is read by why_not, not asked of a "
                            "configuration")
        if self.kind == "asked":
            return self.why(config)
        field, has_value, value = self.what.partition("=")
        if field not in {f.name for f in dataclasses.fields(config)}:
            return None  # a DDPConfig field, asked of a LayoutConfig
        got = getattr(config, field)
        applies = got == ast.literal_eval(value) if has_value else (self.when or bool)(got)
        return f"{self.what}: {self.why.format(value=got)}" if applies else None


def unmapped(mapped: Iterable[str], why: str) -> tuple[Lack, ...]:
    """A row for every upstream knob outside ``mapped``, each with ``why``."""
    mapped = set(mapped)
    return tuple(Lack(knob, why) for knob in KNOBS if knob not in mapped)


def no_checkpoint(peer: str) -> Lack:
    """The ``checkpoint`` level's row of an adapter whose optimizer wrapper saves nothing."""
    return Lack("checkpoint", f"the adapter's optimizer over {peer} offers no state_dict / load_state_dict "
                              "(protocol.Checkpoints): a checkpoint of the peer's own is not mapped")


def levels(impl) -> frozenset[str]:
    """The capability levels ``impl`` provides: those no row of its table names."""
    return frozenset(CAPABILITIES) - {row.what for row in impl.lacks if row.kind == "level"}


def provides(impl, level: str) -> bool:
    return level in levels(impl)


class Declared:
    """An adapter's ``capabilities`` and ``knobs``, read from its table ``lacks``, for whoever reads them."""

    lacks: Sequence[Lack] = ()

    @property
    def capabilities(self) -> frozenset[str]:
        return levels(self)

    @property
    def knobs(self) -> frozenset[str]:
        return frozenset(KNOBS) - {row.what for row in self.lacks if row.kind == "knob"}


@runtime_checkable
class StatesCapabilities(Protocol):
    """An implementation that also states its levels (``Declared`` derives them; stated apart they could
    disagree)."""

    capabilities: frozenset[str]


def check_table(impl) -> None:
    """Refuse a table that is not one: rows of another type, or ``capabilities`` stated apart from it."""
    bad = [row for row in impl.lacks if not isinstance(row, Lack)]
    if bad:
        raise ValueError(f"{impl.name}.lacks: got {bad!r}, but should hold only suites.impls.support.Lack "
                         "rows")
    if isinstance(impl, StatesCapabilities) and frozenset(impl.capabilities) != levels(impl):
        raise ValueError(
            f"{impl.name}.capabilities: got {sorted(impl.capabilities)}, but should be "
            f"{sorted(levels(impl))}, the levels its table `lacks` leaves: say a level it does not provide "
            "as a row, Lack(level, why)")


@runtime_checkable
class AsksItself(Protocol):
    """A need that says itself why an implementation cannot meet it (a multigpu ``Case``)."""

    def unsupported_by(self, impl) -> str | None: ...


def why_not(impl, need, knobs: Iterable[str] = ()) -> str | None:
    """Why ``impl`` cannot run what needs ``need``, or None when it can.

    ``need``: a level or a knob (by name), a configuration (``LayoutConfig``,
    ``DDPConfig``; ``knobs``: the upstream knobs the check turns beyond the
    configuration's own fields), a ``Transport``, or a need that asks itself
    (``AsksItself``); anything else needs nothing of the implementation.
    """
    if impl.unavailable:
        return f"{impl.name}: {impl.unavailable}"
    if isinstance(need, Transport):
        row = next((r for r in impl.lacks if r.what == f"transport={need}"), None)
        return f"{impl.name} cannot run over {need}: {row.why}" if row else None
    if isinstance(need, AsksItself):
        return need.unsupported_by(impl)
    if isinstance(need, str) and need in CAPABILITIES:
        return _level(impl, need)
    if isinstance(need, str):
        return _knobs(impl, [need])
    if not isinstance(need, (LayoutConfig, DDPConfig)):
        return None
    rows = (row.reason(need) for row in impl.lacks if row.kind in ("field", "asked"))
    return _knobs(impl, [*knobs_used(need), *knobs]) or next(filter(None, rows), None)


def refuse_unsupported(impl, config: Config, knobs: Iterable[str] = ()) -> None:
    """What an adapter's ``wrap`` does first: raise, with the reason, where ``why_not`` has one."""
    reason = why_not(impl, config, knobs)
    if reason:
        raise ValueError(f"config: {reason}")


def _level(impl, level: str) -> str | None:
    rows = [r for r in impl.lacks if r.what == level]
    if not rows:
        return None
    return f"{impl.name} does not provide the {level!r} level ({CAPABILITIES[level]}): {rows[0].why}"


def _knobs(impl, used: Iterable[str]) -> str | None:
    if not set(used) <= set(KNOBS):
        raise ValueError(f"knobs: got {sorted(set(used) - set(KNOBS))}, but should be drawn from "
                         f"{', '.join(KNOBS)}")
    rows = {r.what: r for r in impl.lacks if r.kind == "knob"}
    missing = [k for k in dict.fromkeys(used) if k in rows]
    if not missing:
        return None
    return (f"{impl.name} {impl.version} does not map "
            + "; ".join(f"{k} ({KNOBS[k]}): {rows[k].why}" for k in missing))


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """An upstream package's expected warnings and set-up logs kept out (megatron warns at import that Apex and TE
    are missing; Megatron-FSDP that it runs on another device than ``cuda:current_device``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)
