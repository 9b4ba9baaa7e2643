"""The search and the shrinking of ``suites/multigpu/explore.py``, over a stand-in for the ranks.

The stand-in fails where three axes meet (any distributed policy, more than
one microbatch, world size 1) and only from the second step on, as a bug
that needs all of them would; the search must name those axes, all their
failing values, the fewest steps, and nothing else. Against a stand-in that
never fails it finds nothing and spends the budget it was given.
"""

import json
import time

import pytest

from datamodel import from_json
from suites.multigpu import covering
from suites.multigpu.explore import Budget, Explorer
from suites.multigpu.records import Exploration
from suites.multigpu.space import BASE, check, spell
from tests.pytest_run import run_pytest

WORLDS = ("1", "2", "3", "4")


def three_axes(labels, steps):
    meets = labels["world"] == "1" and labels["policy"] != "packed" and labels["microbatches"] != "1"
    return "AssertionError: step 1 grads doubled" if meets and steps >= 2 else None


def never(labels, steps):
    return None


def explorer(run, tmp_path, supported=lambda labels: True):
    return Explorer(run, "stand-in", WORLDS, supported, str(tmp_path / "db"))


def test_a_three_axis_failure_is_shrunk_to_its_three_axes_and_every_failing_value(tmp_path):
    exploration = explorer(three_axes, tmp_path).explore(covering.rows("triples"), Budget(200, None))
    assert len(exploration.findings) == 1, f"findings: got {[f.composition for f in exploration.findings]}"
    finding, = exploration.findings
    assert finding.composition == "world=1,policy=padded,microbatches=2", finding
    assert finding.values == {"world": ["1"], "policy": ["padded", "high-busbw", "shard-aligned"],
                              "microbatches": ["2", "3"]}, finding.values
    assert finding.steps == 2, f"steps: got {finding.steps}, but should be 2, the fewest that fail"
    assert finding.reproduce("x") == "pytest suites/multigpu --impl x --case 'world=1,policy=padded,microbatches=2,steps=2'"
    assert finding.message == "step 1 grads doubled"
    check(dict(part.split("=") for part in finding.composition.split(",")))  # a composition --case accepts


def test_the_search_alone_finds_and_shrinks_it_too(tmp_path):
    exploration = explorer(three_axes, tmp_path).explore([], Budget(300, None))
    assert [f.composition for f in exploration.findings] == ["world=1,policy=padded,microbatches=2"]
    assert exploration.findings[0].found_by == "search" and exploration.triples == 0


def test_compositions_holding_a_finding_are_not_run_again(tmp_path):
    exploration = explorer(three_axes, tmp_path).explore(covering.rows("triples"), Budget(200, None))
    holding = [row for row in covering.rows("triples") if exploration.findings[0].contains(row)]
    assert exploration.explained == len(holding) - 1, (exploration.explained, len(holding))


def test_the_database_replays_a_failure_first(tmp_path):
    explorer(three_axes, tmp_path).explore([], Budget(300, None))
    again = explorer(three_axes, tmp_path).explore([], Budget(1, None))
    assert [f.composition for f in again.findings] == ["world=1,policy=padded,microbatches=2"], (
        "a second search of one composition with the same database: got "
        f"{[f.composition for f in again.findings]}, but should replay the failure found before")


def test_nothing_found_spends_the_budget_and_says_so(tmp_path):
    triples = covering.rows("triples")
    exploration = explorer(never, tmp_path).explore(triples, Budget(len(triples) + 20, None))
    assert not exploration.findings
    assert exploration.triples == len(triples) and exploration.searched == 20, exploration
    assert exploration.stopped_by == "compositions"


def test_a_time_budget_stops_the_search(tmp_path):
    def slow(labels, steps):
        time.sleep(0.05)

    start = time.monotonic()
    exploration = explorer(slow, tmp_path).explore(covering.rows("triples"), Budget(10_000, 1.0))
    assert time.monotonic() - start < 10 and exploration.stopped_by == "time", exploration


def test_the_search_stops_drawing_when_its_seconds_are_spent_in_bounded_time_and_memory(tmp_path):
    """Against a stand-in that answers at once, a search asked for 100,000 compositions and given 2 s ends within
    about those 2 s, each draw's bookkeeping the same however many came before it; the old search kept drawing,
    without running them, up to the compositions asked for, scanning every earlier outcome at each draw."""
    import tracemalloc

    tracemalloc.start()
    start = time.monotonic()
    exploration = explorer(never, tmp_path).explore([], Budget(100_000, 2.0))
    took = time.monotonic() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert exploration.stopped_by == "time" and took < 4.0, (took, exploration.stopped_by)
    assert 0 < exploration.searched < 100_000, exploration.searched
    assert peak < 100 * 2**20, f"peak memory: got {peak / 2**20:.0f} MiB, but should stay under 100 MiB"


