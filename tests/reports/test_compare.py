"""Run-to-run comparison: significance and threshold, gated vs informative, old runs, discovery, exit codes."""

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.registry import Metric
from benchmarks.stats import Figure
from datamodel import DecodeError, from_json, to_json
from reports.compare import main
from reports.comparison.changes import compare_metrics, threshold_for
from reports.comparison.comparable import previous_comparable
from reports.render.comparison import comparison_markdown
from reports.store.model import Change
from reports.store.runs import RunError, Runs, dump_json, load_results
from tests.pytest_run import ROOT

BUSBW = "busbw/all_reduce/padded/out-of-place/1048576"
STEP = "step_time/ratio_median"
FAILED = "conformance/suites/layout/reference/failed"


def metric(value, better, unit="", gated=True, exact=False):
    """A metric without samples: what runs wrote before figures kept theirs, read as the model reads them."""
    return Metric(float(value), unit, better, gated, exact)


def sampled(samples, better="higher", unit="GB/s", gated=True, spread_kind="relative"):
    return Metric.of(Figure.of(samples, unit, better, spread_kind), gated)


def compare_runs(old: Path, new: Path) -> list[Change]:
    return compare_metrics(load_results(old).metrics, load_results(new).metrics)


# Seeded noise around 1: 15 samples spread about +-3%, like a quiet machine.
NOISE = [1.0, 0.97, 1.02, 1.01, 0.99, 1.03, 0.98, 1.0, 1.01, 0.99, 1.02, 0.97, 1.0, 1.01, 0.98]


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


def test_one_more_failed_test_is_a_regression_even_in_runs_written_before_counts_said_they_were_exact(tmp_path):
    old = write(tmp_path, "20261122T043209Z", 10.0, failed=0, extra={"conformance/x/failed": 10})
    new = write(tmp_path, "20261122T052149Z", 10.0, failed=1, extra={"conformance/x/failed": 11})
    changes = by_key(compare_metrics(load_results(old).metrics, load_results(new).metrics, threshold=0.5))
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
    ({"value": 1, "unit": "", "better": "bigger", "gated": True, "exact": False}, "better: got 'bigger'"),
    ({"value": "fast", "unit": "", "better": "higher", "gated": True, "exact": False}, "value: got 'fast'"),
    (5.0, "got 5.0, but should be Metric"),
])
def test_a_malformed_metric_is_named_where_it_is_read(entry, message):
    with pytest.raises(DecodeError, match=message):
        from_json(Metric, entry, "$.metrics.m")


def test_a_metric_whose_meaning_changed_cannot_be_compared():
    with pytest.raises(ValueError, match="got unit='MB/s' in the new run and 'GB/s' in the old one"):
        compare_metrics({"m": metric(1, "higher", "GB/s")}, {"m": metric(1, "higher", "MB/s")})


def test_markdown_lists_regressions_before_improvements():
    informative = dict(gated=False)
    changes = compare_metrics(
        {BUSBW: metric(10.0, "higher", **informative), STEP: metric(1.25, "lower", **informative),
         "same": metric(1, "higher", **informative)},
        {BUSBW: metric(8.0, "higher", **informative), STEP: metric(1.0, "lower", **informative),
         "same": metric(1, "higher", **informative)},
    )
    text = comparison_markdown(changes)
    assert text.startswith("Gated: 0 regressions, 0 improvements, 0 unchanged. Informative: 1 regressions, "
                           "1 improvements, 1 unchanged."), text
    assert "written before figures kept their samples" in text, "metrics without samples should carry the note"
    assert text.index(BUSBW) < text.index(STEP), text
    assert "| regression " in text and "-20.0%" in text and "same" not in text, text


GLOO = {"backend": "gloo", "world_size": 2, "mode": "plain"}
NCCL = {"backend": "nccl", "world_size": 8, "mode": "torchrun"}


def results(metrics: dict, schema=1, run: dict | None = None) -> str:
    """A results.json as schema 1 (one value per metric) or 2 (samples, gating) wrote it."""
    return dump_json({"schema": schema, "run": {"name": "x", **(run or GLOO)}, "metrics": metrics})


def schema_1(value, better, unit=""):
    return {"value": value, "unit": unit, "better": better}


