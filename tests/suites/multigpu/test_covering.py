"""The pairwise covering array meets every pair where it can show, for the rules alone and for each registered
implementation: at least ``TIMES`` times, and once in a composition holding no masking value besides the pair's own
where one can (counted here, apart from the generator's bookkeeping); the registered implementations' own rows are
stored for what each can express here. And the model's shape needs no axis: under the high-busbw and shard-aligned
policies every rank but the first holds padding only."""

import itertools

import pytest

from reference.layout import LayoutConfig, ParamSpec, plan_layout
from suites.impls import REGISTRY, load_implementation
from suites.multigpu import covering, space
from suites.multigpu.cases import MID, TINY
from suites.multigpu.models import SHAPES, make_model


def unmasked_choices(pair: dict[str, str]) -> list[dict[str, str]]:
    """Every way to give the masking axes the pair leaves free a value that masks nothing."""
    free = [a for a in space.AXES if a.name in {m.axis for m in space.MASKING} and a.name not in pair]
    options = [[v for v in a.labels if (a.name, v) not in space.MASKED] for a in free]
    return [dict(zip((a.name for a in free), values)) for values in itertools.product(*options)]


def shortfalls(rows: list[dict[str, str]], can) -> list[str]:
    """Each pair ``can`` expresses that ``rows`` meet fewer than ``TIMES`` times, or never without a masking value
    besides its own where some composition it runs would."""
    out = []
    for combo in covering.allowed(2):
        pair = dict(combo)
        if not can(pair):
            continue
        meeting = [r for r in rows if all(r[a] == v for a, v in pair.items())]
        plain = [r for r in meeting if not space.masks(r, besides=pair)]
        if len(meeting) < covering.TIMES:
            out.append(f"{pair}: met {len(meeting)} times")
        elif not plain and any(can({**pair, **choice}) for choice in unmasked_choices(pair)):
            out.append(f"{pair}: met only beside a masking value")
    return out


def test_the_common_rows_meet_every_pair_twice_and_once_unmasked():
    missed = shortfalls(covering.rows("pairwise"), space.extendable)
    assert not missed, f"got {len(missed)} pairs short, but should be none:\n" + "\n".join(missed[:20])


def test_a_row_taken_away_leaves_pairs_short():
    """The check above can fail: without the rows the augmenting added, pairs are met only beside a masking value."""
    rows = covering.rows("pairwise")
    assert shortfalls(rows[: len(rows) // 2], space.extendable)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_pair_an_implementation_can_express_meets_in_rows_stored_for_it(name):
    impl = load_implementation(name)
    if impl.unavailable is not None:
        pytest.skip(f"{name} is not installed here: {impl.unavailable}")
    supported = space.supported_by(impl)
    own = covering.OwnRows(supported, 2)
    if own.needed is not None:
        assert own.key in covering.stored().get("implementations", {}), (
            f"{name}'s own rows: got none stored for what it can express here ({own.key}), but should be: "
            "tox -m regenerate (or python -m suites.multigpu.covering --write-own where it is installed)")
    ran = [row for row in covering.rows("pairwise") if supported(row)] + covering.for_implementation(supported)
    can = covering.runnable(supported)
    got = covering.coverage("pairwise", ran, 2, can)
    assert got.covered == got.expressible, (
        f"{name}: got {got.covered} of the {got.expressible} pairs it can express met, but should be every one")
    missed = shortfalls(ran, can)
    assert not missed, f"{name}: got {len(missed)} pairs short, but should be none:\n" + "\n".join(missed[:20])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("policy", ["high-busbw", "shard-aligned"])
@pytest.mark.parametrize("dp", [2, 3, 4])
@pytest.mark.parametrize("bucket", [TINY, MID, None])
def test_the_padding_policies_leave_every_rank_but_the_first_padding_only(policy, dp, bucket, shape):
    model = make_model(tied=True, shape=SHAPES[shape])
    specs = [ParamSpec.from_parameter(n, p) for n, p in model.named_parameters()]
    layout = plan_layout(specs, LayoutConfig(dp=dp, policy=policy, bucket_size=bucket))
    for buffer in layout.buffers:
        for rank in range(1, dp):
            held = sum(max(0, min(end, hi) - max(start, lo))
                       for b in range(buffer.num_buckets) for lo, hi in [buffer.owned_range(b, rank)]
                       for start, end, owner in buffer.param_index_map.values() if owner == b)
            assert held == 0, f"{policy} at dp {dp}: rank {rank} holds {held} param elements, but should hold none"


def test_a_stale_file_refuses_the_compositions_but_not_one_composition_or_none(monkeypatch, capfd):
    # a new axis' value runs as one line (--case) and the named tests run, before the arrays are regenerated
    from tests.pytest_run import run_pytest

    monkeypatch.setattr(covering, "fingerprint", lambda: "another-space")
    monkeypatch.setattr(covering, "stored", covering.stored.__wrapped__)  # not the file as read before
    whole = run_pytest("suites/multigpu/test_compositions.py", "--collect-only", "-q", in_process=True)
    refusal = whole.stdout + whole.stderr + capfd.readouterr().err
    assert whole.returncode == pytest.ExitCode.USAGE_ERROR and "should be for another-space" in refusal, refusal
    for args in (["--compositions=none"], ["--case", "world=2"]):
        one = run_pytest("suites/multigpu/test_compositions.py", "--collect-only", "-q", *args, in_process=True)
        assert one.returncode == 0, (args, one.stdout[-1500:], one.stderr[-1500:])
