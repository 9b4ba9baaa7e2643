"""Every schema this project has written, read into the current model: the one place that knows old runs.

A run of schema 5 or later is brought up one schema at a time, each step a
function of the JSON (``STEPS``), then read strictly; the earlier ones,
whose records had other shapes, are read into the model directly.

- **12** (now) is read as it is, strictly.
- **11** (before a benchmark that raised was kept as a fault): a fault
  ended the job then, so a run of it has none: ``benchmark_faults`` is empty.
- **10** (the bisection beside the run): a night's bisection was written
  after the run, into ``bisection.json`` beside results.json; it is read
  into the run's ``bisection`` (one that does not read is left out, named).
- **9** (failures and implementations in words): read as 10 by typing the
  words (``_nine_to_ten``).
- **8** (before the verdict said which implementations it covers, the
  search its seed, strength rows where they were measured and caught, and
  the job its phases' times): read as 9; its verdict covers no
  implementation by name (every failure failed it then), its strength rows
  were measured in the run itself against whole suites (caught there, or
  nowhere), and it has no phases.
- **7** (verdict lines typed): the claims' verdicts, the tuner's
  verification and the sampling targets' kinds were words; each claim gets
  its outcome and why from its verdict's first words, the verification its
  problems and what held, and each target its kind from its own ('±2%' is
  relative, '±0.03' absolute); schema 4's records too.
- **6** (one setup per run): its verdict lines held words and two flags
  (``fails``, ``error``); each gets its kind (conformance, collectives, gate)
  and its status, taken from those, the one place where a decision is read
  from words, those of runs written before decisions were typed. It had no
  search past the covering arrays: ``explorations`` is empty.
- **5** (typed records, the verdict stored): its run record repeated five
  of its setup's fields (``mode``, ``world_size``, ``backend``, ``tensors``,
  ``smoke``), which are dropped; then as 6.
- **4** (calibrated sampling, refusals): the benchmark records move under
  ``benchmarks``, and what the model derives (each sampling's
  ``targets_met``) is dropped; its comparison (``compared_with``: the earlier
  run and the regressed keys) is left out: the changes behind it were never
  stored.
- **3** (the setup recorded, every node's hardware) and **2** (samples,
  medians, intervals, the gate): their metrics, setup, nodes, conformance
  runs and padding table are read; their benchmark records, of an earlier
  method and another shape, are left out (their metrics stay, which is what
  the gate and the trend read).
- **1** (one value per metric): the metrics have no samples and did not say
  whether they were gated or exact: every one reads as gated (any of them could
  fail the job then), judged by the threshold, the conformance counts as
  exact; the setup is derived from the run record and the host.

What a run of an older schema has no place for is named in
``Results.upgraded``; the file on disk is never changed. A run whose run
record or metrics cannot be read is refused, naming the schema, the run and
the field: a malformed run must never pass the gate as "not comparable".
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks import BENCHMARKS
from benchmarks.padding import OverheadRow
from benchmarks.registry import Metric
from benchmarks.settings import BenchSettings
from datamodel import DecodeError, from_json, mismatch, to_json
from hardware.node import Node

from ..conformance.records import StrengthRecord, SuiteRun
from .bisection import Bisection
from .model import SCHEMA, Records, Results, Run, Setup, Upgrade, decode, setup_of, usual_tensors

SCHEMAS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, SCHEMA)
SCHEMA_5_RUN_REPEATS = ("mode", "world_size", "backend", "tensors", "smoke")
"""What schema 5's run record repeated of its setup."""
EARLIER_METHOD = 2
"""The benchmark method of every run written before the method was recorded (schemas 1 and 2)."""


