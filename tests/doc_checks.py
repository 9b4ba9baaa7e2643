"""The docs' checks: what the docs name exists, the counts they state are the code's, and the journal's entries are dated.

Each check is a function of one doc's text, so that a planted broken doc shows
it reports what it should (the last tests of this module):

- ``path_problems``: every repository path a doc names, in a code span, a
  fenced block or a Markdown link, exists; a link's anchor is a heading of
  the page it points at; ``path::test_name`` (or a bare ``test_x.py::name``)
  names a test defined there. A path counts as the repository's when its
  first part is a top-level entry of the checkout (``suites/...``,
  ``docs/...``, ``tox.ini``); upstream's paths (``optimizer/optimizer.py:1923``)
  are not. Left alone: URLs, globs (``*``, ``?``, ``[``, ``{``) and
  placeholders (``<run>``, ``...``), by ``IGNORED``; and output locations,
  the folders ``.gitignore`` lists (``reports/runs/``, ``reports/site/``,
  ``ci-artifacts/``, ...), by ``OUTPUTS``.
- ``count_problems``: a count a guide states about the code is the code's:
  ``N axes`` and ``N rules`` of the composition space; the masking values (a
  paragraph naming ``MASKING`` lists each as ``axis=label``); the budgets (a
  paragraph naming ``BUDGETS`` that lists them as ```key` seconds`` lists
  every key with its seconds, and one must); the stored covering arrays (the
  table rows ``| pairwise`` and ``| triples``); the catalogue's size where a
  guide states it. The journal (docs/measurements/) is dated history and
  keeps the counts of its day: its paths are checked, its counts are not.
- ``catalogue_problems``: the docs' table of broken implementations names
  every entry of the catalogue.
- ``list_problems``: a list a guide states about the code is the code's: the
  floors (``FLOORS``), the default peers (``DEFAULT_PEERS``), what ``tox -e
  tests`` runs whole against each implementation (tox.ini), the stored runs'
  schemas; ``space_counts``: the code's comments and configuration state no
  count of the composition space (the guides do, where it is checked).
- ``unanswered_steps``: every step of docs/extending.md's checklists says
  what fails when it is forgotten.
- ``undated_entries``: every entry of the journal carries its date.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from tests.pytest_run import ROOT

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


JOURNAL = ROOT / "docs" / "measurements"


GUIDES = [d for d in DOCS if JOURNAL not in d.parents]


IGNORED = re.compile(r"://|[*?\[{<>]|\.\.\.|…")


MULTIGPU = "suites/multigpu"
"""URLs, globs and placeholders: nothing to look for on disk."""


def _gitignored() -> tuple[set[str], tuple[str, ...]]:
    """Top-level names and output folders ``.gitignore`` lists (``reports/runs/`` and the like)."""
    names, outputs = set(), []
    for line in (ROOT / ".gitignore").read_text().splitlines():
        line = line.strip()
        if not line.endswith("/") or line.startswith(("*", "#")):
            continue
        if "/" in line[:-1]:
            outputs.append(line)
        else:
            names.add(line[:-1])
    return names, tuple(outputs)


IGNORED_TOP, OUTPUTS = _gitignored()


OUTPUTS = (*OUTPUTS, *(f"{n}/" for n in IGNORED_TOP))


TOP = {p.name for p in ROOT.iterdir()} - IGNORED_TOP - {".git"}
"""What a repository path starts with: the checkout's top-level entries, less what git ignores."""


FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


SPAN = re.compile(r"`([^`]+)`")


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


TOKEN_SPLIT = re.compile(r"[\s'\"(),;=|]+")


TEST_ID = re.compile(r"^([\w./-]+\.py)::(\w+)")


BARE_TEST = re.compile(r"^(test_\w+\.py)(?:::(\w+))?")
"""A test module named without its folder (``test_isolation.py``): it must be one of suites/ or tests/."""


@cache
def modules_named() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for top in ("suites", "tests"):
        for path in (ROOT / top).rglob("test_*.py"):
            found.setdefault(path.name, []).append(path)
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    found, seen = set(), {}
    for line in FENCE.sub("", text).splitlines():
        match = re.match(r"#{1,6}\s+(.*)", line)
        if match:
            base = slug(match.group(1))
            n = seen.get(base, 0)
            found.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
    return found


