"""Markdown sections of the report, one function per section, all github tables."""

from __future__ import annotations

from tabulate import tabulate

from .conformance import SuiteResult


def table(rows: list[dict], floatfmt: str = ".3f") -> str:
    return tabulate(rows, headers="keys", tablefmt="github", floatfmt=floatfmt) if rows else "(none)"


def conformance_markdown(results: list[SuiteResult]) -> str:
    rows = [
        {
            "suite": r.suite, "implementation": r.header or r.impl, "passed": r.passed,
            "failed": r.failed + r.errors, "skipped": r.skipped, "xfailed": r.xfailed,
            "verdict": "PASS" if r.ok else "FAIL",
        }
        for r in results
    ]
    text = table(rows)
    for r in results:
        if r.failures:
            text += f"\n\nFailures of {r.impl} in {r.suite}:\n" + "\n".join(f"- {f}" for f in r.failures[:20])
        if r.skip_reasons:
            reasons = sorted(r.skip_reasons.items(), key=lambda kv: -kv[1])
            text += f"\n\nSkips of {r.impl} in {r.suite} (count: reason):\n" + "\n".join(
                f"- {n}: {reason}" for reason, n in reasons
            )
    return text


def busbw_summary_markdown(averages: dict, records: list[dict]) -> str:
    """Average busbw per collective and policy (nccl-tests' footer), raw and over useful bytes."""
    effective: dict[tuple[str, str], list[float]] = {}
    for r in records:
        effective.setdefault((r["collective"], r["policy"]), []).append(r["effective_busbw_gbps"])
    rows = [
        {"collective": c, "policy": p, "avg busbw (GB/s)": v,
         "avg effective busbw (GB/s)": sum(effective[(c, p)]) / len(effective[(c, p)])}
        for c, per_policy in averages.items() for p, v in per_policy.items()
    ]
    return table(rows, ".4f")


def busbw_markdown(records: list[dict], collective: str) -> str:
    rows = [
        {
            "size(B)": r["size_bytes"], "count": r["count"], "type": r["type"], "redop": r["redop"],
            "policy": r["policy"], "placement": r["placement"], "time(us)": r["time_us"],
            "algbw(GB/s)": r["algbw_gbps"], "busbw(GB/s)": r["busbw_gbps"],
            "eff. busbw": r["effective_busbw_gbps"], "#wrong": r["wrong"],
        }
        for r in records if r["collective"] == collective
    ]
    means = {}
    for r in rows:
        means.setdefault(r["policy"], []).append(r["busbw(GB/s)"])
    footer = "; ".join(f"{p} {sum(v) / len(v):.4f}" for p, v in means.items())
    return table(rows, ".4f") + f"\n\nAvg bus bandwidth (GB/s): {footer}"


def overlap_markdown(rows: list[dict]) -> str:
    shown = [{k: v for k, v in r.items() if k != "ddp_timers"} for r in rows]
    text = table(shown)
    timers = next((r["ddp_timers"] for r in rows if r.get("ddp_timers")), None)
    if timers:
        text += "\n\ntorch DDP's own backward timers (overlapped variant):\n\n" + table([timers])
    return text + "\n\nefficiency = (T_serial - T_overlap) / (T_serial - T_compute)."


def step_time_markdown(row: dict) -> str:
    return table([row]) + (
        "\n\nratio = reference / torch DDP per round (median, quartiles), measured side by side; "
        "goal <= 1.05."
    )
