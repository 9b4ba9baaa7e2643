"""Every schema this project has written reads into the current model (real runs in fixtures/runs), older runs
compare and trend against a new one, and a malformed run is refused by name."""

import json
import shutil
from dataclasses import replace

import pytest

from datamodel import to_json
from reports.comparison.changes import compare_metrics
from reports.comparison.comparable import previous_comparable, why_not_comparable
from reports.comparison.series import trend
from reports.store.bisection import Bisection
from reports.store.model import SCHEMA, Results, encode
from reports.store.runs import RunError, Runs, dump_json, load_results
from reports.store.upgrade import OLD_BISECTION, upgrade
from tests.pytest_run import ROOT
from tests.reports.builders import results

FIXTURES = ROOT / "fixtures" / "runs"
SCHEMAS = {"20261125T134329Z": 1, "20261125T134518Z": 2, "20261125T134618Z": 3, "20261125T134732Z": 4,
           "20261125T174848Z": 5, "20261126T143421Z": 6, "20261126T164925Z": 7, "20261127T144541Z": 8,
           "20261127T184556Z": 9, "20261128T000901Z": 10, "20261129T044119Z": 11}
METHODS = {1: 2, 2: 2, 3: 3, 4: 4, 5: 4, 6: 4, 7: 4, 8: 4, 9: 4, 10: 4, 11: 4}
DEVICES = {**dict.fromkeys(range(1, 8), "cpu: AMD EPYC"),
           **dict.fromkeys((8, 9, 10, 11), "cpu: Intel(R) Xeon(R) Processor")}  # runs before the method was recorded measured by method 2


@pytest.mark.parametrize("name, schema", SCHEMAS.items())
def test_every_schema_reads_into_the_current_model(name, schema):
    raw = json.loads((FIXTURES / name / "results.json").read_text())
    assert raw["schema"] == schema, "the fixture is the schema it says"
    run = load_results(FIXTURES / name)
    assert isinstance(run, Results) and run.schema == SCHEMA and run.upgraded.from_schema == schema
    assert run.run.name == name and run.run.setup.method == METHODS[schema], run.run.setup
    assert run.run.setup.devices == (DEVICES[schema],) and run.run.setup.world_size == 2, run.run.setup
    assert set(run.metrics) == set(raw["metrics"]), "every metric of the file is read"
    assert [c.passed for c in run.conformance] == [c["passed"] for c in raw["conformance"]]
    if schema < 5:
        assert run.verdict is None and run.comparison is None, "nothing was decided and stored then"


def test_schema_5_reads_whole_its_run_record_without_what_its_setup_holds():
    raw = json.loads((FIXTURES / "20261125T174848Z" / "results.json").read_text())
    run = load_results(FIXTURES / "20261125T174848Z")
    assert run.upgraded.left_out == (), run.upgraded
    setup = raw["run"]["setup"]
    assert [raw["run"][k] for k in ("mode", "world_size", "backend", "tensors", "smoke")] == [
        setup[k] for k in ("mode", "world_size", "backend", "tensors", "smoke")], "it repeated its setup"
    assert encode(run)["run"].keys() == {"name", "host", "setup", "commit", "command"}, encode(run)["run"]
    assert run.verdict.exit_code == 0 and run.comparison.against == "20261125T134732Z", "decisions are kept"
    assert run.mutation is not None and len(run.claims) == len(raw["claims"]) and len(run.benchmarks.busbw) == 4


def test_schema_6_verdict_lines_get_their_kind_and_status_from_their_words_and_flags():
    raw = json.loads((FIXTURES / "20261126T143421Z" / "results.json").read_text())
    run = load_results(FIXTURES / "20261126T143421Z")
    assert [(line.kind, line.status) for line in run.verdict.lines] == [
        ("conformance", "pass"), ("collectives", "pass"), ("gate", "pass")], run.verdict.lines
    assert [line.text for line in run.verdict.lines] == [line["text"] for line in raw["verdict"]["lines"]]
    assert run.explorations == () and run.verdict.exit_code == 0 and run.upgraded.left_out == ()


