"""The score of a session, per module and over all, by population (written to
``reports.store.mutation_score.SCORE_FILE``, which each run of the report keeps in its results).

A mutant the checks pass *survived*; survivors triaged as equivalent, with
why, in ``fixtures/expectations/mutants.toml`` count apart. The score is killed
over the mutants run that are not equivalent; each module says its population
(mutants outside type annotations), how many of them ran, and whether it ran
whole or as a seeded sample.
"""

from __future__ import annotations

import datetime
import tomllib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from reports.store.mutation_score import FORMAT

from . import ROOT
from .population import Mutant
from .session import Session

EQUIVALENTS_FILE = ROOT / "fixtures" / "expectations" / "mutants.toml"


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
