"""Trends over runs: gated metrics across nights, the first run where one moved, robust to odd run directories."""

import warnings

import pytest

from benchmarks.registry import Metric
from benchmarks.stats import Figure
from datamodel import to_json
from reports.comparison.series import trend
from reports.render.trend import plot_trend, trend_markdown
from reports.store.runs import Runs, SkippedRunWarning, dump_json
from reports.trend import main

KEY = "step_time/reference/ratio"
NOISE = [1.0, 0.98, 1.02, 1.01, 0.99, 1.0, 1.01, 0.99]
GLOO = {"backend": "gloo", "world_size": 2, "mode": "plain"}


def sampled(level, gated=True, spread_kind="relative"):
    return to_json(Metric.of(Figure.of([level * x for x in NOISE], "x", "lower", spread_kind), gated))


def write(root, name, metrics, schema=2, run=GLOO):
    """A run as schema 2 wrote it (or ``schema`` 1, metrics one value each)."""
    return Runs(root).write(name, {"results.json": dump_json({"schema": schema, "run": {"name": name, **run},
                                                               "metrics": metrics})})


def test_one_run_gives_one_point_and_no_step(tmp_path):
    write(tmp_path, "r1", {KEY: sampled(1.0), "info": sampled(1.0, gated=False)})
    runs = Runs(tmp_path).readable()
    [series] = trend(runs)
    assert series.key == KEY and len(series.points) == 1 and series.step is None
    assert "1 run(s), r1 to r1" in trend_markdown([series])


def test_the_first_run_of_a_lasting_move_is_named(tmp_path):
    """Ratios 1.0, 1.0, 1.0 then 1.2, 1.2: a 20% step up (worse) at the fourth run."""
    for i, level in enumerate([1.0, 1.0, 1.0, 1.2, 1.2]):
        write(tmp_path, f"r{i}", {KEY: sampled(level)})
    [series] = trend(Runs(tmp_path).readable())
    step = series.step
    assert (step.run, step.direction) == ("r3", "regression") and step.change == pytest.approx(0.2, abs=0.02)
    assert "regression at r3" in trend_markdown([series])


def test_noise_within_the_threshold_is_no_step(tmp_path):
    for i, level in enumerate([1.0, 1.04, 0.97, 1.03, 0.98]):
        write(tmp_path, f"r{i}", {KEY: sampled(level)})
    [series] = trend(Runs(tmp_path).readable())
    assert series.step is None


def test_schemas_mix_and_broken_runs_are_skipped_by_name(tmp_path):
    write(tmp_path, "r0", {KEY: {"value": 1.0, "unit": "x", "better": "lower"}}, schema=1)
    write(tmp_path, "r1", {KEY: sampled(1.0)})
    (tmp_path / "r2").mkdir()
    (tmp_path / "r2" / "results.json").write_text('{"schema": 2, "metr')  # half-written
    (tmp_path / "r3").mkdir()  # no results at all
    write(tmp_path, "r4", {KEY: sampled(1.5)}, schema=7)
    write(tmp_path, "r5", {KEY: 1.5})  # a metric that is a bare number
    Runs(tmp_path).write("r6", {"results.json": dump_json({"schema": 4, "metrics": {KEY: sampled(1.5)}})})
    (tmp_path / ".tmp-r7").mkdir()  # still being written: not a run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = Runs(tmp_path).readable()
    assert [r.run.name for r in runs] == ["r0", "r1"]
    skipped = {str(w.message).split(":")[0]: str(w.message) for w in caught if w.category is SkippedRunWarning}
    assert sorted(skipped) == [f"skipped run r{i}" for i in (2, 3, 4, 5, 6)], list(skipped.values())
    assert "$.metrics.step_time/reference/ratio: got 1.5, but should be Metric" in skipped["skipped run r5"]
    assert "(schema 4)" in skipped["skipped run r6"] and "$.run: got None" in skipped["skipped run r6"]
    [series] = trend(runs)
    assert [p.run for p in series.points] == ["r0", "r1"]
    assert series.points[0].interval is None and series.points[1].interval is not None


