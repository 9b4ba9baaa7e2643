"""The first screen of the report: the verdict, the headline figures with their intervals, what is unstable.

The verdict is the run's, decided once when it was written
(``reports.comparison.verdict``): conformance per implementation, wrong
results of the collectives, and the gated regressions against the previous
run of the same setup. The headline figures are the gated ones, each with its
95% interval, its sampling target, the rounds taken and whether the target
was met; when one missed, the summary names what looked wrong on the machine
(``hardware.noise.suspects``). Figures not given are listed with the reason:
refused (not measurable here, or a measurement failure) or a finding; every
figure whose spread passes its limit is listed once, so the tables below can
mark it with a single sign.
"""

from __future__ import annotations

from benchmarks import BENCHMARKS
from benchmarks.measurable import FINDING, Refusal
from benchmarks.registry import Metric
from benchmarks.stats import UNSTABLE_MARK, describe
from hardware.noise import suspects

from ..store.model import Results
from ..views.compositions import compositions_view
from ..views.run import line_words, verdict_view
from .table import table


def headline_rows(metrics: dict[str, Metric]) -> list[dict]:
    """Every metric with samples that a gate rule covers (gated, or not this run for a missed target), with how
    it was sampled."""
    rows = []
    for key, metric in sorted(metrics.items()):
        if _headline(metric):
            sampling = metric.sampling
            met = {True: "yes", False: "**no**", None: ""}[sampling.met if sampling else None]
            rows.append({"figure": key, "median [95% interval]": describe(metric.figure), "unit": metric.unit,
                         "better": metric.better, "target": sampling.target if sampling else "",
                         "rounds": sampling.rounds if sampling else "", "target met": met,
                         "gated": "yes" if metric.gated else "no"})
    return rows


def _headline(metric: Metric) -> bool:
    """A metric with samples under a gate rule: gated, or not this run for a missed target."""
    return (metric.gated or metric.sampling is not None) and metric.figure is not None


def missed_targets(metrics: dict[str, Metric]) -> list[str]:
    """Figures under a gate rule that ``benchmarks.registry.gated`` left ungated: their calibrated sampling missed
    the target, so they are informative this run."""
    return sorted(k for k, m in metrics.items() if m.sampling and not m.gated)


def not_given(results: Results, findings: bool) -> list[str]:
    """Each kind of figure not given (refused, or ``findings``), once per benchmark and rule (``Refusal.rule``),
    with how many records it concerns and the first and last one's reasons with their numbers."""
    groups: dict[tuple[str, str], list[Refusal]] = {}
    for benchmark in BENCHMARKS:
        for record in results.records(benchmark.name):
            refused = getattr(record, "refused", None)
            if refused and (refused.kind == FINDING) == findings:
                groups.setdefault((benchmark.title, refused.rule or str(refused)), []).append(refused)
    return [f"{title} ({len(each)} figure{'s' if len(each) != 1 else ''}): {_one_line(each)}"
            for (title, _), each in groups.items()]


def _one_line(refusals: list[Refusal]) -> str:
    """Refusals under one rule as one line: the rule, then the first one's reason and the last one's, with their
    numbers."""
    first, last = refusals[0], refusals[-1]
    if len(refusals) == 1 or not first.rule:
        return str(first)
    return (f"{first.kind}: {first.rule} (the first: {first.why}; the last: {last.why})"
            + (f"; try {first.remedy}" if first.remedy else ""))


def noise_suspects(results: Results) -> list[str]:
    """What looked wrong on each node, and in the emulated compute's sleeps."""
    overshoot = next((r.sleep_overshoot for r in results.benchmarks.overlap if r.sleep_overshoot), None)
    found = []
    for node in results.nodes:
        found += [f"node {node.node_rank}: {line}" for line in suspects(node.noise)]
    return found + suspects(None, overshoot)


def unstable_keys(metrics: dict[str, Metric]) -> list[str]:
    return sorted(k for k, m in metrics.items() if m.figure is not None and m.figure.unstable)


def verdict_markdown(results: Results) -> str:
    view = verdict_view(results)
    head = f"**{view.title}**" + (f" ({view.note})" if view.note else "")
    if view.word is None:
        return head
    text = head + (f" {view.covers}" if view.covers else "") + "\n\n" + "\n".join(
        f"- {line_words(line)}" for line in view.lines)
    new = compositions_view(results).new_findings
    if new:
        text += ("\n\nNew findings of the search past the covering arrays, each the one line that runs it again:\n\n"
                 + "\n".join(f"- **{f.implementation}**: `{f.reproduce}` ({f.message}): {f.advice}." for f in new))
    return text


def summary_markdown(results: Results, with_verdict: bool = True) -> str:
    """``with_verdict``: lead with the verdict (a page that shows it apart leaves it out)."""
    parts = [verdict_markdown(results)] if with_verdict else []
    metrics = results.metrics
    rows = headline_rows(metrics)
    if rows:
        parts.append("Headline figures (gated; sampled until the 95% interval is inside its target, or the "
                     "benchmark's time budget ran out):\n\n" + table(rows, numparse=False))
    missed = missed_targets(metrics)
    if missed and not results.run.setup.smoke:
        causes = noise_suspects(results)
        parts.append(f"**{len(missed)} of the {len(rows)} figures above missed their sampling target, so they "
                     "are not gated this run** (target met: no): their intervals are wider than their gate rule "
                     "assumes. "
                     + ("What looked wrong on the machine:\n\n" + "\n".join(f"- {c}" for c in causes) if causes
                        else "Nothing in the machine's readings looked wrong (load, other processes, frequencies, "
                             "sleeps): more rounds (a larger --budget) would narrow them."))
    findings = not_given(results, findings=True)
    if findings:
        parts.append("Findings (a figure not given because the machine showed something real; never gated or "
                     "given a verdict):\n\n" + "\n".join(f"- {line}" for line in findings))
    refused = not_given(results, findings=False)
    if refused:
        parts.append("Refused figures (null in results.json, never gated or given a verdict):\n\n"
                     + "\n".join(f"- {line}" for line in refused))
    unstable = unstable_keys(metrics)
    covered = [k for k in unstable if _headline(metrics[k])]
    parts.append(f"Unstable figures ({UNSTABLE_MARK}): {len(unstable)}"
                 + (f", {len(covered)} of them in the headline table above" if covered else "")
                 + ("; the tables below mark the others." if len(unstable) > len(covered) else "."))
    return "\n\n".join(parts)
