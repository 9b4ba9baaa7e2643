"""What an implementation does not support, said one way: its table ``lacks``; ``why_not``, the one question.

Every registered adapter must provide exactly the levels and knobs it declared before its table said them
(``BEFORE``, read from the adapters as they were), and each optional member is a protocol that
``isinstance`` answers as the ``getattr`` probes it replaced did.
"""

import contextlib
import dataclasses
import sys

import pytest
import torch

from ranks.context import Transport
from reference.config import DDPConfig
from reference.layout import LayoutConfig
from suites.impls import REGISTRY, load_implementation
from suites.impls.protocol import (
    KNOBS,
    WRITTEN_AGAINST,
    DeclaresLayouts,
    FinishesGradSync,
    HasNoSync,
    MayBeUnreadable,
    ReportsLines,
    ResetsProcessState,
    SharesExpectations,
    WholeParams,
    ZeroesGradBuffer,
)
from suites.impls.reference import ReferenceImplementation
from suites.impls.support import Lack, check_table, levels, unmapped, why_not

ALL_LEVELS = {"layout", "buffer", "shards", "validation", "ddp", "expert", "optimizer", "checkpoint"}
DDP_AND_OPTIMIZER = ({"ddp", "optimizer"}, set())
BEFORE = {  # name: (levels, knobs mapped), as each adapter stated them in capabilities and knobs; a new peer: the
    # levels it provides and the knobs it maps, as you know them from its upstream, not read off its table
    "reference": (ALL_LEVELS, set(KNOBS)),
    "torch": ({"layout", "ddp", "checkpoint"}, set()),  # checkpoint: the suite's stepping optimizer saves it
    "torch-static-graph": ({"layout", "ddp", "checkpoint"}, set()),  # registered after the tables: its table's
    "torch-bucket-view": ({"layout", "ddp", "checkpoint"}, set()),  # registered after the tables: torch's table
    "torch-find-unused": ({"layout", "ddp", "checkpoint"}, set()),  # likewise
    "fsdp2": DDP_AND_OPTIMIZER,
    "fsdp2-no-reshard": DDP_AND_OPTIMIZER,
    "fsdp2-hsdp": DDP_AND_OPTIMIZER,
    "replicate": DDP_AND_OPTIMIZER,
    "deepspeed": DDP_AND_OPTIMIZER,
    "deepspeed-zero1": DDP_AND_OPTIMIZER,
    "deepspeed-bf16": DDP_AND_OPTIMIZER,
    "deepspeed-zero3": DDP_AND_OPTIMIZER,
    "deepspeed-round-robin": DDP_AND_OPTIMIZER,
    "deepspeed-offload": DDP_AND_OPTIMIZER,
    "megatron-fsdp": DDP_AND_OPTIMIZER,  # registered after the tables: what its table says
    "megatron-fsdp-no-shard": DDP_AND_OPTIMIZER,
    "megatron-fsdp-optim": DDP_AND_OPTIMIZER,
    "megatron-fsdp-optim-grads": DDP_AND_OPTIMIZER,
    "megatron-fsdp-optim-grads-units": DDP_AND_OPTIMIZER,
    "megatron": ({"layout", "buffer", "ddp", "expert", "optimizer"}, None),  # knobs: the installed version's
    "wrap:fixtures.examples.torch_ddp_factory:factory": ({"ddp", "checkpoint"}, set()),
}


@pytest.mark.parametrize("name", BEFORE)
def test_every_adapter_provides_what_it_declared_before_its_table(name):
    impl = load_implementation(name)
    want_levels, want_knobs = BEFORE[name]
    if want_knobs is None:
        from suites.impls.megatron_core import UNHONOURED, upstream_knobs

        # every knob the installed version has, but those its adapter declares it cannot honour
        want_knobs = set(upstream_knobs()) - {row.what for row in UNHONOURED} if impl.unavailable is None else set()
    assert (set(impl.capabilities), set(impl.knobs)) == (want_levels, want_knobs), (
        f"{name} (levels, knobs): got {(sorted(impl.capabilities), sorted(impl.knobs))}, but should be "
        f"{(sorted(want_levels), sorted(want_knobs))}")
    assert levels(impl) == impl.capabilities


