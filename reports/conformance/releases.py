"""The release matrix: the multi-rank suite against the peers' older releases (``python -m
reports.conformance.releases``, ``tox -e releases``; nightly, outside CI).

Each release is installed on its own (no dependencies: the environment's serve) into a folder of the user's cache
(``--sites``), which the suite's child imports first. A bug a release shipped is an entry of its peer's expectation list whose ``versions`` name the
releases it affects, so the suite runs with ``xfail_strict``: a release passes the matrix when every check it
fails is recorded for it, and every recorded failure still fails. A fixed release where a finding is recorded
(an unexpected pass), or a new failure, fails the matrix and names the check. docs/peers.md has the table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from packaging.version import InvalidVersion, Version
from tabulate import tabulate

from cli import OutFolder, Parser

from .records import SuiteRun
from .suites import run_suite

SUITE = "suites/multigpu"
SITES = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ddp-conformance" / "releases"
"""Where the releases are installed: outside the checkout, whose own tests read every module in its tree."""
STRICT = ("-o", "xfail_strict=true")


@dataclass(frozen=True)
class Check:
    """One session of the multi-rank suite against a registered variant of the peer."""

    impl: str
    args: tuple[str, ...] = ("--compositions=none",)


@dataclass(frozen=True)
class Line:
    """A peer's releases under test and what runs against each."""

    distribution: str
    versions: tuple[str, ...]
    checks: tuple[Check, ...]


LINES = (
    # 0.1.0-0.2.3 scale the accumulated grad shard (Megatron-LM PR #3023); 0.3.1 neither that nor the optimizer
    # priming of 0.4.0-0.6.1 (issue #5974); 0.6.1 the newest.
    Line("megatron-fsdp", ("0.2.3", "0.3.1", "0.4.0", "0.6.1"),
         (Check("megatron-fsdp"), Check("megatron-fsdp-no-shard"))),
    # The offload findings (a stale clipping norm; microbatches dropped, PR #7981), round_robin_gradients' reads
    # and the BF16_Optimizer's accumulation (PR #7985, 0.18.x), back to the 0.17 line.
    Line("deepspeed", ("0.17.6", "0.18.6", "0.19.8"),
         (Check("deepspeed"),
          Check("deepspeed-offload", ("--case", "clip=l2,loss=per-token")),
          Check("deepspeed-offload", ("--case", "microbatches=2")),
          Check("deepspeed-bf16", ("--case", "overlap=off,bucket=one,microbatches=2,precision=bf16-fp32-grads")),
          Check("deepspeed-bf16", ("--case", "overlap=off,bucket=one,precision=bf16-fp32-grads,loss=per-token")),
          Check("deepspeed-round-robin",
                ("--compositions=none", "--only", "*test_grad_sync_matches_torch_ddp?allreduce-overlap-tiny?")))),
)
NAMES = {line.distribution: line for line in LINES}


@dataclass(frozen=True)
class Row:
    """One check against one release, as the table and the JSON show it."""

    distribution: str
    version: str
    impl: str
    implementation: str
    ok: bool
    status: str
    passed: int
    xfailed: int
    failed: int
    errors: int
    skipped: int
    seconds: float
    failures: tuple[str, ...]


def install(distribution: str, version: str, sites: Path) -> Path:
    """The folder holding ``distribution==version`` alone, installed there once."""
    folder = sites / f"{distribution}-{version}"
    if (folder / ".complete").exists():
        return folder
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                           "--no-build-isolation", "--upgrade", "--target", str(folder), f"{distribution}=={version}"],
                          capture_output=True, text=True, env={**os.environ, "DS_BUILD_OPS": "0"})
    if done.returncode:
        raise RuntimeError(f"{distribution}=={version} did not install: {done.stderr.strip()[-400:]}")
    (folder / ".complete").touch()
    return folder


def row(line: Line, version: str, check: Check, run: SuiteRun) -> Row:
    """A check passes the matrix where its suite passed, something ran, and against the release asked for: an
    adapter that cannot import a release names it "not installed" and skips every check."""
    asked = run.implementation == f"{check.impl} {version}"
    ok = run.status == "pass" and run.passed + run.xfailed > 0 and asked
    status = run.status if asked else f"ran {run.implementation or 'nothing'}"
    wrong = () if asked else (f"asked for {check.impl} {version}, but the suite ran {run.implementation or 'nothing'}",)
    return Row(line.distribution, version, check.impl, run.implementation, ok, status, run.passed, run.xfailed,
               run.failed, run.errors, run.skipped, round(run.seconds, 1),
               tuple(str(f) for f in run.failures) + wrong)


def parser() -> Parser:
    p = Parser(prog="python -m reports.conformance.releases",
               description="The multi-rank suite against the peers' older releases (the release matrix).")
    p.add_argument("--peer", action="append", choices=sorted(NAMES),
                   help="repeatable: a peer whose releases run (default: every one)")
    p.add_argument("--version", action="append", metavar="VERSION",
                   help="repeatable: a release to run instead of the peer's list (with exactly one --peer)")
    p.add_argument("--sites", type=OutFolder("the folder the releases are installed into"), default=SITES,
                   help=f"where each release is installed, once (default: {SITES})")
    p.add_argument("--out", type=OutFolder("the matrix's folder"), help="a folder for releases.json, the rows")
    return p


def parse_args(argv: Sequence[str] | None):
    p = parser()
    args = p.parse_args(argv)
    if args.version and len(args.peer or ()) != 1:
        p.error(f"--version: got {args.version} with --peer {args.peer or 'none'}, but should come with exactly "
                "one --peer")
    for text in args.version or ():
        try:
            Version(text)
        except InvalidVersion:
            p.error(f"--version: got {text!r}, but should be a release number such as 0.6.1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = []
    for line in (NAMES[name] for name in args.peer or NAMES):
        for version in args.version or line.versions:
            try:
                site = install(line.distribution, version, args.sites)
            except RuntimeError as exc:
                print(f"warning: {exc}", file=sys.stderr, flush=True)
                rows.extend(Row(line.distribution, version, c.impl, "", False, "not installed", 0, 0, 0, 1, 0, 0.0,
                                (str(exc),)) for c in line.checks)
                continue
            for check in line.checks:
                print(f"[releases] {line.distribution} {version}: {check.impl}", file=sys.stderr, flush=True)
                rows.append(row(line, version, check, run_suite(SUITE, check.impl, [*check.args, *STRICT],
                                                                first=site)))
    print(tabulate([(r.distribution, r.version, r.impl, r.status, r.passed, r.xfailed, r.failed + r.errors,
                     r.skipped, r.seconds) for r in rows],
                   headers=("peer", "release", "variant", "status", "passed", "recorded findings", "failed",
                            "skipped", "seconds"), tablefmt="github"))
    for r in (r for r in rows if not r.ok):
        print(f"\n{r.distribution} {r.version} {r.impl}:", *(f"  {f}" for f in r.failures[:10]), sep="\n")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "releases.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
