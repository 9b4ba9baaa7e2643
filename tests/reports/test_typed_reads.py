"""No reader of results indexes a record by a string key: the results are typed, and read by attribute.

The scan reads every module of ``reports/`` and ``selfcheck/`` outside ``reports/store/`` (the one
place that turns JSON into the model) and flags ``x["field"]`` and
``x.get("field")`` where ``field`` names a field of any type of the model: a
reader that went back to dicts. What is not a result is listed with why.
"""

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest

from datamodel.codec import json_key, typed_fields
from reports.failure_causes import _EXCEPTION
from reports.render.report import build_report
from reports.store.model import Results
from reports.store.runs import load_results
from reports.store.schema import model_types
from tests.pytest_run import ROOT

NOT_RESULTS = {
    ("reports/conformance/suites.py", "case"): "a JUnit XML element's attributes",
    ("reports/conformance/suites.py", "child"): "a JUnit XML element's attributes",
    ("reports/conformance/suites.py", "p"): "a JUnit XML property element's attributes",
    ("reports/failure_causes.py", "bad"): "a JUnit XML element's attributes",
    ("selfcheck/gate_check.py", "r"): "the gate check's own table rows, written to gate_check.md",
    ("reports/website/gate.py", "row"): "a table row the page draws, its status given a symbol",
}
"""(module, receiver) -> why its string keys are not results."""


def readers(root: Path = ROOT) -> list[Path]:
    """The modules that read runs: what users run (``reports/``) and the project's checks of itself
    (``selfcheck/``)."""
    return sorted(p for top in ("reports", "selfcheck") for p in (root / top).rglob("*.py"))


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
    for path in readers(root):
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


# Decisions are typed values: nothing in reports/ decides by reading words back (a verdict's text, a claim's
# sentence, a tally pytest printed). Each string test that remains is listed with what it reads and why that is
# not a decision read from words. reports/store/upgrade.py is the one reader of old runs' words, by design.

WORD_METHODS = {"startswith", "endswith", "partition", "rpartition", "split", "rsplit", "removeprefix",
                "removesuffix", "find", "index", "count"}
WORDS_NOT_DECISIONS = {
    ("reports/bisect/__main__.py", "'{out}' not in args.command"): "a --command template's placeholder",
    ("reports/conformance/families.py", "nodeid.split('::')"): "a pytest node id's path and function",
    ("selfcheck/strength.py", "f.split('::')"): "a pytest node id's path",
    ("selfcheck/strength.py", "f.split('::')[0].rsplit('/', 1)"): "a pytest node id's file name",
    ("reports/conformance/suites.py", "Path(getattr(module, '__file__', None) or 'x').name.startswith('test_')"):
        "a module's file name",
    ("reports/conformance/suites.py", "each.count('errors')"): "pytest's parsed outcome counts",
    ("reports/conformance/suites.py", "node_id.split('::')"): "a pytest node id's path",
    ("reports/conformance/suites.py", "(child.get('message') or '').removeprefix('Skipped: ')"):
        "a skip reason shown without pytest's prefix",
    ("reports/conformance/suites.py", "raised[-1].rsplit('.', 1)"): "an exception's qualified name",
    ("selfcheck/gate_check.py", "'identical' in parts"): "a --part choice",
    ("selfcheck/gate_check.py", "'changepoints' in parts"): "a --part choice",
    ("selfcheck/gate_check.py", "'bisect' in parts"): "a --part choice",
    ("selfcheck/gate_check.py", "'slowed' in parts"): "a --part choice",
    ("selfcheck/gate_check.py", "'sensitivity' in parts"): "a --part choice",
    ("selfcheck/gate_check.py", "'run (s)' in r"): "the gate check's own table rows",
    ("reports/gpu_check.py", "text.split(',')"): "a comma-separated command-line argument",
    ("reports/gpu_check.py", "__doc__.split('\\n\\n')"): "the module docstring's first paragraph as help",
    ("reports/nightly/preflight.py", "suite.split('::')"): "a pytest node id's path",
    ("reports/render/mutation.py", "name.removeprefix('reference/')"): "a module path shown shorter",
    ("reports/store/runs.py", "p.name.startswith('.')"): "a hidden folder in the runs root",
    ("reports/store/schema.py", "(cls.__doc__ or '').strip().split('\\n\\n')"): "a docstring's paragraphs",
    ("reports/website/build.py", "name.endswith('.html')"): "a file name",
    ("reports/store/runs.py", "'..' not in rel.parts"): "a path's parts",
    ("reports/website/environment.py", "own[key].split(' (')"): "a version shown without its detail",
    ("selfcheck/site_size.py", "k.startswith('history/')"): "a file's path on the site",
}
"""(module, the expression) -> what it reads, and why that is not a decision read from words."""


