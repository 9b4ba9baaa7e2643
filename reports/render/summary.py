"""The first screen of the report: the verdict, the headline figures with their intervals, what is unstable.

The verdict is what the nightly job decides on: conformance per
implementation (any failed check fails it), wrong results of the collectives,
and the gated regressions against the previous run of the same setup. The
headline figures are the gated ones, each with its 95% interval, its
sampling target, the rounds taken and whether the target was met; when one
missed, the summary names what looked wrong on the machine
(``hardware.noise.suspects``). Refused figures (not measurable here, or a
measurement failure) are listed with the reason; every figure whose spread
passes its limit is listed once, so the tables below can mark it with a
single sign.
"""

from __future__ import annotations

import re

from benchmarks import BENCHMARKS
from benchmarks.measurable import refusal_text
from benchmarks.stats import UNSTABLE_MARK, Figure, describe
from hardware.noise import Noise, SleepOvershoot, suspects

from .matrix import impl_label
from .table import table


def verdict(results: dict) -> tuple[bool, list[str]]:
    """(pass, one line per reason it fails or per thing it checked)."""
    lines, ok = [], True
    for r in results.get("conformance", []):
        failed = r["failed"] + r["errors"]
        good = failed == 0 and r["exit_code"] in (0, 5)
        ok &= good
        lines.append(f"{r['suite']} against {impl_label(r['header'], r['impl'])}: {r['passed']} passed, {failed} failed, "
                     f"{r['skipped']} skipped{'' if good else ' — FAIL'}")
    if not results.get("conformance"):
        lines.append("conformance: not run")
    wrong = sum(r["wrong"] for r in results.get("busbw", []))
    ok &= wrong == 0
    lines.append(f"collectives' results: {wrong} wrong elements" + ("" if wrong == 0 else " — FAIL"))
    compared = results.get("compared_with") or {}
    if compared.get("run"):
        regressions = compared.get("gated_regressions", [])
        lines.append(f"gated regressions against {compared['run']}: {len(regressions)}"
                     + (f" ({', '.join(regressions)})" if regressions else ""))
    else:
        lines.append("gated regressions: none checked (no earlier run of this setup)")
    return ok, lines


def headline_rows(metrics: dict) -> list[dict]:
    """Every metric with samples that a gate rule covers (gated, or not this run for a missed target), with how
    it was sampled."""
    rows = []
    for key, metric in sorted(metrics.items()):
        if _headline(metric):
            sampling = metric.get("sampling") or {}
            met = {True: "yes", False: "**no**", None: ""}[sampling.get("met")]
            rows.append({"figure": key, "median [95% interval]": describe(Figure.from_json(metric["figure"])),
                         "unit": metric.get("unit", ""), "better": metric.get("better", ""),
                         "target": sampling.get("target", ""), "rounds": sampling.get("rounds", ""),
                         "target met": met, "gated": "yes" if metric.get("gated") else "no"})
    return rows


def _headline(metric: dict) -> bool:
    """A metric with samples under a gate rule: gated, or not this run for a missed target."""
    return bool(metric.get("gated") or metric.get("sampling")) and isinstance(metric.get("figure"), dict)


def missed_targets(metrics: dict) -> list[str]:
    """Figures under a gate rule that ``benchmarks.registry.gated`` left ungated: their calibrated sampling missed
    the target, so they are informative this run."""
    return sorted(k for k, m in metrics.items() if m.get("sampling") and not m.get("gated"))


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def refusals(results: dict) -> list[str]:
    """Each kind of refused figure, once per benchmark, with how many records it refused.

    Refusals that differ only in their numbers (one per message size, say)
    read as one line, each number shown as the range it took.
    """
    groups: dict[tuple[str, str], list[str]] = {}
    for benchmark in BENCHMARKS:
        for record in benchmark.records_of(results):
            if record.get("refused"):
                text = refusal_text(record["refused"])
                groups.setdefault((benchmark.title, NUMBER.sub("#", text)), []).append(text)
    return [f"{title} ({len(texts)} figure{'s' if len(texts) != 1 else ''}): {_ranged(texts)}"
            for (title, _), texts in groups.items()]


def _ranged(texts: list[str]) -> str:
    """``texts`` of one shape as one, each number that varies shown as 'lowest to highest'."""
    slots = [NUMBER.findall(text) for text in texts]
    shown = iter([values[0] if len(set(values)) == 1 else
                  f"{min(values, key=float)} to {max(values, key=float)}" for values in zip(*slots)])
    return NUMBER.sub(lambda _: next(shown), texts[0])


def noise_suspects(results: dict) -> list[str]:
    """What looked wrong on each node, and in the emulated compute's sleeps."""
    overshoot = next((r["sleep_overshoot"] for r in results.get("overlap") or [] if r.get("sleep_overshoot")),
                     None)
    found = []
    for node in results.get("nodes") or []:
        noise = Noise.from_json(node["noise"]) if node.get("noise") else None
        found += [f"node {node['node_rank']}: {line}" for line in suspects(noise)]
    return found + suspects(None, SleepOvershoot.from_json(overshoot) if overshoot else None)


def unstable_keys(metrics: dict) -> list[str]:
    return sorted(k for k, m in metrics.items() if isinstance(m.get("figure"), dict) and m["figure"].get("unstable"))


def summary_markdown(results: dict) -> str:
    ok, lines = verdict(results)
    smoke = (results.get("run") or {}).get("smoke")
    head = f"**Verdict: {'PASS' if ok else 'FAIL'}**" + (" (smoke run: the figures mean nothing)" if smoke else "")
    parts = [head + "\n\n" + "\n".join(f"- {line}" for line in lines)]
    metrics = results.get("metrics", {})
    rows = headline_rows(metrics)
    if rows:
        parts.append("Headline figures (gated; sampled until the 95% interval is inside its target, or the "
                     "benchmark's time budget ran out):\n\n" + table(rows, numparse=False))
    missed = missed_targets(metrics)
    if missed and not smoke:
        causes = noise_suspects(results)
        parts.append(f"**{len(missed)} of the {len(rows)} figures above missed their sampling target, so they "
                     "are not gated this run** (target met: no): their intervals are wider than their gate rule "
                     "assumes. "
                     + ("What looked wrong on the machine:\n\n" + "\n".join(f"- {c}" for c in causes) if causes
                        else "Nothing in the machine's readings looked wrong (load, other processes, frequencies, "
                             "sleeps): more rounds (a larger --budget) would narrow them."))
    refused = refusals(results)
    if refused:
        parts.append("Refused figures (null in results.json, never gated or given a verdict):\n\n"
                     + "\n".join(f"- {line}" for line in refused))
    unstable = unstable_keys(metrics)
    covered = [k for k in unstable if _headline(metrics[k])]
    parts.append(f"Unstable figures ({UNSTABLE_MARK}): {len(unstable)}"
                 + (f", {len(covered)} of them in the headline table above" if covered else "")
                 + ("; the tables below mark the others." if len(unstable) > len(covered) else "."))
    return "\n\n".join(parts)
