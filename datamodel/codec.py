"""JSON for frozen dataclasses, read from their type hints: one codec for every record the project writes.

The rules, written once:

- a dataclass is an object of its fields, each under its own name (or
  ``metadata["json"]`` where the name on disk is not an identifier);
- a class with its own ``to_json`` / ``from_json`` (``benchmarks.stats.Figure``:
  its samples, and what they derive) is written and read by them;
- ``tuple[T, ...]`` and ``list[T]`` are arrays (read back as tuples: records
  are frozen), ``dict[str, T]`` objects, ``X | None`` null or X, a union the
  first member the value reads as, ``Literal[...]`` one of its values;
- bool, int, float and str are themselves (an int reads as a float); ``Any``
  passes through as it is.

Reading is strict, so a malformed run is refused rather than half-read: a
missing field without a default, a field the type does not have, or a value of
the wrong type is a ``DecodeError`` naming where (``$.benchmarks.busbw[3].time_us``)
and what was expected there.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, Literal, TypeVar, Union

T = TypeVar("T")


class DecodeError(ValueError):
    """A value that does not read as the type the model declares, with where it stands."""

    def __init__(self, path: str, got: Any, expected: str) -> None:
        shown = repr(got)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        super().__init__(f"{path}: got {shown}, but should be {expected}")
        self.path = path


def doc(text: str, default: Any = dataclasses.MISSING, *, json: str | None = None, default_factory: Any =
        dataclasses.MISSING) -> Any:
    """A dataclass field that carries its meaning (reports/schema.md is generated from these)."""
    metadata = {"doc": text, **({"json": json} if json else {})}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def meaning(cls: type, name: str) -> str:
    """The documented meaning of a field of ``cls``."""
    return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls)}[name]


def json_name(field: dataclasses.Field) -> str:
    return field.metadata.get("json", field.name)


@cache
def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def to_json(value: Any) -> Any:
    """Plain JSON data (dicts, lists, numbers, strings, null) of a record."""
    if hasattr(value, "to_json") and not isinstance(value, type):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {json_name(f): to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def from_json(tp: Any, data: Any, path: str = "$") -> Any:
    """``data`` read as type ``tp``, or a ``DecodeError`` naming where it does not fit."""
    if tp is Any:
        return data
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return _union(args, data, path)
    if origin is Literal:
        if data not in args:
            raise DecodeError(path, data, f"one of {', '.join(map(repr, args))}")
        return data
    if origin in (tuple, list):
        if not isinstance(data, list):
            raise DecodeError(path, data, "an array")
        item = args[0] if args else Any
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(data) != len(args):
                raise DecodeError(path, data, f"an array of {len(args)}")
            return tuple(from_json(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
        items = [from_json(item, v, f"{path}[{i}]") for i, v in enumerate(data)]
        return tuple(items) if origin is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(data, dict):
            raise DecodeError(path, data, "an object")
        value = args[1] if args else Any
        return {k: from_json(value, v, f"{path}.{k}") for k, v in data.items()}
    if isinstance(tp, type) and hasattr(tp, "from_json"):
        if not isinstance(data, dict):
            raise DecodeError(path, data, f"an object ({tp.__name__})")
        try:
            return tp.from_json(data)
        except DecodeError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise DecodeError(path, data, f"a {tp.__name__} ({exc})") from exc
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, data, path)
    return _scalar(tp, data, path)


def _union(members: tuple, data: Any, path: str) -> Any:
    if data is None and type(None) in members:
        return None
    errors = []
    for member in (m for m in members if m is not type(None)):
        try:
            return from_json(member, data, path)
        except DecodeError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    names = " or ".join(getattr(m, "__name__", str(m)) for m in members)
    raise DecodeError(path, data, names)


def _dataclass(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise DecodeError(path, data, f"an object ({cls.__name__})")
    fields = {json_name(f): f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise DecodeError(f"{path}.{unknown[0]}", data[unknown[0]],
                          f"absent: {cls.__name__} has no field {unknown[0]!r} (fields: {', '.join(fields)})")
    kwargs = {}
    types_of = hints(cls)
    for name, field in fields.items():
        if name not in data:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise DecodeError(f"{path}.{name}", None, f"present: {cls.__name__} needs it "
                                  f"({field.metadata.get('doc', 'no description')})")
            continue
        kwargs[field.name] = from_json(types_of[field.name], data[name], f"{path}.{name}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise DecodeError(path, data, f"a valid {cls.__name__} ({exc})") from exc


def _scalar(tp: Any, data: Any, path: str) -> Any:
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise DecodeError(path, data, "a number")
        return float(data)
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise DecodeError(path, data, "an integer")
        return data
    if tp is bool:
        if not isinstance(data, bool):
            raise DecodeError(path, data, "true or false")
        return data
    if tp is str:
        if not isinstance(data, str):
            raise DecodeError(path, data, "a string")
        return data
    if tp is type(None):
        if data is not None:
            raise DecodeError(path, data, "null")
        return None
    raise TypeError(f"{path}: the model declares {tp!r}, which this codec cannot read")
