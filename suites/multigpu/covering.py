"""Covering arrays over the configuration space: every pair (or triple) of axis values the rules allow, in few cases.

A pair met only in compositions whose other values hide it is not tested
(a world of one rank, a scaling factor of 1, no step taken: ``space.MASKING``).
So the pairwise set meets every allowed pair at least ``TIMES`` times, once
at least in a composition holding no masking value besides the pair's own
(where the rules allow one): covertable makes the array over the values
that mask nothing, and ``augment`` adds rows, greedily, until the pairs of
the masking values and the second meetings are in. The triples are
covertable's alone (they run in the nightly search, which draws beyond them).

The sets are generated once and kept in ``compositions.json``, so every machine runs the
same cases whatever the library's version; ``python -m
suites.multigpu.covering --write`` regenerates them after the axes or the
rules change, and the suite refuses a file written for another space.
Coverage is counted here independently of the generator: the interactions
the rules allow (those some valid composition contains) against those the
rows contain.

An implementation that lacks some of the axes' values skips the rows that
use them, each with its reason, and would cover few pairs; it gets rows of
its own besides (``for_implementation``): a covering array over the values
it supports, so that every pair it can express meets too; stored beside the
common sets for the registered implementations (keyed by what they can
express), generated as its session starts for any other.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cli import Parser

from .records import Coverage, Removal
from .space import (AXES, BASE, MASKED, MASKING, RULED, RULES, Composition, extendable, masks, moved, parse, spell,
                    violated)

FILE = Path(__file__).with_name("compositions.json")
STRENGTHS = {2: "pairwise", 3: "triples"}
OPTIMIZE_MS = 20_000
"""Simulated annealing after covertable's greedy pass, before the rows added for masking: it shortened the pairwise
set, and left the triples as they were in 60 s, so they are not annealed (docs/measurements/conformance.md, dated)."""
TIMES = 2
"""How many compositions of the pairwise set meet each allowed pair (or each an implementation can express)."""
CANDIDATES = 16
"""Rows ``augment`` builds for each one it adds, keeping the one that meets the most of what is missing."""

Interaction = tuple[tuple[str, str], ...]
"""(axis, label) pairs, in axis order."""


def fingerprint() -> str:
    """What the stored sets depend on: the axes' names and labels, the rules, the masking values and ``TIMES``."""
    described = ([(a.name, a.labels) for a in AXES] + [(r.name, r.describe()) for r in RULES]
                 + [(m.axis, m.label) for m in MASKING] + [TIMES])
    return hashlib.sha256(repr(described).encode()).hexdigest()[:16]


@cache
def allowed(strength: int) -> frozenset[Interaction]:
    """Every ``strength``-wise combination of axis values that some composition the rules allow contains."""
    out = set()
    for axes in itertools.combinations(AXES, strength):
        for labels in itertools.product(*(a.labels for a in axes)):
            combo = tuple((a.name, label) for a, label in zip(axes, labels))
            if extendable(dict(combo)):
                out.add(combo)
    return frozenset(out)


def interactions(rows: Iterable[Composition], strength: int) -> set[Interaction]:
    """The ``strength``-wise combinations the rows contain."""
    out = set()
    for row in rows:
        out.update(itertools.combinations(tuple((a.name, row[a.name]) for a in AXES), strength))
    return out


def blame(combo: Interaction) -> tuple[str, ...]:
    """The rules that remove a combination: those it breaks by itself, else those without any one of which it
    would be allowed."""
    labels = dict(combo)
    direct = tuple(r.name for r in violated(labels))
    return direct or tuple(r.name for r in RULES if extendable(labels, ignoring=r.name))


def unmasked_completion(labels: Composition, can: Callable[[Composition], bool]) -> dict[str, str] | None:
    """A composition holding ``labels`` and no masking value on the other axes that ``can`` runs (``can`` answers
    for some axes, as ``extendable`` and ``runnable`` do), found depth first; None where there is none."""
    if not can(labels):
        return None
    free = next((a for a in AXES if a.name not in labels), None)
    if free is None:
        return {a.name: labels[a.name] for a in AXES}
    for label in free.labels:
        if (free.name, label) not in MASKED and can({**labels, free.name: label}):
            found = unmasked_completion({**labels, free.name: label}, can)
            if found is not None:
                return found
    return None


