"""Every command refuses a bad argument before any work starts: exit 2, one line naming it, nothing left behind.

The bad values are generated from each command's own parser: every typed
argument (``cli.Arg``) gets the values its kind refuses (a count below its
least, one past its most, words; a number that is negative, zero, not a
number or infinite; a folder that does not exist or is a file; a folder to
write into under a file; a run folder that holds no run, or a run of a
schema this project never wrote; a world size past this machine), every
argument with choices a name it does not know, and every command an option
it does not have. Each must exit 2 within a few seconds with one line that
names the argument and the value and says what is valid, no traceback, no
child process left running, nothing written.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from cli import Arg
from tests.pytest_run import ROOT

FIXTURE_RUN = ROOT / "fixtures" / "runs" / "20261126T143421Z"


@dataclass(frozen=True)
class Command:
    name: str
    module: str
    """Where its ``parser()`` and ``main(argv)`` live."""
    base: tuple[str, ...]
    """Arguments it takes as valid (``{tmp}`` becomes a fresh folder): a bad one added to them is refused."""


COMMANDS = (
    Command("reports", "reports.nightly.job", ("--smoke", "--out", "{tmp}/runs")),
    Command("reports.render", "reports.render.__main__", (str(FIXTURE_RUN), "--out", "{tmp}/render")),
    Command("reports.website", "reports.website.__main__", ("--root", str(FIXTURE_RUN.parent), "--out", "{tmp}/site")),
    Command("reports.tune", "reports.tune", ("--model", "llama2-7b", "--dp", "8")),
    Command("reports.compare", "reports.compare", ("--root", str(FIXTURE_RUN.parent))),
    Command("reports.trend", "reports.trend", ("--root", str(FIXTURE_RUN.parent))),
    Command("selfcheck.gate_check", "selfcheck.gate_check", ("--out", "{tmp}/gate")),
    Command("reports.gpu_check", "reports.gpu_check", ("--out", "{tmp}/gpu", "--steps", "environment")),
    Command("reports.overhead", "reports.overhead", ()),
    Command("reference.layout", "reference.layout.cli", ("--model", "llama2-7b")),
    Command("mutation", "mutation.__main__", ("--session", "{tmp}/session")),
    Command("hardware", "hardware.probe", ()),
    Command("selfcheck.site_size", "selfcheck.site_size", ("--from", str(FIXTURE_RUN))),
    Command("selfcheck.strength", "selfcheck.strength", ("--out", "{tmp}/strength")),
    Command("suites.multigpu.covering", "suites.multigpu.covering", ()),
    Command("reports.store.schema", "reports.store.schema", ()),
    Command("reports.bisect", "reports.bisect.__main__", ("--good", "HEAD~1")),
    Command("reports.conformance.releases", "reports.conformance.releases", ("--peer", "deepspeed", "--version", "0.0.0",
                                                                          "--sites", "{tmp}/sites")),
)
ENTRY_POINTS = {"reports.__main__": "reports.nightly.job", "hardware.__main__": "hardware.probe",
                "reference.layout.__main__": "reference.layout.cli"}
"""A package's ``__main__`` that only calls another module's ``main``: that module holds the parser."""
NOT_COMMANDS = {"reports.bisect.step": "git bisect run's step: started by reports.bisect with a plan it wrote"}
"""Modules ``python -m`` runs that no user types, with why."""


def bad_values(arg: Arg, tmp: Path) -> list[str]:
    """What an argument of this kind refuses."""
    a_file = tmp / "a-file"
    a_file.write_text("x")
    kind = arg.kind
    if kind in ("count", "world size"):
        values = ["-1", "many", "2.5"]
        maximum = getattr(arg, "maximum", None)
        return values + ([str(maximum + 1)] if maximum is not None else ["100000"] if kind == "world size" else [])
    if kind == "number":
        values = ["nan", "inf", "fast"]
        if getattr(arg, "above", None) is not None:
            values += [str(arg.above), "-1"]
        elif arg.minimum is not None:
            values.append(str(arg.minimum - 1))
        if arg.maximum is not None:
            values.append(str(arg.maximum * 2 + 1))
        return values
    if kind in ("runs root", "run"):
        other = tmp / "another-schema"
        other.mkdir(exist_ok=True)
        (other / "results.json").write_text(json.dumps({"schema": 99}))
        return [str(tmp / "missing"), str(a_file)] + ([str(other), str(tmp)] if kind == "run" else [])
    if kind == "file":
        return [str(tmp / "missing"), str(tmp)]
    if kind == "output folder":  # /proc: a folder whose permission bits let root in, and that refuses a file
        return [str(a_file), str(a_file / "under-a-file"), "/proc/ddpc-out"]
    if kind == "key=number":
        return ["no-number", "key=-1", "key=fast", "=1"]
    if kind in ("factory", "names"):
        return ["nonsense"]
    raise AssertionError(f"an argument of kind {kind!r}: got no bad values, but every kind should have some")


def cases() -> list:
    found = []
    for command in COMMANDS:
        parser = importlib.import_module(command.module).parser()
        found.append(pytest.param(command, "--no-such-option", None, id=f"{command.name}:--no-such-option"))
        for action in parser._actions:
            flag = action.option_strings[-1] if action.option_strings else None
            name = flag or action.dest
            if isinstance(action.type, Arg):
                found.append(pytest.param(command, flag, action.type, id=f"{command.name}:{name}"))
            elif action.choices and not isinstance(action.type, Arg):
                found.append(pytest.param(command, flag, "choice", id=f"{command.name}:{name}:choice"))
    return found


def argv_with(command: Command, flag: str | None, value: str, tmp: Path) -> list[str]:
    base = [part.replace("{tmp}", str(tmp)) for part in command.base]
    if flag is None:  # a positional: it takes the first place
        return [value, *base[1:]]
    if flag in base:
        at = base.index(flag)
        return [*base[:at], flag, value, *base[at + 2:]]
    return [*base, flag, value] if flag != "--no-such-option" else [*base, flag]


def refusal(command: Command, argv: list[str]) -> tuple[int | None, str, float]:
    main = importlib.import_module(command.module).main
    err = io.StringIO()
    start = time.monotonic()
    code = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue(), time.monotonic() - start


@pytest.mark.parametrize("command, flag, arg", cases())
def test_a_bad_argument_is_refused_in_one_line_before_any_work(command, flag, arg, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if arg is None:
        values = [None]
    elif arg == "choice":
        values = ["no-such-choice"]
    else:
        values = bad_values(arg, tmp_path)
    watched = [ROOT / "reports" / "runs", ROOT / "reports" / "site", ROOT / "reports" / "gate_check"]
    before = {p: sorted(p.iterdir()) if p.is_dir() else None for p in watched}
    children = set(psutil.Process().children(recursive=True))
    for value in values:
        argv = argv_with(command, flag, value, tmp_path)
        code, err, took = refusal(command, argv)
        lines = [line for line in err.splitlines() if line.strip()]
        said = f"python -m {command.name} {' '.join(argv)}: got exit {code} and {err!r}"
        assert code == 2, f"{said}, but should exit 2"
        assert len(lines) == 1 and "Traceback" not in err, f"{said}, but should say one line"
        named = flag or "argument"
        assert named.lstrip("-").split("-")[0] in lines[0] or (flag == "--no-such-option" and
                                                               "unrecognized" in lines[0]), f"{said}: names no {named}"
        assert value is None or value in lines[0] or repr(value) in lines[0], f"{said}: names no value"
        assert took < 10, f"{said}: took {took:.1f} s, but should refuse within seconds"
    assert set(psutil.Process().children(recursive=True)) <= children, "a child process is left running"
    assert {p: sorted(p.iterdir()) if p.is_dir() else None for p in watched} == before, "something was written"
    assert not [p for p in tmp_path.iterdir() if p.name not in ("a-file", "another-schema")], (
        f"written into the work folder: {sorted(p.name for p in tmp_path.iterdir())}")


def commands_in_the_tree(root: Path = ROOT) -> set[str]:
    """Every module ``python -m`` can run: a package's ``__main__`` and every module with a ``__main__`` guard."""
    found = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] in ("tests", "fixtures", "docs") or rel.parts[0].startswith("."):
            continue
        text = path.read_text()
        if path.name == "__main__.py" or 'if __name__ == "__main__"' in text:
            module = ".".join(rel.with_suffix("").parts)
            found.add(ENTRY_POINTS.get(module, module))
    return found


def test_every_command_and_kind_is_covered():
    kinds = {c.values[2].kind for c in cases() if isinstance(c.values[2], Arg)}
    assert {"count", "number", "file", "output folder", "run", "runs root", "world size", "key=number"} <= kinds, kinds
    missing = commands_in_the_tree() - {c.module for c in COMMANDS} - set(NOT_COMMANDS)
    assert not missing, f"commands with no bad-argument check: got {sorted(missing)}, but every command should be in COMMANDS"
