"""Run-to-run comparison: direction from ``better``, thresholds, run discovery and the CLI's exit codes."""

import subprocess
import sys
from pathlib import Path

import pytest

from reports.compare import (
    Change, compare_metrics, compare_runs, comparison_markdown, main, previous_run, threshold_for,
)
from reports.writer import dump_json, write_run

ROOT = Path(__file__).resolve().parent.parent
BUSBW = "busbw/all_reduce/padded/out-of-place/1048576"
STEP = "step_time/ratio_median"
FAILED = "conformance/suites/layout/reference/failed"


def metric(value, better, unit=""):
    return {"value": value, "unit": unit, "better": better}


def by_key(changes: list[Change]) -> dict[str, Change]:
    return {c.key: c for c in changes}


def test_throughput_drop_beyond_threshold_is_a_regression():
    old, new = {BUSBW: metric(10.0, "higher", "GB/s")}, {BUSBW: metric(8.0, "higher", "GB/s")}
    [change] = compare_metrics(old, new)
    assert change.status == "regression", change
    assert change.relative == pytest.approx(-0.2)
    assert (change.old, change.new, change.unit, change.better) == (10.0, 8.0, "GB/s", "higher")


def test_same_drop_on_a_lower_is_better_metric_is_an_improvement():
    [change] = compare_metrics({STEP: metric(1.25, "lower", "x")}, {STEP: metric(1.0, "lower", "x")})
    assert change.status == "improvement", change


def test_direction_comes_from_better_not_from_the_name():
    # Same key, same numbers: only `better` differs, and so does the verdict.
    up = compare_metrics({"m": metric(10, "higher")}, {"m": metric(12, "higher")})
    down = compare_metrics({"m": metric(10, "lower")}, {"m": metric(12, "lower")})
    assert (up[0].status, down[0].status) == ("improvement", "regression")


@pytest.mark.parametrize("new", [9.5, 10.0, 10.9])
def test_within_threshold_is_unchanged(new):
    old = {BUSBW: metric(10.0, "higher")}
    [change] = compare_metrics(old, {BUSBW: metric(new, "higher")}, threshold=0.10)
    assert change.status == "unchanged", change


def test_one_more_failed_test_is_a_regression_under_the_conformance_prefix():
    old = {FAILED: metric(0, "lower", "tests"), "conformance/x/failed": metric(10, "lower", "tests")}
    new = {FAILED: metric(1, "lower", "tests"), "conformance/x/failed": metric(11, "lower", "tests")}
    changes = by_key(compare_metrics(old, new, threshold=0.5))
    assert changes[FAILED].status == "regression", "0 -> 1 failures should regress whatever the threshold"
    assert changes[FAILED].relative is None
    assert changes["conformance/x/failed"].status == "regression", "10 -> 11 is +10%, but conformance/ is 0%"
    assert changes["conformance/x/failed"].threshold == 0.0


def test_moves_from_zero_use_the_absolute_rule():
    changes = by_key(compare_metrics(
        {"a": metric(0, "higher"), "b": metric(0, "lower"), "c": metric(0, "higher")},
        {"a": metric(0.001, "higher"), "b": metric(0, "lower"), "c": metric(-0.001, "higher")},
    ))
    assert [changes[k].status for k in "abc"] == ["improvement", "unchanged", "regression"]


def test_longest_prefix_wins():
    prefixes = {"busbw": 0.15, "busbw/all_reduce/": 0.30, "conformance/": 0.0}
    assert threshold_for(BUSBW, 0.1, prefixes) == 0.30
    assert threshold_for("busbw_avg/all_reduce/padded", 0.1, prefixes) == 0.15
    assert threshold_for(STEP, 0.1, prefixes) == 0.1
    old, new = {BUSBW: metric(10.0, "higher")}, {BUSBW: metric(7.5, "higher")}
    assert compare_metrics(old, new, thresholds=prefixes)[0].status == "unchanged"
    assert compare_metrics(old, new, thresholds={"busbw": 0.15})[0].status == "regression"


def test_added_and_removed_keys():
    changes = by_key(compare_metrics({"gone": metric(1, "higher"), "kept": metric(1, "higher")},
                                     {"kept": metric(1, "higher"), "new": metric(2, "lower", "ms")}))
    assert changes["gone"].status == "removed" and changes["gone"].new is None
    assert changes["new"].status == "added" and changes["new"].old is None and changes["new"].unit == "ms"
    assert changes["kept"].status == "unchanged"


@pytest.mark.parametrize("entry, message", [
    (metric(1, "bigger"), "got better='bigger'"),
    (metric("fast", "higher"), "got value 'fast'"),
    (metric(1, "higher", "MB/s"), "got unit='MB/s'"),
])
def test_bad_metrics_are_named(entry, message):
    with pytest.raises(ValueError, match=message):
        compare_metrics({"m": metric(1, "higher", "GB/s")}, {"m": entry})


