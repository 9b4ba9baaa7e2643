"""Figures not given: each refusal proven on made-up samples, and a refused figure never shown as a number.

An efficiency outside [0, 1] within noise, or an overlapped step faster than
compute alone, is a measurement failure; an overlapped step slower than the
serial one with the intervals apart is a finding (overlapping costs more than
it hides here); a ratio or an efficiency whose denominator is within its own
noise is not measurable here. Either way the figure is null, gets no metric
(never gated or trended), and the report, its summary and the claims table
say why instead of giving a number.
"""

from __future__ import annotations

import types

import pytest

from benchmarks import overlap, step_time
from benchmarks.measuring import overlap as measuring_overlap
from benchmarks.measurable import FAILURE, FINDING, NOT_MEASURABLE, noise_bound, ratio
from benchmarks.sampling import Sampled
from benchmarks.settings import Model
from reports.comparison.claims import judge_claims
from reports.render.report import claims_markdown
from reports.render.sections.overlap import markdown as overlap_markdown
from reports.render.summary import summary_markdown
from tests.reports.builders import results

CTX = types.SimpleNamespace(world_size=2, backend="gloo")
COMPUTE = [0.100, 0.101, 0.099, 0.100, 0.102, 0.098, 0.100, 0.101, 0.099, 0.100]  # seconds


SAMPLED = Sampled(rounds=10, warmup=3, warmup_settled=True, stopped="targets met", seconds=1.0, budget_s=90.0,
                  targets={})


def emulated_record(overlap_s: list[float], serial_s: list[float], impl: str = "reference") -> overlap.OverlapRecord:
    times = {(impl, "compute"): COMPUTE, (impl, "overlap"): overlap_s, (impl, "serial"): serial_s}
    return measuring_overlap._record(CTX, "emulated", impl, Model(depth=8), 0.002, 0.002, times, [0.012] * len(COMPUTE), None,
                           SAMPLED, None)


def test_an_overlapped_step_faster_than_compute_alone_is_a_measurement_failure():
    # Serial 20 ms over compute, overlapped 5 ms *under* compute: an efficiency of 1.25, which cannot be.
    record = emulated_record([c - 0.005 for c in COMPUTE], [c + 0.020 for c in COMPUTE])
    assert record.efficiency is None and record.share is None
    assert record.refused.kind == FAILURE, record.refused
    assert "below zero beyond noise" in record.refused.why and "--benchmark overlap" in record.refused.remedy


def test_an_efficiency_above_one_within_noise_of_compute_is_still_refused():
    # Overlapped steps scatter around compute (-1 to +0.6 ms), serial 10 ms over: efficiency median above 1.
    jitter = [-0.0010, 0.0006, -0.0008, 0.0004, -0.0006, -0.0009, 0.0005, -0.0007, -0.0004, -0.0003]
    record = emulated_record([c + j for c, j in zip(COMPUTE, jitter)], [c + 0.010 for c in COMPUTE])
    assert record.efficiency is None and record.refused.kind == FAILURE, record.refused
    assert "outside [0, 1] (the overlapped step was faster than compute alone" in record.refused.why


def test_an_overlapped_step_slower_than_serial_beyond_noise_is_a_finding_with_both_steps():
    # Overlapped 30 ms over compute, serial 10 ms over: the two steps' intervals lie 20 ms apart.
    record = emulated_record([c + 0.030 for c in COMPUTE], [c + 0.010 for c in COMPUTE])
    assert record.efficiency is None and record.refused.kind == FINDING, record.refused
    why = record.refused.why
    assert "overlapping costs more than it hides here" in why, why
    assert "130 [129, 131] ms against 110 [109, 111] ms serial, 20 ms more" in why, why
    assert record.refused.remedy == "" and "try" not in str(record.refused), "a finding is no failure to retry"


