"""A JSON Schema (draft 2020-12) of a record type, from the same type hints and field meanings the codec reads.

What ``from_json`` accepts, the schema accepts: a dataclass is an object of
its keys, those without a default required and no other allowed; ``omit_none``
fields are absent rather than null; a class with its own codec gives its own
schema (``json_schema()``). Each dataclass is one ``$defs`` entry, named by
the class, described by its docstring's first paragraph and each field by
its ``doc``. For users' own tools: a dashboard that validates a run, or a
language with generated types.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Literal, Union, get_args, get_origin

from .codec import NONE, own_codec, json_key, typed_fields

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema(root: type, title: str, schema_id: str | None = None) -> dict:
    """The schema of ``root`` (a dataclass) with every type it reaches under ``$defs``."""
    defs: dict[str, dict] = {}
    top = _schema(root, defs)
    return {"$schema": DIALECT, **({"$id": schema_id} if schema_id else {}), "title": title, **top,
            "$defs": dict(sorted(defs.items()))}


def _schema(hint: Any, defs: dict[str, dict]) -> dict:
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return {}
    if own_codec(hint):
        return _ref(hint, defs, lambda: hint.json_schema())
    if origin in (Union, types.UnionType):
        return {"anyOf": [_schema(a, defs) for a in args]}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return {"type": "array", "prefixItems": [_schema(a, defs) for a in args], "items": False,
                    "minItems": len(args)}
        return {"type": "array", "items": _schema(args[0], defs) if args else {}}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema(args[1], defs)}
    if dataclasses.is_dataclass(hint):
        return _ref(hint, defs, lambda: _object(hint, defs))
    return {bool: {"type": "boolean"}, int: {"type": "integer"}, float: {"type": "number"},
            str: {"type": "string"}, NONE: {"type": "null"}}[hint]


def _ref(cls: type, defs: dict[str, dict], make) -> dict:
    if cls.__name__ not in defs:
        defs[cls.__name__] = {}  # taken before it is made: a type may name itself
        defs[cls.__name__] = make()
    return {"$ref": f"#/$defs/{cls.__name__}"}


def _object(cls: type, defs: dict[str, dict]) -> dict:
    properties, required = {}, []
    for f, hint in typed_fields(cls):
        if f.metadata.get("omit_none"):
            hint = Union[tuple(a for a in get_args(hint) if a is not NONE)] if get_args(hint) else hint
        schema = _schema(hint, defs)
        if f.metadata.get("doc"):
            schema = {**schema, "description": f.metadata["doc"]}
        properties[json_key(f)] = schema
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(json_key(f))
    described = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    return {"type": "object", **({"description": described} if described and
                                 not described.startswith(cls.__name__ + "(") else {}),
            "properties": properties, "required": required, "additionalProperties": False}
