"""reports/schema.md is what the writer declares, and a real run writes what it declares."""

import json

from benchmarks import BENCHMARKS
from reports.store.schema import METRIC_FIELDS, RUN_FIELDS, schema_markdown

from tests.pytest_run import ROOT


def test_committed_schema_is_the_generated_one():
    committed = (ROOT / "reports" / "schema.md").read_text()
    assert committed == schema_markdown(), "reports/schema.md is stale: run `python -m reports.store.schema > reports/schema.md`"


def test_a_smoke_run_writes_what_the_schema_declares(smoke_run):
    results = json.loads((smoke_run / "results.json").read_text())
    declared = set(RUN_FIELDS) | {b.name for b in BENCHMARKS}
    assert set(results) == declared, f"top-level keys: got extra {set(results) - declared}, missing {declared - set(results)}"
    for benchmark in BENCHMARKS:
        benchmark.record.check(benchmark.name, results[benchmark.name])
    keys = {field for name in METRIC_FIELDS for field in name.split(", ")}
    optional = {"threshold", "sampling"}
    for key, metric in results["metrics"].items():
        want = keys - optional if not metric["exact"] else keys - optional - {"figure"}
        assert want <= set(metric) <= want | optional, (
            f"metric {key}: got fields {sorted(metric)}, but should be {sorted(want)} (and maybe {optional})")