def test_schema_6_failing_reported_and_unchecked_lines_keep_their_decision():
    raw = json.loads((FIXTURES / "20261126T143421Z" / "results.json").read_text())
    raw["verdict"]["lines"] = [
        {"text": "suites/multigpu against x: 1 passed, 1 failed, 0 skipped", "fails": True, "error": False},
        {"text": "gated regressions against y: 1 (busbw/z) (reported; --fail-on-regression would fail)",
         "fails": False, "error": False},
        {"text": "gated regressions: not checked, an earlier run cannot be read: bad", "fails": True, "error": True}]
    lines = upgrade(raw).verdict.lines
    assert [(line.kind, line.status) for line in lines] == [("conformance", "fail"), ("gate", "reported"),
                                                             ("gate", "error")], lines


def test_schema_7_claims_and_verifications_get_their_outcome_from_their_words():
    raw = json.loads((FIXTURES / "20261126T164925Z" / "results.json").read_text())
    run = load_results(FIXTURES / "20261126T164925Z")
    said = [c["verdict"] for c in raw["claims"]]
    assert [c.outcome for c in run.claims] == [
        "not measured", "not measurable", "not measurable", "holds", "does not hold", "does not hold",
        "does not hold", "does not hold", "not measured", "holds", "not measurable", "not measurable"], said
    assert [c.why for c in run.claims][:2] == [said[0].removeprefix("not measured: "),
                                               said[1].split(": ", 1)[1]], "the reason is kept whole"
    verification = run.benchmarks.bucket_size[0].verification
    was = raw["benchmarks"]["bucket_size"][0]["verification"]
    assert verification.verified == was["verified"] and (verification.problems == ()) == was["verified"], was
    assert run.upgraded.left_out == () and run.verdict.exit_code == 0


def test_schema_4_records_read_whole_and_older_ones_are_named_as_left_out():
    current = load_results(FIXTURES / "20261125T134732Z")
    assert current.upgraded.left_out == (), current.upgraded
    assert len(current.benchmarks.busbw) == 4 and current.benchmarks.overlap[0].sampling.rounds == 3
    assert current.settings.busbw.sizes == (1024, 4096) and len(current.nodes) == 1
    older = load_results(FIXTURES / "20261125T134518Z")
    assert older.benchmarks.busbw == () and any("busbw: 4 records of schema 2" in line
                                                 for line in older.upgraded.left_out), older.upgraded


def test_schema_1_metrics_count_as_they_were_judged_then():
    metrics = load_results(FIXTURES / "20261125T134329Z").metrics
    failed = metrics["conformance/suites/layout/test_golden.py/reference/failed"]
    assert failed.exact and failed.gated and failed.figure is None
    busbw = next(m for k, m in metrics.items() if k.startswith("busbw/"))
    assert busbw.gated and not busbw.exact and busbw.figure is None, "any schema-1 metric could fail the job"


def test_schema_9_suite_runs_read_their_implementation_and_failures_as_values():
    raw = json.loads((FIXTURES / "20261127T184556Z" / "results.json").read_text())
    [suite] = raw["conformance"]
    assert suite["header"].startswith("reference 0.1.0 (levels: buffer, ddp"), suite["header"]
    run = load_results(FIXTURES / "20261127T184556Z")
    assert (run.conformance[0].implementation, run.conformance[0].levels[:2]) == ("reference 0.1.0", ("buffer", "ddp"))
    # Schema 9 wrote a failure as 'class::name: message', beside the node ids; a session's own failure had no id.
    failing = {**suite, "failed_ids": ["suites/x.py::test_a"], "failures": ["suites.x::test_a: got 1, but should be 2"]}
    broken = {**suite, "failed_ids": [], "failures": ["pytest exited 3: internal error"]}
    upgraded = upgrade({**raw, "conformance": [failing, broken]})
    assert [tuple(map(str, (f.test, f.message))) for r in upgraded.conformance for f in r.failures] == [
        ("suites/x.py::test_a", "got 1, but should be 2"), ("", "pytest exited 3: internal error")]


@pytest.mark.parametrize("last_night", ["20261125T134732Z", "20261125T174848Z", "20261126T143421Z",
                                        "20261126T164925Z", "20261127T144541Z", "20261127T184556Z",
                                        "20261128T000901Z", "20261129T044119Z"])
