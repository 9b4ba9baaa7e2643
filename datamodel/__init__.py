"""Typed records and their JSON: frozen dataclasses whose fields say what they mean, written and read one way."""

from .codec import DecodeError, JsonModel, doc, from_json, mismatch, to_json

__all__ = ["DecodeError", "JsonModel", "doc", "from_json", "mismatch", "to_json"]
