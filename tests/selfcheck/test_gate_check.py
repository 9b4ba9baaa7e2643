"""The gate check's own arithmetic: the slowed reference's delay, and detection rates per slowdown."""

import pytest

from fixtures.slowed_reference import delay_s
from selfcheck.gate_check import detection_rates


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
        {"slowdown": "5.0%", "caught": "1 of 3", "detection rate": "33%", "seconds a run": ""},
        {"slowdown": "20.0%", "caught": "3 of 3", "detection rate": "100%", "seconds a run": ""},
    ]
    timed = [{**r, "run (s)": 40 + i} for i, r in enumerate(rows)]
    assert detection_rates(timed)[1]["seconds a run"] == "43-45"


def test_each_part_asked_for_reaches_the_summary(monkeypatch, tmp_path):
    """The parts run and summarized are the ones asked for, with the figures each returned."""
    from selfcheck import gate_check

    same = [{"old": "a", "new": "b", "metrics": 4, "gated regressions": 0, "flagged": 0, "flagged %": 0.0, "which": ""}]
    sensitive = [{"try": 1, "slowdown": 0.2, "delay (ms)": 9.0, "step ratio": "1.0 -> 1.2", "p": "0.001", "caught": True}]
    monkeypatch.setattr(gate_check, "identical", lambda job, out, runs: same)
    monkeypatch.setattr(gate_check, "slowed", lambda *a: pytest.fail("slowed ran though not asked for"))
    monkeypatch.setattr(gate_check, "sensitivity", lambda job, out, tries, slowdowns: sensitive)
    assert gate_check.main(["--out", str(tmp_path), "--part", "identical", "--part", "sensitivity"]) == 0
    text = (tmp_path / "gate_check.md").read_text()
    assert "Gated regressions: 0" in text and "| 20.0%" in text and "10 ms per step" not in text
