"""Per-implementation skip and xfail lists, kept in ``fixtures/expectations/<name>.toml``.

Format::

    [[skip]]
    test = "suites/layout/test_dtype_grouping.py::test_one_buffer_per_dtype_pair"
    reason = "why this check does not apply to the implementation"

    [[xfail]]
    test = "suites/layout/test_golden.py::test_*"     # fnmatch patterns allowed
    reason = "a known, recorded difference"

An entry that matches no collected test draws a warning, so stale entries
do not silently pile up.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

EXPECTATIONS_DIR = Path(
    os.environ.get("DDPC_EXPECTATIONS_DIR")
    or Path(__file__).resolve().parent.parent / "fixtures" / "expectations"
)


@dataclass(frozen=True)
class Expectation:
    kind: str  # "skip" or "xfail"
    test: str
    reason: str

    def matches(self, nodeid: str) -> bool:
        return fnmatch.fnmatchcase(nodeid, self.test) or nodeid.startswith(self.test + "[")


def load_expectations(impl_name: str, directory: Path = EXPECTATIONS_DIR) -> list[Expectation]:
    path = directory / f"{impl_name}.toml"
    if not path.exists():
        return []
    data = tomllib.loads(path.read_text())
    entries = []
    for kind in ("skip", "xfail"):
        for i, entry in enumerate(data.get(kind, [])):
            if not entry.get("test") or not entry.get("reason"):
                raise ValueError(
                    f"{path}: {kind}[{i}] is {entry!r}, but should have a non-empty 'test' and "
                    "'reason'"
                )
            entries.append(Expectation(kind, entry["test"], entry["reason"]))
    unknown = set(data) - {"skip", "xfail"}
    if unknown:
        raise ValueError(f"{path}: got tables {sorted(unknown)}, but should only have skip, xfail")
    return entries
