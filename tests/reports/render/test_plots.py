"""Plots render to real PNG files from small records, and empty records draw nothing."""

from dataclasses import replace
from pathlib import Path

from benchmarks.timeline import CollectiveSpan, LayerSpan, Timeline
from reports.render.plots import plot_bucket_size, plot_busbw, plot_overlap, plot_timeline
from reports.render.table import bytes_label
from tests.reports.builders import bucket_size_record, busbw_record, overlap_record, prediction

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def busbw_records() -> list:
    rows = []
    for collective in ("all_reduce", "reduce_scatter"):
        for policy in ("unpadded", "high-busbw"):
            for placement in ("out-of-place", "in-place"):
                for i, requested in enumerate((256, 16384, 1 << 18, 1 << 20)):
                    count = requested if policy == "unpadded" else max(requested, 65536)
                    rows.append(busbw_record(0, collective, policy, placement, requested, count, 0.5 + i))
    rows[-1] = replace(rows[-1], wrong=3)
    return rows


def overlap_records() -> list:
    return [overlap_record("reference", 12.0, 0.6), overlap_record("torch", 11.0, 0.8)]


def timeline_record():
    layers = tuple(LayerSpan(i, 6.0 * (3 - i), 6.0 * (4 - i)) for i in (3, 2, 1, 0))
    collectives = tuple(CollectiveSpan(k, 6.0 * (k + 1), 6.0 * (k + 1) + 4.0) for k in range(3))
    timeline = Timeline(layers, (*collectives, CollectiveSpan(3, 24.0, None)), 24.5, 29.0)
    return overlap_record("reference", timeline=timeline)


def assert_png(path: Path) -> None:
    assert path.is_file(), f"got no file at {path}, but should be a PNG"
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE), f"got {data[:8]!r}, but should start with {PNG_SIGNATURE!r}"
    assert len(data) > 10_000, f"got {len(data)} bytes in {path.name}, but should be a drawn plot"


def test_busbw_one_png_per_collective(tmp_path):
    paths = plot_busbw(busbw_records(), tmp_path)
    assert [p.name for p in paths] == ["busbw_all_reduce.png", "busbw_reduce_scatter.png"]
    for path in paths:
        assert_png(path)


def test_overlap_and_timeline_pngs(tmp_path):
    assert plot_overlap(overlap_records(), tmp_path) == tmp_path / "overlap.png"
    assert_png(tmp_path / "overlap.png")
    assert plot_timeline(timeline_record(), tmp_path) == tmp_path / "timeline_reference.png"
    assert_png(tmp_path / "timeline_reference.png")


def test_bucket_size_png(tmp_path):
    record = bucket_size_record()
    predictions = tuple(prediction(size, ms) for size, ms in ((2**16, 30.0), (2**20, 5.0), (None, 25.0)))
    path = plot_bucket_size(replace(record, predictions=predictions), tmp_path)
    assert path == tmp_path / "bucket_size.png"
    assert_png(tmp_path / "bucket_size.png")


def test_empty_records_write_nothing(tmp_path):
    assert plot_busbw([], tmp_path) == []
    assert plot_overlap([], tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_byte_labels_are_binary():
    assert [bytes_label(s) for s in (1, 1024, 1 << 20, 3 << 29, 40_042_496)] == [
        "1 B", "1 KiB", "1 MiB", "1.5 GiB", "38.19 MiB"]
