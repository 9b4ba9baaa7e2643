"""The main job end to end: a smoke run writes a complete run, stores what it decided, and its report is
rebuilt from its results alone."""

import json
import subprocess
import sys

import pytest

from reports.render.__main__ import main as render_main
from reports.store.runs import load_results
from tests.pytest_run import ROOT


def test_report_smoke_end_to_end(smoke_run):
    """The main job in smoke mode: every benchmark once, correct results, a complete run directory."""
    run = smoke_run
    report = (run / "report.md").read_text()
    results = load_results(run)
    assert "| suites/layout/test_golden.py | reference" in report, report[:1500]
    assert report.index("## Summary") < report.index("## Conformance"), "the summary opens the report"
    assert "**Verdict: PASS**" in report and "Headline figures (gated;" in report, report[:2000]
    for section in ("## Hardware", "### Node 0", "## Bus bandwidth: padded and unpadded buckets", "### all_reduce",
                    "## Overlap of gradient communication", "### Emulated compute", "## Step time",
                    "## Bucket size: the tuner's prediction against measured steps", "**UNVERIFIED**",
                    "## The design notes' claims, checked", "## Trend over the last runs", "## Padding overhead",
                    "notes' claims", "Reproduce: `python -m reports --smoke"):
        assert section in report, f"report section {section!r}: got missing, but should be there"
    records = results.benchmarks.busbw
    assert {r.collective for r in records} == {"all_reduce", "reduce_scatter", "all_gather"}
    assert {r.policy for r in records} == {"unpadded", "padded", "high-busbw", "shard-aligned"}
    assert sum(r.wrong for r in records) == 0, [r for r in records if r.wrong]
    sampled = [r.sampling for name in ("step_time", "overlap", "busbw") for r in results.records(name)]
    assert sampled and all(s.stopped == "fixed rounds" and s.rounds == 1 for s in sampled), sampled[:3]
    gated = [m for m in results.metrics.values() if m.gated and not m.exact]
    assert gated and all(m.sampling.rounds == 1 for m in gated), "every gated figure says how it was sampled"
    assert [n.node_rank for n in results.nodes] == [0], results.nodes
    assert results.run.setup.backend == "gloo" and results.run.setup.nodes == 1, results.run
    node = results.nodes[0]
    assert node.hardware.host.hostname, node
    assert node.telemetry.available == node.hardware.nvml.available, node.telemetry
    assert node.noise.cores >= 1 and len(node.noise.load_before) == 3, node.noise
    timeline = next(r.timeline for r in results.benchmarks.overlap if r.mode == "emulated")
    assert len(timeline.layers) == 3 and timeline.collectives, timeline
    assert "timeline_reference.png" in results.plots and "bucket_size.png" in results.plots
    (tuning,) = results.benchmarks.bucket_size
    assert tuning.verification.checks and tuning.predictions and tuning.recommendation.within, tuning
    for plot in results.plots:
        assert (run / plot).read_bytes().startswith(b"\x89PNG"), plot
    assert results.verdict.exit_code == 0 and results.run.commit and results.run.command[:3] == (
        "python", "-m", "reports"), results.run


def test_a_report_is_rebuilt_from_its_results_alone(smoke_run, tmp_path):
    """``python -m reports.render`` gives back the report and the plots the run wrote, byte for byte."""
    assert render_main([str(smoke_run), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").read_text() == (smoke_run / "report.md").read_text()
    for plot in json.loads((smoke_run / "results.json").read_text())["plots"]:
        assert (tmp_path / plot).read_bytes() == (smoke_run / plot).read_bytes(), plot


def test_an_older_run_is_rebuilt_only_beside_it(tmp_path, capsys):
    old = ROOT / "fixtures" / "runs" / "20261125T134732Z"
    with pytest.raises(SystemExit) as exit_:
        render_main([str(old)])
    assert exit_.value.code == 2 and "written under schema 4" in capsys.readouterr().err
    assert render_main([str(old), "--out", str(tmp_path)]) == 0
    assert "## Read from an older schema" in (tmp_path / "report.md").read_text()


def test_a_run_without_multi_rank_benchmarks_still_describes_its_node():
    """The setup that decides what a run compares with names the devices even when only one-process benchmarks ran."""
    from benchmarks.settings import BenchSettings
    from benchmarks.suite import run_rank_benchmarks
    from reports.store.model import setup_of

    bench = run_rank_benchmarks(BenchSettings.for_backend("gloo").smoked(), 1, ["planning"], progress=lambda _: None)
    assert len(bench["nodes"]) == 1, f"nodes described: got {len(bench['nodes'])}, but should be 1"
    setup = setup_of("gloo", "cpu", 1, "plain", True, [(n.devices, n.host.cpu_model) for n in bench["nodes"]])
    assert setup.devices != ("unknown",), f"devices: got {setup.devices}, but should name this node's CPU or GPUs"


def test_the_step_benchmark_carries_its_rounds_over_fresh_launches():
    """Each launch keeps the rounds of those before it: the run's figures hold every launch's rounds, and its
    sampling record counts them (one round a launch in smoke mode, worked by hand: 2 launches, 2 rounds)."""
    from dataclasses import replace

    from benchmarks.settings import BenchSettings
    from benchmarks.suite import run_rank_benchmarks

    said = []
    settings = replace(BenchSettings.for_backend("gloo").smoked(), impls=("reference",), launches=2)
    [record] = run_rank_benchmarks(settings, 2, ["step_time"], progress=said.append)["step_time"]
    assert (record.sampling.launches, record.sampling.rounds) == (2, 2), record.sampling
    assert (record.ratio.n, record.impl_ms.n, record.torch_ddp_ms.n) == (2, 2, 2), record
    assert [line for line in said if "fresh ranks" in line] == ["benchmarks on 2 fresh ranks, launch 2 of 2: step_time"]


def test_every_benchmark_has_a_section_of_the_report():
    """A benchmark returns records only; the report owns how its section looks (``reports.render.sections``)."""
    from benchmarks import BENCHMARKS
    from reports.render.sections import SECTIONS

    missing = [b.name for b in BENCHMARKS if not callable(getattr(SECTIONS.get(b.name), "markdown", None))]
    assert not missing, f"got benchmarks without a section: {missing}, but each should have one in SECTIONS"


def test_python_dash_m_reports_render_runs(smoke_run, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "reports.render", str(smoke_run), "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "report.md").is_file()
