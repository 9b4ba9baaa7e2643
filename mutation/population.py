"""The mutants of a module, which of them run, and in what order.

Mutants inside type annotations are left out as equivalent by construction:
``from __future__ import annotations`` never evaluates them. The rest are the
module's population; a session runs all of it (*whole*) or a seeded random
share of every module (*sampled*).
"""

from __future__ import annotations

import ast
import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

Span = tuple[tuple[int, int], tuple[int, int]]


@dataclass(frozen=True, order=True)
class Mutant:
    """One change cosmic-ray can make: the ``occurrence``-th place ``operator`` applies to in ``module``."""

    module: str
    line: int
    operator: str
    occurrence: int

    @property
    def key(self) -> str:
        """The mutant's name in sessions and in the triage file: ``module:line:operator:occurrence``."""
        return f"{self.module}:{self.line}:{self.operator}:{self.occurrence}"

    @classmethod
    def from_key(cls, key: str) -> Mutant:
        parts = key.rsplit(":", 3)
        if len(parts) != 4 or not parts[1].isdigit() or not parts[3].isdigit():
            raise ValueError(f"mutant: got {key!r}, but should be 'module:line:operator:occurrence'")
        return cls(parts[0], int(parts[1]), parts[2], int(parts[3]))


def annotation_spans(path: Path) -> list[Span]:
    """(start, end) positions of every annotation in a module, as cosmic-ray numbers them (col from 0)."""
    spans = []
    for node in ast.walk(ast.parse(path.read_text())):
        notes = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            notes.append(node.returns)
        if isinstance(node, ast.arg) and node.annotation is not None:
            notes.append(node.annotation)
        if isinstance(node, ast.AnnAssign):
            notes.append(node.annotation)
        spans += [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in notes]
    return spans


def inside(spans: Sequence[Span], position: tuple[int, int]) -> bool:
    return any(start <= position < end for start, end in spans)


def find_mutants(tree: Path, module: str) -> tuple[list[Mutant], list[Mutant]]:
    """(eligible, in type annotations): every mutant of cosmic-ray's operators in ``tree / module``."""
    from cosmic_ray.commands import init
    from cosmic_ray.work_db import WorkDB, use_db

    spans = annotation_spans(tree / module)
    eligible, annotated = [], []
    database = tree / f".mutants-{module.replace('/', '-')}.sqlite"
    with use_db(str(database), WorkDB.Mode.create) as db:
        init([tree / module], db, {})
        for item in db.work_items:
            spec = item.mutations[0]
            mutant = Mutant(module, spec.start_pos[0], spec.operator_name, spec.occurrence)
            (annotated if inside(spans, tuple(spec.start_pos)) else eligible).append(mutant)
    database.unlink()
    return sorted(eligible), sorted(annotated)


def choose(eligible: Mapping[str, Sequence[Mutant]], whole: bool, sample: int, seed: int) -> list[Mutant]:
    """Every eligible mutant, or a seeded sample of about ``sample``: the same share of every module."""
    if whole:
        return [m for module in eligible for m in eligible[module]]
    share = min(1.0, sample / max(1, sum(len(pool) for pool in eligible.values())))
    rng = random.Random(seed)
    chosen = []
    for module, pool in eligible.items():
        pool = sorted(pool, key=lambda m: m.key)
        chosen += rng.sample(pool, min(len(pool), max(1, round(share * len(pool)))))
    return chosen


def run_order(mutants: Sequence[Mutant], seed: int) -> list[Mutant]:
    """A seeded shuffle, so the mutants done when a session stops are a random sample of every module."""
    return sorted(mutants, key=lambda m: hashlib.sha256(f"{seed}:{m.key}".encode()).hexdigest())
