"""The mutation-score command's own logic: which mutants are equivalent by construction, triage, the summary line."""

import json

import pytest

from reports.mutation import annotation_spans, load_equivalents, score_markdown

SOURCE = '''from __future__ import annotations

def f(x: int | None, y: dict[str, int] = {}) -> list[int] | None:
    z: int | str = x | 1
    return [z]
'''


def inside(spans, row, col):
    return any(a <= (row, col) < b for a, b in spans)


def test_annotations_are_found_and_code_is_not(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    spans = annotation_spans(path)
    line3, line4 = SOURCE.splitlines()[2], SOURCE.splitlines()[3]
    assert inside(spans, 3, line3.index("| None")), "the `|` of the argument's annotation"
    assert inside(spans, 3, line3.index("| None:")), "the `|` of the return annotation"
    assert inside(spans, 4, line4.index("| str")), "the `|` of a variable annotation"
    assert not inside(spans, 4, line4.index("| 1")), "the `|` of code, which is evaluated, got marked as annotation"
    assert not inside(spans, 3, line3.index("{}")), "a default value got marked as annotation"


def test_triage_entries_need_a_reason(tmp_path):
    path = tmp_path / "mutants.toml"
    path.write_text('[[equivalent]]\nmutant = "reference/ddp.py:1:AddNot:0"\n')
    with pytest.raises(ValueError, match=r"equivalent\[0\] has keys \['mutant'\], but should have 'mutant' and 'why'"):
        load_equivalents(path)
    path.write_text('[[equivalent]]\nmutant = "reference/ddp.py:1:AddNot:0"\nwhy = "x"\n')
    assert load_equivalents(path) == {"reference/ddp.py:1:AddNot:0": "x"}


def test_the_summary_line_says_score_date_sample_and_triage(tmp_path):
    path = tmp_path / "score.json"
    assert "not measured yet" in score_markdown(path)
    path.write_text(json.dumps({
        "date": "2026-11-22", "commit": "0123456789abcdef", "score": 0.9, "killed": 90, "non_equivalent": 100,
        "population": {"sampled": 104, "eligible": {"a.py": 600, "b.py": 400}},
        "per_module": {"a.py": {"killed": 50, "equivalent": 3}, "b.py": {"killed": 40, "survived": 10, "equivalent": 1}},
    }))
    line = score_markdown(path)
    for part in ("2026-11-22", "0123456789", "**90%**", "90 of 100", "104 of 1000", "4 triaged equivalent"):
        assert part in line, f"summary: got {line!r}, but should contain {part!r}"
    assert "uncommitted" not in line, f"summary of a clean tree: got {line!r}, but should not mention uncommitted changes"
    path.write_text(json.dumps({**json.loads(path.read_text()), "uncommitted": True}))
    assert "with uncommitted changes" in score_markdown(path), "a score measured on a dirty tree must say so"
