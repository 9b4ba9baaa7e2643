"""The mutation score as a run recorded it, rendered for the report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ..store.model import ModuleScore, MutationScore


def percent(killed: int, scored: int) -> str:
    return f"{killed / scored:.0%}" if scored else "n/a"


MODE_WORDS = {"whole": "every mutant of", "sampled": "a seeded sample of"}


def modes(modules: Mapping[str, ModuleScore]) -> str:
    """'every mutant of 5 modules', 'a seeded sample of 9 modules', or both."""
    by_mode = Counter(m.mode for m in modules.values())
    return ", ".join(f"{words} {by_mode[mode]} module{'s' if by_mode[mode] != 1 else ''}"
                     for mode, words in MODE_WORDS.items() if by_mode[mode])


def summary_markdown(s: MutationScore) -> str:
    """The summary line and the per-module table of a score."""
    modules = s.modules
    run = sum(m.run for m in modules.values())
    population = sum(m.eligible for m in modules.values())
    equivalent = sum(m.equivalent for m in modules.values())
    line = (f"Mutation score (cosmic-ray over `reference/`, measured {s.date} at {s.commit[:10]}"
            f"{' with uncommitted changes' if s.uncommitted else ''}): "
            f"**{percent(s.killed, s.non_equivalent)}** of non-equivalent mutants killed "
            f"({s.killed} of {s.non_equivalent}); {run} of a population of {population} mutants run "
            f"({modes(modules)}; the population leaves out mutants inside type annotations), "
            f"{equivalent} triaged equivalent. See docs/mutation.md.")
    rows = ["| module | mode | population | run | killed | equivalent | survived | score |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    rows += [f"| {name.removeprefix('reference/')} | {m.mode} | {m.eligible} | {m.run} | {m.killed} | "
             f"{m.equivalent} | {m.survived} | {percent(m.killed, m.killed + m.survived)} |"
             for name, m in modules.items()]
    rows.append(f"| **all** | | **{population}** | **{run}** | **{s.killed}** | **{equivalent}** | "
                f"**{s.non_equivalent - s.killed}** | **{percent(s.killed, s.non_equivalent)}** |")
    return line + "\n\n" + "\n".join(rows)


def score_markdown(score: MutationScore | None) -> str:
    """The score as it stood when the run was made, for the report's strength section."""
    if score is None:
        return "Mutation score: not measured when this run was made (`python -m mutation`)."
    return summary_markdown(score)