@dataclass
class Needs:
    """What the pairwise rows of one implementation (or of the rules alone) must meet, and what they miss."""

    pairs: frozenset[Interaction]
    """The pairs it can express."""
    unmaskable: frozenset[Interaction]
    """Those some composition it runs holds without a masking value besides the pair's own."""

    @classmethod
    def of(cls, can: Callable[[Composition], bool]) -> "Needs":
        pairs = frozenset(p for p in allowed(2) if can(dict(p)))
        return cls(pairs, frozenset(p for p in pairs if unmasked_completion(dict(p), can) is not None))

    def met(self, rows: Iterable[Composition]) -> tuple[dict[Interaction, int], set[Interaction]]:
        """How often ``rows`` meet each pair, and which pairs they meet without a masking value besides their own."""
        times: dict[Interaction, int] = {}
        unmasked: set[Interaction] = set()
        for row in rows:
            items = tuple((a.name, row[a.name]) for a in AXES)
            held = [item for item in items if item in MASKED]
            for pair in itertools.combinations(items, 2):
                times[pair] = times.get(pair, 0) + 1
                if all(m in pair for m in held):
                    unmasked.add(pair)
        return times, unmasked

    def missing(self, rows: Iterable[Composition]) -> tuple[set[Interaction], set[Interaction]]:
        """The pairs ``rows`` never meet unmasked (of those that can be), and those they meet fewer than ``TIMES``
        times."""
        times, unmasked = self.met(rows)
        return set(self.unmaskable - unmasked), {p for p in self.pairs if times.get(p, 0) < TIMES}


def augment(rows: Sequence[Composition], can: Callable[[Composition], bool], needs: Needs | None = None,
            seed: int = 0) -> list[dict[str, str]]:
    """Rows that, added to ``rows``, meet every pair ``can`` expresses ``TIMES`` times and unmasked where it can be:
    each the best of ``CANDIDATES`` rows built greedily from one missing pair (the unmasked ones first, each free axis
    taking the value that meets the most of what is missing), or, for an unmasked pair the greedy build cannot
    complete without a masking value, the first unmasked composition that holds it."""
    import random

    needs = needs or Needs.of(can)
    rng = random.Random(seed)
    kept, added = list(rows), []
    unmasked, few = needs.missing(kept)
    times, _ = needs.met(kept)
    while unmasked or few:
        target, plain = (sorted(unmasked)[0], True) if unmasked else (sorted(few)[0], False)
        built = [_build(dict(target), can, unmasked, few, times, plain, rng) for _ in range(CANDIDATES)]
        built = [row for row in built if row is not None]
        if not built:
            built = [unmasked_completion(dict(target), can)]
        row = max(built, key=lambda r: _gain(r, unmasked, few))
        kept.append(row)
        added.append(row)
        unmasked, few = needs.missing(kept)
        times, _ = needs.met(kept)
    return added


def _build(row: dict[str, str], can, unmasked, few, times, plain: bool, rng) -> dict[str, str] | None:
    """One row from a seed pair, each free axis (in a random order) given the value that meets the most of what is
    missing; ``plain``: no masking value at all. None where it runs into a dead end."""
    axes = [a for a in AXES if a.name not in row]
    rng.shuffle(axes)
    for axis in axes:
        options = []
        for label in axis.labels:
            masked = (axis.name, label) in MASKED
            if plain and masked or not can({**row, axis.name: label}):
                continue
            gain = 0.0
            held = masks(row)
            for other, value in row.items():
                pair = tuple(sorted([(axis.name, label), (other, value)], key=lambda x: ORDER[x[0]]))
                gain += pair in few
                if pair in unmasked and not masked and all(m == (other, value) for m in held):
                    gain += 3
            options.append((gain - 2 * masked, rng.random(), label))
        if not options:
            return None
        row[axis.name] = max(options)[2]
    full = {a.name: row[a.name] for a in AXES}
    return full if can(full) else None


def _gain(row: Composition, unmasked, few) -> int:
    items = tuple((a.name, row[a.name]) for a in AXES)
    held = [item for item in items if item in MASKED]
    return sum((pair in few) + 3 * (pair in unmasked and all(m in pair for m in held))
               for pair in itertools.combinations(items, 2))


