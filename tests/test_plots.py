"""Plots render to real PNG files from small records, and empty records draw nothing."""

from pathlib import Path

from reports.plots import plot_busbw, plot_overlap, render_plots, size_label

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def busbw_records() -> list[dict]:
    rows = []
    for collective in ("all_reduce", "reduce_scatter"):
        for policy in ("padded", "high-busbw"):
            for placement in ("out-of-place", "in-place"):
                for i, size in enumerate((1024, 65536, 1 << 20, 1 << 22)):
                    rows.append({"collective": collective, "policy": policy, "placement": placement,
                                 "size_bytes": size, "busbw_gbps": 0.5 + i, "algbw_gbps": 0.5 + i,
                                 "time_us": 10.0 * (i + 1), "wrong": 0, "world_size": 2})
    rows[-1]["wrong"] = 3
    return rows


def overlap_records() -> list[dict]:
    return [
        {"impl": "reference", "compute_ms": 10.0, "overlap_ms": 12.0, "serial_ms": 15.0, "efficiency": 0.6},
        {"impl": "torch", "compute_ms": 10.0, "overlap_ms": 11.0, "serial_ms": 15.0, "efficiency": None},
    ]


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


def test_overlap_png(tmp_path):
    path = plot_overlap(overlap_records(), tmp_path)
    assert path == tmp_path / "overlap.png"
    assert_png(path)


def test_empty_records_write_nothing(tmp_path):
    assert plot_busbw([], tmp_path) == []
    assert plot_overlap([], tmp_path) is None
    assert render_plots({"busbw": [], "overlap": []}, tmp_path) == []
    assert render_plots({"schema": 1, "metrics": {}}, tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_render_plots_returns_relative_names(tmp_path):
    results = {"run": {"backend": "gloo", "world_size": 2}, "busbw": busbw_records(),
               "overlap": overlap_records()}
    names = render_plots(results, tmp_path / "plots")
    assert names == ["busbw_all_reduce.png", "busbw_reduce_scatter.png", "overlap.png"]
    for name in names:
        assert_png(tmp_path / "plots" / name)


def test_size_labels_are_binary():
    assert [size_label(s) for s in (1, 1024, 1 << 20, 3 << 29)] == ["1 B", "1 KiB", "1 MiB", "1.5 GiB"]