def write(root: Path, name: str, busbw: float, failed: int = 0, schema=1, run: dict | None = None,
          extra: dict | None = None) -> Path:
    """A schema-1 run: one value per metric, a busbw and a count of failed tests (and ``extra`` counts)."""
    metrics = {BUSBW: schema_1(busbw, "higher", "GB/s"), FAILED: schema_1(failed, "lower", "tests"),
               **{k: schema_1(v, "lower", "tests") for k, v in (extra or {}).items()}}
    return Runs(root).write(name, {"results.json": results(metrics, schema, run), "report.md": "r"})


def write_sampled(root: Path, name: str, metrics: dict[str, Metric]) -> Path:
    """A schema-2 run of the given metrics."""
    return Runs(root).write(name, {"results.json": results({k: to_json(m) for k, m in metrics.items()}, 2)})


def named(results, name):
    return replace(results, run=replace(results.run, name=name))


def test_previous_comparable_skips_tmp_latest_and_other_setups_and_stops_at_a_broken_run(tmp_path):
    for name in ("20261122T043209Z", "20261122T052149Z", "20261123T010000Z"):
        write(tmp_path, name, 1.0)
    (tmp_path / ".tmp-abc123").mkdir()
    (tmp_path / ".tmp-zzz").mkdir()
    assert (tmp_path / "latest").is_file()
    mine = load_results(tmp_path / "20261123T010000Z")
    runs = Runs(tmp_path)
    found, passed = previous_comparable(runs, mine)
    assert found.run.name == "20261122T052149Z" and passed == [], (found, passed)
    assert previous_comparable(runs, named(mine, "20261122T043209Z")) == (None, [])
    assert previous_comparable(Runs(tmp_path / "missing"), named(mine, "20261122T043209Z")) == (None, [])
    write(tmp_path, "20261123T020000Z", 1.0, run=NCCL)
    found, passed = previous_comparable(runs, named(mine, "20261124T000000Z"))
    assert found.run.name == "20261123T010000Z", (found, passed)
    assert passed[0].startswith("20261123T020000Z: another setup (backend nccl -> gloo; tensors cuda -> cpu; "
                                "world_size 8 -> 2; mode torchrun -> plain)"), passed
    runs.write("20261123T030000Z", {"report.md": "no results"})
    with pytest.raises(RunError, match="20261123T030000Z/results.json"):
        previous_comparable(runs, named(mine, "20261124T000000Z"))  # it may be the run to compare with


