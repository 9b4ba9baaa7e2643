"""Frozen dataclasses to and from JSON, by their type hints: one codec for every typed record a run writes.

``to_json(value)`` and ``from_json(type, data)`` read and write any value or
type below; a record class may inherit ``JsonModel`` for the same as methods
(``record.to_json()``, ``Record.from_json(data)``). Each field is made with
``doc(text, ...)``: its meaning (``metadata["doc"]``, from which the results
schema is written) and how it is spelled in JSON.

Rules, by a field's type hint:

- a dataclass is a JSON object with one key per field, in field order; the key
  is the field's name, or ``doc(json=...)`` where JSON spells it
  otherwise. Reading, an absent key takes the field's default (absent without
  a default is an error), and a key the class does not declare is an error:
  nothing is dropped unseen.
- None is written as null, except in a field made with ``omit_none=True``:
  there None is written by leaving the key out (what the probes do with what
  they did not read), and a null read there is an error.
- ``bool``, ``int``, ``float``, ``str`` take exactly that JSON type: a bool is
  no int; an int is a float, and stays an int, so it is written back as read.
- ``Literal[...]`` takes one of its values (of the same type: True is not 1).
- a class with its own ``to_json`` / ``from_json`` that is no ``JsonModel``
  (``benchmarks.stats.Figure``: its samples, and what they derive) is written
  and read by them.
- a union (``X | Y | None``) takes None only where None is a member; anything
  else is read by each member in turn and the first that reads it wins, so
  dataclass members are told apart by the keys they require and allow.
- ``list[T]`` and ``tuple[T, ...]`` (or a fixed ``tuple[A, B]``) are JSON
  arrays; ``dict[str, T]`` is a JSON object; ``Any`` is any JSON value, as is.

So ``from_json(data).to_json() == data`` for whatever this codec reads, but for
keys absent from ``data`` that the class writes (a field older records lacked
and that is not ``omit_none`` comes back as its default).

A value that does not fit raises ``DecodeError`` (a ValueError) naming the
path to it, the value and what it should be:
``Node.hardware.nvml.devices[1].power_draw_w: got 'fast', but should be float | Unsupported``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T", bound="JsonModel")
NONE = type(None)


class DecodeError(ValueError):
    """A JSON value that does not fit its type; ``path`` says where it is."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def doc(text: str, default: Any = dataclasses.MISSING, *, json: str | None = None, omit_none: bool = False,
        default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field with its meaning; ``json``: the JSON key where it is not the field's name;
    ``omit_none``: None is written by leaving the key out (and is the default)."""
    metadata: dict[str, Any] = {"doc": text}
    if omit_none:
        metadata["omit_none"] = True
        default = None
    if json is not None:
        metadata["json"] = json
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


class JsonModel:
    """A dataclass that reads and writes itself as JSON by this module's rules."""

    def to_json(self) -> dict:
        return to_json(self)

    @classmethod
    def from_json(cls: type[T], data: Any) -> T:
        return from_json(cls, data, cls.__name__)


def json_key(f: dataclasses.Field) -> str:
    return f.metadata.get("json", f.name)


def own_codec(cls: Any) -> bool:
    """A class that writes and reads itself (not by this module's rules)."""
    return isinstance(cls, type) and hasattr(cls, "from_json") and not issubclass(cls, JsonModel)


@functools.cache
def typed_fields(cls: type) -> tuple[tuple[dataclasses.Field, Any], ...]:
    """Each field of a dataclass with its resolved type hint."""
    hints = get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls))


