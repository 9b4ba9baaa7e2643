"""Plots render to real PNG files from small records, and empty records draw nothing."""

from pathlib import Path

from benchmarks.stats import Figure
from reports.render.plots import plot_busbw, plot_overlap, plot_timeline
from reports.render.table import bytes_label

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def fig(median: float, unit: str = "GB/s", better: str = "higher") -> dict:
    return Figure.of([median * x for x in (0.98, 1.0, 1.02, 0.99, 1.01, 1.0)], unit, better).to_json()


def busbw_records() -> list[dict]:
    rows = []
    for collective in ("all_reduce", "reduce_scatter"):
        for policy in ("unpadded", "high-busbw"):
            for placement in ("out-of-place", "in-place"):
                for i, requested in enumerate((256, 16384, 1 << 18, 1 << 20)):
                    count = requested if policy == "unpadded" else max(requested, 65536)
                    rows.append({"collective": collective, "policy": policy, "placement": placement,
                                 "size_bytes": 4 * count, "count": count, "requested_count": requested,
                                 "busbw_gbps": fig(0.5 + i), "effective_busbw_gbps": fig((0.5 + i) * requested / count),
                                 "wrong": 0, "world_size": 2, "backend": "gloo"})
    rows[-1]["wrong"] = 3
    return rows


def overlap_records() -> list[dict]:
    common = {"compute_ms": fig(10.0, "ms", "lower"), "serial_ms": fig(15.0, "ms", "lower"), "ideal": 0.875}
    return [
        {"impl": "reference", "mode": "emulated", "overlap_ms": fig(12.0, "ms", "lower"), "efficiency": fig(0.6, ""),
         **common},
        {"impl": "torch", "mode": "emulated", "overlap_ms": fig(11.0, "ms", "lower"), "efficiency": fig(0.8, ""),
         **common},
    ]


def timeline_record() -> dict:
    layers = [{"layer": i, "start_ms": 6.0 * (3 - i), "end_ms": 6.0 * (4 - i)} for i in (3, 2, 1, 0)]
    collectives = [{"collective": k, "start_ms": 6.0 * (k + 1), "end_ms": 6.0 * (k + 1) + 4.0} for k in range(3)]
    collectives.append({"collective": 3, "start_ms": 24.0, "end_ms": None})
    return {"impl": "reference", "mode": "emulated",
            "timeline": {"layers": layers, "collectives": collectives, "backward_end_ms": 24.5, "step_end_ms": 29.0}}


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


def test_empty_records_write_nothing(tmp_path):
    assert plot_busbw([], tmp_path) == []
    assert plot_overlap([], tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_byte_labels_are_binary():
    assert [bytes_label(s) for s in (1, 1024, 1 << 20, 3 << 29, 40_042_496)] == [
        "1 B", "1 KiB", "1 MiB", "1.5 GiB", "38.19 MiB"]
