"""datamodel: the codec's rules, each on a small record, and each strictness caught on a broken value."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from datamodel import DecodeError, JsonModel, doc, from_json


@dataclass(frozen=True)
class Refused(JsonModel):
    error: str = doc("why", json="refused")


@dataclass(frozen=True, kw_only=True)
class Part(JsonModel):
    kind: Literal["a", "b"] = doc("which")
    size: float | Refused = doc("how big")


@dataclass(frozen=True, kw_only=True)
class Whole(JsonModel):
    name: str = doc("a name")
    parts: tuple[Part, ...] = doc("its parts")
    by_key: dict[str, int] = doc("numbers by key")
    pair: tuple[int, str] = doc("a fixed pair")
    listed: list[bool] = doc("flags")
    extra: Any = doc("anything")
    later: int | None = doc("absent in older records", default=None)
    maybe: str | None = doc("left out when None", omit_none=True)


WHOLE = {"name": "w", "parts": [{"kind": "a", "size": 1}, {"kind": "b", "size": 2.5},
                                {"kind": "a", "size": {"refused": "NoPermission"}}],
         "by_key": {"x": 1}, "pair": [3, "three"], "listed": [True, False], "extra": {"any": [1, None]},
         "later": None}


def test_a_record_reads_back_as_written_and_keeps_its_json_exact():
    whole = Whole.from_json(WHOLE)
    assert whole.parts[2].size == Refused("NoPermission") and whole.pair == (3, "three")
    assert whole.to_json() == WHOLE
    assert json.dumps(whole.to_json(), sort_keys=True) == json.dumps(WHOLE, sort_keys=True), \
        "an int read for a float stays an int: 1 is written back as 1, not 1.0"
    assert isinstance(whole.parts[0].size, int)
    assert "maybe" not in whole.to_json() and Whole.from_json({**WHOLE, "maybe": "m"}).to_json()["maybe"] == "m"


def test_an_absent_key_takes_its_default_and_is_written_back():
    older = {k: v for k, v in WHOLE.items() if k != "later"}
    assert Whole.from_json(older).later is None
    assert Whole.from_json(older).to_json() == WHOLE, "a field older records lacked is written as its default"


@pytest.mark.parametrize("change, message", [
    ({"name": 3}, "Whole.name: got 3, but should be str"),
    ({"listed": [1]}, "Whole.listed[0]: got 1, but should be bool"),
    ({"by_key": {"x": True}}, "Whole.by_key['x']: got True, but should be int"),
    ({"pair": [3]}, "Whole.pair: got [3], but should be tuple[int, str]"),
    ({"parts": [{"kind": "c", "size": 1}]}, "Whole.parts[0].kind: got 'c', but should be 'a' or 'b'"),
    ({"parts": [{"kind": "a", "size": "big"}]}, "Whole.parts[0].size: got 'big', but should be float | Refused"),
    ({"parts": [{"kind": "a", "size": {"refused": 5}}]}, "Whole.parts[0].size.refused: got 5, but should be str"),
    ({"parts": [{"kind": "a"}]}, "Whole.parts[0].size: got nothing, but should be float | Refused"),
    ({"later": "soon"}, "Whole.later: got 'soon', but should be int | None"),
    ({"maybe": None}, "Whole.maybe: got null, but should be str or absent"),
    ({"colour": "red"}, "Whole: got keys ['colour'], but Whole has only"),
])
def test_a_value_that_does_not_fit_is_named_by_its_path(change, message):
    with pytest.raises(ValueError) as caught:
        Whole.from_json({**WHOLE, **change})
    assert isinstance(caught.value, DecodeError)
    assert str(caught.value).startswith(message), str(caught.value)


def test_a_type_the_codec_does_not_read_is_a_programming_error():
    with pytest.raises(TypeError, match="set"):
        from_json(set[int], [1])