def code_tokens(text: str) -> list[str]:
    """Every whitespace-separated word of the doc's code: fenced blocks and inline spans."""
    blocks = FENCE.findall(text)
    spans = SPAN.findall(FENCE.sub("", text))
    return [t for chunk in [*blocks, *spans] for t in TOKEN_SPLIT.split(chunk) if t]


def repository_path(token: str) -> str | None:
    """``token`` as a path of this repository (its ``::test`` kept), or None when it names none."""
    token = token.rstrip(".,;:")
    token = re.sub(r":\d[\d, -]*$", "", token)  # a line number: file.py:123 or :12-34
    if token.startswith("./"):
        token = token[2:]
    if not token or IGNORED.search(token) or token.startswith("/"):
        return None
    if token.split("/")[0].split("::")[0] not in TOP or not re.fullmatch(r"[\w./:-]+", token):
        return None
    if any(token.startswith(o) or token + "/" == o for o in OUTPUTS):
        return None
    return token


def _defines(path: Path, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?def {re.escape(name)}\b|^class {re.escape(name)}\b",
                     path.read_text(), re.M) is not None


def path_problems(text: str, doc: Path) -> list[str]:
    """What ``text`` (the doc at ``doc``) names that does not exist: paths, ``file::test`` ids, links and
    anchors."""
    problems = []
    for token in dict.fromkeys(code_tokens(text)):
        token = re.sub(r"(::\w+)\[[^\]]*\]$", r"\1", token.rstrip(".,;:"))  # a test id's parameters
        bare = BARE_TEST.match(token)
        if bare and token == bare.group(0):
            files = modules_named().get(bare.group(1), [])
            if not files:
                problems.append(f"`{bare.group(0)}`: no test module of that name in suites/ or tests/")
            elif bare.group(2) and not any(_defines(f, bare.group(2)) for f in files):
                problems.append(f"`{bare.group(0)}`: {bare.group(1)} defines no {bare.group(2)}")
            continue
        path = repository_path(token)
        if path is None:
            continue
        test = TEST_ID.match(path)
        file = test.group(1) if test else path.split("::")[0]
        if not (ROOT / file).exists():
            problems.append(f"`{path}`: no such file or folder")
        elif test and not _defines(ROOT / file, test.group(2)):
            problems.append(f"`{path}`: {file} defines no {test.group(2)}")
    for target in dict.fromkeys(LINK.findall(FENCE.sub("", text))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        where, _, anchor = target.partition("#")
        page = (doc.parent / where).resolve() if where else doc
        if where and not page.exists():
            problems.append(f"link ({target}): no such file")
        elif anchor and page.suffix == ".md":
            if anchor not in anchors(page.read_text() if where else text):
                problems.append(f"link ({target}): {page.name} has no heading #{anchor}")
    return problems


@cache
def facts() -> dict:
    """What the code says, for the counts the docs state."""
    from benchmarks.settings import BUDGETS
    from fixtures import broken, outsiders
    from suites.multigpu import covering, space

    pairwise = covering.rows("pairwise")
    cover = covering.coverage("pairwise", pairwise, 2)
    return {"axes": len(space.AXES), "rules": len(space.RULES),
            "masking": {f"{m.axis}={m.label}" for m in space.MASKING},
            "budgets": dict(BUDGETS), "pairwise": (len(pairwise), cover.covered, cover.allowed, cover.total),
            "triples": len(covering.rows("triples")),
            "broken": len(broken.NAMES), "outsiders": len(outsiders.NAMES)}


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", FENCE.sub("", text)) if p.strip()]


def count_problems(text: str, known: dict) -> tuple[list[str], set[str]]:
    """The counts ``text`` states that are not ``known``'s (``facts()``), and which kinds of count it
    states."""
    problems, stated = [], set()

    def compare(kind: str, got, want, where: str) -> None:
        stated.add(kind)
        if got != want:
            problems.append(f"{kind}: the doc says {got} ({where!r}), but the code has {want}")

    for pattern, kind, want in [(r"\b(\d[\d,]*) axes\b", "axes", known["axes"]),
                                (r"\b(\d[\d,]*) rules\b", "rules", known["rules"]),
                                (r"\b(\d[\d,]*) masking values\b", "masking values", len(known["masking"])),
                                (r"\b(\d[\d,]*) (?:deliberately )?broken implementations\b", "broken",
                                 known["broken"]),
                                (r"\b(\d[\d,]*) outsiders\b", "outsiders", known["outsiders"]),
                                (r"\b(\d[\d,]*) (?:common )?pairwise (?:compositions|rows)\b", "pairwise",
                                 known["pairwise"][0])]:
        for match in re.finditer(pattern, text):
            compare(kind, _number(match.group(1)), want, match.group(0))
    for row in re.finditer(r"^\| pairwise[^|]*((?:\| *[\d,]+ *)+)\|", text, re.M):
        cells = tuple(_number(c) for c in re.findall(r"[\d,]+", row.group(1)))
        compare("pairwise", cells, known["pairwise"][: len(cells)], row.group(0))
    for row in re.finditer(r"^\| triples[^|]*\| *([\d,]+) *\|", text, re.M):
        compare("triples", _number(row.group(1)), known["triples"], row.group(0))
    for paragraph in _paragraphs(text):
        if "`MASKING`" in paragraph and re.search(r"`[\w-]+=[\w-]+`", paragraph):
            listed_values = set(re.findall(r"`([\w-]+=[\w-]+)`", paragraph))
            compare("masking", listed_values, known["masking"], paragraph[:60])
        listed = {k: float(v) for k, v in re.findall(r"`(\w+)` (\d+(?:\.\d+)?)\b", paragraph)}
        if "`BUDGETS`" in paragraph and listed:
            compare("budgets", listed, known["budgets"], paragraph[:60])
    return problems, stated


def catalogue_problems(text: str, names) -> list[str]:
    """The catalogue's entries ``text`` does not name in a code span: a broken implementation added to
    ``fixtures/broken/__init__.py`` (or ``fixtures/outsiders``) must be named in the docs' table of them."""
    named = {t for span in SPAN.findall(FENCE.sub("", text)) for t in TOKEN_SPLIT.split(span)}
    return [f"`{n}`: in the catalogue, not in the docs' table" for n in names if n not in named]


CATALOGUE_DOC = ROOT / "docs" / "suites.md"


def undated_entries(text: str) -> list[str]:
    """The entries of a journal page (its ``##`` headings) whose heading carries no date (YYYY-MM-DD)."""
    return [line for line in FENCE.sub("", text).splitlines()
            if re.match(r"##\s", line) and not re.search(r"20\d\d-\d\d-\d\d", line)]


INDEX_PAGES = {"docs/nightly.md": "an index of the pages its sections moved to"}
"""Pages that hold nothing of their own: code cites the page that holds the matter."""


CITED = re.compile(r"\bdocs/[\w./-]+\.md\b")


CODE = [p for pattern in ("*.py", "*.txt", "*.toml", "*.ini")
        for p in ROOT.glob(f"**/{pattern}")
        if not {".tox", ".git", "node_modules"} & set(p.relative_to(ROOT).parts)
        and p not in (ROOT / "tests" / "doc_checks.py", ROOT / "tests" / "test_docs.py")]
"""The project's code and configuration, less the docs' checks (which name the index pages) and their tests (which
plant broken citations)."""


def citation_problems(text: str, root: Path = ROOT) -> list[str]:
    """Each docs/ page a file of code cites that is gone, or is an index page."""
    problems = []
    for page in dict.fromkeys(CITED.findall(text)):
        if not (root / page).is_file():
            problems.append(f"{page}: no such page")
        elif page in INDEX_PAGES:
            problems.append(f"{page}: {INDEX_PAGES[page]}; cite the page that holds it")
    return problems


@cache
def lists() -> dict:
    """What the code and the configuration say, for the lists the docs state."""
    import configparser
    import json
    import tomllib

    from benchmarks.settings import DEFAULT_PEERS
    from reports.store.model import SCHEMA
    from suites.impls import REGISTRY, load_implementation
    from suites.impls.support import levels
    from tests.test_architecture import FLOORS

    tox = configparser.RawConfigParser()
    tox.read(ROOT / "tox.ini")
    testpaths = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"]
    again = tox.get("again", "pytest_args")
    commands = [c.replace("{[again]pytest_args}", again) for c in tox.get("testenv:tests", "commands").splitlines()]
    schemas = {json.loads(p.read_text())["schema"] for p in (ROOT / "fixtures" / "runs").glob("*/results.json")}
    return {"floors": FLOORS, "tops": tuple(dict.fromkeys(n.split(".")[0] for f in FLOORS for n in f)),
            "peers": DEFAULT_PEERS, "registry": tuple(REGISTRY),
            "levels": {name: levels(load_implementation(name)) for name in REGISTRY}
            | {"wrap:pkg.module:factory": levels(load_implementation("wrap:fixtures.examples.torch_ddp_factory:factory"))},
            "tox tests": suites_run_whole(commands, [p for p in testpaths if p.startswith("suites/")]),
            "schemas": (min(schemas), max(schemas), SCHEMA)}


def suites_run_whole(commands: list[str], testpaths: list[str]) -> dict[str, set[str]]:
    """Each implementation (``--impl``, else the reference) and the suites a tox env's ``pytest`` commands run
    against it whole: with no file left out (``--ignore``), no test chosen (``--only``, ``--case``, a file named)
    and, for the multi-rank suite, the compositions kept."""
    found: dict[str, set[str]] = {}
    for command in commands:
        words = command.split()
        if "pytest" not in words:
            continue
        args = [w for w in words[words.index("pytest") + 1:] if "{" not in w]
        impl = args[args.index("--impl") + 1] if "--impl" in args else "reference"
        chosen = [a for a in args if not a.startswith("-") and a not in (impl,) and a.startswith("suites/")]
        cut = any(a.startswith(("--ignore", "--only", "--case")) for a in args)
        no_compositions = "--compositions=none" in args
        whole = [p for p in (chosen or testpaths) if p in testpaths and not (no_compositions and p == MULTIGPU)
                 ] if not cut else []
        found.setdefault(impl, set()).update(whole)
    return {impl: suites for impl, suites in found.items() if suites}


def _units(text: str) -> list[str]:
    """The paragraphs of ``text``, each table row and each list item on its own."""
    return [u for p in _paragraphs(text) for u in re.split(r"\n(?=\||- |\d+\. )", p)]


def list_problems(text: str, known: dict) -> tuple[list[str], set[str]]:
    """The lists ``text`` states that are not ``known``'s (``lists()``), and which kinds of list it states:

    - ``floors``: the numbered list after a paragraph naming ``FLOORS``, a floor a line, bottom first;
    - ``top floors``: the folders listed after "bottom first: " on one line (`cli/`, ...), each top-level
      package of ``FLOORS`` once, bottom first;
    - ``default peers``: a paragraph, list item or table row naming ``DEFAULT_PEERS`` names, of the registered
      implementations (in code spans), exactly the default peers, in their order;
    - ``tox tests``: a table headed ``| `--impl` | suites run whole |`` says, row by row, what ``tox -e tests``
      runs whole against each implementation;
    - ``levels``: a table headed ``| `--impl` | levels |`` says, row by row, the capability levels of each
      registered implementation it names (``all`` where it has every one), and names every registered one;
    - ``schemas``: "older results schema ... (A to B; the model's `SCHEMA` is C)": the stored runs' schemas
      (fixtures/runs/) and the model's.
    """
    problems, stated = [], set()

    def compare(kind: str, got, want, where: str) -> None:
        stated.add(kind)
        if got != want:
            problems.append(f"{kind}: the doc says {got} ({where[:70]!r}), but the code has {want}")

    match = re.search(r"`FLOORS`[^\n]*(?:\n[^\n]+)*\n\n((?:\d+\. [^\n]*\n?)+)", text)
    if match:
        floors = tuple(tuple(s.rstrip("/") for s in SPAN.findall(line)) for line in match.group(1).splitlines())
        compare("floors", floors, known["floors"], match.group(1))
    for match in re.finditer(r"bottom\s+first: (`[^)]*)\)", text):
        compare("top floors", tuple(s.rstrip("/") for s in SPAN.findall(match.group(1))), known["tops"],
                match.group(0))
    for unit in _units(text):
        if "`DEFAULT_PEERS`" in unit:
            named = tuple(dict.fromkeys(s for s in SPAN.findall(unit) if s in known["registry"] and s != "reference"))
            if named:
                compare("default peers", named, known["peers"], unit)
    table = re.search(r"^\| `--impl` \| suites run whole \|\n\|[-|]+\|\n((?:\|[^\n]*\n?)+)", text, re.M)
    if table:
        rows = {}
        for row in table.group(1).splitlines():
            cells = row.strip("|").split("|")
            for impl in SPAN.findall(cells[0]):
                rows.setdefault(impl, set()).update(SPAN.findall(cells[1]))
        compare("tox tests", rows, known["tox tests"], table.group(0))
    table = re.search(r"^\| `--impl` \| levels \|[^\n]*\n\|[-|]+\|\n((?:\|[^\n]*\n?)+)", text, re.M)
    if table:
        for row in table.group(1).splitlines():
            cells = row.strip("|").split("|")
            said = frozenset(re.split(r",\s*", cells[1].split("(")[0].strip()))
            for impl in (s for s in SPAN.findall(cells[0]) if s in known["levels"] and said != {"all"}):
                compare("levels", {impl: set(said)}, {impl: set(known["levels"][impl])}, row)
        named = {span for row in table.group(1).splitlines() for span in SPAN.findall(row)}
        unnamed = sorted(n for n in known["levels"] if not n.startswith("wrap:") and n not in named)
        if unnamed:
            problems.append(f"levels: the `--impl` table names no row for the registered {unnamed}")
    for match in re.finditer(r"older results schema[^(\n]*\((\d+) to (\d+); the model's `SCHEMA` is (\d+)\)", text):
        compare("schemas", tuple(int(g) for g in match.groups()), known["schemas"], match.group(0))
    return problems, stated


CONFIG = [p for p in CODE if p.suffix != ".py" or "tests" not in p.relative_to(ROOT).parts] + [ROOT / ".ci" / "run"]
"""The code and its configuration, less the tests (whose made-up spaces count what they like)."""


SPACE_COUNT = re.compile(r"\b\d[\d,]* (?:common |pairwise |triple )?(?:compositions|axes|rules|masking values|pairwise "
                         r"rows)\b|\b(?:triples|pairwise)[:,]? \d", re.I)


def space_counts(text: str) -> list[str]:
    """The counts of the composition space ``text`` states: the code's comments and configuration state none
    (docs/suites.md states them, where ``test_the_counts_the_guides_state_are_the_codes`` checks them)."""
    return [m.group(0) for m in SPACE_COUNT.finditer(text)]




CHECKLISTS = ROOT / "docs" / "extending.md"


CHECKLIST = re.compile(r"^\| step \| file \| regenerate \| fails when forgotten \|\n\|[-|]+\|\n"
                       r"((?:\|[^\n]*\n?)+)", re.M)


def unanswered_steps(text: str) -> list[str]:
    """The steps of each checklist (a table headed ``| step | file | regenerate | fails when forgotten |``) whose
    last cell is empty: each says which test fails when it is forgotten, or that none does and why."""
    return [row.split("|")[1].strip()[:60] for table in CHECKLIST.findall(text) for row in table.splitlines()
            if not row.rstrip().rstrip("|").rsplit("|", 1)[-1].strip()]


SHARED_FILES = {"__init__", "__main__", "conftest"}
"""Modules the file-by-file list of docs/development.md need not name: a package's marker, its command, pytest's."""


def unnamed_modules(text: str, root: Path = ROOT) -> list[str]:
    """Each module of a folder the file-by-file list of ``text`` describes that its line does not name (by its
    stem, ``.py`` or not), but for tests, fixtures (their catalogues list them: ``NAMES``), a line that says it
    holds "one module per" something, and the benchmarks' definitions (``BENCHMARKS`` names them)."""
    from benchmarks import BENCHMARKS

    block = text.split("## The repository, file by file", 1)[1].split("```")[1]
    lines: dict[str, str] = {}
    folder = None
    for line in block.splitlines():
        start = re.match(r"^(\S+/)\s+(.*)$", line)
        if start:
            folder = start.group(1)
            lines[folder] = start.group(2)
        elif folder and line.strip():
            lines[folder] += " " + line.strip()
    definitions = {b.name for b in BENCHMARKS}
    missing = []
    for folder, words in lines.items():
        if folder.startswith(("fixtures/", "tests/")) or "one module per" in words:
            continue
        for module in sorted((root / folder).glob("*.py")):
            stem = module.stem
            if stem in SHARED_FILES or stem.startswith("test_") or (folder == "benchmarks/" and stem in definitions):
                continue
            if not re.search(rf"(?<![\w.]){re.escape(stem)}(\.py)?(?!\w)", words):
                missing.append(f"{folder}{module.name}")
    return missing