def test_every_registered_name_is_in_the_table_above():
    missing = sorted(set(REGISTRY) - set(BEFORE))
    assert not missing, (f"registered, but not in BEFORE (tests/suites/impls/test_support.py): {missing}; add a row "
                         "for each, name: (the levels it provides, the knobs it maps), as its upstream does, e.g. "
                         f"{missing[0]!r}: ({{'ddp', 'checkpoint'}}, set()) for a peer whose optimizer is the suite's, "
                         "({'ddp', 'optimizer'}, set()) for one that steps with its own")


@pytest.mark.parametrize("row, message", [
    (lambda: Lack("polcy", "typo"), "what: got 'polcy', but should be a level"),
    (lambda: Lack("buffer", "x", when=bool), "got a `when` for a level or knob"),
    (lambda: Lack("force_all_reduce", "x", when=bool), "got a `when` for a level or knob"),
    (lambda: Lack("overlap_grad_reduce=False", "x", when=bool), "got both a value and a `when`"),
    (lambda: Lack("transport=nccl+cpu", "x"), "should name one of gloo\\+cpu, gloo\\+cuda, nccl\\+cuda"),
])
def test_a_row_that_says_nothing_clear_is_refused(row, message):
    with pytest.raises(ValueError, match=message):
        row()


class Fake(ReferenceImplementation):
    name, version = "fake", "1"
    lacks = (
        Lack("shards", "the fake keeps no shards"),
        *unmapped({"force_all_reduce"}, "the fake predates them"),
        Lack("overlap_grad_reduce=False", "the fake always overlaps"),
        Lack("policy", "the fake has no {value!r} policy", when=lambda policy: policy == "high-busbw"),
        Lack("factory.unsupported", lambda config: "no tiny buckets" if config.bucket_size == 1 else None),
        Lack("transport=gloo+cuda", "the fake coalesces on gloo"),
    )


@pytest.mark.parametrize("need, reason", [
    ("shards", "fake does not provide the 'shards' level (cached per-rank shard views and ownership ranges): "
               "the fake keeps no shards"),
    ("buffer", None),
    ("grad_norm_skip_threshold", "fake 1 does not map grad_norm_skip_threshold (make_optimizer(..., "),
    ("force_all_reduce", None),
    (DDPConfig(num_distributed_optimizer_instances=2, policy="padded", overlap_grad_reduce=True,
               param_name_patterns_for_fp32_local_accumulation=("all",)),
     "fake 1 does not map num_distributed_optimizer_instances (replicas of the distributed optimizer, each "
     "sharding over dp / N ranks): the fake predates them; param_name_patterns_for_fp32_local_accumulation"),
    (DDPConfig(overlap_grad_reduce=False), "overlap_grad_reduce=False: the fake always overlaps"),
    (DDPConfig(overlap_grad_reduce=True), None),
    (LayoutConfig(), None),  # overlap is no field of a LayoutConfig
    (LayoutConfig(policy="high-busbw"), "policy: the fake has no 'high-busbw' policy"),
    (LayoutConfig(bucket_size=1), "no tiny buckets"),
    (Transport("gloo", "cuda"), "fake cannot run over gloo+cuda: the fake coalesces on gloo"),
    (Transport("gloo", "cpu"), None),
    (7, None),  # not a need of the implementation at all
])
def test_why_not_reads_each_kind_of_row(need, reason):
    got = why_not(Fake(), need)
    assert (got is None) == (reason is None) and (reason is None or got.startswith(reason)), (
        f"why_not(fake, {need!r}): got {got!r}, but should start with {reason!r}")


def test_unavailable_comes_before_everything():
    gone = Fake()
    gone.unavailable = "not installed"
    assert why_not(gone, "shards") == why_not(gone, None) == "fake: not installed"


def test_a_need_that_asks_itself_is_asked():
    class Needs:
        def unsupported_by(self, impl):
            return f"{impl.name} is not enough"

    assert why_not(Fake(), Needs()) == "fake is not enough"


