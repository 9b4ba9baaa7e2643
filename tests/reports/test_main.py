"""The report job: overhead figures worked by hand, atomic run directories, an end-to-end smoke."""

import json

import pytest

from benchmarks.stats import UNSTABLE_FOOTNOTE, Figure
from benchmarks import padding
from reports.render.table import with_unstable_footnote
from reports.render.summary import summary_markdown
from reports.store.writer import latest_run, write_run


def test_llama2_7b_needs_no_padding_under_upstream_padding():
    # Every Llama-2 7B param size is a multiple of 4096 * ... >= 128 (4096, 4096*4096,
    # 11008*4096, 32000*4096): no 64-element gaps and no bucket end off lcm(8, 128) = 128.
    row = padding.overhead_row("llama2-7b", 8, "padded")
    assert row["padding_elements"] == 0, row


def test_shard_aligned_aligns_every_shard():
    row = padding.overhead_row("llama2-70b", 32, "shard-aligned")
    assert row["shards_2**16_aligned"] == f"{row['buckets']}/{row['buckets']}", row


def test_write_run_is_atomic(tmp_path):
    first = write_run({"report.md": "one"}, root=tmp_path, name="r1")
    assert latest_run(tmp_path) == first
    with pytest.raises(AttributeError):  # content that cannot be written
        write_run({"report.md": "two", "bad": object()}, root=tmp_path, name="r2")
    assert not (tmp_path / "r2").exists(), "a failed run should leave no directory"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []
    assert latest_run(tmp_path) == first, "latest should still point at the last good run"


def test_report_smoke_end_to_end(smoke_run):
    """The main job in smoke mode: every benchmark once, correct results, a complete run directory."""
    run = smoke_run
    report = (run / "report.md").read_text()
    results = json.loads((run / "results.json").read_text())
    assert "| suites/layout/test_golden.py | reference" in report, report[:1500]
    assert report.index("## Summary") < report.index("## Conformance"), "the summary opens the report"
    assert "**Verdict: PASS**" in report and "Headline figures (gated;" in report, report[:2000]
    for section in ("## Hardware", "### Node 0", "## Bus bandwidth: padded and unpadded buckets", "### all_reduce",
                    "## Overlap of gradient communication", "### Emulated compute", "## Step time",
                    "## The design notes' claims, checked", "## Trend over the runs", "## Padding overhead",
                    "seed claims"):
        assert section in report, f"report section {section!r}: got missing, but should be there"
    records = results["busbw"]
    assert {r["collective"] for r in records} == {"all_reduce", "reduce_scatter", "all_gather"}
    assert {r["policy"] for r in records} == {"unpadded", "padded", "high-busbw", "shard-aligned"}
    assert sum(r["wrong"] for r in records) == 0, [r for r in records if r["wrong"]]
    assert results["schema"] == 4 and results["metrics"], "results.json should carry schema 4 and metrics"
    sampled = [r["sampling"] for name in ("step_time", "overlap", "busbw") for r in results[name]]
    assert sampled and all(s["stopped"] == "fixed rounds" and s["rounds"] == 1 for s in sampled), sampled[:3]
    gated = [m for m in results["metrics"].values() if m["gated"] and not m["exact"]]
    assert gated and all(m["sampling"]["rounds"] == 1 for m in gated), "every gated figure says how it was sampled"
    assert [n["node_rank"] for n in results["nodes"]] == [0], results["nodes"]
    assert results["run"]["setup"]["backend"] == "gloo" and results["run"]["setup"]["nodes"] == 1, results["run"]
    node = results["nodes"][0]
    assert node["hardware"]["host"]["hostname"], node
    assert node["telemetry"]["available"] == node["hardware"]["nvml"]["available"], node["telemetry"]
    assert node["noise"]["cores"] >= 1 and len(node["noise"]["load_before"]) == 3, node["noise"]
    timeline = next(r["timeline"] for r in results["overlap"] if r["mode"] == "emulated")
    assert len(timeline["layers"]) == 3 and timeline["collectives"], timeline
    assert "timeline_reference.png" in results["plots"]
    for plot in results["plots"]:
        assert (run / plot).read_bytes().startswith(b"\x89PNG"), plot


def _conformance(failed: int) -> dict:
    return {"suite": "suites/multigpu", "impl": "megatron", "header": "megatron 0.19.2", "passed": 140,
            "failed": failed, "errors": 0, "skipped": 3, "exit_code": int(failed > 0)}