def test_a_new_run_compares_with_last_nights_run_of_an_older_schema(tmp_path, last_night):
    """Last night's run (schema 4 to 11) and tonight's (current) share a setup, so the gate reads both."""
    for name in list(SCHEMAS)[:list(SCHEMAS).index(last_night) + 1]:
        shutil.copytree(FIXTURES / name, tmp_path / "runs" / name)
    old = load_results(FIXTURES / last_night)
    new = replace(old, run=replace(old.run, name="20261201T000000Z"), upgraded=None)
    runs = Runs(tmp_path / "runs")
    runs.write(new.run.name, {"results.json": dump_json(encode(new))})
    found, passed = previous_comparable(runs, runs.load(new.run.name))
    assert found.run.name == last_night and passed == [], (found, passed)
    changes = compare_metrics(found.metrics, new.metrics)
    assert changes and all(c.status == "unchanged" for c in changes), [c for c in changes if c.status != "unchanged"]
    assert why_not_comparable(load_results(FIXTURES / "20261125T134618Z"), new).endswith("method 3 -> 4"), (
        "an earlier method is another setup, named")


def test_the_trend_reads_every_schema_beside_a_new_run(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "runs")
    old = load_results(FIXTURES / "20261125T134732Z")
    new = replace(old, run=replace(old.run, name="20261201T000000Z"), upgraded=None)
    Runs(tmp_path / "runs").write(new.run.name, {"results.json": dump_json(encode(new))})
    runs = Runs(tmp_path / "runs").readable()
    assert [r.run.name for r in runs] == [*SCHEMAS, "20261201T000000Z"], "every run is readable"
    series = {(s.setup, s.key): s for s in trend(runs)}
    method_4 = [s for (setup, _), s in series.items() if "method" not in setup]
    method_4_runs = ["20261125T134732Z", "20261125T174848Z", "20261126T143421Z", "20261126T164925Z",
                     "20261127T144541Z", "20261127T184556Z", "20261128T000901Z", "20261129T044119Z",
                     "20261201T000000Z"]
    assert method_4 and all([p.run for p in s.points] == [r for r in method_4_runs if r in {p.run for p in s.points}]
                            for s in method_4), "the method-4 nights and tonight are one series, in order"
    amd = [r for r in method_4_runs if r not in ("20261127T144541Z", "20261127T184556Z", "20261128T000901Z",
                                                 "20261129T044119Z")]
    # the eighth to the eleventh ran on another machine: a setup of their own
    assert any([p.run for p in s.points] == amd for s in method_4), "some figure was measured every method-4 night"


@pytest.mark.parametrize("damage, where", [
    (lambda d: d.pop("run"), "$.run: got None"),
    (lambda d: d["metrics"].update({"step_time/reference/ratio_to_torch_ddp": 1.02}),
     "$.metrics.step_time/reference/ratio_to_torch_ddp: got 1.02, but should be Metric"),
    (lambda d: d["run"].pop("backend"), "$.run.backend: got None, but should be a str"),
    (lambda d: d.update(schema=SCHEMA + 1), f"got schema {SCHEMA + 1}, but should be one of 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, {SCHEMA}"),
])
def test_a_malformed_run_is_refused_naming_the_schema_the_run_and_the_field(tmp_path, damage, where):
    data = json.loads((FIXTURES / "20261125T134732Z" / "results.json").read_text())
    damage(data)
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.json").write_text(json.dumps(data))
    with pytest.raises(RunError) as caught:
        load_results(tmp_path / "r")
    assert "run r" in str(caught.value) and where in str(caught.value), str(caught.value)


def test_a_current_run_is_read_strictly():
    data = encode(results())
    data["run"]["surprise"] = 1
    from reports.store.upgrade import upgrade
    with pytest.raises(ValueError, match=r"\$.run: got keys \['surprise'\]"):
        upgrade(data)


def test_a_bisection_kept_beside_an_older_run_reads_into_it_and_a_broken_one_is_named_as_left_out(tmp_path):
    """Schema 10 and before wrote a night's bisection into bisection.json beside results.json."""
    name = max(n for n, schema in SCHEMAS.items() if schema <= 10)
    found = Bisection("a" * 40, "b" * 40, "step_time/reference/ratio_to_torch_ddp", 0.05, "no move", None, None)
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    (folder / OLD_BISECTION).write_text(json.dumps(to_json(found)))
    run = load_results(folder)
    assert run.bisection == found and run.upgraded.left_out == (), run.upgraded
    (folder / OLD_BISECTION).write_text('{"good": ')
    run = load_results(folder)
    assert run.bisection is None and any(OLD_BISECTION in why for why in run.upgraded.left_out), run.upgraded
