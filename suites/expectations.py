"""Per-implementation skip and xfail lists, kept in ``fixtures/expectations/<name>.toml``.

Format::

    [[skip]]
    test = "suites/layout/test_dtype_grouping.py::test_one_buffer_per_dtype_pair"
    reason = "why this check does not apply to the implementation"

    [[xfail]]
    test = "suites/layout/test_golden.py::test_*"     # fnmatch patterns allowed
    reason = "a known, recorded difference"
    versions = "<0.19"      # optional: only for these versions of the implementation
    run = false             # optional, xfail only: a known failure that hangs (until the group's timeout)
                            # is recorded without running it; --runxfail runs it
    unless = ["*ep2*"]      # optional: tests these patterns match are left out (where a region of the
                            # compositions holds some that pass)

A variant with findings of its own keeps its own list and names the lists
whose entries still apply to it (its parent's) in a top-level ``include``::

    include = ["torch"]     # torch.toml's entries first, then this list's

``versions`` takes PEP 440 specifiers: an entry with it applies only when the
implementation's version satisfies them, so one list serves several releases
of a peer. An entry that matches no collected test draws a warning, so stale
entries do not silently pile up.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

EXPECTATIONS_DIR = Path(
    os.environ.get("DDPC_EXPECTATIONS_DIR")
    or Path(__file__).resolve().parent.parent / "fixtures" / "expectations"
)


@dataclass(frozen=True)
class Expectation:
    kind: str  # "skip" or "xfail"
    test: str
    reason: str
    versions: SpecifierSet = SpecifierSet()  # empty: every version
    run: bool = True
    """An xfail that is recorded without running (it hangs until the group's timeout)."""
    unless: tuple[str, ...] = ()
    """Patterns of the tests ``test`` matches that the entry leaves out."""

    def matches(self, nodeid: str) -> bool:
        if any(fnmatch.fnmatchcase(nodeid, pattern) for pattern in self.unless):
            return False
        # A whole id, pasted as it is, matches itself: in a glob its brackets would be a character class.
        return nodeid == self.test or fnmatch.fnmatchcase(nodeid, self.test) or nodeid.startswith(self.test + "[")

    def applies_to(self, version: str) -> bool:
        """Whether this entry is for ``version``; never for a string that is no version ("not installed")."""
        if not self.versions:
            return True
        try:
            return self.versions.contains(Version(version), prereleases=True)
        except InvalidVersion:
            return False


def load_expectations(impl_name: str, directory: Path = EXPECTATIONS_DIR, *,
                      version: str | None = None, _including: tuple[str, ...] = ()) -> list[Expectation]:
    """The entries for ``impl_name``, those of the lists it includes first; with ``version``, only those that
    apply to it."""
    path = directory / f"{impl_name}.toml"
    if not path.exists():
        if _including:
            raise ValueError(f"{directory / (_including[-1] + '.toml')}: include names {impl_name!r}, but should "
                             f"name a list in {directory}: {path.name} does not exist")
        return []
    data = tomllib.loads(path.read_text())
    include = data.get("include", [])
    if not isinstance(include, list) or not all(isinstance(n, str) and n for n in include):
        raise ValueError(f"{path}: include is {include!r}, but should be a list of the names of other lists")
    if impl_name in _including or impl_name in include:
        raise ValueError(f"{path}: include makes a cycle ({' -> '.join((*_including, impl_name))}), but a list "
                         "should include only lists that do not include it")
    entries = [e for name in include
               for e in load_expectations(name, directory, version=version, _including=(*_including, impl_name))]
    for kind in ("skip", "xfail"):
        for i, entry in enumerate(data.get(kind, [])):
            if not entry.get("test") or not entry.get("reason"):
                raise ValueError(
                    f"{path}: {kind}[{i}] is {entry!r}, but should have a non-empty 'test' and "
                    "'reason'"
                )
            try:
                versions = SpecifierSet(entry.get("versions", ""))
            except InvalidSpecifier:
                raise ValueError(
                    f"{path}: {kind}[{i}] versions is {entry['versions']!r}, but should be PEP 440 "
                    "version specifiers such as '<0.19' or '>=0.16,<0.17'"
                ) from None
            run = entry.get("run", True)
            if not isinstance(run, bool) or kind == "skip" and "run" in entry:
                raise ValueError(f"{path}: {kind}[{i}] run is {run!r}, but should be true or false, and only on an "
                                 "xfail")
            unless = entry.get("unless", [])
            if not isinstance(unless, list) or not all(isinstance(u, str) and u for u in unless):
                raise ValueError(f"{path}: {kind}[{i}] unless is {unless!r}, but should be a list of test patterns")
            entries.append(Expectation(kind, entry["test"], entry["reason"], versions, run, tuple(unless)))
    unknown = set(data) - {"include", "skip", "xfail"}
    if unknown:
        raise ValueError(f"{path}: got tables {sorted(unknown)}, but should only have include, skip, xfail")
    return [e for e in entries if version is None or e.applies_to(version)]
