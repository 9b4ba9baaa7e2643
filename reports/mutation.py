"""Mutation score of the suites over the reference: ``python -m reports.mutation``.

cosmic-ray mutates one spot of ``reference/`` at a time and runs both suites
(plain mode, 2 ranks, ``-x``) and the tests of the reference's own public
defaults and errors, which the suites cannot reach through an adapter; a
mutant that passes them all *survived*. The
run works in a scratch copy of the tracked tree, because cosmic-ray rewrites
files in place and the suites' spawned ranks import from disk.

A full run (about 1,000 mutants at 20-45 s each) does not fit a 2-core
nightly slot, so the run samples: a seeded, stratified random sample, the
same share of every module. Mutants inside type annotations are left out as
equivalent by construction (``from __future__ import annotations`` never
evaluates them). Survivors triaged as equivalent are listed, with why, in
``fixtures/expectations/mutants.toml``; the score counts killed among the
sampled mutants that are not equivalent. The summary goes to
``reports/mutation-score.json``, which the report's strength section shows.

Needs ``pip install -r requirements-mutation.txt``; not run in CI.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import random
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COSMIC_RAY = str(Path(sys.executable).parent / "cosmic-ray")
SCORE_FILE = ROOT / "reports" / "mutation-score.json"
EQUIVALENTS_FILE = ROOT / "fixtures" / "expectations" / "mutants.toml"
MODULES = (
    "reference/layout/planner.py", "reference/layout/policies.py", "reference/buffer.py", "reference/config.py",
    "reference/clip.py", "reference/optimizer.py", "reference/finalize.py", "reference/bucket_group.py",
    "reference/ddp.py",
)
TEST_COMMAND = (f"{sys.executable} -m pytest -x -q -p no:cacheprovider --hypothesis-profile=strength "
                "--pg-timeout=30 suites/multigpu suites/layout "
                "tests/test_config_errors.py tests/test_reference_api.py")


def config_text(modules: Sequence[str], timeout: float) -> str:
    paths = ", ".join(json.dumps(m) for m in modules)
    return (f"[cosmic-ray]\nmodule-path = [{paths}]\ntimeout = {timeout}\nexcluded-modules = []\n"
            f"test-command = {json.dumps(TEST_COMMAND)}\n\n[cosmic-ray.distributor]\nname = \"local\"\n")


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
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


def key(spec) -> str:
    """A mutant's name for triage: module, line, operator, occurrence."""
    return f"{spec.module_path}:{spec.start_pos[0]}:{spec.operator_name}:{spec.occurrence}"


def choose(db, tree: Path, sample: int, seed: int) -> dict:
    """Mark annotation mutants and the unsampled rest as skipped; return the population per module."""
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans = {m: annotation_spans(tree / m) for m in MODULES}
    items = sorted(db.pending_work_items, key=lambda item: key(item.mutations[0]))
    in_annotation = {i.job_id for i in items
                     if any(a <= tuple(i.mutations[0].start_pos) < b for a, b in spans[str(i.mutations[0].module_path)])}
    eligible = [i for i in items if i.job_id not in in_annotation]
    by_module: dict[str, list] = defaultdict(list)
    for item in eligible:
        by_module[str(item.mutations[0].module_path)].append(item)
    share = min(1.0, sample / max(1, len(eligible)))
    rng = random.Random(seed)
    chosen = set()
    for module in MODULES:
        pool = by_module[module]
        chosen |= {i.job_id for i in rng.sample(pool, min(len(pool), max(1, round(share * len(pool)))))}
    for item in items:
        if item.job_id not in chosen:
            reason = "in a type annotation (never evaluated)" if item.job_id in in_annotation else "not sampled"
            db.set_result(item.job_id, WorkResult(output=reason, worker_outcome=WorkerOutcome.SKIPPED))
    return {"annotation": len(in_annotation), "eligible": {m: len(by_module[m]) for m in MODULES},
            "sampled": len(chosen)}


def load_equivalents(path: Path = EQUIVALENTS_FILE) -> dict[str, str]:
    """``{mutant key: why it is equivalent}`` from the triage file."""
    if not path.exists():
        return {}
    entries = tomllib.loads(path.read_text()).get("equivalent", [])
    for i, entry in enumerate(entries):
        if not {"mutant", "why"} <= entry.keys():
            raise ValueError(f"{path}: equivalent[{i}] has keys {sorted(entry)}, but should have 'mutant' and 'why'")
    return {e["mutant"]: e["why"] for e in entries}


