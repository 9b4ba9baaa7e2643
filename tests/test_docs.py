"""The docs' checks (``tests/doc_checks.py``) over every doc, and each proven by a planted broken doc
that it reports what it should."""

from __future__ import annotations

import pytest

from tests.doc_checks import (
    CATALOGUE_DOC,
    CHECKLIST,
    CHECKLISTS,
    CODE,
    CONFIG,
    DOCS,
    GUIDES,
    JOURNAL,
    catalogue_problems,
    citation_problems,
    count_problems,
    facts,
    list_problems,
    lists,
    path_problems,
    space_counts,
    unanswered_steps,
    undated_entries,
    unnamed_modules,
)
from tests.pytest_run import ROOT


def _stated_lists(known: dict) -> str:
    """A planted page stating each list as the code has it."""
    floors = "".join(f"{i}. " + ", ".join(f"`{n}`" for n in floor) + "\n" for i, floor in enumerate(known["floors"], 1))
    tox = "".join(f"| `{impl}` | " + ", ".join(f"`{s}`" for s in sorted(suites)) + " |\n"
                  for impl, suites in known["tox tests"].items())
    return ("The floors (`FLOORS` there), bottom first:\n\n" + floors + "\n"
            "How imports run one way (floors, bottom first: " + ", ".join(f"`{t}/`" for t in known["tops"]) + ").\n\n"
            "Beside `--impl` and `--peer torch`, the default peers (`DEFAULT_PEERS`): "
            + ", ".join(f"`{p}`" for p in known["peers"]) + ".\n\n"
            "| `--impl` | suites run whole |\n|---|---|\n" + tox + "\n"
            "fixtures/runs/ a real run of every older results schema (%d to %d; the model's `SCHEMA` is %d)\n"
            % known["schemas"])


def test_the_catalogue_table_names_every_broken_implementation():
    from fixtures import broken, outsiders

    problems = catalogue_problems(CATALOGUE_DOC.read_text(), [*broken.NAMES, *outsiders.NAMES])
    assert not problems, f"{CATALOGUE_DOC.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(ROOT).as_posix() for d in DOCS])
def test_every_path_test_and_link_a_doc_names_exists(doc):
    problems = path_problems(doc.read_text(), doc)
    assert not problems, f"{doc.relative_to(ROOT)}: got names of nothing:\n" + "\n".join(problems)


def test_the_counts_the_guides_state_are_the_codes():
    problems, stated = [], set()
    for doc in GUIDES:
        found, kinds = count_problems(doc.read_text(), facts())
        problems += [f"{doc.relative_to(ROOT)}: {p}" for p in found]
        stated |= kinds
    assert not problems, "got counts the code does not have:\n" + "\n".join(problems)
    assert {"axes", "rules", "masking", "budgets", "pairwise", "triples"} <= stated, (
        f"got the counts stated for {sorted(stated)}, but the guides should state the composition space's "
        "axes, rules, masking values and covering arrays (docs/suites.md) and every budget "
        "(docs/reading-a-run.md)")


def test_the_journal_is_one_folder_of_dated_entries():
    """Each entry of docs/measurements/ (a heading below the page's title) carries its date."""
    undated = [f"{page.name}: {line}" for page in sorted(JOURNAL.glob("*.md")) if page.name != "README.md"
               for line in undated_entries(page.read_text())]
    assert not undated, "got journal entries without a date in their heading:\n" + "\n".join(undated)


PLANTED = """# A planted page

## Real section

See `suites/multigpu/space.py`, `docs/rules.md`, `fixtures/configs/llama-2-70b.json:3`,
[the rules](rules.md#1-buffer-layout-megatron-lms-rule), [here](#real-section) and
`tests/reports/test_main.py::test_every_benchmark_has_a_section_of_the_report`.
Never checked: `reports/runs/<run>`, `suites/*.py`, https://example.com/x.py, `optimizer/optimizer.py:1923`,
`reports/site/index.html`, `ci-artifacts/site-screenshots`.

```bash
python -m reference.layout --config fixtures/configs/no-such-model.json --dp 64
```

Broken: `suites/multigpu/no_such_module.py`, [gone](no-such-page.md), [dead](rules.md#no-such-section),
`tests/reports/test_main.py::test_no_such_test`, [here too](#no-such-heading).
"""