ORDER = {a.name: i for i, a in enumerate(AXES)}


def coverage(name: str, rows: Sequence[Composition], strength: int,
             expressible: Callable[[Composition], bool] | None = None) -> Coverage:
    """What ``rows`` (the compositions that ran) cover of the combinations the rules allow and, where given,
    ``expressible`` says the implementation can run (``runnable``); for pairs, also how many meet ``TIMES`` times
    and unmasked."""
    permitted = allowed(strength)
    expressed = permitted if expressible is None else frozenset(c for c in permitted if expressible(dict(c)))
    total = sum(len(list(itertools.product(*(a.labels for a in axes))))
                for axes in itertools.combinations(AXES, strength))
    removed: dict[tuple[str, ...], list[Interaction]] = {}
    for axes in itertools.combinations(AXES, strength):
        for labels in itertools.product(*(a.labels for a in axes)):
            combo = tuple((a.name, label) for a, label in zip(axes, labels))
            if combo not in permitted:
                removed.setdefault(blame(combo), []).append(combo)
    met = {}
    if strength == 2:
        needs = Needs.of(expressible or extendable)
        times, unmasked = needs.met(rows)
        met = dict(twice=sum(times.get(p, 0) >= TIMES for p in needs.pairs),
                   unmasked=len(needs.unmaskable & unmasked), unmaskable=len(needs.unmaskable))
    return Coverage(name, strength, len(rows), len(interactions(rows, strength) & expressed), len(expressed),
                    len(permitted), total,
                    tuple(Removal(rules, len(combos), ",".join(f"{a}={v}" for a, v in combos[0]))
                          for rules, combos in sorted(removed.items(), key=lambda kv: -len(kv[1]))), **met)


@cache
def stored() -> dict:
    if not FILE.exists():
        raise FileNotFoundError(f"{FILE}: missing; write it with tox -m regenerate (docs/extending.md (a) "
                                "step 11)")
    data = json.loads(FILE.read_text())
    if data.get("space") != fingerprint():
        raise ValueError(f"{FILE.name}: got sets written for space {data.get('space')}, but should be for "
                         f"{fingerprint()} (the axes or the rules changed since): regenerate them where every "
                         "registered peer is installed: tox -m regenerate (docs/extending.md (a) step 11)")
    return data


def rows(name: str) -> list[dict[str, str]]:
    """The stored set ``name`` (``pairwise`` or ``triples``), each composition with every axis labelled."""
    return [parse(text) for text in stored()[name]]


Supported = Callable[[dict[str, str]], bool]
"""Whether the implementation under test can run a composition (every axis labelled)."""


def generate(strength: int, optimize_ms: int = 0, factors: dict[str, list[str]] | None = None,
             exclude: Sequence[Interaction] = ()) -> list[dict[str, str]]:
    """A covering array of the given strength under the rules, by covertable (greedy, then annealed), over
    ``factors`` (default: every value of every axis), without the pairs in ``exclude``."""
    import covertable

    factors = factors or {a.name: list(a.labels) for a in AXES}
    constraints = [{"operator": "fn", "requires": list(r.axes),
                    "evaluate": lambda row, rule=r: rule.holds(row) is not False} for r in RULES]
    constraints += [{"operator": "fn", "requires": [a for a, _ in pair],
                     "evaluate": lambda row, pair=pair: not all(row[a] == v for a, v in pair)} for pair in exclude]
    controller = covertable.Controller(factors, strength=strength, constraints=constraints)
    made = controller.make()
    if optimize_ms:
        made = controller.optimize(made, tuning={"budget_ms": optimize_ms})
    return sorted((dict(row) for row in made), key=lambda row: (len(spell(row).split(",")), spell(row)))


def pairwise(optimize_ms: int = 0) -> list[dict[str, str]]:
    """The common pairwise set: covertable's array over the values that mask nothing, then ``augment``'s rows."""
    plain = generate(2, optimize_ms, factors={a.name: [v for v in a.labels if (a.name, v) not in MASKED] for a in AXES})
    return plain + augment(plain, extendable)