def word_reads(path: Path) -> list[tuple[int, str]]:
    """(line, expression) of each string test against a constant in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WORD_METHODS
                and node.args and isinstance(node.args[0], (ast.Constant, ast.Tuple))):
            found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
              and isinstance(node.left.value, str) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops)):
            found.append((node.lineno, ast.unparse(node)))
    return found


def scan_reads(reads, listed: dict, root: Path = ROOT) -> tuple[list[str], set[tuple[str, str]]]:
    """What ``reads`` finds in each module of ``reports/`` (but the upgrade, the one reader of old runs' words)
    that ``listed`` does not list, and the listed ones seen."""
    flagged, seen = [], set()
    for path in readers(root):
        rel = path.relative_to(root).as_posix()
        if rel == "reports/store/upgrade.py":
            continue
        for line, read in reads(path):
            if (rel, read) in listed:
                seen.add((rel, read))
            else:
                flagged.append(f"{rel}:{line}: {read}")
    return flagged, seen


def scan_words(root: Path = ROOT) -> tuple[list[str], set[tuple[str, str]]]:
    """The string tests not listed, and the listed ones seen."""
    return scan_reads(word_reads, WORDS_NOT_DECISIONS, root)


def test_no_decision_is_read_back_from_words():
    flagged, seen = scan_words()
    assert not flagged, ("got decisions read from words, but they should be typed values (or listed in "
                         "WORDS_NOT_DECISIONS with why):\n" + "\n".join(flagged))
    stale = set(WORDS_NOT_DECISIONS) - seen
    assert not stale, f"listed but no longer found, remove them: {sorted(stale)}"


REGEX_FUNCTIONS = {"compile", "sub", "subn", "search", "match", "fullmatch", "findall", "finditer", "split"}
PATTERNS_NOT_DECISIONS = {
    ("reports/conformance/suites.py", "^(?:E\\s+)?([A-Za-z_][\\w.]*(?:Error|Exception|Interrupt|Exit)):"):
        "the exception a crashed check raised, in pytest's traceback text (only text holds it)",
    ("reports/failure_causes.py", _EXCEPTION.pattern): "the exception a failure names, in pytest's text",
    ("reports/failure_causes.py", 'File "([^"]+)", line (\\d+), in (\\S+)'): "a traceback's frames (only text holds them)",
    ("reports/failure_causes.py", "^(\\S+\\.py):(\\d+): "): "pytest's short frames (only text holds them)",
    ("reports/render/trend.py", "[^A-Za-z0-9_.-]+"): "a metric key made a file name",
    ("reports/render/plots.py", "[^A-Za-z0-9_.-]+"): "a name made a file name",
    ("reports/website/markdown.py", "[^\\w\\- ]"): "a heading made an anchor, as github does",
    ("reports/website/markdown.py", "!\\[([^\\]]*)\\]\\(([^)\\s]+)\\)"): "Markdown images, to copy their files",
    ("reports/website/chart.py", "(\\d{4})(\\d{2})(\\d{2})T\\d{6}Z(?:-\\d+)?"): "a run's date in its folder name",
    ("reports/website/html.py", "[^a-z0-9]+"): "a label made an id",
}
"""(module, the pattern) -> what a regular expression reads, and why that is not a decision read from words."""


def pattern_reads(path: Path) -> list[tuple[int, str]]:
    """(line, pattern) of each call of ``re`` in one file (a pattern held in a name: ``<name>``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in REGEX_FUNCTIONS
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args):
            first = node.args[0]
            pattern = first.value if isinstance(first, ast.Constant) else f"<{ast.unparse(first)}>"
            found.append((node.lineno, pattern))
    return found


def scan_patterns(root: Path = ROOT) -> tuple[list[str], set[tuple[str, str]]]:
    """The regular expressions not listed, and the listed ones seen."""
    return scan_reads(pattern_reads, PATTERNS_NOT_DECISIONS, root)


def test_no_decision_is_read_back_by_a_regular_expression():
    flagged, seen = scan_patterns()
    assert not flagged, ("got regular expressions over words, but decisions should be typed values (or listed in "
                         "PATTERNS_NOT_DECISIONS with why):\n" + "\n".join(flagged))
    stale = set(PATTERNS_NOT_DECISIONS) - seen
    assert not stale, f"listed but no longer found, remove them: {sorted(stale)}"


def test_the_scans_catch_each_way_words_were_read_back(tmp_path):
    """The four this project once had: a failure split from its test, an implementation cut from a header, refusals
    grouped by a pattern over their numbers, a footnote decided by a pattern over the Markdown just written."""
    render = tmp_path / "reports" / "render"
    render.mkdir(parents=True)
    (render / "page.py").write_text(
        "import re\n\n"
        "def failure(r, i):\n    return r.failures[i].split(': ', 1)[-1]\n\n"
        "def label(r):\n    return r.header.split(' (levels')[0]\n\n"
        "NUMBER = re.compile(r'-?\\d+(?:\\.\\d+)?')\n\n"
        "def footnoted(section, mark):\n    return re.search(re.escape(mark) + r'\\s*\\|', section)\n")
    words, _ = scan_words(tmp_path)
    patterns, _ = scan_patterns(tmp_path)
    assert words == ["reports/render/page.py:4: r.failures[i].split(': ', 1)",
                     "reports/render/page.py:7: r.header.split(' (levels')"], words
    assert patterns == ["reports/render/page.py:9: -?\\d+(?:\\.\\d+)?",
                        "reports/render/page.py:12: <re.escape(mark) + '\\\\s*\\\\|'>"], patterns


def test_the_word_scan_catches_a_verdict_read_from_its_text(tmp_path):
    broken = tmp_path / "reports" / "gpu_check.py"
    broken.parent.mkdir(parents=True)
    broken.write_text("def found(lines, v):\n    ok = 'Verdict: PASS' in v.text\n"
                      "    return ok, [l for l in lines if l.startswith('**Verdict:')]\n")
    assert scan_words(tmp_path)[0] == ["reports/gpu_check.py:2: 'Verdict: PASS' in v.text",
                                       "reports/gpu_check.py:3: l.startswith('**Verdict:')"]


REWORDED = "(reworded)"
DECISION_WORDS = re.compile(r"\b(?:PASS|FAIL|ERROR)\b|\bholds\b|does not hold here|not measurable on this backend|"
                            r"not measured|not assessed|[✔✘]")
"""What the report decides in words of its own: the verdict and each claim's outcome (never the words reworded)."""


def reworded(results: Results) -> Results:
    """The run with every sentence a decision came with rewritten: verdict lines' texts, claims and their reasons."""
    verdict = results.verdict and replace(results.verdict, lines=tuple(
        replace(line, text=REWORDED) for line in results.verdict.lines))
    claims = tuple(replace(c, claim=REWORDED, measured=REWORDED, why=REWORDED if c.why else c.why)
                   for c in results.claims)
    return replace(results, verdict=verdict, claims=claims)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "fixtures" / "runs").iterdir() if p.is_dir()))
def test_rewording_a_run_changes_none_of_its_decisions(name):
    original = load_results(ROOT / "fixtures" / "runs" / name)
    words = reworded(original)
    assert (words.verdict and words.verdict.exit_code) == (original.verdict and original.verdict.exit_code)
    before, after = (DECISION_WORDS.findall(build_report(r)) for r in (original, words))
    assert before, f"{name}: the report states no decision, so rewording could change none"
    assert after == before, f"{name}: the report's decisions got {after}, but should be {before}"