def test_markdown_lists_regressions_before_improvements():
    changes = compare_metrics(
        {BUSBW: metric(10.0, "higher"), STEP: metric(1.25, "lower"), "same": metric(1, "higher")},
        {BUSBW: metric(8.0, "higher"), STEP: metric(1.0, "lower"), "same": metric(1, "higher")},
    )
    text = comparison_markdown(changes)
    assert text.startswith("1 regressions, 1 improvements, 1 unchanged (threshold 10%"), text
    assert text.index(BUSBW) < text.index(STEP), text
    assert "| regression " in text and "-20.0%" in text and "same" not in text, text


def results(metrics: dict, schema=1) -> str:
    return dump_json({"schema": schema, "run": {"name": "x"}, "metrics": metrics})


def write(root: Path, name: str, busbw: float, failed: int = 0, schema=1) -> Path:
    metrics = {BUSBW: metric(busbw, "higher", "GB/s"), FAILED: metric(failed, "lower", "tests")}
    return write_run({"results.json": results(metrics, schema), "report.md": "r"}, root=root, name=name)


def test_previous_run_skips_tmp_and_latest(tmp_path):
    for name in ("20261122T043209Z", "20261122T052149Z", "20261123T010000Z"):
        write(tmp_path, name, 1.0)
    (tmp_path / ".tmp-abc123").mkdir()
    (tmp_path / ".tmp-zzz").mkdir()
    assert (tmp_path / "latest").is_file()
    assert previous_run(tmp_path, "20261123T010000Z") == tmp_path / "20261122T052149Z"
    assert previous_run(tmp_path, "20261122T052149Z") == tmp_path / "20261122T043209Z"
    assert previous_run(tmp_path, "20261122T043209Z") is None
    assert previous_run(tmp_path / "missing", "20261122T043209Z") is None


def test_compare_runs_reads_both_directories(tmp_path):
    old, new = write(tmp_path, "20261122T043209Z", 10.0), write(tmp_path, "20261122T052149Z", 8.0, failed=1)
    statuses = {c.key: c.status for c in compare_runs(old, new)}
    assert statuses == {BUSBW: "regression", FAILED: "regression"}


def test_cli_exit_codes(tmp_path, capsys):
    write(tmp_path, "20261122T043209Z", 10.0)
    write(tmp_path, "20261122T052149Z", 10.5)
    assert main(["--root", str(tmp_path), "--fail-on-regression"]) == 0, "a small gain is no regression"
    write(tmp_path, "20261123T010000Z", 7.0)  # latest, 33% below the run before it
    assert main(["--root", str(tmp_path)]) == 0, "without --fail-on-regression a regression only reports"
    out = capsys.readouterr().out
    assert "1 regressions, 0 improvements, 1 unchanged" in out and BUSBW in out, out
    assert main(["--root", str(tmp_path), "--fail-on-regression"]) == 1
    two_earlier = ["20261122T043209Z", "20261122T052149Z"]
    assert main([*two_earlier, "--root", str(tmp_path), "--fail-on-regression"]) == 0
    assert main([two_earlier[1], "--root", str(tmp_path), "--fail-on-regression"]) == 1, "one run: vs latest"
    assert main(["--root", str(tmp_path), "--threshold", "0.5", "--fail-on-regression"]) == 0
    assert main(["--root", str(tmp_path), "--prefix-threshold", "busbw=0.5", "--fail-on-regression"]) == 0


def test_cli_missing_run_exits_2_with_the_reason(tmp_path, capsys):
    write(tmp_path, "20261122T043209Z", 10.0)
    assert main(["20261122T043209Z", "20991231T000000Z", "--root", str(tmp_path)]) == 2
    assert "got no run directory at" in capsys.readouterr().err
    assert main(["--root", str(tmp_path)]) == 2, "one run has nothing before it"
    assert "got no run before 20261122T043209Z" in capsys.readouterr().err
    assert main(["--root", str(tmp_path / "empty")]) == 2
    assert "got no " in capsys.readouterr().err


def test_cli_missing_results_or_unknown_schema_exits_2(tmp_path, capsys):
    write(tmp_path, "20261122T043209Z", 10.0)
    write_run({"report.md": "no results"}, root=tmp_path, name="20261122T052149Z")
    assert main(["--root", str(tmp_path)]) == 2
    assert "results.json" in capsys.readouterr().err
    write(tmp_path, "20261123T010000Z", 10.0, schema=None)
    assert main(["20261122T043209Z", "20261123T010000Z", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "got schema None" in err and "but should be 1" in err, err


def test_python_dash_m_runs_the_cli(tmp_path):
    old, new = write(tmp_path, "a", 10.0), write(tmp_path, "b", 5.0)
    command = [sys.executable, "-m", "reports.compare", str(old), str(new), "--fail-on-regression"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "1 regressions" in proc.stdout, proc.stdout
