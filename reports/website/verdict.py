"""A run's verdict in a box: the word, a symbol and a colour (never the colour alone), and each line that
decided it, marked."""

from __future__ import annotations

from ..store.model import Results, VerdictLine
from .html import Markup, join, tag

SYMBOLS = {"PASS": "✔", "FAIL": "✘", "ERROR": "⚠"}


def _mark(line: VerdictLine, reported: bool) -> str:
    """✘ a line that fails the run, ⚠ one that could not be checked, ▼ the gate's line when it found
    regressions that do not fail the run (without --fail-on-regression), ✔ the others."""
    if line.error:
        return "⚠ "
    if line.fails:
        return "✘ "
    return "▼ " if reported and line.text.startswith("gated regressions against") else "✔ "


def verdict_html(results: Results) -> Markup:
    verdict = results.verdict
    if verdict is None:
        return tag("div", tag("p", "Verdict: not recorded (a run written before verdicts were stored)."),
                   class_="verdict verdict-none")
    word = verdict.word
    smoke = " (smoke run: the figures mean nothing)" if results.run.setup.smoke else ""
    head = f"{SYMBOLS[word]} Verdict: {word}{smoke}"
    reported = bool(results.comparison and results.comparison.regressions)
    lines = [tag("li", join([tag("span", _mark(line, reported), aria_hidden="true"), line.text,
                             " — ERROR" if line.error else " — FAIL" if line.fails else ""]),
                 class_="fails" if line.fails else None)
             for line in verdict.lines]
    return tag("div", join([tag("p", head, class_="word"), tag("ul", join(lines))]),
               class_=f"verdict verdict-{word.lower()}")
