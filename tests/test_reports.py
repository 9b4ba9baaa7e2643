"""The report job: overhead figures worked by hand, atomic run directories, an end-to-end smoke."""

import pytest

from reports import overhead
from reports.main import main as report_main
from reports.writer import latest_run, write_run


def test_llama2_7b_needs_no_padding_under_upstream_padding():
    # Every Llama-2 7B param size is a multiple of 4096 * ... >= 128 (4096, 4096*4096,
    # 11008*4096, 32000*4096): no 64-element gaps and no bucket end off lcm(8, 128) = 128.
    row = overhead.overhead_row("llama2-7b", 8, "padded")
    assert row["padding_elements"] == 0, row


def test_shard_aligned_aligns_every_shard():
    row = overhead.overhead_row("llama2-70b", 32, "shard-aligned")
    assert row["shards_2**16_aligned"] == f"{row['buckets']}/{row['buckets']}", row


def test_write_run_is_atomic(tmp_path):
    first = write_run({"report.md": "one"}, root=tmp_path, name="r1")
    assert latest_run(tmp_path) == first
    with pytest.raises(AttributeError):  # content that cannot be written
        write_run({"report.md": "two", "bad": object()}, root=tmp_path, name="r2")
    assert not (tmp_path / "r2").exists(), "a failed run should leave no directory"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []
    assert latest_run(tmp_path) == first, "latest should still point at the last good run"


def test_report_end_to_end(tmp_path, capsys):
    code = report_main(["--impl", "reference", "--suite", "suites/layout/test_golden.py",
                        "--out", str(tmp_path), "--rounds", "3"])
    assert code == 0
    report = (latest_run(tmp_path) / "report.md").read_text()
    assert "| suites/layout/test_golden.py | reference" in report, report[:1500]
    assert "palm-540b" in report and "seed claims" in report
    assert "reference_median_ms" in report and "ratio_median" in report, "step-time section missing"