def test_runs_of_bare_values_alone_draw_no_series(tmp_path):
    write(tmp_path, "r0", {KEY: {"value": 1.0, "unit": "x", "better": "lower"}}, schema=1)
    runs = Runs(tmp_path).readable()
    assert trend(runs) == []
    assert "No gated metric" in trend_markdown([])


def test_plots_and_cli(tmp_path, capsys):
    for i, level in enumerate([1.0, 1.0, 1.3]):
        write(tmp_path / "runs", f"r{i}", {KEY: sampled(level), "eff": sampled(0.6, spread_kind="absolute")})
    [first, *_] = plot_trend(trend(Runs(tmp_path / "runs").readable()), tmp_path / "png")
    assert first.read_bytes().startswith(b"\x89PNG")
    assert main(["--root", str(tmp_path / "runs"), "--plots", str(tmp_path / "png2")]) == 0
    out = capsys.readouterr().out
    assert KEY in out and "eff" in out, out
    assert len(list((tmp_path / "png2").glob("trend_*.png"))) == 2


def test_each_setup_is_its_own_series_so_new_hardware_is_no_step(tmp_path):
    """Three gloo runs, then three runs on 8 GPUs whose ratio is 30% worse: two flat series, no step."""
    nccl = {"backend": "nccl", "world_size": 8, "mode": "torchrun"}
    for i, (run, level) in enumerate([(GLOO, 1.0)] * 3 + [(nccl, 1.3)] * 3):
        write(tmp_path, f"r{i}", {KEY: sampled(level)}, run=run)
    runs = Runs(tmp_path).readable()
    first, second = trend(runs)
    assert (first.setup.split(",")[0], second.setup.split(",")[0]) == ("gloo", "nccl")
    assert [p.run for p in first.points] == ["r0", "r1", "r2"] and [p.run for p in second.points] == ["r3", "r4", "r5"]
    assert first.step is None and second.step is None
    text = trend_markdown([first, second])
    assert "of 2 setup(s)" in text and "### gloo, 2 ranks, plain, 1 node" in text and "### nccl, 8 ranks" in text
    assert len(plot_trend([first, second], tmp_path / "plots")) == 2


def test_an_empty_root_is_an_empty_trend(tmp_path, capsys):
    """(A root that does not exist is refused, as every command refuses a bad argument: tests/test_commands.py.)"""
    (tmp_path / "empty").mkdir()
    assert main(["--root", str(tmp_path / "empty")]) == 0
    assert "No readable runs" in capsys.readouterr().out


def points(levels, spread=0.01, seed=0):
    """One point a night: ``levels`` with ``spread`` noise, each with the 95% interval of that noise."""
    import numpy as np

    from reports.store.model import Point

    rng = np.random.default_rng(seed)
    values = [level * (1 + spread * rng.standard_normal()) for level in levels]
    return [Point(f"n{i:02d}", v, (v * (1 - 1.96 * spread), v * (1 + 1.96 * spread))) for i, v in enumerate(values)]


def test_change_points_are_found_over_the_whole_history_small_ones_too():
    """30 nights at 1% noise: a 5% step up at night 10 and back down at night 20 (worse, then better); the step
    beyond the 10% threshold is none, but both change points are found where they began."""
    from reports.comparison.series import first_step, shifts

    pytest.importorskip("ruptures", reason="change points are found with ruptures")
    nights = points([1.0] * 10 + [1.05] * 10 + [1.0] * 10)
    found = shifts(nights, "lower", False)
    assert [(s.run, s.direction) for s in found] == [("n10", "regression"), ("n20", "improvement")], found
    assert found[0].change == pytest.approx(0.05, abs=0.015)
    assert first_step(nights, "lower", False) is None and first_step(nights, "lower", False, threshold=0.03).run == "n10"


def test_noise_alone_has_no_change_point():
    from reports.comparison.series import shifts

    pytest.importorskip("ruptures", reason="change points are found with ruptures")
    for seed in range(5):
        assert shifts(points([1.0] * 40, seed=seed), "lower", False) == (), seed
