"""Failures grouped by cause: one line per exception and the place it was raised, with how many it ended.

A run where 174 checks fail on one exception is one finding, not 174. A
test's cause is the last exception its report names (for a check that
failed on the ranks, the rank's own traceback inside the harness's message)
and the innermost frame that raised it; tests with the same exception
message and frame count as one cause. Numbers inside messages (addresses,
sizes, rank ids) are kept: two sizes that differ are two findings.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

_EXCEPTION = re.compile(r"^\s*(?:E\s+)?((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure|"
                        r"Warning|Timeout|Mismatch|Failed))(?::\s*(.*))?$")
_PYTHON_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_PYTEST_FRAME = re.compile(r"^(\S+\.py):(\d+): ")
ROOT = f"{Path(__file__).resolve().parent.parent}/"


@dataclass(frozen=True)
class Cause:
    exception: str
    """The exception's type and first line, e.g. 'RuntimeError: No backend type associated with device type cuda'."""
    where: str
    """The innermost frame that raised it, 'path:line in function', or '' when the text names none."""


def cause_of(text: str) -> Cause:
    """The cause a failure's text (a traceback, pytest's report of one, or a log) names."""
    lines = text.splitlines()
    exception = ""
    for line in reversed(lines):
        match = _EXCEPTION.match(line)
        if match:
            exception = f"{match.group(1)}: {match.group(2)}".rstrip(": ") if match.group(2) else match.group(1)
            break
    frames = _PYTHON_FRAME.findall(text)
    if frames:
        path, line, function = frames[-1]
        where = f"{_short(path)}:{line} in {function}"
    else:
        pytest_frames = [m for m in map(_PYTEST_FRAME.match, lines) if m]
        where = f"{_short(pytest_frames[-1].group(1))}:{pytest_frames[-1].group(2)}" if pytest_frames else ""
    if not exception:
        exception = next((line.strip() for line in reversed(lines) if line.strip()), "no output")[:200]
    return Cause(exception[:300], where)


def causes_in_junit(path: Path) -> Counter[Cause]:
    """Every failed or erroring test of a JUnit XML file, counted by cause."""
    counts: Counter[Cause] = Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        for bad in (*case.findall("failure"), *case.findall("error")):
            counts[cause_of(f"{bad.get('message') or ''}\n{bad.text or ''}")] += 1
    return counts


def causes_markdown(counts: Counter[Cause]) -> str:
    """One line per cause, the commonest first: '174 x RuntimeError: ... (raised at file:line in f)'."""
    return "\n".join(f"- {n} x `{cause.exception}`" + (f" (raised at `{cause.where}`)" if cause.where else "")
                     for cause, n in counts.most_common())


def _short(path: str) -> str:
    """A path from its package on: '.../site-packages/torch/distributed/x.py' reads 'torch/distributed/x.py', and
    this project's files read from its root."""
    for marker in (ROOT, "site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path
