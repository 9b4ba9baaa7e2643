"""A run's verdict in a box: the word, a symbol and a colour (never the colour alone), and each line that
decided it, marked."""

from __future__ import annotations

from ..store.model import Results
from .html import Markup, join, tag

SYMBOLS = {"PASS": "✔", "FAIL": "✘", "ERROR": "⚠"}


MARKS = {"pass": "✔ ", "fail": "✘ ", "not applicable": "– ", "reported": "▼ ", "error": "⚠ "}
"""✔ passed, ✘ fails the run, – nothing was checked (every check skipped), ▼ gated regressions that do not fail
the run (without --fail-on-regression), ⚠ could not be checked."""
WORDS = {"fail": " — FAIL", "error": " — ERROR", "not applicable": " — not applicable"}


def verdict_html(results: Results) -> Markup:
    verdict = results.verdict
    if verdict is None:
        return tag("div", tag("p", "Verdict: not recorded (a run written before verdicts were stored)."),
                   class_="verdict verdict-none")
    word = verdict.word
    smoke = " (smoke run: the figures mean nothing)" if results.run.setup.smoke else ""
    head = f"{SYMBOLS[word]} Verdict: {word}{smoke}"
    lines = [tag("li", join([tag("span", MARKS[line.status], aria_hidden="true"), line.text,
                             WORDS.get(line.status, "")]),
                 class_="fails" if line.fails else "not-applicable" if line.status == "not applicable" else None)
             for line in verdict.lines]
    return tag("div", join([tag("p", head, class_="word"), tag("ul", join(lines))]),
               class_=f"verdict verdict-{word.lower()}")
