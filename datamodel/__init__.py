"""Typed records and their JSON: frozen dataclasses whose fields say what they mean, written and read one way."""

from .codec import DecodeError, doc, from_json, meaning, to_json

__all__ = ["DecodeError", "doc", "from_json", "meaning", "to_json"]