def test_the_path_check_reports_a_missing_path_test_link_and_anchor():
    problems = path_problems(PLANTED, ROOT / "docs" / "planted.md")
    assert len(problems) == 6, problems
    for name in ("fixtures/configs/no-such-model.json", "suites/multigpu/no_such_module.py",
                 "no-such-page.md", "rules.md#no-such-section", "test_no_such_test", "#no-such-heading"):
        assert any(name in p for p in problems), (name, problems)


def test_the_count_check_reports_each_wrong_count():
    known = facts()
    dropped = next(iter(known["budgets"]))
    wrong_budget = ", ".join(f"`{k}` {v:g}" for k, v in known["budgets"].items() if k != dropped)
    masking = sorted(known["masking"])
    planted = (f"The space has **{known['axes'] + 1} axes** and {known['rules'] - 1} rules.\n\n"
               f"The masking values (`MASKING`): " + ", ".join(f"`{m}`" for m in masking[1:]) + ".\n\n"
               f"The budgets (`BUDGETS`, seconds): {wrong_budget}.\n\n"
               "| set | compositions | covered |\n|---|---|---|\n"
               f"| pairwise (every pair) | {known['pairwise'][0] - 25} | {known['pairwise'][1]} |\n"
               f"| triples (every three) | {known['triples'] + 1} |\n\n"
               f"`fixtures/broken/` holds {known['broken'] - 1} broken implementations.\n")
    problems, stated = count_problems(planted, known)
    assert {"axes", "rules", "masking", "budgets", "pairwise", "triples", "broken"} <= stated, stated
    assert len(problems) == 7, "\n".join(problems)
    right = planted.replace(f"{known['axes'] + 1} axes", f"{known['axes']} axes")
    assert len(count_problems(right, known)[0]) == 6, "a right count is not reported"


def test_the_catalogue_check_reports_an_entry_the_table_leaves_out():
    table = "| layout | `wrong_divisor` (lcm(dp, 64)), `forward_order` |\n"
    assert catalogue_problems(table, ["wrong_divisor", "forward_order"]) == []
    assert catalogue_problems(table, ["wrong_divisor", "forward_order", "closing_off_by_one"]) == [
        "`closing_off_by_one`: in the catalogue, not in the docs' table"]


def test_the_journal_check_reports_an_undated_entry():
    page = "# Gate\n\n## 2026-11-27, commit 05ed328: launches\n\n### detail\n\n## The gate, later\n"
    assert undated_entries(page) == ["## The gate, later"]


def test_every_page_the_code_cites_exists_and_holds_the_matter():
    problems = [f"{p.relative_to(ROOT)}: {problem}" for p in CODE for problem in citation_problems(p.read_text())]
    assert not problems, "got citations of docs that do not hold them:\n" + "\n".join(problems)


def test_the_citation_check_reports_a_gone_page_and_an_index():
    text = '"""See docs/rules.md, docs/nightly.md ("The gate measured") and docs/no-such-page.md."""'
    assert citation_problems(text) == [
        "docs/nightly.md: an index of the pages its sections moved to; cite the page that holds it",
        "docs/no-such-page.md: no such page"]


# The lists the docs state about the code, each compared with its one definition.


def test_the_lists_the_guides_state_are_the_codes():
    problems, stated = [], {}
    for doc in GUIDES:
        found, kinds = list_problems(doc.read_text(), lists())
        problems += [f"{doc.relative_to(ROOT)}: {p}" for p in found]
        for kind in kinds:
            stated.setdefault(kind, []).append(doc.relative_to(ROOT).as_posix())
    assert not problems, "got lists the code does not have:\n" + "\n".join(problems)
    want = {"floors": ["docs/development.md"], "top floors": ["README.md"], "tox tests": ["docs/development.md"],
            "schemas": ["docs/development.md"], "default peers": ["README.md", "docs/running-nightly.md"],
            "levels": ["docs/suites.md"]}
    assert all(set(docs) <= set(stated.get(kind, ())) for kind, docs in want.items()), (
        f"got the lists stated in {stated}, but should find at least {want}")


