"""A mutation session on disk: which mutants it runs, which are done, and whether it may go on.

A session is a directory: ``session.json``, written once when the session
starts (the commit, the options, each mutated module's population and content
hash, the chosen mutants in run order), and ``results/``, one file per mutant
done, each written whole and renamed into place, so an interrupted run loses
at most the mutant in flight. The content hashes guard the mutants' places: a
session whose modules changed since would mutate the wrong lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

MANIFEST = "session.json"
RESULTS = "results"
FORMAT = 1
FLAGS = {"modules": "--module", "whole": "--whole", "sample": "--sample", "seed": "--seed"}


class SessionError(Exception):
    """A session cannot be started, continued or rerun as asked; the message says why and what to do."""


def fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Session:
    path: Path
    commit: str
    uncommitted: bool
    options: dict  # modules, whole, sample, seed: what chose the mutants
    modules: dict[str, dict]  # module: mode, sha256, mutants, in_annotations, eligible
    order: list[str]  # the chosen mutants' keys, in run order

    @classmethod
    def open(cls, path: Path) -> Session:
        manifest = json.loads((path / MANIFEST).read_text())
        if manifest.get("format") != FORMAT:
            raise SessionError(f"{path / MANIFEST}: got format {manifest.get('format')!r}, but should be {FORMAT}: "
                               "start a new session with another --session directory")
        del manifest["format"]
        return cls(path=path, **manifest)

    def save(self) -> None:
        manifest = {"format": FORMAT, **asdict(self)}
        del manifest["path"]
        (self.path / RESULTS).mkdir(parents=True, exist_ok=True)
        write_whole(self.path / MANIFEST, json.dumps(manifest, indent=1) + "\n")

    def results(self) -> dict[str, dict]:
        """``{mutant key: result}`` of every mutant done."""
        loaded = (json.loads(p.read_text()) for p in sorted((self.path / RESULTS).glob("*.json")))
        return {r["mutant"]: r for r in loaded}

    def record(self, result: dict) -> None:
        write_whole(self.result_path(result["mutant"]), json.dumps(result, indent=1) + "\n")

    def forget(self, keys: Iterable[str]) -> None:
        """Drop the results of ``keys``, so the next run does them again."""
        for key in keys:
            self.result_path(key).unlink()

    def result_path(self, key: str) -> Path:
        return self.path / RESULTS / f"{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"

    def pending(self, results: Mapping[str, dict]) -> list[str]:
        return [key for key in self.order if key not in results]

    def conflicts(self, requested: Mapping[str, object]) -> list[str]:
        """Options given now that differ from the ones the session was started with (None: not given)."""
        return [f"{FLAGS[name]}: got {value!r}, but session {self.path} was started with {self.options[name]!r}: "
                "leave the option out to continue it, or name another --session directory"
                for name, value in requested.items() if value is not None and value != self.options[name]]

    def changed_modules(self, tree: Path) -> list[str]:
        """Why each module whose content differs from when the session placed its mutants cannot run."""
        at = f"commit {self.commit[:10]}{' with uncommitted changes' if self.uncommitted else ''}"
        problems = []
        for module, info in self.modules.items():
            now = fingerprint(tree / module)
            if now != info["sha256"]:
                how = "" if self.uncommitted else f" (git checkout {self.commit[:10]} -- {module})"
                problems.append(
                    f"{module}: got content sha256 {now[:12]}, but should be {info['sha256'][:12]} as when session "
                    f"{self.path} placed its mutants (at {at}); they would land on the wrong lines. Restore the "
                    f"file as it was{how} to continue this session, or start a new one "
                    "with another --session directory")
        return problems


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never a part."""
    part = path.with_name(path.name + ".part")
    with open(part, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the session directory (created if new) for one run; the lock ends with the process, however."""
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionError(f"--session: got {path}, but another run holds it: wait for that run to end, "
                               "or name another --session directory") from None
        yield
