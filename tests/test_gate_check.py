"""The gate check's own arithmetic: the slowed reference's delay, and detection rates per slowdown."""

import pytest

from fixtures.slowed_reference import delay_s
from reports.gate_check import detection_rates


def test_the_slowed_reference_takes_its_delay_from_the_environment(monkeypatch):
    monkeypatch.delenv("DDPC_SLOWDOWN_MS", raising=False)
    assert delay_s() == pytest.approx(0.010)
    monkeypatch.setenv("DDPC_SLOWDOWN_MS", "0.75")
    assert delay_s() == pytest.approx(0.00075)
    monkeypatch.setenv("DDPC_SLOWDOWN_MS", "-1")
    with pytest.raises(ValueError, match="DDPC_SLOWDOWN_MS: got '-1', but should be a number of milliseconds >= 0"):
        delay_s()


def test_detection_rate_per_slowdown():
    rows = [{"slowdown": 0.05, "caught": False}, {"slowdown": 0.05, "caught": True}, {"slowdown": 0.05, "caught": False},
            {"slowdown": 0.2, "caught": True}, {"slowdown": 0.2, "caught": True}, {"slowdown": 0.2, "caught": True}]
    assert detection_rates(rows) == [
        {"slowdown": "5.0%", "caught": "1 of 3", "detection rate": "33%"},
        {"slowdown": "20.0%", "caught": "3 of 3", "detection rate": "100%"},
    ]
