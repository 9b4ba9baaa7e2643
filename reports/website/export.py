"""Each run's figures in the formats of the dashboards people already run, one file per format.

- github-action-benchmark's custom tools (``customSmallerIsBetter`` and
  ``customBiggerIsBetter``: a list of ``{name, unit, value, range, extra}``):
  the run's gated metrics, the figure's median as the value and its 95%
  interval as the range; the setup is in the name, so two setups are never
  one series there either.
- nccl-tests' JSON output (its version 2 file: ``results`` rows of ``size``,
  ``count``, ``type``, ``redop``, ``root``, and ``out_of_place`` / ``in_place``
  with ``time`` (us), ``alg_bw``, ``bus_bw`` (GB/s) and ``nwrong``): the
  bus-bandwidth sweep, one document per collective and padding, medians of the
  rounds. At one rank nothing crosses a bus, and ``bus_bw`` is 0 as nccl-tests
  writes it.
"""

from __future__ import annotations

import json
from typing import Sequence

from benchmarks.busbw import BusbwRecord

from ..store.model import Results

BENCHMARK_ACTION = {"lower": ("customSmallerIsBetter", "benchmark-action-smaller.json"),
                    "higher": ("customBiggerIsBetter", "benchmark-action-bigger.json")}
NCCL_TESTS = "nccl-tests.json"
NCCL_TESTS_VERSION = 2
"""The version of nccl-tests' JSON file whose shape the export follows."""


def benchmark_action(results: Results) -> dict[str, list[dict]]:
    """tool -> its entries: every gated metric of the run."""
    setup = results.run.setup.label()
    out: dict[str, list[dict]] = {tool: [] for tool, _ in BENCHMARK_ACTION.values()}
    for key, metric in sorted(results.metrics.items()):
        if not metric.gated:
            continue
        entry = {"name": f"{key} [{setup}]", "unit": metric.unit, "value": metric.value}
        extra = [f"run {results.run.name}", f"commit {results.run.commit or 'not recorded'}"]
        if metric.figure is not None:
            interval = metric.figure.interval
            if interval is not None:
                entry["range"] = f"[{interval[0]:.6g}, {interval[1]:.6g}]"
                extra.insert(0, "range: 95% interval of the median")
            extra.insert(0, f"{metric.figure.n} sample{'s' if metric.figure.n != 1 else ''}")
        else:
            extra.insert(0, "an exact count")
        entry["extra"] = "; ".join(extra)
        out[BENCHMARK_ACTION[metric.better][0]].append(entry)
    return out


def _placement(record: BusbwRecord) -> dict:
    busbw = record.busbw_gbps.median if record.busbw_gbps is not None else 0.0
    return {"time": record.time_us.median, "alg_bw": record.algbw_gbps.median, "bus_bw": busbw,
            "nwrong": record.wrong}


def nccl_tests(results: Results) -> dict:
    """The sweep as nccl-tests would have written it: one document per (collective, padding)."""
    records: Sequence[BusbwRecord] = results.benchmarks.busbw
    documents = []
    groups: dict[tuple[str, str], list[BusbwRecord]] = {}
    for r in records:
        groups.setdefault((r.collective, r.policy), []).append(r)
    nccl = next((n.nccl_version for n in results.nodes if n.nccl_version), None)
    for (collective, policy), group in groups.items():
        rows: dict[int, dict] = {}
        for r in sorted(group, key=lambda r: r.requested_count):
            row = rows.setdefault(r.requested_count, {
                "size": r.size_bytes, "count": r.count, "type": r.element_type, "redop": r.redop,
                "root": "-1", "out_of_place": None, "in_place": None, "actual_iterations": r.calls,
                "experiment_name": f"{collective}_perf, {policy}"})
            row["in_place" if r.placement == "in-place" else "out_of_place"] = _placement(r)
        busbw = [p["bus_bw"] for row in rows.values() for p in (row["out_of_place"], row["in_place"]) if p]
        wrong = sum(r.wrong for r in group)
        documents.append({
            "version": NCCL_TESTS_VERSION, "start_time": results.run.name,
            "args": list(results.run.command or ()), "nccl_version": nccl,
            "config": {"ranks": group[0].world_size, "backend": group[0].backend,
                       "minimum_bytes": min(r.size_bytes for r in group),
                       "maximum_bytes": max(r.size_bytes for r in group)},
            "results": list(rows.values()),
            "out_of_bounds": {"count": wrong, "okay": wrong == 0},
            "average_bus_bandwidth": {"bandwidth": sum(busbw) / len(busbw) if busbw else 0.0,
                                      "okay": "unchecked"},
            "errors": [],
        })
    return {"source": f"python -m reports, run {results.run.name}: {results.run.setup.label()}",
            "tests": documents}


def export_files(results: Results) -> dict[str, str]:
    """file name -> its JSON text."""
    files = {name: json.dumps(benchmark_action(results)[tool], indent=1)
             for tool, name in BENCHMARK_ACTION.values()}
    files[NCCL_TESTS] = json.dumps(nccl_tests(results), indent=1)
    return files
