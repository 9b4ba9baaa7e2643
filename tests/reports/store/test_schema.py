"""reports/schema.md is the model's, and a real run writes exactly what the model reads back."""

import json

from reports.store.model import SCHEMA, Results, decode, encode
from datamodel.codec import typed_fields
from reports.store.schema import model_types, schema_markdown
from tests.pytest_run import ROOT


def test_committed_schema_is_the_generated_one():
    committed = (ROOT / "reports" / "schema.md").read_text()
    assert committed == schema_markdown(), "reports/schema.md is stale: run `python -m reports.store.schema > reports/schema.md`"


def test_a_smoke_run_writes_what_the_model_reads_back_unchanged(smoke_run):
    data = json.loads((smoke_run / "results.json").read_text())
    results = decode(data)
    assert isinstance(results, Results) and results.schema == SCHEMA and results.upgraded is None
    assert encode(results) == data, "a current run should read back to exactly what was written"
    assert results.verdict is not None and results.comparison is not None and results.claims, (
        "a run stores what is decided about it: its verdict, its comparison and the claims' verdicts")


def test_every_field_of_the_model_says_what_it_means():
    undocumented = [f"{cls.__name__}.{f.name}" for cls in model_types() for f, _ in typed_fields(cls)
                    if not f.metadata.get("doc")]
    assert not undocumented, f"got fields without a meaning: {undocumented}, but each should say what it means"
