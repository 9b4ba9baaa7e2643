"""reports/schema.md and schema.json are the model's, and a real run writes exactly what the model reads back."""

import json

import jsonschema
import pytest

from datamodel.codec import typed_fields
from reports.store.model import SCHEMA, Results, decode, encode
from reports.store.runs import load_results
from reports.store.schema import JSON, MARKDOWN, model_types, schema_json, schema_markdown
from tests.pytest_run import ROOT

STALE = "is stale: run `python -m reports.store.schema --write`"


def test_committed_schemas_are_the_generated_ones():
    assert MARKDOWN.read_text() == schema_markdown(), f"{MARKDOWN.name} {STALE}"
    assert JSON.read_text() == schema_json(), f"{JSON.name} {STALE}"


def validator():
    schema = json.loads(JSON.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_a_run_validates_against_the_json_schema_and_a_broken_one_does_not(smoke_run):
    check = validator()
    data = json.loads((smoke_run / "results.json").read_text())
    errors = sorted(check.iter_errors(data), key=str)
    assert not errors, f"got {errors[0].message} at {errors[0].json_path}, but a run should validate"
    for broken, where in [({**data, "schema": "8"}, "$.schema"),
                          ({**data, "run": {**data["run"], "name": 3}}, "$.run.name"),
                          ({**data, "unknown": 1}, "$"),
                          ({**data, "claims": [{**data["claims"][0], "outcome": "maybe"}]}, "$.claims[0].outcome")]:
        found = [e.json_path for e in check.iter_errors(broken)]
        assert where in found, f"got errors at {found}, but should be one at {where}"


@pytest.mark.parametrize("run", sorted(p.name for p in (ROOT / "fixtures" / "runs").iterdir() if p.is_dir()))
def test_every_older_run_upgraded_validates(run):
    data = encode(load_results(ROOT / "fixtures" / "runs" / run))
    errors = list(validator().iter_errors(data))
    assert not errors, f"got {errors[0].message} at {errors[0].json_path}, but an upgraded run should validate"


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