def test_confirming_and_shrinking_keep_to_the_budget_and_a_cut_short_finding_says_so(tmp_path):
    def slow_everywhere(labels, steps):
        time.sleep(0.2)
        return "AssertionError: wrong" if labels["microbatches"] != "1" else None

    start = time.monotonic()
    failing_first = sorted(covering.rows("triples"), key=lambda labels: labels["microbatches"] == "1")
    exploration = explorer(slow_everywhere, tmp_path).explore(failing_first, Budget(10_000, 1.5))
    took = time.monotonic() - start
    assert took < 1.5 + 0.2 * 3, f"the search took {took:.1f} s, but should keep to its 1.5 s and a run or two"
    assert exploration.findings and not exploration.findings[0].shrunk, exploration.findings


def test_the_same_seed_draws_the_same_compositions_and_another_other_ones(tmp_path):
    def drawn(seed, folder):
        seen = []
        Explorer(lambda labels, steps: seen.append((spell(labels), steps)), "stand-in", WORLDS, lambda labels: True,
                 str(tmp_path / folder), seed=seed).explore(covering.rows("triples"), Budget(150, None))
        return seen

    first, again, other = drawn(7, "a"), drawn(7, "b"), drawn(8, "c")
    assert first == again, "a seed must draw the same compositions, in the same order"
    assert first != other and len(first) == 150, (len(first), len(other))


def test_compositions_the_expectations_record_as_known_failures_are_not_run(tmp_path):
    ran = []

    def record(labels, steps):
        ran.append(labels)
        return "AssertionError: known" if labels["world"] == "1" else None

    exploration = Explorer(record, "stand-in", WORLDS, lambda labels: True, str(tmp_path / "db"),
                           expected=lambda labels: "recorded" if labels["world"] == "1" else None).explore(
        covering.rows("triples"), Budget(200, None))
    assert not exploration.findings and all(labels["world"] != "1" for labels in ran), exploration.findings
    assert exploration.known_skipped == sum(row["world"] == "1" for row in covering.rows("triples")), exploration


def test_compositions_an_implementation_cannot_run_are_counted_and_never_run(tmp_path):
    seen = []

    def record(labels, steps):
        seen.append(labels["policy"])

    exploration = explorer(record, tmp_path, supported=lambda labels: labels.get("policy", "packed") == "packed").explore(
        covering.rows("triples"), Budget(200, None))
    assert exploration.unsupported > 0 and set(seen) == {"packed"}, (exploration.unsupported, set(seen))


def test_shrinking_never_steps_outside_the_world_sizes_or_what_the_implementation_supports(tmp_path):
    """At a torchrun world size of 1 with padding unsupported, a failure of world 1 shrinks without trying world
    2 (which this session cannot start) or a padded policy."""
    tried = []

    def fails_at_one(labels, steps):
        tried.append((labels["world"], labels["policy"]))
        return "AssertionError: x" if labels["microbatches"] != "1" else None

    supported = lambda labels: labels.get("policy", "packed") == "packed"  # noqa: E731
    exploration = Explorer(fails_at_one, "stand-in", ("1",), supported, None).explore(
        covering.rows("triples"), Budget(40, None))
    assert {w for w, _ in tried} == {"1"} and {p for _, p in tried} == {"packed"}, set(tried)
    assert [f.composition for f in exploration.findings] == ["world=1,microbatches=2"], exploration.findings


@pytest.mark.parametrize("world", ["2"])
def test_a_torchrun_world_size_bounds_every_composition(tmp_path, world):
    worlds = []
    Explorer(lambda labels, steps: worlds.append(labels["world"]), "stand-in", (world,), lambda labels: True,
             None).explore(covering.rows("triples"), Budget(60, None))
    assert set(worlds) == {world} and BASE["world"] == world


def test_the_search_shrinks_a_three_axis_bug_of_the_catalogue_to_its_axes_on_real_ranks(tmp_path):
    """``pytest suites/multigpu --explore`` against the catalogue's one-rank shard bug: the 38th composition of
    the triples is the first to hold it (one rank, two microbatches, a distributed policy); the finding names
    those three axes, and the line that reproduces it does."""
    report = tmp_path / "exploration.json"
    spec = "fixtures.broken.one_rank_shard_adds_twice"
    first = next(i for i, labels in enumerate(covering.rows("triples"), 1)
                 if labels["world"] == "1" and labels["microbatches"] != "1" and labels["policy"] != "packed")
    proc = run_pytest("suites/multigpu", "--impl", spec, "--explore", str(first), "--explore-db",
                      str(tmp_path / "db"), "--explore-report", str(report), in_process=True)
    assert proc.returncode == 1, proc.stdout[-2000:]
    exploration = from_json(Exploration, json.loads(report.read_text()))
    assert [set(f.values) for f in exploration.findings] == [{"world", "policy", "microbatches"}], exploration
    finding = exploration.findings[0]
    assert finding.values["policy"] == ["padded", "high-busbw", "shard-aligned"], finding.values
    assert finding.reproduce(spec) in proc.stdout, proc.stdout[-2000:]
    again = run_pytest("suites/multigpu", "--impl", spec, "--case", finding.reproduce(spec).split("--case ")[1]
                       .strip("'"), in_process=True)
    assert again.returncode == 1 and "1 failed" in again.stdout, again.stdout[-2000:]