def test_an_unknown_name_is_refused():
    with pytest.raises(ValueError, match="knobs: got \\['bufer'\\], but should be drawn from"):
        why_not(Fake(), "bufer")


def test_a_knob_added_later_is_lacked_by_an_adapter_that_does_not_map_it(monkeypatch):
    monkeypatch.setitem(KNOBS, "knob_of_tomorrow", "a knob upstream adds later")
    rows = unmapped({"force_all_reduce"}, "why")
    assert {r.what for r in rows} == set(KNOBS) - {"force_all_reduce"}, [r.what for r in rows]


def test_levels_stated_apart_from_the_table_are_refused():
    """The way an adapter said its levels before (``capabilities`` set directly) would be ignored: refused."""
    class Stated(ReferenceImplementation):
        name = "stated"
        capabilities = frozenset({"layout"})

    with pytest.raises(ValueError, match=r"stated.capabilities: got \['layout'\], but should be \['buffer'"):
        check_table(Stated())


def test_rows_of_another_type_are_refused():
    class Strings(ReferenceImplementation):
        name = "strings"
        lacks = ("buffer",)

    with pytest.raises(ValueError, match="strings.lacks: got \\['buffer'\\], but should hold only"):
        check_table(Strings())


def test_an_adapter_without_a_table_is_refused_at_load(tmp_path, monkeypatch):
    (tmp_path / "tableless_adapter.py").write_text(
        "class Old:\n    name, version, unavailable = 'old', '1', None\n"
        "    capabilities = frozenset({'layout'})\n"
        "    def unsupported(self, config):\n        return None\n\nimplementation = Old()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"Implementation \(missing: lacks\)"):
        load_implementation("tableless_adapter")
    sys.modules.pop("tableless_adapter", None)


# Optional members: each protocol answers as the probe it replaced (methods: getattr(x, m, None) is not None;
# attributes: hasattr).

class WithAll:
    declared_layouts = None
    unreadable = None

    def whole_params(self):
        return {}

    def no_sync(self):
        return contextlib.nullcontext()

    def finish_grad_sync(self):
        pass

    def zero_grad_buffer(self):
        pass

    def report_lines(self):
        return []

    def reset_process_state(self):
        pass

    expectations = "fsdp2"


class SetToNone:
    whole_params = no_sync = finish_grad_sync = zero_grad_buffer = report_lines = reset_process_state = None


OPTIONAL = [(WholeParams, "whole_params", True), (HasNoSync, "no_sync", True),
            (FinishesGradSync, "finish_grad_sync", True), (ZeroesGradBuffer, "zero_grad_buffer", True),
            (ReportsLines, "report_lines", True), (ResetsProcessState, "reset_process_state", True),
            (DeclaresLayouts, "declared_layouts", False), (MayBeUnreadable, "unreadable", False),
            (SharesExpectations, "expectations", False)]


@pytest.mark.parametrize("protocol, member, method", OPTIONAL, ids=[o[1] for o in OPTIONAL])
@pytest.mark.parametrize("obj", [WithAll(), SetToNone(), object(), torch.nn.Linear(2, 2), None],
                         ids=["with", "none", "object", "module", "None"])
def test_an_optional_member_is_a_protocol_answered_as_its_probe_was(protocol, member, method, obj):
    probe = getattr(obj, member, None) is not None if method else hasattr(obj, member)
    assert isinstance(obj, protocol) == probe, f"isinstance({obj!r}, {protocol.__name__}): got {not probe}"


def test_the_adapters_have_the_optional_members_they_had():
    from suites.impls.deepspeed import DeepSpeedDDP
    from suites.impls.forwarding import ForwardingDDP, GradsInParamsDDP
    from suites.impls.fsdp2 import FSDP2DDP

    assert issubclass(FSDP2DDP, WholeParams) and issubclass(DeepSpeedDDP, WholeParams)
    assert not issubclass(GradsInParamsDDP, WholeParams) and not issubclass(ForwardingDDP, WholeParams)
    megatron, reference = load_implementation("megatron"), load_implementation("reference")
    assert isinstance(megatron, ResetsProcessState) and isinstance(megatron, ReportsLines)
    assert not isinstance(reference, ResetsProcessState) and not isinstance(reference, ReportsLines)
    shared = {name: load_implementation(name).expectations for name in REGISTRY
              if isinstance(load_implementation(name), SharesExpectations)}
    assert shared == SHARED, (
        f"got the expectation lists {shared}, but should be {SHARED}: a registered peer whose `expectations` names "
        "a list (fixtures/expectations/<list>.toml) gets a row name: list in SHARED, "
        "tests/suites/impls/test_support.py")


SHARED = {"torch-bucket-view": "torch", "torch-find-unused": "torch", "fsdp2": "fsdp2", "fsdp2-no-reshard": "fsdp2", "fsdp2-hsdp": "fsdp2-hsdp", "replicate": "fsdp2", "deepspeed": "deepspeed",
          "deepspeed-zero1": "deepspeed-zero1", "deepspeed-bf16": "deepspeed-bf16", "deepspeed-zero3": "deepspeed",
          "deepspeed-round-robin": "deepspeed-round-robin", "deepspeed-offload": "deepspeed-offload"}
"""The registered peers with an ``expectations`` attribute, and the list each reads: FSDP2's behaviour is its own
whatever applies the units; ZeRO-3 shares ZeRO-2's findings; torch DDP's findings hold with bucket views and with the search for unused params."""



def test_skipping_beside_clipping_by_a_norm_the_implementation_cannot_skip_by_is_unsupported():
    """megatron-core decides a skip from the L2 norm its clipping computed: a case that clips by the inf norm and
    skips a step is not one it can express, said before the adapter is asked (which refuses it mid-run)."""
    from suites.impls.megatron_core import MegatronCoreImplementation
    from suites.multigpu.cases import Case

    class SkipsByL2(ReferenceImplementation):
        skip_norm_types = frozenset({2.0})

    inf_clip_and_skip = Case("inf-clip-skip", clip=1.0, norm_type=float("inf"), skip_above=100.0)
    reason = inf_clip_and_skip.unsupported_by(SkipsByL2())
    assert reason == "reference skips a step by the L2 norm only; this case clips by the inf norm", reason
    assert inf_clip_and_skip.unsupported_by(ReferenceImplementation()) is None
    for supported in (Case("l2-clip-skip", clip=1.0, skip_above=100.0), Case("inf-skip", norm_type=float("inf"), skip_above=100.0),
                      Case("inf-clip", clip=1.0, norm_type=float("inf"))):
        assert supported.unsupported_by(SkipsByL2()) is None, supported
    assert MegatronCoreImplementation.skip_norm_types == {2.0}


def untold(config_type, knobs, written_against) -> list[str]:
    """What to do for each field of ``config_type`` that is neither a knob nor one every adapter was written
    against: handed to every peer, which would ignore it."""
    return [f"DDPConfig.{f.name}: make it a knob (a line in KNOBS, suites/impls/protocol.py: every adapter built on "
            "unmapped(...) then lacks it), or, where the peers take it as a field, add it to WRITTEN_AGAINST "
            "(beside KNOBS) and a Lack row to each adapter that cannot honour it (wrap.py's "
            "NOT_TOLD for a factory): docs/extending.md (a) step 1"
            for f in dataclasses.fields(config_type) if f.name not in knobs and f.name not in written_against]


def test_every_field_of_the_configuration_is_a_knob_or_one_the_adapters_were_written_against():
    problems = untold(DDPConfig, KNOBS, WRITTEN_AGAINST)
    assert not problems, "got fields the peers would be handed and ignore:\n" + "\n".join(problems)


def test_the_field_check_reports_a_new_field_that_is_no_knob():
    @dataclasses.dataclass(frozen=True)
    class Tomorrow(DDPConfig):
        overlap_tomorrow: bool = False

    assert [p.split(":")[0] for p in untold(Tomorrow, KNOBS, WRITTEN_AGAINST)] == ["DDPConfig.overlap_tomorrow"]
    assert untold(Tomorrow, {**KNOBS, "overlap_tomorrow": "a knob"}, WRITTEN_AGAINST) == []
