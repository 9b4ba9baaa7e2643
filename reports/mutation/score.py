"""The score of a session, per module and over all, by population; its file and its markdown.

A mutant the checks pass *survived*; survivors triaged as equivalent, with
why, in ``fixtures/expectations/mutants.toml`` count apart. The score is killed
over the mutants run that are not equivalent; each module says its population
(mutants outside type annotations), how many of them ran, and whether it ran
whole or as a seeded sample.
"""

from __future__ import annotations

import datetime
import json
import tomllib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from . import ROOT
from .population import Mutant
from .session import Session

SCORE_FILE = ROOT / "reports" / "mutation-score.json"
EQUIVALENTS_FILE = ROOT / "fixtures" / "expectations" / "mutants.toml"
FORMAT = 2


def load_equivalents(path: Path = EQUIVALENTS_FILE) -> dict[str, str]:
    """``{mutant key: why it is equivalent}`` from the triage file."""
    if not path.exists():
        return {}
    entries = tomllib.loads(path.read_text()).get("equivalent", [])
    for i, entry in enumerate(entries):
        if not {"mutant", "why"} <= entry.keys():
            raise ValueError(f"{path}: equivalent[{i}] has keys {sorted(entry)}, but should have 'mutant' and 'why'")
    return {e["mutant"]: e["why"] for e in entries}


def verdict(result: Mapping, equivalents: Mapping[str, str]) -> str:
    """killed, survived or equivalent (a survivor triaged as such)."""
    if result["outcome"] == "killed":
        return "killed"
    return "equivalent" if result["mutant"] in equivalents else "survived"


def summarize(session: Session, results: Mapping[str, dict], equivalents: Mapping[str, str]) -> dict:
    """The session's score file: per module its population, mode and counts; the score over all."""
    chosen = Counter(Mutant.from_key(key).module for key in session.order)
    counts = {module: Counter() for module in session.modules}
    for key, result in results.items():
        counts[Mutant.from_key(key).module][verdict(result, equivalents)] += 1
    modules = {
        module: {"mode": info["mode"], "mutants": info["mutants"], "in_annotations": info["in_annotations"],
                 "eligible": info["eligible"], "chosen": chosen[module], "run": sum(counts[module].values()),
                 **{v: counts[module][v] for v in ("killed", "survived", "equivalent")}}
        for module, info in session.modules.items()
    }
    killed = sum(m["killed"] for m in modules.values())
    scored = killed + sum(m["survived"] for m in modules.values())
    survivors = [{"mutant": k, "diff": r["diff"]} for k, r in results.items() if verdict(r, equivalents) == "survived"]
    return {
        "format": FORMAT, "date": datetime.date.today().isoformat(), "commit": session.commit,
        "uncommitted": session.uncommitted, "tool": "cosmic-ray", "seed": session.options["seed"],
        "modules": modules, "killed": killed, "non_equivalent": scored, "score": killed / scored if scored else None,
        "survivors": sorted(survivors, key=lambda s: s["mutant"]),
    }


def percent(killed: int, scored: int) -> str:
    return f"{killed / scored:.0%}" if scored else "n/a"


MODE_WORDS = {"whole": "every mutant of", "sampled": "a seeded sample of"}


def modes(modules: Mapping[str, dict]) -> str:
    """'every mutant of 5 modules', 'a seeded sample of 9 modules', or both."""
    by_mode = Counter(m["mode"] for m in modules.values())
    return ", ".join(f"{words} {by_mode[mode]} module{'s' if by_mode[mode] != 1 else ''}"
                     for mode, words in MODE_WORDS.items() if by_mode[mode])


def summary_markdown(s: Mapping) -> str:
    """The summary line and the per-module table of a score file's contents."""
    modules = s["modules"]
    run = sum(m["run"] for m in modules.values())
    population = sum(m["eligible"] for m in modules.values())
    equivalent = sum(m["equivalent"] for m in modules.values())
    line = (f"Mutation score (cosmic-ray over `reference/`, measured {s['date']} at {s['commit'][:10]}"
            f"{' with uncommitted changes' if s['uncommitted'] else ''}): "
            f"**{percent(s['killed'], s['non_equivalent'])}** of non-equivalent mutants killed "
            f"({s['killed']} of {s['non_equivalent']}); {run} of a population of {population} mutants run "
            f"({modes(modules)}; the population leaves out mutants inside type annotations), "
            f"{equivalent} triaged equivalent. See docs/mutation.md.")
    rows = ["| module | mode | population | run | killed | equivalent | survived | score |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    rows += [f"| {name.removeprefix('reference/')} | {m['mode']} | {m['eligible']} | {m['run']} | {m['killed']} | "
             f"{m['equivalent']} | {m['survived']} | {percent(m['killed'], m['killed'] + m['survived'])} |"
             for name, m in modules.items()]
    rows.append(f"| **all** | | **{population}** | **{run}** | **{s['killed']}** | **{equivalent}** | "
                f"**{s['non_equivalent'] - s['killed']}** | **{percent(s['killed'], s['non_equivalent'])}** |")
    return line + "\n\n" + "\n".join(rows)


def score_markdown(path: Path = SCORE_FILE) -> str:
    """The last measured score, for the report's strength section."""
    if not path.exists():
        return "Mutation score: not measured yet (`python -m reports.mutation`)."
    s = json.loads(path.read_text())
    if s.get("format") != FORMAT:
        raise ValueError(f"{path}: got format {s.get('format')!r}, but should be {FORMAT}: "
                         "rerun python -m reports.mutation")
    return summary_markdown(s)