def test_cli_gates_nothing_between_setups_and_finds_the_last_comparable_run(tmp_path, capsys):
    write(tmp_path, "20261122T043209Z", 10.0)
    write(tmp_path, "20261122T052149Z", 1.0, failed=3, run=NCCL)  # a GPU run: far slower-looking, far worse
    assert main(["20261122T043209Z", "20261122T052149Z", "--root", str(tmp_path), "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert "is not comparable with 20261122T043209Z: backend gloo -> nccl" in out and "Nothing is gated" in out
    write(tmp_path, "20261123T010000Z", 5.0)  # latest: a gloo run again, half the old gloo busbw
    assert main(["--root", str(tmp_path), "--fail-on-regression"]) == 1
    out = capsys.readouterr().out
    assert "Passed over 20261122T052149Z: another setup" in out and "Comparing 20261123T010000Z with " \
        "20261122T043209Z" in out, out


def test_compare_runs_reads_both_directories(tmp_path):
    old, new = write(tmp_path, "20261122T043209Z", 10.0), write(tmp_path, "20261122T052149Z", 8.0, failed=1)
    statuses = {c.key: c.status for c in compare_runs(old, new)}
    assert statuses == {BUSBW: "regression", FAILED: "regression"}


def test_same_distribution_is_unchanged_whatever_the_medians_say():
    old = {"m": sampled([10 * x for x in NOISE])}
    new = {"m": sampled([10 * x for x in reversed(NOISE)])}
    [change] = compare_metrics(old, new)
    assert (change.status, change.test) == ("unchanged", "mann-whitney"), change
    assert change.p_adjusted == pytest.approx(1.0), change


def test_a_clear_20_percent_drop_is_a_significant_regression():
    [change] = compare_metrics({"m": sampled([10 * x for x in NOISE])}, {"m": sampled([8 * x for x in NOISE])})
    assert change.status == "regression", change
    # Fully separated samples of 15 and 15 (U = 225 of 225): with ties, the normal approximation
    # gives p = 3.2e-6; the exact test without ties would give 2 / C(30, 15) = 1.3e-8.
    assert change.p_value < 1e-5, change
    assert change.relative == pytest.approx(-0.2), change


def test_a_big_move_in_noise_too_few_to_test_does_not_cry_wolf():
    """3 wild samples a side: the medians differ by 30%, but U cannot tell them apart."""
    [change] = compare_metrics({"m": sampled([10.0, 4.0, 16.0])}, {"m": sampled([7.0, 12.0, 3.0])})
    assert change.status == "unchanged", change
    assert change.p_adjusted > 0.05, change


def test_significant_but_below_the_threshold_is_unchanged():
    [change] = compare_metrics({"m": sampled([10 * x for x in NOISE])}, {"m": sampled([9.7 * x for x in NOISE])},
                               threshold=0.10)
    assert change.p_value < 0.05 and change.status == "unchanged", change


def test_benjamini_hochberg_corrects_for_the_number_of_metrics():
    """A metric with moderate evidence (6 samples a side, half-overlapping: p about 0.016) counts alone;
    among 19 metrics that did not move, BH lifts it to 20 x 0.016 and it no longer does. A strong move
    among the same 19 is still found."""
    moderate_old = sampled([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], gated=False)
    moderate_new = sampled([4.5, 5.5, 6.5, 7.5, 8.5, 9.5], gated=False)
    [alone] = compare_metrics({"m": moderate_old}, {"m": moderate_new})
    assert alone.p_value < 0.05 and alone.status == "improvement", alone
    null = {f"n{i}": sampled([10 * x for x in NOISE], gated=False) for i in range(19)}
    crowd = {c.key: c for c in compare_metrics({**null, "m": moderate_old}, {**null, "m": moderate_new})}
    assert crowd["m"].p_adjusted == pytest.approx(20 * alone.p_value) and crowd["m"].status == "unchanged"
    strong_old, strong_new = sampled([10 * x for x in NOISE], gated=False), sampled([8 * x for x in NOISE], gated=False)
    crowd = {c.key: c for c in compare_metrics({**null, "s": strong_old}, {**null, "s": strong_new})}
    assert crowd["s"].status == "regression", crowd["s"]
    assert all(crowd[k].status == "unchanged" for k in null)


def test_efficiencies_move_by_an_absolute_threshold():
    old = {"eff": sampled([0.60 + 0.01 * x for x in range(-7, 8)], spread_kind="absolute", unit="")}
    small = {"eff": sampled([0.57 + 0.01 * x for x in range(-7, 8)], spread_kind="absolute", unit="")}
    large = {"eff": sampled([0.50 + 0.01 * x for x in range(-7, 8)], spread_kind="absolute", unit="")}
    [a] = compare_metrics(old, small)
    [b] = compare_metrics(old, large)
    assert a.absolute and a.threshold == 0.05 and a.status == "unchanged", a  # -0.03: within 0.05
    assert b.status == "regression", b  # -0.10 and significant


def test_exact_counts_regress_on_any_bad_move():
    old = {"strength/x/caught": metric(1, "higher", exact=True), "wrong/x": metric(0, "lower", exact=True)}
    new = {"strength/x/caught": metric(0, "higher", exact=True), "wrong/x": metric(3, "lower", exact=True)}
    statuses = {c.key: (c.status, c.test) for c in compare_metrics(old, new, threshold=0.9)}
    assert statuses == {"strength/x/caught": ("regression", "exact"), "wrong/x": ("regression", "exact")}


def test_only_gated_regressions_fail_the_job(tmp_path):
    base = {"gate": sampled([10 * x for x in NOISE]), "info": sampled([10 * x for x in NOISE], gated=False)}
    worse_info = {**base, "info": sampled([5 * x for x in NOISE], gated=False)}
    worse_gate = {**base, "gate": sampled([5 * x for x in NOISE])}
    for name, metrics in (("a", base), ("b", worse_info), ("c", worse_gate)):
        write_sampled(tmp_path, name, metrics)
    assert main(["a", "b", "--root", str(tmp_path), "--fail-on-regression"]) == 0
    assert main(["a", "c", "--root", str(tmp_path), "--fail-on-regression"]) == 1


def test_a_schema_1_run_compares_with_a_schema_2_run_by_threshold_with_a_note(tmp_path):
    old = write(tmp_path, "20261122T043209Z", 10.0)
    new_metrics = {BUSBW: sampled([7 * x for x in NOISE]), FAILED: metric(0, "lower", "tests", exact=True)}
    new = write_sampled(tmp_path, "20261122T052149Z", new_metrics)
    changes = {c.key: c for c in compare_runs(old, new)}
    assert (changes[BUSBW].status, changes[BUSBW].test) == ("regression", "threshold"), changes[BUSBW]
    assert "written before figures kept their samples" in comparison_markdown(list(changes.values()))


def test_cli_exit_codes(tmp_path, capsys):
    write(tmp_path, "20261122T043209Z", 10.0)
    write(tmp_path, "20261122T052149Z", 10.5)
    assert main(["--root", str(tmp_path), "--fail-on-regression"]) == 0, "a small gain is no regression"
    write(tmp_path, "20261123T010000Z", 7.0)  # latest, 33% below the run before it
    assert main(["--root", str(tmp_path)]) == 0, "without --fail-on-regression a regression only reports"
    out = capsys.readouterr().out
    assert "Gated: 1 regressions, 0 improvements, 1 unchanged" in out and BUSBW in out, out
    assert main(["--root", str(tmp_path), "--fail-on-regression"]) == 1
    two_earlier = ["20261122T043209Z", "20261122T052149Z"]
    assert main([*two_earlier, "--root", str(tmp_path), "--fail-on-regression"]) == 0
    assert main([two_earlier[1], "--root", str(tmp_path), "--fail-on-regression"]) == 1, "one run: vs latest"
    assert main(["--root", str(tmp_path), "--threshold", "0.5", "--fail-on-regression"]) == 0
    assert main(["--root", str(tmp_path), "--prefix-threshold", "busbw=0.5", "--fail-on-regression"]) == 0


def refused(argv, capsys) -> str:
    """What the command said refusing ``argv`` (exit 2, before comparing anything)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2, exit_.value.code
    return capsys.readouterr().err


def test_cli_missing_run_exits_2_with_the_reason(tmp_path, capsys):
    write(tmp_path, "20261122T043209Z", 10.0)
    assert "got no run directory at" in refused(["20261122T043209Z", "20991231T000000Z", "--root", str(tmp_path)],
                                                capsys)
    assert "got no earlier run of the same setup as 20261122T043209Z" in refused(["--root", str(tmp_path)], capsys), (
        "one run has nothing before it")
    (tmp_path / "empty").mkdir()
    assert "got no " in refused(["--root", str(tmp_path / "empty")], capsys)


def test_cli_missing_results_or_unknown_schema_exits_2(tmp_path, capsys):
    write(tmp_path, "20261122T043209Z", 10.0)
    Runs(tmp_path).write("20261122T052149Z", {"report.md": "no results"})
    assert "results.json" in refused(["--root", str(tmp_path)], capsys)
    write(tmp_path, "20261123T010000Z", 10.0, schema=None)
    err = refused(["20261122T043209Z", "20261123T010000Z", "--root", str(tmp_path)], capsys)
    assert "got schema None" in err and "but should be one of 1, 2, 3, 4, 5" in err, err


def test_python_dash_m_runs_the_cli(tmp_path):
    old, new = write(tmp_path, "a", 10.0), write(tmp_path, "b", 5.0)
    command = [sys.executable, "-m", "reports.compare", str(old), str(new), "--fail-on-regression"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "Gated: 1 regressions" in proc.stdout, proc.stdout


def test_a_lost_measurement_is_judged_without_the_rank_test():
    [change] = compare_metrics({"eff": sampled([0.6, 0.62, 0.58], spread_kind="absolute", unit="")},
                               {"eff": sampled([float("nan")], spread_kind="absolute", unit="")})
    assert (change.status, change.test) == ("regression", "threshold"), change


def test_a_metric_may_carry_its_own_practical_threshold_and_a_prefix_overrides_it():
    old = {"m": replace(sampled([10 * x for x in NOISE], gated=False), threshold=0.25)}
    new = {"m": replace(sampled([8 * x for x in NOISE], gated=False), threshold=0.25)}
    [within] = compare_metrics(old, new)
    assert (within.status, within.threshold) == ("unchanged", 0.25), within  # -20% < 25%
    [overridden] = compare_metrics(old, new, thresholds={"m": 0.1})
    assert overridden.status == "regression", overridden


def test_informative_metrics_can_be_gated_by_prefix(tmp_path):
    base = {"busbw_largest/x": sampled([10 * x for x in NOISE], gated=False)}
    worse = {"busbw_largest/x": sampled([5 * x for x in NOISE], gated=False)}
    for name, metrics in (("a", base), ("b", worse)):
        write_sampled(tmp_path, name, metrics)
    assert main(["a", "b", "--root", str(tmp_path), "--fail-on-regression"]) == 0
    assert main(["a", "b", "--root", str(tmp_path), "--fail-on-regression", "--gate", "busbw_largest/"]) == 1
