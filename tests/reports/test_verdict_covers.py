"""The verdict covers the implementations the user gates: a new finding of the search in one of them fails the run;
one in a peer (--peer, or the default peers) is reported with its reproduction line and passes it."""

from dataclasses import replace
from datetime import date, timedelta

import pytest

from benchmarks.settings import DEFAULT_PEERS
from reports.comparison.verdict import covered, decide
from reports.nightly.job import (PEERS_A_NIGHT, covered_by, implementations, parse_args, run_exploration,
                                 search_budgets)
from reports.render.summary import summary_markdown
from reports.store.model import Results
from suites.impls import REGISTRY
from suites.multigpu.covering import rows
from tests.reports.builders import results


def test_the_defaults_cover_the_reference_and_run_every_peer(tmp_path):
    args = parse_args(["--out", str(tmp_path)])
    assert covered_by(args) == ("reference",), covered_by(args)
    assert implementations(args) == ("reference", *DEFAULT_PEERS), implementations(args)
    assert implementations(parse_args(["--peer", "torch", "--out", str(tmp_path)])) == ("reference", "torch"), (
        "--peer replaces the default peers")
    mine = parse_args(["--impl", "fixtures.broken.no_scaling", "--out", str(tmp_path)])
    assert implementations(mine) == covered_by(mine) == ("fixtures.broken.no_scaling",), "no peer unless asked"
    assert covered(["x"], ["x", "reference"]) == ("x", "reference"), "the reference is covered whenever it runs"


@pytest.mark.parametrize("count", [None, 7, 2], ids=["the-default-peers", "seven-peers", "two-peers"])
def test_the_peers_take_turns_at_the_search_and_the_covered_search_every_night(tmp_path, count):
    peers = DEFAULT_PEERS if count is None else [name for name in REGISTRY if name != "reference"][:count]
    asked = [] if count is None else [arg for peer in peers for arg in ("--peer", peer)]
    args = parse_args([*asked, "--out", str(tmp_path)])
    turns = -(-len(peers) // PEERS_A_NIGHT)  # nights for every peer to have its turn, PEERS_A_NIGHT at most a night
    night = date(2026, 11, 29)
    nights = [search_budgets(args, covered_by(args), night + timedelta(days=d)) for d in range(2 * turns)]
    assert all(budgets["reference"] == 60 for budgets in nights), nights
    searched = [set(budgets) - {"reference"} for budgets in nights]
    assert all(0 < len(each) <= PEERS_A_NIGHT for each in searched), searched
    for start in range(turns):  # any run of `turns` nights searches each peer exactly once
        met = sorted(peer for each in searched[start:start + turns] for peer in each)
        assert met == sorted(peers), f"nights {start} to {start + turns - 1}: got {met}, but should be each peer once"


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Results:
    """A search against two broken implementations, one gated and one a peer: each finds its bug."""
    out = tmp_path_factory.mktemp("runs")
    args = parse_args(["--impl", "fixtures.broken.no_scaling", "--peer", "fixtures.broken.double_scaling",
                       "--suite", "suites/multigpu/test_compositions.py", "--explore-seconds", "12", "--out", str(out)])
    # The seed picks the triple the search starts at: one where a scaling bug shows (two ranks, a factor of 1/2).
    seed = next(i for i, row in enumerate(rows("triples")) if (row["world"], row["average"], row["loss"], row["skip"])
                == ("2", "sum", "mean", "none"))
    explorations = run_exploration(args, search_budgets(args, covered_by(args), date.today()), seed)
    run = results(explorations=tuple(explorations))
    return replace(run, verdict=decide(run, False, covered_by(args)))


def test_a_new_finding_of_a_gated_implementation_fails_and_a_peers_is_reported(planted):
    lines = {line.text.split(":")[0]: line for line in planted.verdict.lines if line.kind == "search"}
    gated = lines["search past the covering arrays against fixtures.broken.no_scaling"]
    peer = lines["search past the covering arrays against fixtures.broken.double_scaling"]
    assert gated.status == "fail" and peer.status == "reported", (gated, peer)
    assert planted.verdict.exit_code == 1
    text = summary_markdown(planted)
    assert "pytest suites/multigpu --impl fixtures.broken.double_scaling --case '" in text, text[:3000]
    assert "reported, not failed (the verdict does not cover this implementation)" in text, text[:3000]


def test_the_same_findings_in_a_peer_alone_pass_the_run(planted):
    peer_only = tuple(e for e in planted.explorations if e.impl == "fixtures.broken.double_scaling")
    run = results(explorations=peer_only)
    verdict = decide(run, False, ("reference",))
    assert verdict.exit_code == 0 and [line.status for line in verdict.lines if line.kind == "search"] == [
        "reported"], verdict.lines
