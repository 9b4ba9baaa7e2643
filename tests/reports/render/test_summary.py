"""The report's first screen: the verdict first, the headline figures, what missed its target and why, what is
unstable."""

from dataclasses import replace

from benchmarks.registry import Metric, MetricSampling
from benchmarks.stats import UNSTABLE_FOOTNOTE, Figure
from hardware.node import Node
from hardware.noise import Noise
from reports.comparison.verdict import decide
from reports.conformance.suites import Outcomes
from reports.render.summary import summary_markdown
from reports.render.table import with_unstable_footnote
from reports.store.model import Comparison
from tests.hardware.test_node import RECORDED
from tests.reports.builders import busbw_record, results


def suite_run(failed: int):
    outcomes = Outcomes()
    outcomes.counts.update(passed=140, failed=failed, skipped=3)
    return outcomes.run("suites/multigpu", "megatron", "megatron 0.19.2", int(failed > 0))


def judged(run, fail_on_regression=False, covers=("reference", "megatron")):
    return replace(run, verdict=decide(run, fail_on_regression, covers))


def test_the_summary_gives_the_verdict_first_and_lists_what_is_unstable():
    steady = Figure.of([1.0, 1.01, 0.99, 1.0, 1.02, 0.98], "x", "lower")
    noisy = Figure.of([0.2, 0.9, 0.4, 0.7, 0.3, 0.8], "", "higher", "absolute")
    metrics = {"step/ratio": Metric.of(steady, True), "overlap/efficiency": Metric.of(noisy, True),
               "busbw/abs": Metric.of(noisy, False)}
    run = results(conformance=(suite_run(0),), metrics=metrics,
                  comparison=Comparison("20261122T000000Z", (), 0.1, 0.05, ()))
    text = summary_markdown(judged(run))
    assert text.startswith("**Verdict: PASS**"), text
    assert "suites/multigpu against megatron 0.19.2: 140 passed, 0 failed, 3 skipped" in text
    assert "gated regressions against 20261122T000000Z: 0" in text
    assert "step/ratio" in text and "busbw/abs | " not in text, "only gated figures are headlines"
    assert "Unstable figures (†): 2, 1 of them in the headline table above; the tables below mark the " \
           "others." in text, text
    failing = summary_markdown(judged(replace(run, conformance=(suite_run(2),))))
    assert failing.startswith("**Verdict: FAIL**") and "2 failed, 3 skipped — FAIL" in failing, failing
    assert "It covers reference, megatron: another implementation's failures" in failing, failing


def test_a_failure_of_an_implementation_the_verdict_does_not_cover_is_reported_and_passes():
    run = results(conformance=(suite_run(2),))
    text = summary_markdown(judged(run, covers=("reference",)))
    assert text.startswith("**Verdict: PASS** It covers reference:"), text
    assert ("140 passed, 2 failed, 3 skipped (reported, not failed: the verdict does not cover megatron; record it "
            "in its expectation list or report it upstream)") in text, text


def test_a_wrong_element_fails_the_verdict():
    text = summary_markdown(judged(results(benchmarks={"busbw": [busbw_record(wrong=5)]})))
    assert text.startswith("**Verdict: FAIL**") and "5 wrong elements — FAIL" in text, text


def test_the_summary_says_which_figures_missed_their_target_and_what_looked_wrong():
    wide = Figure.of([0.90, 1.10, 0.95, 1.08, 0.92, 1.05], "x", "lower")
    missed = MetricSampling("±2%", 40, False, "budget spent")
    metrics = {"step/a": Metric.of(wide, False, 0.03, missed),
               "step/b": Metric.of(wide, True, 0.03, replace(missed, met=True, stopped="targets met"))}
    node = replace(_node(), node_rank=0, noise=Noise(cores=2, load_before=(3.0, 2.0, 1.0)))
    run = results(conformance=(suite_run(0),), metrics=metrics, nodes=(node,))
    text = summary_markdown(judged(run))
    assert "**1 of the 2 figures above missed their sampling target" in text, text
    assert "node 0: the load average before the run was 3.00 on 2 cores" in text, text
    quiet = replace(node, noise=Noise(cores=2, load_before=(0.1, 0.1, 0.1)))
    assert "Nothing in the machine's readings looked wrong" in summary_markdown(judged(replace(run, nodes=(quiet,))))


def _node() -> Node:
    """This CPU host as the probes recorded it (tests/hardware/data)."""
    return Node.from_json(RECORDED[-1])


def test_one_footnote_per_section_and_only_when_a_figure_it_shows_is_unstable():
    wide = Figure.of([0.2, 0.9, 0.4, 0.3, 0.8, 0.5], "x", "lower")
    steady = Figure.of([1.0, 1.01, 0.99, 1.0, 1.02, 0.98], "x", "lower")
    assert wide.unstable and not steady.unstable
    shown = {"bus": (busbw_record(),), "figures": [steady, {"deep": wide}]}
    assert with_unstable_footnote("a section", shown).endswith(UNSTABLE_FOOTNOTE)
    # The decision is the figures', never the text's: a mark in the words alone draws no footnote.
    assert with_unstable_footnote("text that mentions † in a table | 1 † |", [steady]) == (
        "text that mentions † in a table | 1 † |")


def test_refusals_read_as_one_line_per_benchmark_and_rule():
    from benchmarks.measurable import noise_bound, outside
    from reports.render.summary import not_given

    at_zero = [noise_bound([-1.0 - i, 0.5, -0.2, 0.1, -0.3, 0.2], "the unpadded effective busbw", "GB/s")
               for i in range(3)]
    wide = Figure.of([1.5, 1.6, 1.4, 1.5, 1.55, 1.45], "", "higher", "absolute")
    failed = outside(wide, 0.0, 1.0, "the efficiency", "busbw")
    records = [replace(busbw_record(count=2**k), refused=r) for k, r in zip((10, 12, 14, 16), [*at_zero, failed])]
    lines = not_given(results(benchmarks={"busbw": records}), findings=False)
    assert len(lines) == 2, f"got {lines}, but should be one line per rule (three refusals share one)"
    assert lines[0].endswith(f"(3 figures): not measurable here: the unpadded effective busbw not above zero "
                             f"(the first: {at_zero[0].why}; the last: {at_zero[2].why})"), lines[0]
    assert lines[1].endswith(f"(1 figure): {failed}"), lines[1]