def anchor(supported: Supported) -> dict[str, str] | None:
    """A composition the implementation supports, near the base: the base, else one change from it, else the
    stored composition of fewest moved axes it supports, else two changes from the base (a variant that runs
    only beside two moved values, as fp32 grads without overlap); what a partial composition's free axes are
    filled from. None where it supports none of them."""
    if supported(BASE):
        return dict(BASE)
    moves = [(a.name, v) for a in AXES for v in a.labels if v != a.base]
    changes = (fill({a: v}, BASE) for a, v in moves)
    found = next((c for c in changes if c is not None and supported(c)), None)
    if found is not None:
        return found
    stored_rows = sorted(rows("pairwise") + rows("triples"), key=lambda r: len(moved(r)))
    found = next((r for r in stored_rows if supported(r)), None)
    if found is not None:
        return found
    pairs = (fill(dict(pair), BASE) for pair in itertools.combinations(moves, 2) if pair[0][0] != pair[1][0])
    return next((c for c in pairs if c is not None and supported(c)), None)


def fill(labels: Composition, like: Composition) -> dict[str, str] | None:
    """``labels`` completed axis by axis: ``like``'s value where the rules still allow it, else the first allowed;
    None where the rules allow none."""
    wanted = {a.name: labels.get(a.name, like.get(a.name, a.base)) for a in AXES}
    if not violated(wanted):  # every step below would keep its wanted value: this completion is its witness
        return wanted
    ruled = _fill_ruled(frozenset((a, v) for a, v in labels.items() if a in RULED),
                        tuple(wanted[a.name] for a in AXES if a.name in RULED))
    return None if ruled is None else {**wanted, **dict(ruled)}


@cache
def _fill_ruled(labelled: frozenset[tuple[str, str]],
                wanted: tuple[str, ...]) -> tuple[tuple[str, str], ...] | None:
    """``fill``'s choice on the axes some rule reads, which no other axis's label sways (``extendable`` reads only
    these): axis by axis, the wanted value where the rules still allow it, else the first allowed. The same pairs
    are filled again and again (the coverage and the needs of a session ask about each many times)."""
    if not extendable(dict(labelled)):
        return None
    full = dict(labelled)
    for axis, value in zip((a for a in AXES if a.name in RULED), wanted):
        if axis.name not in full:
            full[axis.name] = next(v for v in (value, *axis.labels) if extendable({**full, axis.name: v}))
    return tuple(full.items())  # cached: a value no caller can change


def runnable(supported: Supported) -> Callable[[Composition], bool]:
    """Whether the implementation can run the composition these labels (some axes) make with the rest filled
    from ``anchor``: one completion, not every one, so a combination it could run only beside values far from
    the anchor counts as one it cannot express."""
    like = anchor(supported)
    known: dict[frozenset, bool] = {}  # the same pairs are asked again and again (coverage, needs, shortfalls)

    def can(labels: Composition) -> bool:
        key = frozenset(labels.items())
        if key not in known:
            full = fill(labels, like) if like is not None else None
            known[key] = full is not None and supported(full)
        return known[key]

    return can


def for_implementation(supported: Supported, strength: int = 2) -> list[dict[str, str]]:
    """Rows that make every ``strength``-wise combination the implementation supports meet, beyond the stored
    rows it can run: a covering array over the values it supports (none for an implementation that runs every
    stored row). Read from the stored sets where one was written for the same support (``--write`` writes the
    registered implementations' that are installed), generated otherwise."""
    own = OwnRows(supported, strength)
    if own.needed is None:
        return []
    kept = stored().get("implementations", {}).get(own.key)
    return [parse(text) for text in kept] if kept is not None else own.generate()


