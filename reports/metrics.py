"""Flattening a run's results into the ``metrics`` a nightly comparison reads (reports/schema.md)."""

from __future__ import annotations


def _metric(value, unit: str, better: str) -> dict:
    return {"value": value, "unit": unit, "better": better}


def collect_metrics(results: dict) -> dict[str, dict]:
    metrics: dict[str, dict] = {}
    for r in results.get("conformance", []):
        key = f"conformance/{r['suite']}/{r['impl']}"
        metrics[f"{key}/failed"] = _metric(r["failed"] + r["errors"], "tests", "lower")
        metrics[f"{key}/passed"] = _metric(r["passed"], "tests", "higher")
    for r in results.get("busbw", []):
        key = f"busbw/{r['collective']}/{r['policy']}/{r['placement']}/{r['size_bytes']}"
        metrics[key] = _metric(r["busbw_gbps"], "GB/s", "higher")
        metrics[f"wrong/{r['collective']}/{r['policy']}/{r['placement']}/{r['size_bytes']}"] = _metric(
            r["wrong"], "elements", "lower")
    for collective, per_policy in results.get("busbw_average", {}).items():
        for policy, value in per_policy.items():
            metrics[f"busbw_avg/{collective}/{policy}"] = _metric(value, "GB/s", "higher")
    for r in results.get("overlap", []):
        if r.get("efficiency") is not None:
            metrics[f"overlap/{r['impl']}/efficiency"] = _metric(r["efficiency"], "", "higher")
    for r in results.get("strength", []):
        metrics[f"strength/{r['broken']}/caught"] = _metric(int(r["caught"]), "", "higher")
    step = results.get("step_time") or {}
    if "ratio_median" in step:
        metrics["step_time/ratio_median"] = _metric(step["ratio_median"], "x", "lower")
    for r in results.get("shard_cache", []) + results.get("planning", []):
        metrics[f"time/{r['name']}"] = _metric(r["median_ms"], "ms", "lower")
    return metrics
