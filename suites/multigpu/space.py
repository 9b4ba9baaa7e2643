"""The configuration space the multi-rank cases are drawn from: axes, their values, and the rules between them.

Bugs of bucketed data parallelism live where features meet (a one-rank
group with microbatches, bf16 experts with clipping), so the cases are
generated as compositions of these axes rather than picked one axis at a
time (``compositions``: every pair of values, searched further by
``explore``). Each axis lists its values with the base first: a composition
names only the axes it moves away from the base, which is its id and its
``--case`` spelling (``world=1,policy=padded,microbatches=2``).

The values of an axis reach both sides of every decision it feeds (a
threshold below and above what it is compared with, a factor that is 1 in one
setting and not in another), or a pair that meets could still hide its bug.

A ``Rule`` says which combinations mean nothing or cannot run, and why: it
hides them from every implementation. What one implementation does not
support is never a rule: its cases skip with the reason
(``Case.unsupported_by``, ``support.why_not``).

A ``Mask`` is a value under which whole classes of bugs cannot show (one
rank, where every collective is the identity; a scaling factor of 1; no step
taken): a pair of values met only in compositions holding one tests little,
so the covering arrays meet every pair in a composition without any
(``covering.py``). The model's shape is an axis: where its sizes land decides
whether a wrong offset shows. A model small against its buffer, where some
rank's shards hold padding only, is what the policies ``high-busbw`` and
``shard-aligned`` make of every shape at every world size above 1 (each
bucket pads to 65,536 elements or more), and ``padded`` the large case.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property

from .cases import MID, MOMENTS, TINY, Case
from .models import SHAPES
from .moe import Topology
from .records import STEPS

CLIP = {"l2": 0.05, "inf": 2e-3}
"""max_norm of a clip that every step's norm exceeds: the L2 and inf norms of this suite's models stay above 0.43
and 0.049 (fp32 and bf16, dense and experts, 1 to 4 ranks, 1 to 3 microbatches, mean and per-token losses)."""
NOT_REACHED = 100.0
"""A max_norm (and a skip threshold) no step's norm reaches (at most 17.5 measured)."""
SKIP_EVERY_STEP = 0.01
"""A skip threshold below every norm of either kind."""
BETWEEN = 3.0
"""A skip threshold of ``BETWEEN`` times the clip's max_norm lies between the clipped norm (max_norm) and the norm
before clipping, for either norm: a skip decided on the wrong one of them shows."""
DISTRIBUTED = ("padded", "high-busbw", "shard-aligned")


@dataclass(frozen=True)
class Value:
    """One value of an axis: its label, and the ``Case`` fields it sets (``derive``: fields that depend on what
    the other axes set)."""

    label: str
    changes: Mapping[str, object] = field(default_factory=dict)
    derive: Callable[[Case], dict] | None = None

    def apply(self, case: Case) -> Case:
        case = dataclasses.replace(case, **self.changes)
        return dataclasses.replace(case, **self.derive(case)) if self.derive else case


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[Value, ...]
    """The base first."""
    feeds: str
    """The decision the axis feeds, and why its values reach both sides of it."""

    @property
    def base(self) -> str:
        return self.values[0].label

    @cached_property
    def labels(self) -> tuple[str, ...]:
        return tuple(v.label for v in self.values)

    def value(self, label: str) -> Value:
        if label not in self.labels:
            raise ValueError(f"{self.name}: got {label!r}, but should be one of {', '.join(self.labels)}")
        return self.values[self.labels.index(label)]


def _flag(name: str, off: str, on: str, feeds: str, **on_changes) -> Axis:
    return Axis(name, (Value(off), Value(on, on_changes)), feeds)