class OwnRows:
    """What an implementation's own rows depend on: the values and pairs it can express, and the stored rows it
    runs; ``key`` names that, so rows generated once serve every session of the same support."""

    def __init__(self, supported: Supported, strength: int) -> None:
        self.supported, self.strength = supported, strength
        common = rows(STRENGTHS[strength])
        runs = [supported(row) for row in common]
        self.needed = None if all(runs) else runs
        if self.needed is None:
            return
        self.can = runnable(supported)
        self.factors = {a.name: [v for v in a.labels if self.can({a.name: v})] for a in AXES}
        self.unsupported = sorted(pair for pair in allowed(2)
                                  if all(v in self.factors[a] for a, v in pair) and not self.can(dict(pair)))
        self.common = [row for row, ran in zip(common, runs) if ran]
        described = (strength, sorted(self.factors.items()), self.unsupported, runs)
        self.key = hashlib.sha256(repr(described).encode()).hexdigest()[:16]

    def generate(self) -> list[dict[str, str]]:
        """None where the implementation can run no composition at all (a level it lacks, as ``ddp``): its cases
        skip with the reason, and no row would run."""
        if not any(self.factors.values()):
            return []
        if self.strength == 2:
            return augment(self.common, self.can)
        made = [row for row in generate(self.strength, factors=self.factors, exclude=self.unsupported)
                if self.supported(row)]
        wanted = ({c for c in allowed(self.strength) if self.can(dict(c))}
                  - interactions(self.common, self.strength))
        kept = []
        for row in sorted(made, key=lambda r: -len(interactions([r], self.strength) & wanted)):
            new = interactions([row], self.strength) & wanted
            if new:
                kept.append(row)
                wanted -= new
        return kept


def parser() -> Parser:
    p = Parser(prog="python -m suites.multigpu.covering",
               description="Show (or regenerate) the covering arrays the multi-rank suite runs.")
    p.add_argument("--write", action="store_true", help=f"regenerate {FILE.name} with covertable (after the axes or "
                   "the rules changed): the common sets and the registered implementations' own rows")
    p.add_argument("--write-own", action="store_true",
                   help="keep the common sets and the rows stored; add the own rows of each registered "
                        "implementation installed here that has none for what it can express (after its support "
                        "changed; run it in each environment whose versions differ)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.write:
        sets = {}
        for strength, name in STRENGTHS.items():
            start = time.monotonic()
            made = pairwise(OPTIMIZE_MS) if strength == 2 else generate(strength)
            print(f"{name}: {len(made)} compositions in {time.monotonic() - start:.1f} s")
            sets[name] = [spell(row) for row in made]
        _write({"space": fingerprint(), "generator": _generator(), **sets})
    if args.write or args.write_own:
        data = stored()
        kept = data.get("implementations", {}) if args.write_own else {}
        _write({**data, "implementations": {**kept, **_registered_rows(set(kept))}})
    for strength, name in STRENGTHS.items():
        c = coverage(name, rows(name), strength)
        print(f"{name}: {c.cases} compositions cover {c.covered} of {c.allowed} allowed combinations of {strength} "
              f"values ({c.total} in all; the rules remove {c.total - c.allowed})"
              + ("" if c.twice is None else f"; {c.twice} met {TIMES} times or more, {c.unmasked} of the "
                 f"{c.unmaskable} that can be met without a masking value met so"))
        for r in c.removals:
            print(f"  {r.count:5d} removed by {' + '.join(r.rules)}   e.g. {r.example}")
    return 0


def _write(data: dict) -> None:
    FILE.write_text(json.dumps(data, indent=1) + "\n")
    stored.cache_clear()


EXAMPLES_STORED = ("wrap:fixtures.examples.main_grad_buffer:configured",)
"""Examples the project's tests run the whole suite against, beside the registered names: their own rows are stored
too, so each run reads them instead of generating them (a minute each)."""


def _registered_rows(kept: set[str]) -> dict[str, list[str]]:
    """Each registered implementation's own rows (every strength) that is installed here, by what they depend on,
    where none are ``kept`` for that already; the ``EXAMPLES_STORED`` too."""
    from suites.impls import REGISTRY, load_implementation

    from .space import supported_by

    out = {}
    for name in (*REGISTRY, *EXAMPLES_STORED):
        impl = load_implementation(name)
        if impl.unavailable is not None:
            print(f"{name}: not installed here ({impl.unavailable}); its rows are generated as its session starts")
            continue
        for strength in STRENGTHS:
            own = OwnRows(supported_by(impl), strength)
            if own.needed is not None and own.key not in out and own.key not in kept:
                out[own.key] = [spell(row) for row in own.generate()]
                print(f"{name}: {len(out[own.key])} rows of its own ({STRENGTHS[strength]})")
    return out


def _generator() -> str:
    from importlib.metadata import version

    return (f"covertable {version('covertable')}: greedy, then pairwise annealed for {OPTIMIZE_MS // 1000} s over the "
            f"values that mask nothing; then rows added greedily until every pair meets {TIMES} times and unmasked")


if __name__ == "__main__":
    raise SystemExit(main())
