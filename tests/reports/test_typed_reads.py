"""No reader of results indexes a record by a string key: the results are typed, and read by attribute.

The scan reads every module of ``reports/`` outside ``reports/store/`` (the one
place that turns JSON into the model) and flags ``x["field"]`` and
``x.get("field")`` where ``field`` names a field of any type of the model: a
reader that went back to dicts. What is not a result is listed with why.
"""

import ast
from pathlib import Path

from datamodel.codec import json_key, typed_fields
from reports.store.schema import model_types
from tests.pytest_run import ROOT

NOT_RESULTS = {
    ("reports/conformance/suites.py", "case"): "a JUnit XML element's attributes",
    ("reports/conformance/suites.py", "child"): "a JUnit XML element's attributes",
    ("reports/failure_causes.py", "bad"): "a JUnit XML element's attributes",
    ("reports/gate_check.py", "r"): "the gate check's own table rows, written to gate_check.md",
    ("reports/website/gate.py", "row"): "a table row the page draws, its status given a symbol",
}
"""(module, receiver) -> why its string keys are not results."""


def field_names() -> set[str]:
    return {json_key(f) for cls in model_types() for f, _ in typed_fields(cls)}


def string_key_reads(path: Path, fields: set[str]) -> list[tuple[str, int, str]]:
    """(receiver, line, key) of each read of a model field by string key in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.ctx, ast.Load):
            receiver, key = node.value, node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            receiver, key = node.func.value, node.args[0].value
        else:
            continue
        if isinstance(key, str) and key in fields:
            found.append((ast.unparse(receiver), node.lineno, key))
    return found


def scan(root: Path = ROOT) -> list[str]:
    fields = field_names()
    flagged = []
    for path in sorted((root / "reports").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("reports/store/"):
            continue
        for receiver, line, key in string_key_reads(path, fields):
            if receiver != "os.environ" and (rel, receiver) not in NOT_RESULTS:
                flagged.append(f"{rel}:{line}: {receiver}[{key!r}]")
    return flagged


def test_no_reader_of_results_indexes_a_record_by_a_string_key():
    flagged = scan()
    assert not flagged, "got results read by string key, but they should be read by attribute:\n" + "\n".join(flagged)


def test_the_scan_catches_a_reader_that_went_back_to_dicts(tmp_path):
    broken = tmp_path / "reports" / "render"
    broken.mkdir(parents=True)
    (broken / "section.py").write_text("def cell(r):\n    return r['time_us'], r.get('refused'), r.time_us\n")
    assert scan(tmp_path) == ["reports/render/section.py:2: r['time_us']", "reports/render/section.py:2: r['refused']"]
