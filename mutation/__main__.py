"""``python -m mutation``: start, continue or rerun a mutation session, then summarize it."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from cli import Count, OutFolder, Parser, Real
from datamodel import from_json
from reports.render.mutation import summary_markdown
from reports.store.model import MutationScore
from reports.store.mutation_score import SCORE_FILE

from .checks import MODULES, command
from .population import Mutant, choose, find_mutants, run_order
from .runner import copy_tree, git, run_checks, run_mutant

from .score import load_equivalents, summarize, verdict
from .session import MANIFEST, Session, SessionError, fingerprint, locked
from .sitting import run_sitting

DEFAULTS = {"modules": list(MODULES), "whole": False, "sample": 120, "seed": 0}


def parser() -> Parser:
    p = Parser(prog="python -m mutation", description="Mutation score of the checks over the reference: a sample or "
               "whole modules, in sessions that continue where they stopped.")
    p.add_argument("--module", action="append", choices=MODULES, metavar="PATH",
                   help=f"a module to mutate, repeatable (default: all of {', '.join(MODULES)})")
    p.add_argument("--whole", action="store_true", default=None,
                   help="run every mutant of the modules, not a sample")
    p.add_argument("--sample", type=Count(1), help=f"mutants to sample, spread over the modules (default "
                   f"{DEFAULTS['sample']})")
    p.add_argument("--seed", type=Count(0), help=f"seed of the sample and of the run order (default {DEFAULTS['seed']})")
    p.add_argument("--session", type=OutFolder("the session's folder"), metavar="DIR",
                   help="keep the session here; the same command again continues it (default: a throwaway one)")
    p.add_argument("--resume", action="store_true",
                   help="rerun the untriaged survivors of a finished --session against the current checks")
    p.add_argument("--max-mutants", type=Count(1), metavar="N", help="stop after N mutants; run again to continue")
    p.add_argument("--max-minutes", type=Real(above=0, unit="minutes"), metavar="M",
                   help="start no mutant after M minutes; run again to continue")
    p.add_argument("--timeout", type=Real(above=0, unit="seconds"), default=300.0,
                   help="seconds per mutant before it counts as killed")
    return p


def check_arguments(p: Parser, args: argparse.Namespace) -> None:
    if args.whole and args.sample is not None:
        p.error(f"--sample: got {args.sample} with --whole, but should be left out: --whole runs every mutant")
    if args.resume and not args.session:
        p.error("--resume: got no --session, but should name the session whose survivors to rerun")


def requested_options(args: argparse.Namespace) -> dict:
    """The options given on the command line (None: not given), modules in their canonical order."""
    modules = None if args.module is None else [m for m in MODULES if m in args.module]
    return {"modules": modules, "whole": args.whole, "sample": args.sample, "seed": args.seed}


def start(path: Path, tree: Path, requested: dict) -> Session:
    """A new session: the modules' populations, the chosen mutants in run order, saved before any runs."""
    if any(p.name != "lock" for p in path.iterdir()):
        raise SessionError(f"--session: got {path}, which holds files but no {MANIFEST}, but should be a session "
                           "directory or a new one: name another --session directory")
    options = {name: DEFAULTS[name] if value is None else value for name, value in requested.items()}
    found = {module: find_mutants(tree, module) for module in options["modules"]}
    chosen = choose({m: eligible for m, (eligible, _) in found.items()}, options["whole"], options["sample"],
                    options["seed"])
    modules = {m: {"mode": "whole" if options["whole"] else "sampled", "sha256": fingerprint(tree / m),
                   "mutants": len(eligible) + len(annotated), "in_annotations": len(annotated),
                   "eligible": len(eligible)} for m, (eligible, annotated) in found.items()}
    session = Session(path, git("rev-parse", "HEAD").strip(), bool(git("status", "--porcelain").strip()), options,
                      modules, [m.key for m in run_order(chosen, options["seed"])])
    session.save()
    return session


def open_or_start(path: Path, tree: Path, requested: dict) -> Session:
    if not (path / MANIFEST).exists():
        return start(path, tree, requested)
    session = Session.open(path)
    problems = session.conflicts(requested)
    if problems:
        raise SessionError("\n".join(problems))
    return session


def refuse_if_changed(session: Session, tree: Path) -> None:
    problems = session.changed_modules(tree)
    if problems:
        raise SessionError("\n".join(problems))


def requeue_survivors(session: Session, tree: Path) -> None:
    """--resume: forget the untriaged survivors of a finished session, so this run checks them again."""
    refuse_if_changed(session, tree)
    results = session.results()
    pending = session.pending(results)
    if pending:
        raise SessionError(f"--resume: got a session with {len(pending)} mutants pending, but should have none: "
                           "continue it without --resume first")
    equivalents = load_equivalents()
    again = [k for k, r in results.items() if verdict(r, equivalents) == "survived"]
    session.forget(again)
    print(f"rerunning {len(again)} surviving mutants", flush=True)


def run_pending(session: Session, tree: Path, args: argparse.Namespace, started: float) -> None:
    """Check the modules and the unmutated tree, then run pending mutants within the limits."""
    pending = session.pending(session.results())
    if not pending:
        return
    refuse_if_changed(session, tree)
    modules = [m for m in MODULES if any(Mutant.from_key(k).module == m for k in pending)]
    passed, output = run_checks(command(modules, tree), tree, timeout=None)
    if not passed:
        print(output[-3000:], file=sys.stderr)
        raise SessionError("the checks fail on the unmutated tree, but should pass: every mutant would count as "
                           "killed")
    print(f"{len(pending)} mutants pending (a survivor runs all its checks: docs/mutation.md says how long)",
          flush=True)
    run_sitting(pending, lambda key: run_mutant(tree, key, args.timeout), session.record, args.max_mutants,
                args.max_minutes, started)


def report(session: Session) -> None:
    """A finished session writes the score file; an unfinished one says how far it got."""
    results = session.results()
    summary = summarize(session, results, load_equivalents())
    pending = len(session.pending(results))
    if pending:
        print(f"{len(results)} of {len(session.order)} mutants done, {pending} pending: run the same command "
              f"to continue. So far:\n{summary_markdown(from_json(MutationScore, summary))}")
        return
    SCORE_FILE.write_text(json.dumps(summary, indent=1) + "\n")
    print(summary_markdown(from_json(MutationScore, summary)))
    for s in summary["survivors"]:
        print(f"survived: {s['mutant']}\n{s['diff']}")


def interrupt(signum, frame) -> None:
    """SIGTERM ends the run as Ctrl-C does: the mutant in flight and its ranks stop, the results stay."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    check_arguments(p, args)
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        p.error("cosmic-ray is not installed: pip install -r requirements-mutation.txt")
    started = time.monotonic()
    signal.signal(signal.SIGTERM, interrupt)
    try:
        with tempfile.TemporaryDirectory(prefix="mutation-") as scratch:
            tree = Path(scratch) / "tree"
            copy_tree(tree)
            path = args.session or Path(scratch) / "session"
            with locked(path):
                session = open_or_start(path, tree, requested_options(args))
                if args.resume:
                    requeue_survivors(session, tree)
                run_pending(session, tree, args, started)
                report(session)
    except SessionError as e:
        p.error(str(e))
    except KeyboardInterrupt:
        print("interrupted: the mutant in flight is not recorded; every result before it is kept"
              f"{'' if args.session else ' lost with the throwaway session (use --session)'}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