def upgrade(data: Any, folder: Path | None = None) -> Results:
    """``data`` (a results.json's contents) as the current model; a ``DecodeError`` naming the field that does
    not read, or a ``ValueError`` for a schema this project never wrote. ``folder``: the run's, where a run of
    schema 10 or earlier kept its bisection."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema not in SCHEMAS:
        raise ValueError(f"got schema {schema!r}, but should be one of {', '.join(map(str, SCHEMAS))} "
                         "(reports/schema.md)")
    if schema >= 5:
        for step in range(schema, SCHEMA):
            data = STEPS[step](data)
        left_out: list[str] = []
        if schema < 11 and folder is not None:
            data = _bisection_beside(data, Path(folder), left_out)
        results = decode(data)
        return results if schema == SCHEMA else replace(results, upgraded=Upgrade(schema, tuple(left_out)))
    left_out: list[str] = []
    nodes = _nodes(data)
    run = _run(_required(data, "run", dict), schema, nodes)
    metrics = _required(data, "metrics", dict)
    return Results(
        schema=SCHEMA, run=run,
        settings=_optional(BenchSettings, data.get("settings"), "settings", left_out),
        nodes=tuple(_each(Node, nodes, "nodes", left_out)),
        conformance=tuple(_each(SuiteRun, _typed_suite_runs(data.get("conformance")), "conformance", left_out,
                                fill={"crashed_ids": [], "families": {}})),
        suite_world_size=data.get("suite_world_size"),
        strength=tuple(_each(StrengthRecord, data.get("strength"), "strength", left_out, fill={"crashed_tests": 0})),
        benchmarks=_records(data, schema, left_out),
        overhead=tuple(_each(OverheadRow, data.get("overhead"), "overhead", left_out)),
        metrics={key: _metric(key, value, schema) for key, value in metrics.items()},
        explorations=(), comparison=None, trend=(), claims=(), mutation=None, verdict=None,
        plots=tuple(data.get("plots") or ()),
        upgraded=Upgrade(schema, tuple(left_out)),
    )


def _required(data: dict, name: str, kind: type) -> Any:
    value = data.get(name)
    if not isinstance(value, kind):
        raise mismatch(f"$.{name}", value, f"an object ({'the run record' if name == 'run' else name})")
    return value


def _five_to_six(data: dict) -> dict:
    run = _required(data, "run", dict)
    return {**data, "schema": 6, "run": {key: value for key, value in run.items() if key not in SCHEMA_5_RUN_REPEATS}}


def _six_to_seven(data: dict) -> dict:
    verdict = data.get("verdict")
    if isinstance(verdict, dict) and isinstance(verdict.get("lines"), list):
        verdict = {**verdict, "lines": [_typed_line(line, f"$.verdict.lines[{i}]")
                                        for i, line in enumerate(verdict["lines"])]}
    return {**data, "schema": 7, "verdict": verdict, "explorations": []}


def _seven_to_eight(data: dict) -> dict:
    benchmarks = data.get("benchmarks")
    if isinstance(benchmarks, dict):
        benchmarks = {name: [_typed_targets(r) for r in rows] if isinstance(rows, list) else rows
                      for name, rows in benchmarks.items()}
    if isinstance(benchmarks, dict) and isinstance(benchmarks.get("bucket_size"), list):
        benchmarks = {**benchmarks, "bucket_size": [_typed_verification(r) for r in benchmarks["bucket_size"]]}
    claims = data.get("claims")
    if isinstance(claims, list):
        claims = [_typed_claim(c, f"$.claims[{i}]") for i, c in enumerate(claims)]
    return {**data, "schema": 8, "benchmarks": benchmarks, "claims": claims}


def _typed_targets(record: Any) -> Any:
    """A record whose sampling's targets said their kind in words only ('±2%' relative, '±0.03' absolute), with
    the kind."""
    sampling = record.get("sampling") if isinstance(record, dict) else None
    targets = sampling.get("targets") if isinstance(sampling, dict) else None
    if not isinstance(targets, dict):
        return record
    typed = {key: {**t, "kind": "relative" if str(t.get("target", "")).endswith("%") else "absolute"}
             if isinstance(t, dict) and "kind" not in t else t for key, t in targets.items()}
    return {**record, "sampling": {**sampling, "targets": typed}}


def _typed_verification(record: Any) -> Any:
    """A bucket-size record, its verification's words (``why``: 'verified: ...' or 'unverified: a; b') split
    into what stood against the recommendation and what held."""
    verification = record.get("verification") if isinstance(record, dict) else None
    if not isinstance(verification, dict) or not isinstance(verification.get("why"), str):
        return record
    verification = dict(verification)
    why = verification.pop("why")
    if verification.get("verified"):
        verification.update(problems=[], held=why.removeprefix("verified: "))
    else:
        verification.update(problems=[why.removeprefix("unverified: ")], held="")
    return {**record, "verification": verification}


CLAIM_OUTCOMES = ("holds", "does not hold", "not measurable", "not measured", "not assessed")
"""A claim's outcomes: the first words of its verdict as schema 7 and earlier wrote it."""