def _experts(ep: int) -> Value:
    return Value(f"ep{ep}", derive=lambda case: dict(moe=Topology(ep, case.world // ep)))


AXES: tuple[Axis, ...] = (
    Axis("world", tuple(Value(str(n), dict(world=n)) for n in (2, 1, 3, 4)),
         "how many ranks reduce: a one-rank group issues no collective; at two ranks gloo's fp32 sum is exact, at "
         "three and four its order shows; four holds two instances or two expert replicas of two"),
    Axis("policy", tuple(Value(p, dict(policy=p)) for p in ("packed", *DISTRIBUTED)),
         "all-reduce (packed) or a distributed optimizer, padded to each policy's divisor"),
    _flag("overlap", "on", "off", "whether buckets launch from backward hooks or at finish_grad_sync", overlap=False),
    Axis("bucket", (Value("tiny", dict(bucket_size=TINY)), Value("mid", dict(bucket_size=MID)),
                    Value("one", dict(bucket_size=None))),
         "many buckets (100 elements: most params close one), a few (1000), or one per buffer"),
    _flag("average", "sum", "avg-in-collective", "a 1/dp factor before a SUM, or 1 before an AVG",
          average_in_collective=True),
    Axis("microbatches", tuple(Value(str(n), dict(microbatches=n)) for n in (1, 2, 3)),
         "no_sync: a last microbatch alone, a first and a last, and one in the middle too"),
    Axis("precision", (Value("fp32"), Value("bf16-fp32-grads", dict(bf16=True)),
                       Value("bf16", dict(bf16=True, fp32_grads=False))),
         "param and grad dtypes: fp32; bf16 params reduced in fp32; bf16 throughout"),
    _flag("tied", "off", "on", "a shared embedding, which closes a bucket of its own and counts once", tied=True),
    Axis("clip", (Value("none"), Value("l2", dict(clip=CLIP["l2"])),
                  Value("l2-not-reached", dict(clip=NOT_REACHED, clip_reached=False)),
                  Value("inf", dict(clip=CLIP["inf"], norm_type=float("inf")))),
         "the clip coefficient below 1 (grads scaled) or not, for the L2 and the inf norm"),
    _flag("param-gather", "serial", "overlapped", "params all-gathered in the step or with the next forward",
          overlap_param_gather=True),
    _flag("loss", "mean", "per-token", "grads summed and divided by the tokens over every rank (num_tokens)",
          num_tokens=True),
    _flag("optimizer", "sgd", "adam", "an update linear in the grad (SGD with momentum) or normalised (Adam)",
          optimizer="adam"),
    Axis("bucket-groups", (Value("1"), Value("2", dict(buckets_per_group=2))),
         "buckets launched one by one, or two at a time once both are complete"),
    Axis("experts", (Value("dense"), _experts(1), _experts(2)),
         "a dense model, or a mixture of experts replicated over every rank (ep 1) or split over two (ep 2), "
         "reduced over the expert-data-parallel group of world / ep ranks"),
    Axis("instances", (Value("1"), Value("2", dict(instances=2))),
         "distributed-optimizer instances: shards within an instance, then reduced across"),
    _flag("fp32-reduce-scatter", "off", "on", "bf16 grads summed over the ranks in fp32, rounded once",
          fp32_reduce_scatter=True),
    Axis("fp32-local", (Value("none"), Value("all", dict(fp32_local=("all",))),
                        Value("weights", dict(fp32_local=("*.weight",)))),
         "params accumulating microbatches in an fp32 main_grad of their own: none, every one, or some"),
    Axis("skip", (Value("none"), Value("every-step", dict(skip_above=SKIP_EVERY_STEP)),
                  Value("between", derive=lambda case: dict(skip_above=BETWEEN * case.clip)),
                  Value("never", dict(skip_above=NOT_REACHED, skip_reached=False))),
         "a step skipped when its norm before clipping exceeds the threshold: below every norm, between the "
         "clipped norm and the norm before clipping, above every norm"),
    _flag("force-all-reduce", "off", "on", "finish_grad_sync(force_all_reduce=True): every rank holds every grad",
          force_all_reduce=True),
    Axis("quantized", (Value("none"), Value("fp8", dict(quantized="fp8")), Value("mxfp8", dict(quantized="mxfp8"))),
         "the linear weights held in FP8 (one scale from the amax of the whole weight, which no rank's shard holds "
         "alone) or MXFP8 (a scale per 32 elements) beside the bf16 rest, gathered so, or every param in its dtype"),
    _flag("reuse", "off", "on", "MXFP8 params gathered in bf16 through the grad buffer's memory, which must be "
          "staged, gathered, consumed and zeroed in turn, or through a param buffer of their own", reuse=True),
    Axis("shape", tuple(Value(name, dict(shape=name)) for name in SHAPES),
         "where the layout's offsets, padding, shard boundaries and MX blocks fall: weights of multiples of 64, 32 "
         "and 128 elements; odd and prime sizes, rows shorter than one MX block; three blocks and a quantized head "
         "(models.SHAPES)"),
    _flag("seeding", "dequantized", "high-precision", "the model keeps each quantized param's value before "
          "quantization, which an optimizer may seed its master from, or only the quantized values",
          seeding="high-precision"),
    Axis("moment", tuple(Value(m, dict(moment=m)) for m in MOMENTS),
         "what comes between a step and the next zero_grad: nothing; a forced gather and an evaluation forward "
         "before zero_grad or after it (with the reuse, the grad memory then holds params, or the gathers staged by "
         "zero_grad are in flight); a checkpoint saved and loaded into a fresh instance (cases.MOMENTS)"),
    Axis("optimizers", (Value("one"), Value("dense-first", dict(chain=("dense", "expert"))),
                        Value("expert-first", dict(chain=("expert", "dense")))),
         "one optimizer over every buffer, or one over the dense and one over the expert buffers under one grad "
         "norm, each zeroing, staging and gathering only its own, either first"),
)
BY_NAME: dict[str, Axis] = {a.name: a for a in AXES}
BASE: dict[str, str] = {a.name: a.base for a in AXES}

Composition = Mapping[str, str]
"""A label for some or all axes, by axis name."""


def _within(part: Mapping[str, frozenset[str]], labels: Composition) -> bool | None:
    """False where a labelled axis of ``part`` takes none of its labels; else None where one has no label yet; else
    True. (Asked millions of times a session by ``extendable``: a plain loop.)"""
    verdict: bool | None = True
    for axis, allowed in part.items():
        label = labels.get(axis)
        if label is None:
            verdict = None
        elif label not in allowed:
            return False
    return verdict


@dataclass(frozen=True)
class Rule:
    """Where every axis of ``when`` takes one of its labels, every axis of ``then`` must take one of its labels."""

    name: str
    when: Mapping[str, frozenset[str]]
    then: Mapping[str, frozenset[str]]
    why: str

    @cached_property
    def axes(self) -> tuple[str, ...]:
        return (*self.when, *(a for a in self.then if a not in self.when))

    def holds(self, labels: Composition) -> bool | None:
        """True or False, or None while an axis it reads has no label yet."""
        when = _within(self.when, labels)
        if when is None:
            return None
        return _within(self.then, labels) if when else True

    def describe(self) -> str:
        def side(part: Mapping[str, frozenset[str]]) -> str:
            return " and ".join(f"{a}={'|'.join(l for l in BY_NAME[a].labels if l in s)}" for a, s in part.items())
        return f"{side(self.when)} needs {side(self.then)}"


def _rule(name: str, when: dict[str, tuple[str, ...] | str], then: dict[str, tuple[str, ...] | str], why: str) -> Rule:
    def sets(part: dict) -> dict[str, frozenset[str]]:
        return {a: frozenset((v,) if isinstance(v, str) else v) for a, v in part.items()}
    return Rule(name, sets(when), sets(then), why)


ON, NOT_PACKED = "on", DISTRIBUTED
RULES: tuple[Rule, ...] = (
    _rule("one bucket without overlap", {"overlap": "off"}, {"bucket": "one"},
          "without overlap every buffer is one bucket whatever the bucket size (docs/rules.md, section 1)"),
    _rule("groups of buckets need buckets", {"bucket-groups": "2"}, {"bucket": ("tiny", "mid")},
          "one bucket per buffer forms no group of two"),
    _rule("no shards to gather", {"param-gather": "overlapped"}, {"policy": NOT_PACKED},
          "only a distributed optimizer all-gathers params"),
    _rule("instances shard", {"instances": "2"}, {"policy": NOT_PACKED},
          "distributed-optimizer instances need a distributed optimizer"),
    _rule("instances divide the ranks", {"instances": "2"}, {"world": ("2", "4")},
          "each instance is world / 2 consecutive ranks"),
    _rule("instances divide the expert replicas", {"instances": "2", "experts": "ep2"}, {"world": "4"},
          "instances divide the expert-data-parallel size too: world / 2 replicas at ep 2"),
    _rule("experts split over two", {"experts": "ep2"}, {"world": ("2", "4")}, "ep 2 divides the ranks"),
    _rule("experts have no tied head", {"experts": ("ep1", "ep2")}, {"tied": "off"},
          "the mixture-of-experts model has an output head of its own"),
    _rule("no average of per-token sums", {"loss": "per-token"}, {"average": "sum"},
          "per-token losses are summed over ranks and divided by the token count (DDPConfig refuses both)"),
    _rule("fp32 sums of bf16 grads", {"fp32-reduce-scatter": ON}, {"precision": "bf16"},
          "with fp32 grads (or params) the sums are fp32 already"),
    _rule("fp32 sums reduce-scatter", {"fp32-reduce-scatter": ON}, {"policy": NOT_PACKED},
          "only a distributed optimizer reduce-scatters"),
    _rule("fp32 sums are sums", {"fp32-reduce-scatter": ON}, {"average": "sum", "instances": "1"},
          "the fp32 all-to-all sums (SUM only) within one group (docs/rules.md, section 6)"),
    _rule("fp32 local accumulation of bf16 grads", {"fp32-local": ("all", "weights")}, {"precision": "bf16"},
          "fp32 params or grad_reduce_in_fp32 accumulate in fp32 already (DDPConfig refuses the latter)"),
    _rule("between needs a clip that is reached", {"skip": "between"}, {"clip": ("l2", "inf")},
          "a threshold between the clipped norm and the norm before clipping"),
    _rule("a forced all-reduce replaces shards", {"force-all-reduce": ON}, {"policy": NOT_PACKED},
          "an all-reduce policy all-reduces already"),
    _rule("a forced all-reduce at finish", {"force-all-reduce": ON}, {"overlap": "off"},
          "with overlap, buckets launched during backward keep their reduce-scatter: which grads a rank holds "
          "depends on timing"),
    _rule("quantized params are gathered", {"quantized": ("fp8", "mxfp8")}, {"policy": NOT_PACKED},
          "fp8_param_gather quantizes the params a distributed optimizer all-gathers (DDPConfig refuses it without)"),
    _rule("quantized params keep fp32 masters", {"quantized": ("fp8", "mxfp8")},
          {"precision": ("bf16-fp32-grads", "bf16")},
          "FP8 weights are made in a bf16 model whose optimizer steps fp32 masters; with fp32 params the master would "
          "be the quantized param itself"),
    _rule("quantized buckets group by upstream's rule", {"quantized": ("fp8", "mxfp8")}, {"bucket-groups": "1"},
          "each bucket of quantized params is a group of its own (DDPConfig refuses buckets_per_group with it)"),
    _rule("only MXFP8 reuses the grad memory", {"reuse": ON}, {"quantized": "mxfp8"},
          "reuse_grad_buf_for_mxfp8_param_ag gathers MXFP8 params in bf16 (DDPConfig refuses it without "
          "fp8_param_gather; upstream, without MXFP8)"),
    _rule("a kept init seeds quantized masters", {"seeding": "high-precision"}, {"quantized": ("fp8", "mxfp8")},
          "only a quantized param's master can be seeded from anything but the param itself"),
    _rule("two optimizers split experts from the rest", {"optimizers": ("dense-first", "expert-first")},
          {"experts": ("ep1", "ep2")}, "the second optimizer owns the expert buffers, which a dense model has not"),
    _rule("a forced all-reduce, then no finalize", {"force-all-reduce": ON}, {"loss": "mean"},
          "the forced all-reduce is finish_grad_sync's, which divides by no token count"),
)


@dataclass(frozen=True)
class Mask:
    """A value under which a class of bugs cannot show, and why."""

    axis: str
    label: str
    why: str


MASKING: tuple[Mask, ...] = (
    Mask("world", "1", "one rank: every collective is the identity, nothing is sharded and the scaling factor is 1, "
         "so nothing wrong in what is reduced, sharded, gathered or scaled can show"),
    Mask("average", "avg-in-collective", "the factor applied before the collective is 1 (the AVG divides): grads "
         "scaled twice, or some of them not at all, look right"),
    Mask("loss", "per-token", "the factor is 1 too: grads are summed and divided by the token count when finalized"),
    Mask("skip", "every-step", "no step is taken: the params never change, so nothing wrong from the second step on "
         "(a param gather, optimizer state) can show"),
    Mask("skip", "between", "no step is taken either: every norm before clipping passes the threshold, which only a "
         "skip decided on the clipped norm would not, so nothing wrong after a step can show"),
    Mask("moment", "none", "zero_grad follows the step at once: no gather is forced while the grad memory holds "
         "params, no forward runs before zeroing, nothing is saved or loaded"),
    Mask("shape", "base", "every weight holds a multiple of 64, 32 and 128 elements: no padding falls between two "
         "weights, no MX block or shard boundary within one, so a wrong offset or extent can land where it is "
         "harmless"),
)
MASKED: frozenset[tuple[str, str]] = frozenset((m.axis, m.label) for m in MASKING)


def masks(labels: Composition, besides: Collection[str] = ()) -> list[tuple[str, str]]:
    """The masking values ``labels`` holds on axes other than ``besides``."""
    return [(a, v) for a, v in labels.items() if a not in besides and (a, v) in MASKED]


def violated(labels: Composition) -> list[Rule]:
    return [r for r in RULES if r.holds(labels) is False]


def extendable(labels: Composition, ignoring: str | None = None) -> bool:
    """Whether ``labels`` (some axes) can be completed into a composition every rule allows (every rule but the
    one named ``ignoring``)."""
    return _extendable(frozenset(item for item in labels.items() if item[0] in RULED), ignoring)


RULED = frozenset(axis for rule in RULES for axis in rule.axes)
"""The axes some rule reads: no other label decides whether a composition can be completed."""


@cache
def _extendable(items: frozenset[tuple[str, str]], ignoring: str | None) -> bool:
    """Labels only the axes of rules not yet decided, the rule that reads the most labelled axes first (where a
    conflict would show soonest): once every rule holds whatever the free axes take, any completion is allowed."""
    labels = dict(items)
    undecided = []
    for rule in RULES:
        if rule.name != ignoring:
            verdict = rule.holds(labels)
            if verdict is False:
                return False
            if verdict is None:
                undecided.append(rule)
    if not undecided:
        return True
    undecided = max(undecided, key=lambda r: sum(a in labels for a in r.axes))
    free = next(a for a in undecided.axes if a not in labels)
    return any(_extendable(items | {(free, label)}, ignoring) for label in BY_NAME[free].labels)


def check(labels: Composition) -> None:
    """Raise ``ValueError`` naming the axis, the value and what is valid, or the rule a composition breaks."""
    for name, label in labels.items():
        if name not in BY_NAME:
            raise ValueError(f"axis: got {name!r}, but should be one of {', '.join(BY_NAME)}")
        if label not in BY_NAME[name].labels:
            raise ValueError(f"{name}: got {label!r}, but should be one of {', '.join(BY_NAME[name].labels)}")
    broken = violated({**BASE, **labels})
    if broken:
        raise ValueError("; ".join(f"{spell(labels)}: {r.describe()} ({r.why})" for r in broken))


def moved(labels: Composition) -> dict[str, str]:
    """The axes ``labels`` moves away from the base, in axis order."""
    return {a.name: labels[a.name] for a in AXES if labels.get(a.name, a.base) != a.base}


def spell(labels: Composition) -> str:
    """The id and ``--case`` spelling: the moved axes as ``axis=value``, comma-separated; ``base`` for none."""
    return ",".join(f"{a}={v}" for a, v in moved(labels).items()) or "base"


def parse(text: str) -> dict[str, str]:
    """A composition's spelling back into labels (every axis), checked against the axes and the rules."""
    labels, steps = parse_case(text)
    if steps is not None:
        raise ValueError(f"steps: got {steps} in {text!r}, but should be left out of a composition")
    return labels


def parse_case(text: str) -> tuple[dict[str, str], int | None]:
    """What ``--case`` names: a composition, and optionally its steps (``steps=N``, at least 1)."""
    labels: dict[str, str] = {}
    steps = None
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part == "base":
            continue
        name, eq, label = (x.strip() for x in part.partition("="))
        if not eq:
            raise ValueError(f"got {part!r}, but should be axis=value (or base), e.g. world=1,microbatches=2")
        if name in labels or name == "steps" and steps is not None:
            raise ValueError(f"{name}: got it twice in {text!r}, but should be given once")
        if name == "steps":
            if not re.fullmatch(r"[0-9]+", label) or int(label) < 1:
                raise ValueError(f"steps: got {label!r}, but should be a whole number of at least 1")
            steps = int(label)
            continue
        labels[name] = label
    check(labels)
    return {**BASE, **labels}, steps


def case_of(labels: Composition, steps: int = STEPS) -> Case:
    """The ``Case`` a composition trains, named by its spelling."""
    full = {**BASE, **labels}
    case = Case(spell(full), steps=steps)
    for axis in AXES:  # world before experts: a topology's replicas follow the world
        case = axis.value(full[axis.name]).apply(case)
    return case


def supported_by(impl) -> Callable[[Composition], bool]:
    """Whether ``impl`` can run a composition (every axis labelled): its case's ``unsupported_by`` answers None, and
    its expectation list neither skips the composition's test (a limit of the implementation that no configuration
    field can say, as a model with a shared embedding) nor records it as a failure not to run (it hangs). Each
    composition is judged once: counting the pairs an implementation can express asks about the same compositions
    about four times each."""
    from suites.expectations import load_expectations
    from suites.impls.protocol import SharesExpectations
    from suites.impls.support import provides

    from .records import composed_test

    name = impl.expectations if isinstance(impl, SharesExpectations) else impl.name
    skips = [e for e in load_expectations(name, version=impl.version) if e.kind == "skip" or not e.run]
    trains = provides(impl, "ddp")  # every composition trains a wrapped model (test_compositions needs the level)

    @cache
    def judged(items: frozenset[tuple[str, str]]) -> bool:
        labels = dict(items)
        return (trains and case_of(labels).unsupported_by(impl) is None
                and not any(e.matches(composed_test(spell(labels))) for e in skips))

    return lambda labels: judged(frozenset(labels.items()))