def test_the_summary_gives_the_verdict_first_and_lists_what_is_unstable():
    steady = Figure.of([1.0, 1.01, 0.99, 1.0, 1.02, 0.98], "x", "lower").to_json()
    noisy = Figure.of([0.2, 0.9, 0.4, 0.7, 0.3, 0.8], "", "higher", "absolute").to_json()
    results = {"run": {"smoke": False}, "conformance": [_conformance(0)], "busbw": [{"wrong": 0}],
               "compared_with": {"run": "20261122T000000Z", "gated_regressions": []},
               "metrics": {"step/ratio": {"gated": True, "figure": steady, "unit": "x", "better": "lower"},
                           "overlap/efficiency": {"gated": True, "figure": noisy, "unit": "", "better": "higher"},
                           "busbw/abs": {"gated": False, "figure": noisy}}}
    text = summary_markdown(results)
    assert text.startswith("**Verdict: PASS**"), text
    assert "suites/multigpu against megatron 0.19.2: 140 passed, 0 failed, 3 skipped" in text
    assert "gated regressions against 20261122T000000Z: 0" in text
    assert "step/ratio" in text and "busbw/abs | " not in text, "only gated figures are headlines"
    assert "Unstable figures (†): 2, 1 of them in the headline table above; the tables below mark the " \
           "others." in text, text
    failing = summary_markdown({**results, "conformance": [_conformance(2)]})
    assert failing.startswith("**Verdict: FAIL**") and "2 failed, 3 skipped — FAIL" in failing, failing
    wrong = summary_markdown({**results, "busbw": [{"wrong": 5}]})
    assert wrong.startswith("**Verdict: FAIL**") and "5 wrong elements — FAIL" in wrong


def test_the_summary_says_which_figures_missed_their_target_and_what_looked_wrong():
    wide = Figure.of([0.90, 1.10, 0.95, 1.08, 0.92, 1.05], "x", "lower").to_json()
    missed = {"rounds": 40, "target": "±2%", "met": False, "stopped": "budget spent"}
    met = {**missed, "met": True, "stopped": "targets met"}
    results = {"run": {"smoke": False}, "conformance": [_conformance(0)],
               "nodes": [{"node_rank": 0, "noise": {"cores": 2, "load_before": [3.0, 2.0, 1.0]}}],
               "metrics": {"step/a": {"figure": wide, "sampling": missed, "unit": "x", "better": "lower"},
                           "step/b": {"gated": True, "figure": wide, "sampling": met, "unit": "x",
                                      "better": "lower"}}}
    text = summary_markdown(results)
    assert "**1 of the 2 figures above missed their sampling target" in text, text
    assert "node 0: the load average before the run was 3.00 on 2 cores" in text, text
    quiet = summary_markdown({**results, "nodes": [{"node_rank": 0, "noise": {"cores": 2,
                                                                              "load_before": [0.1, 0.1, 0.1]}}]})
    assert "Nothing in the machine's readings looked wrong" in quiet, quiet


def test_one_footnote_per_section_and_only_when_a_cell_is_marked():
    marked = "| a | 0.4 [0.2, 0.9] † |"
    assert with_unstable_footnote(marked).endswith(UNSTABLE_FOOTNOTE)
    assert with_unstable_footnote("text that mentions † without a table") == "text that mentions † without a table"


def test_a_run_without_multi_rank_benchmarks_still_describes_its_node():
    """The setup that decides what a run compares with names the devices even when only one-process benchmarks ran."""
    from benchmarks.settings import BenchSettings
    from benchmarks.suite import run_rank_benchmarks
    from reports.comparison.comparable import run_setup

    bench = run_rank_benchmarks(BenchSettings.for_backend("gloo").smoked(), 1, ["planning"], progress=lambda _: None)
    assert len(bench["nodes"]) == 1, f"nodes described: got {len(bench['nodes'])}, but should be 1"
    nodes = [node.to_json() for node in bench["nodes"]]
    devices = run_setup({"backend": "gloo", "world_size": 1, "mode": "plain"}, nodes)["devices"]
    assert devices != ["unknown"], f"devices: got {devices}, but should name this node's CPU or GPUs"


def test_every_benchmark_has_a_section_of_the_report():
    """A benchmark returns records only; the report owns how its section looks (``reports.render.sections``)."""
    from benchmarks import BENCHMARKS
    from reports.render.sections import SECTIONS

    missing = [b.name for b in BENCHMARKS if not callable(getattr(SECTIONS.get(b.name), "markdown", None))]
    assert not missing, f"got benchmarks without a section: {missing}, but each should have one in SECTIONS"