def _typed_claim(claim: Any, path: str) -> dict:
    """A claim whose verdict was words ('not measured: why') with its outcome and why."""
    if not isinstance(claim, dict) or not isinstance(claim.get("verdict"), str):
        raise mismatch(path, claim, "a claim with its verdict's words (schema 7 or earlier)")
    claim = dict(claim)
    words = claim.pop("verdict")
    outcome = next((o for o in CLAIM_OUTCOMES if words.startswith(o)), None)
    if outcome is None:
        raise mismatch(f"{path}.verdict", words, "words starting " + ", ".join(map(repr, CLAIM_OUTCOMES)))
    _, _, why = words.partition(": ")
    return {**claim, "outcome": outcome, "why": why}


def _typed_line(line: Any, path: str) -> dict:
    """A schema-6 verdict line (its words and two flags) with the kind and status its words and flags tell."""
    if not isinstance(line, dict) or not isinstance(line.get("text"), str):
        raise mismatch(path, line, "a verdict line with its text (schema 6)")
    text = line["text"]
    kind = ("gate" if text.startswith("gated regressions") else
            "collectives" if text.startswith("collectives' results") else "conformance")
    status = ("error" if line.get("error") else "fail" if line.get("fails") else
              "reported" if kind == "gate" and "(reported;" in text else "pass")
    return {"kind": kind, "status": status, "text": text}


NOT_STORED_UNTIL = {"verdict": "verdicts were stored", "comparison": "comparisons were stored",
                    "claims": "the claims' verdicts were stored", "command": "commands were stored",
                    "samples": "figures kept their samples", "phases": "the job timed its phases"}
"""What older runs did not store, by the field (or the part of a field) a page would show."""


def written_before(field: str) -> str:
    """Why a run shows nothing for ``field``: 'a run written before verdicts were stored'."""
    return f"a run written before {NOT_STORED_UNTIL[field]}"


def _eight_to_nine(data: dict) -> dict:
    """9 adds (the verdict's ``covers``, the search's ``seed`` and ``known_skipped``, a finding's ``shrunk``, a
    strength row's ``caught_in`` and ``measured_in``, ``strength_phase``, ``phases``), each read at its default
    but a strength row's ``caught_in``: its suite where it was caught, else nowhere."""
    strength = data.get("strength")
    if isinstance(strength, list):
        strength = [{**row, "caught_in": "suite" if row.get("caught") else "nowhere"} if isinstance(row, dict) else row
                    for row in strength]
    return {**data, "schema": 9, "strength": strength}


def _nine_to_ten(data: dict) -> dict:
    """10 types what 9 wrote in words: a suite run's failures (9: "test: message", the test as JUnit's class and
    name) and the implementation apart from its levels (9: the header "name version (levels: a, b)"); a refusal's
    ``rule`` reads empty (each reason a line of its own)."""
    return {**data, "schema": 10, "conformance": _typed_suite_runs(data.get("conformance"))}


def _typed_suite_runs(runs: Any) -> Any:
    """Suite runs as schema 10 writes them, from the words of earlier schemas."""
    if not isinstance(runs, list):
        return runs
    typed = []
    for run in runs:
        if not isinstance(run, dict) or "header" not in run:
            typed.append(run)
            continue
        name, _, levels = str(run["header"] or "").partition(" (levels: ")
        failed, failures = run.get("failed_ids") or [], run.get("failures") or []
        aligned = len(failed) == len(failures)
        typed.append({**{k: v for k, v in run.items() if k != "header"}, "implementation": name,
                      "levels": [level for level in levels.rstrip(")").split(", ") if level not in ("", "none")],
                      "failures": [{"test": failed[i], "message": str(f).split(": ", 1)[-1]} if aligned
                                   else {"test": "", "message": str(f)} for i, f in enumerate(failures)]})
    return typed


def _ten_to_eleven(data: dict) -> dict:
    """11 keeps a night's bisection in the run (``bisection``); 10 wrote it beside, read by
    ``_bisection_beside``."""
    return {**data, "schema": 11, "bisection": None}


def _eleven_to_twelve(data: dict) -> dict:
    """12 keeps each benchmark that raised (``benchmark_faults``); under 11 a fault ended the job."""
    return {**data, "schema": 12, "benchmark_faults": []}


OLD_BISECTION = "bisection.json"
"""Where a run of schema 10 or earlier kept its night's bisection, beside results.json."""