def summarize(db, population: dict, equivalents: dict[str, str], seed: int, commit: str, uncommitted: bool) -> dict:
    """Killed, survived and equivalent per module, and the score over the non-equivalent ones."""
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    counts: dict[str, Counter] = defaultdict(Counter)
    survivors = []
    for item, result in db.completed_work_items:
        if result.worker_outcome == WorkerOutcome.SKIPPED:
            continue
        spec = item.mutations[0]
        name = key(spec)
        module = str(spec.module_path)
        if result.test_outcome == TestOutcome.SURVIVED:
            if name in equivalents:
                counts[module]["equivalent"] += 1
            else:
                counts[module]["survived"] += 1
                survivors.append({"mutant": name, "diff": result.diff})
        else:  # killed, or incompetent: the mutant broke the code before any test could pass
            counts[module]["killed"] += 1
    killed = sum(c["killed"] for c in counts.values())
    scored = killed + sum(c["survived"] for c in counts.values())
    return {
        "date": datetime.date.today().isoformat(), "commit": commit, "uncommitted": uncommitted,
        "tool": "cosmic-ray", "seed": seed,
        "population": population, "per_module": {m: dict(counts[m]) for m in MODULES},
        "killed": killed, "non_equivalent": scored, "score": killed / scored if scored else None,
        "survivors": sorted(survivors, key=lambda s: s["mutant"]),
    }


def forget_survivors(session: Path, equivalents: dict[str, str]) -> int:
    """Drop the results of untriaged survivors, so ``cosmic-ray exec`` runs them again."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome

    with use_db(str(session), WorkDB.Mode.open) as db:
        again = [item.job_id for item, result in db.completed_work_items
                 if result.test_outcome == TestOutcome.SURVIVED and key(item.mutations[0]) not in equivalents]
    with sqlite3.connect(session) as con:
        con.executemany("DELETE FROM work_results WHERE job_id = ?", [(j,) for j in again])
    return len(again)


def copy_tree(dest: Path) -> None:
    """The files git tracks or would track (not ignored), as they are on disk now."""
    for name in filter(None, git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def score_markdown(path: Path = SCORE_FILE) -> str:
    """The last measured score, for the report's strength section."""
    if not path.exists():
        return "Mutation score: not measured yet (`python -m reports.mutation`)."
    s = json.loads(path.read_text())
    return (f"Mutation score (cosmic-ray over `reference/`, measured {s['date']} at {s['commit'][:10]}"
            f"{' with uncommitted changes' if s.get('uncommitted') else ''}): "
            f"**{s['score']:.0%}** of non-equivalent mutants killed ({s['killed']} of {s['non_equivalent']}; "
            f"a seeded sample of {s['population']['sampled']} of "
            f"{sum(s['population']['eligible'].values())} mutants, "
            f"{sum(c.get('equivalent', 0) for c in s['per_module'].values())} triaged equivalent). "
            "See docs/mutation.md.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=120, help="mutants to run, spread over the modules (default 120)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant before it counts as killed")
    parser.add_argument("--keep", type=Path, help="keep the session database here (default: thrown away)")
    parser.add_argument("--resume", type=Path, metavar="SESSION",
                        help="rerun the untriaged survivors of a kept session against the current suites")
    args = parser.parse_args(argv)
    if args.sample < 1:
        parser.error(f"--sample: got {args.sample}, but should be at least 1")
    try:
        from cosmic_ray.work_db import WorkDB, use_db
    except ImportError:
        parser.error("cosmic-ray is not installed: pip install -r requirements-mutation.txt")
    commit = git("rev-parse", "HEAD").strip()
    uncommitted = bool(git("status", "--porcelain").strip())
    if args.resume:
        previous = json.loads(SCORE_FILE.read_text())
        if git("diff", "--stat", previous["commit"], "--", *MODULES).strip():
            parser.error(f"--resume: reference/ changed since {previous['commit'][:10]}, where the session's mutants "
                         "were placed; they would land on the wrong lines. Run without --resume")
    with tempfile.TemporaryDirectory(prefix="mutation-") as scratch:
        tree = Path(scratch)
        copy_tree(tree)
        (tree / "cosmic-ray.toml").write_text(config_text(MODULES, args.timeout))
        session = tree / "session.sqlite"
        baseline = subprocess.run(shlex.split(TEST_COMMAND), cwd=tree, capture_output=True, text=True, check=False)
        if baseline.returncode != 0:
            print(baseline.stdout[-3000:], file=sys.stderr)
            parser.error(f"the tests fail on the unmutated tree (exit {baseline.returncode}), but should pass: "
                         "every mutant would count as killed")
        if args.resume:
            shutil.copy2(args.resume, session)
            population, args.seed = previous["population"], previous["seed"]
            rerun = forget_survivors(session, load_equivalents())
            print(f"rerunning {rerun} surviving mutants", flush=True)
        else:
            subprocess.run([COSMIC_RAY, "init", "cosmic-ray.toml", session.name], cwd=tree, check=True)
            with use_db(str(session), WorkDB.Mode.open) as db:
                population = choose(db, tree, args.sample, args.seed)
            print(f"running {population['sampled']} mutants (about 20-45 s each)", flush=True)
        subprocess.run([COSMIC_RAY, "exec", "cosmic-ray.toml", session.name], cwd=tree, check=True)
        with use_db(str(session), WorkDB.Mode.open) as db:
            summary = summarize(db, population, load_equivalents(), args.seed, commit, uncommitted)
        if args.keep:
            shutil.copy2(session, args.keep)
    SCORE_FILE.write_text(json.dumps(summary, indent=1) + "\n")
    print(score_markdown())
    for s in summary["survivors"]:
        print(f"survived: {s['mutant']}\n{s['diff']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
