"""The configuration objects every implementation is handed reject bad values by name."""

import pytest

from reference.layout import LayoutConfig


@pytest.mark.parametrize(
    "field, kwargs, value",
    [
        ("bucket_size", {"bucket_size": 0}, "0"),
        ("bucket_size", {"bucket_size": -5}, "-5"),
        ("dp", {"dp": 0}, "0"),
        ("policy", {"policy": "zero3"}, "'zero3'"),
        ("expert_dp", {"dp": 4, "expert_dp": 3}, "3"),
        ("expert_dp", {"dp": 4, "expert_dp": 0}, "0"),
    ],
)
def test_bad_config_is_rejected_by_name(field, kwargs, value):
    with pytest.raises(ValueError) as info:
        LayoutConfig(**kwargs)
    message = str(info.value)
    assert message.startswith(f"{field}: got {value}"), f"message: got {message!r}, but should name {field} and {value}"
    assert "should be" in message, f"message: got {message!r}, but should say what is valid"