def _bisection_beside(data: dict, folder: Path, left_out: list[str]) -> dict:
    """The run with the bisection its folder holds; one that does not read is left out, named."""
    path = folder / OLD_BISECTION
    if not path.is_file():
        return data
    try:
        found = from_json(Bisection, json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        left_out.append(f"{OLD_BISECTION}, which does not read ({exc})")
        return data
    return {**data, "bisection": to_json(found)}


STEPS = {5: _five_to_six, 6: _six_to_seven, 7: _seven_to_eight, 8: _eight_to_nine, 9: _nine_to_ten,
         10: _ten_to_eleven, 11: _eleven_to_twelve}
"""Schema n's run, as schema n + 1 writes it."""


def _nodes(data: dict) -> list[dict]:
    """Every node; a schema-1 run recorded rank 0's hardware alone, which stands for its one node."""
    if isinstance(data.get("nodes"), list):
        return data["nodes"]
    hardware = data.get("hardware")
    if isinstance(hardware, dict):
        devices = [d.get("name") for d in (hardware.get("torch") or {}).get("devices", [])]
        return [{"node_rank": 0, "host": hardware.get("host") or {}, "devices": devices}]
    return []


def _run(run: dict, schema: int, nodes: list[dict]) -> Run:
    def field(name: str, kind: type) -> Any:
        value = run.get(name)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise mismatch(f"$.run.{name}", value, f"a {kind.__name__} (schema {schema} runs record it)")
        return value

    backend = field("backend", str)
    tensors = run.get("tensors") or usual_tensors(backend)
    recorded = run.get("setup")
    if isinstance(recorded, dict):
        setup = from_json(Setup, {"tensors": tensors, **recorded}, "$.run.setup")
    else:
        computes_on = [(n.get("devices") or [], (n.get("host") or {}).get("cpu_model", "unknown")) for n in nodes]
        setup = setup_of(backend, tensors, field("world_size", int), field("mode", str), bool(run.get("smoke")),
                         computes_on, EARLIER_METHOD)
    return Run(name=field("name", str), host=str(run.get("host") or "unknown"), setup=setup)


def _metric(key: str, value: Any, schema: int) -> Metric:
    path = f"$.metrics.{key}"
    if schema == 1 and isinstance(value, dict):
        # Nothing said whether it was gated or exact: every metric could fail the job, judged by the threshold,
        # and the conformance counts by any move (what comparisons of these runs always did).
        value = {"gated": True, "exact": key.startswith("conformance/"), **value}
    return from_json(Metric, value, path)


def _optional(kind: type, value: Any, name: str, left_out: list[str]) -> Any:
    if value is None:
        return None
    try:
        return from_json(kind, value, f"$.{name}")
    except DecodeError as exc:
        left_out.append(f"{name}: another shape ({exc})")
        return None


def _each(kind: type, values: Any, name: str, left_out: list[str], fill: dict | None = None) -> list:
    """Each record that reads as ``kind`` (``fill``: defaults for fields older runs lacked); the others left
    out, counted."""
    read, failed = [], None
    for i, value in enumerate(values or []):
        try:
            read.append(from_json(kind, {**(fill or {}), **value} if isinstance(value, dict) else value,
                                  f"$.{name}[{i}]"))
        except DecodeError as exc:
            failed = failed or exc
    if failed:
        left_out.append(f"{name}: {len(values) - len(read)} of {len(values)} records of another shape ({failed})")
    return read


def _records(data: dict, schema: int, left_out: list[str]) -> Records:
    """Schema 4's records, which have the current shape but for what the model derives; older ones left out."""
    records = {}
    for benchmark in BENCHMARKS:
        rows = data.get(benchmark.name)
        if not rows:
            continue
        if schema < 4:
            left_out.append(f"{benchmark.name}: {len(rows)} records of schema {schema}, measured by an earlier "
                            "method in another shape (their metrics are read)")
            continue
        records[benchmark.name] = tuple(_each(benchmark.record, [_without_derived(r) for r in rows],
                                              benchmark.name, left_out))
    return Records(**records)


def _without_derived(record: Any) -> Any:
    """Schema 4 stored what ``Sampled`` now derives (targets_met), and its targets' kind in words only."""
    if isinstance(record, dict) and isinstance(record.get("sampling"), dict):
        record = {**record, "sampling": {k: v for k, v in record["sampling"].items() if k != "targets_met"}}
    return _typed_targets(record)