def to_json(value: Any) -> Any:
    """A dataclass, sequence or mapping of them as plain JSON values (tuples become lists)."""
    if own_codec(type(value)):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if item is None and f.metadata.get("omit_none"):
                continue
            out[json_key(f)] = to_json(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    return value


def from_json(hint: Any, data: Any, path: str = "$") -> Any:
    """``data`` read as ``hint``, or a DecodeError naming the path, the value and the type."""
    origin = get_origin(hint)
    if hint is Any:
        return data
    if own_codec(hint):
        if not isinstance(data, dict):
            raise _mismatch(path, data, hint)
        try:
            return hint.from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise DecodeError(path, f"got an unreadable {hint.__name__} ({exc})") from exc
    if origin in (Union, types.UnionType):
        return _union(hint, data, path)
    if origin is Literal:
        if any(data == v and type(data) is type(v) for v in get_args(hint)):
            return data
        raise _mismatch(path, data, hint)
    if origin in (list, tuple):
        return _sequence(hint, data, path)
    if origin is dict:
        if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
            raise _mismatch(path, data, hint)
        _, value_hint = get_args(hint)
        return {k: from_json(value_hint, v, f"{path}[{k!r}]") for k, v in data.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint, data, path)
    if hint in (bool, int, float, str, NONE):
        if _is_primitive(hint, data):
            return data
        raise _mismatch(path, data, hint)
    raise TypeError(f"{path}: type {type_name(hint)} is not one this codec reads")


def _is_primitive(hint: type, data: Any) -> bool:
    if hint is float:
        return isinstance(data, (int, float)) and not isinstance(data, bool)
    if hint is int:
        return isinstance(data, int) and not isinstance(data, bool)
    return isinstance(data, hint)


def _union(hint: Any, data: Any, path: str) -> Any:
    members = get_args(hint)
    if data is None:
        if NONE in members:
            return None
        raise _mismatch(path, data, hint)
    errors = []
    for member in (m for m in members if m is not NONE):
        try:
            return from_json(member, data, path)
        except DecodeError as exc:
            errors.append(exc)
    deeper = [e for e in errors if len(e.path) > len(path)]
    if deeper:  # the value read as one member but for a part of it: that part is the error
        raise max(deeper, key=lambda e: len(e.path))
    raise _mismatch(path, data, hint)


def _sequence(hint: Any, data: Any, path: str) -> Any:
    if not isinstance(data, (list, tuple)):
        raise _mismatch(path, data, hint)
    args = get_args(hint)
    if get_origin(hint) is list or (len(args) == 2 and args[1] is Ellipsis):
        items = [from_json(args[0], item, f"{path}[{i}]") for i, item in enumerate(data)]
    elif len(args) == len(data):
        items = [from_json(arg, item, f"{path}[{i}]") for i, (arg, item) in enumerate(zip(args, data))]
    else:
        raise _mismatch(path, data, hint)
    return items if get_origin(hint) is list else tuple(items)


def _dataclass(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise _mismatch(path, data, cls)
    fields = {json_key(f): (f, hint) for f, hint in typed_fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise DecodeError(path, f"got keys {unknown}, but {cls.__name__} has only {sorted(fields)}")
    values = {}
    for key, (f, hint) in fields.items():
        if key in data:
            if data[key] is None and f.metadata.get("omit_none"):
                shown = " | ".join(type_name(a) for a in get_args(hint) if a is not NONE)
                raise DecodeError(f"{path}.{key}", f"got null, but should be {shown} or absent")
            values[f.name] = from_json(hint, data[key], f"{path}.{key}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise DecodeError(f"{path}.{key}", f"got nothing, but should be {type_name(hint)}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise DecodeError(path, f"got values {cls.__name__} refuses ({exc})") from exc


def mismatch(path: str, data: Any, expected: str) -> DecodeError:
    """The error for ``data`` at ``path`` that should have been ``expected`` (words)."""
    shown = repr(data)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return DecodeError(path, f"got {shown}, but should be {expected}")


def _mismatch(path: str, data: Any, hint: Any) -> DecodeError:
    return mismatch(path, data, type_name(hint))


def type_name(hint: Any) -> str:
    """A type as the messages write it: 'float | Unsupported | None', 'tuple[int, ...]'."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin is not None:
        shown = ["..." if a is Ellipsis else type_name(a) for a in args]
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(shown)}]"
    if hint is NONE:
        return "None"
    return getattr(hint, "__name__", str(hint).removeprefix("typing."))

