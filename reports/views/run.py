"""A run's verdict, claims, comparison and reproduction as its pages say them: the Markdown report
(``reports/render/``) and the HTML site (``reports/website/``) format these, so a sentence or a mark lives in one
place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..store.model import ClaimVerdict, Comparison, Results, VerdictLine
from ..store.upgrade import written_before

SMOKE = "smoke run: the figures mean nothing"
"""How a smoke run's verdict is qualified."""

VERDICT_SYMBOLS = {"PASS": "✔", "FAIL": "✘", "ERROR": "⚠"}
STATUS_MARKS = {"pass": "✔", "fail": "✘", "not applicable": "–", "reported": "▼", "error": "⚠"}
"""✔ passed, ✘ fails the run, – nothing was checked (every check skipped), ▼ reported without failing the run
(gated regressions without --fail-on-regression; failures and new findings of an implementation the verdict does
not cover), ⚠ could not be checked."""
STATUS_SUFFIXES = {"pass": "", "fail": " — FAIL", "not applicable": " — not applicable", "reported": "",
                   "error": " — ERROR"}
"""Said after a verdict line's words, so a status reads without its mark or colour."""
CLAIM_MARKS = {"holds": "✔", "does not hold": "✘"}
"""A claim's outcome as a mark; every other outcome (not measurable, measured or assessed) is "–"."""


@dataclass(frozen=True)
class VerdictView:
    word: str | None
    """PASS, FAIL or ERROR; None for a run that stored no verdict."""
    title: str
    """'Verdict: PASS', or 'Verdict: not recorded'."""
    note: str
    """What qualifies it (a smoke run; why none was recorded), or nothing."""
    lines: tuple[VerdictLine, ...]
    covers: str = ""
    """Which implementations it covers, as a sentence; nothing for a run written before verdicts said so."""

    @property
    def symbol(self) -> str:
        return VERDICT_SYMBOLS.get(self.word, "")


def verdict_view(results: Results) -> VerdictView:
    verdict = results.verdict
    if verdict is None:
        return VerdictView(None, "Verdict: not recorded", written_before("verdict"), ())
    covers = (f"It covers {', '.join(verdict.covers)}: another implementation's failures and new findings are "
              "reported (▼), not failed." if verdict.covers else "")
    return VerdictView(verdict.word, f"Verdict: {verdict.word}", SMOKE if results.run.setup.smoke else "",
                       verdict.lines, covers)


def line_words(line: VerdictLine) -> str:
    """A verdict line's words with its status said after them."""
    return line.text + STATUS_SUFFIXES[line.status]


def claim_rows(claims: tuple[ClaimVerdict, ...], marked: bool = False) -> list[dict[str, str]]:
    """One row a claim; ``marked``: its verdict led by its outcome's mark."""
    return [{"source": c.source, "claim": c.claim, "measured": c.measured,
             "verdict": (CLAIM_MARKS.get(c.outcome, "–") + " " if marked else "") + c.verdict} for c in claims]


def claims_missing(claims: tuple[ClaimVerdict, ...]) -> str | None:
    """Why a run shows no claims, or None when it judged them."""
    return None if claims else f"Not judged ({written_before('claims')})."


@dataclass(frozen=True)
class ComparisonView:
    state: Literal["not stored", "error", "no earlier run", "compared"]
    sentence: str
    """What to say instead of the changes; for "compared", against which run."""
    passed_over: tuple[str, ...]


def comparison_view(comparison: Comparison | None) -> ComparisonView:
    if comparison is None:
        return ComparisonView("not stored", f"Not compared ({written_before('comparison')}).", ())
    if comparison.error is not None:
        return ComparisonView("error", f"Not compared: an earlier run cannot be read: {comparison.error}", ())
    if comparison.against is None:
        return ComparisonView("no earlier run", "No earlier run of this setup to compare with: nothing is gated.",
                              comparison.passed_over)
    return ComparisonView("compared", f"Against {comparison.against}.", comparison.passed_over)


def command_missing(results: Results) -> str | None:
    """Why a run's page cannot say how to reproduce it, or None when it can."""
    return None if results.run.command else f"The command was not recorded ({written_before('command')})."