def test_an_overlapped_step_slower_than_serial_within_noise_is_a_measurement_failure():
    # Serial 10 ms over compute; overlapped scattered 6-14 ms over it: slower at the median, intervals overlapping.
    scatter = [0.006, 0.014, 0.007, 0.013, 0.0105, 0.012, 0.0115, 0.008, 0.0125, 0.011]
    serial = [c + 0.010 + j for c, j in zip(COMPUTE, [0.001, -0.001, 0.0005, -0.0005, 0.0, 0.001, -0.001, 0.0,
                                                      0.0005, -0.0005])]
    record = emulated_record([c + s for c, s in zip(COMPUTE, scatter)], serial)
    assert record.efficiency is None and record.refused.kind == FAILURE, record.refused
    assert "slower than the serial one, within noise" in record.refused.why, record.refused.why


def test_a_real_efficiency_is_kept():
    record = emulated_record([c + 0.005 for c in COMPUTE], [c + 0.020 for c in COMPUTE])
    assert record.refused is None and record.efficiency.median == pytest.approx(0.75, abs=0.02)


@pytest.mark.parametrize("denominator, words", [
    ([0.0] * 8, "not above zero"),
    ([0.004, -0.003, 0.005, -0.002, 0.003, -0.004, 0.002, 0.001], "interval reaches zero"),
    ([0.001, 0.009, 0.002, 0.008, 0.0025, 0.0075, 0.005, 0.005], "below its own spread"),
])
def test_a_denominator_within_its_own_noise_is_not_measurable(denominator, words):
    refused = noise_bound(denominator, "the step", "s")
    assert refused is not None and refused.kind == NOT_MEASURABLE and words in refused.why, refused
    figure, refused = ratio([1.0] * len(denominator), denominator, "lower", "the step", "s")
    assert figure is None and refused is not None


def test_a_ratio_over_a_clear_denominator_is_given():
    figure, refused = ratio([2.0, 3.0], [1.0, 2.0], "lower", "the step", "s")
    assert refused is None and figure.samples == (2.0, 1.5)
    with pytest.raises(ValueError, match="one pair per round"):
        ratio([1.0], [1.0, 2.0], "lower", "the step", "s")


def test_a_refused_figure_is_never_a_number_in_metrics_summary_section_or_claims():
    records = [emulated_record([c - 0.005 for c in COMPUTE], [c + 0.020 for c in COMPUTE]),
               emulated_record([c + 0.005 for c in COMPUTE], [c + 0.020 for c in COMPUTE], impl="torch")]
    keys = set(overlap.metrics(records))
    assert "overlap/emulated/reference/efficiency" not in keys, "a refused figure is never gated"
    assert "overlap/emulated/torch/efficiency" in keys
    run = results(benchmarks={"overlap": records})
    summary = summary_markdown(run)
    assert "Refused figures" in summary and "measurement failure" in summary, summary
    section = overlap_markdown(records)
    assert "measurement failure" in section and "1.25" not in section, section
    claims = claims_markdown(judge_claims(run))
    line = next(line for line in claims.splitlines() if "85-95%" in line)
    assert "not measured" in line and "refused" in line and "holds" not in line, line


def test_a_step_ratio_over_a_noise_bound_baseline_is_refused():
    """The generic rule on another benchmark: a baseline step within its own noise divides nothing."""
    times = {"reference": [1.0] * 8, step_time.BASELINE: [0.004, -0.003, 0.005, -0.002, 0.003, -0.004, 0.002, 0.001]}
    figure, refused = ratio(times["reference"], times[step_time.BASELINE], "lower", "torch DDP's step", "ms")
    assert figure is None and refused.kind == NOT_MEASURABLE, refused


def test_findings_under_one_rule_read_as_one_line_with_the_first_and_last_numbers():
    # Overlapped steps 30 ms and 40 ms over compute against serial 10 ms over: findings 20 and 30 ms apart.
    records = [emulated_record([c + extra for c in COMPUTE], [c + 0.010 for c in COMPUTE], impl=impl)
               for impl, extra in (("reference", 0.030), ("torch", 0.040))]
    lines = [line for line in summary_markdown(results(benchmarks={"overlap": records})).splitlines()
             if "costs more than it hides" in line]
    assert len(lines) == 1, f"got {len(lines)} lines for one kind of finding, but should be 1: {lines}"
    assert "(2 figures)" in lines[0] and "took 130 [" in lines[0] and "took 140 [" in lines[0], lines[0]
    assert "20 ms more" in lines[0] and "30 ms more" in lines[0], lines[0]