def test_the_code_and_its_configuration_state_no_count_of_the_composition_space():
    found = [f"{p.relative_to(ROOT)}: {c!r}" for p in CONFIG for c in space_counts(p.read_text())]
    assert not found, ("got counts of the composition space in the code's comments or configuration, which no test "
                       "checks; state them in docs/suites.md alone, or say where they are:\n" + "\n".join(found))


def test_the_list_check_reports_each_wrong_list():
    known = lists()
    right = _stated_lists(known)
    problems, stated = list_problems(right, known)
    assert problems == [] and stated == {"floors", "top floors", "default peers", "tox tests", "schemas"}, (
        problems, stated)
    first, last = known["schemas"][:2]
    wrong = (right.replace(", `selfcheck`\n", "\n").replace(", `selfcheck/`)", ")")
             .replace(f", `{known['peers'][-1]}`.", ".").replace("| `fsdp2` | `suites/multigpu` |",
                                                                   "| `fsdp2` | `suites/layout`, `suites/multigpu` |")
             .replace(f"({first} to {last};", f"({first} to {last - 1};"))
    assert wrong.count("selfcheck") == 0 and "`suites/layout`, `suites/multigpu` |" in wrong, "the plant took"
    problems, _ = list_problems(wrong, known)
    assert sorted(p.split(":")[0] for p in problems) == sorted(stated), "\n".join(problems)


def test_the_space_count_check_reports_a_count_in_a_comment():
    old_tox = ("# job's search, which starts with them: 130 compositions, 98 s here, more than CI holds)\n"
               '"""... 27 pairwise rows became 24 in 20 s (triples: 130, unchanged in 60 s)."""\n')
    assert space_counts(old_tox) == ["130 compositions", "27 pairwise rows", "triples: 1"], space_counts(old_tox)
    assert space_counts("# which starts with them: docs/suites.md counts them; 98 s here") == []


def test_every_step_of_the_checklists_says_what_fails_when_it_is_forgotten():
    text = CHECKLISTS.read_text()
    assert len(CHECKLIST.findall(text)) >= 5, ("got fewer tables than docs/extending.md's five checklists ((a), (c) "
                                               "to (f); (b), a knob with no axis, is (a)'s first steps)")
    missing = unanswered_steps(text)
    assert not missing, ("got steps of docs/extending.md whose 'fails when forgotten' is empty; name the test that "
                         "fails, or say that none does and why:\n" + "\n".join(missing))


def test_the_checklist_check_reports_a_step_that_says_nothing():
    table = ("| step | file | regenerate | fails when forgotten |\n|---|---|---|---|\n"
             "| 1. The adapter | `suites/impls/<peer>.py` | | `load_implementation` refuses it |\n"
             "| 2. Its registered name | `suites/impls/__init__.py` (`REGISTRY`) | | |\n")
    assert unanswered_steps(table) == ["2. Its registered name"], unanswered_steps(table)


def test_the_file_by_file_list_names_every_module():
    missing = unnamed_modules((ROOT / "docs" / "development.md").read_text())
    assert not missing, f"got modules the file-by-file list of docs/development.md does not name: {missing}, " \
        "but each should be named on its folder's line, with what it holds"


def test_the_file_by_file_check_reports_a_module_left_out(tmp_path):
    (tmp_path / "room").mkdir()
    for name in ("kept.py", "forgotten.py", "__init__.py", "test_x.py"):
        (tmp_path / "room" / name).write_text("")
    text = "## The repository, file by file\n\n```\nroom/   kept.py (what it keeps)\n```\n"
    assert unnamed_modules(text, tmp_path) == ["room/forgotten.py"]
