"""The overlap benchmark's method: the ideal schedule, when communication can be told from noise, device spans."""

import pytest

from benchmarks.measuring.overlap import communication_check
from benchmarks.overlap import ideal_efficiency
from benchmarks.timeline import Kernel, LayerSpan, spans_from_kernels

COMPUTE = [0.100, 0.102, 0.098, 0.101, 0.099, 0.100, 0.103, 0.097]  # seconds, +-3%


def test_ideal_hides_every_collective_but_the_last():
    # 8 layers of 1 s, collectives of 1 s one at a time: the last one is exposed, 7 of 8 hidden.
    assert ideal_efficiency(8, 1.0, 1.0) == pytest.approx(7 / 8)
    # Collectives twice as long as a layer queue up: 16 s of them end at 17 s, 9 s after backward.
    assert ideal_efficiency(8, 1.0, 2.0) == pytest.approx((16 - 9) / 16)


def test_communication_that_stands_out_is_measurable():
    serial = [c + 0.020 + 0.001 * (i % 3) for i, c in enumerate(COMPUTE)]
    communication, why = communication_check(COMPUTE, serial, world_size=2)
    assert why is None and communication.median == pytest.approx(0.021, abs=1e-3)


@pytest.mark.parametrize("extra, words", [
    ([0.0] * 8, "not above zero"),
    ([-0.004, 0.004, -0.003, 0.003, -0.002, 0.002, 0.001, 0.001], "interval reaches zero"),
    ([0.0015, 0.0012, 0.0011, 0.0014, 0.0013, 0.0016, 0.0012, 0.0011], "below the compute step's own spread"),
])
def test_communication_within_the_noise_is_not_measurable_and_says_why(extra, words):
    _, refused = communication_check(COMPUTE, [c + e for c, e in zip(COMPUTE, extra)], world_size=2)
    assert refused is not None and refused.kind == "not measurable here" and words in refused.why, refused


def test_communication_within_its_own_spread_is_not_measurable():
    # Each serial step adds 1-9 ms (median 5 ms) to a compute step held still: the IQR (5 ms) passes the median.
    flat = [0.100] * 8
    extra = [0.001, 0.009, 0.002, 0.008, 0.0025, 0.0075, 0.005, 0.005]
    _, refused = communication_check(flat, [c + e for c, e in zip(flat, extra)], world_size=2)
    assert refused is not None and "below its own spread" in refused.why, refused


def test_one_rank_has_nothing_to_hide_whatever_the_times_say():
    # The same clear 21 ms as the measurable case above, but over one rank: a collective there moves nothing.
    serial = [c + 0.020 + 0.001 * (i % 3) for i, c in enumerate(COMPUTE)]
    _, refused = communication_check(COMPUTE, serial, world_size=1)
    assert refused is not None and refused.why.startswith("one rank: nothing is communicated"), refused


def test_device_kernels_become_layer_and_collective_spans():
    # Backward of 3 layers, last layer first, with each bucket's NCCL kernel overlapping the next layer.
    kernels = [Kernel("spin_kernel", 1000, 2000), Kernel("ncclDevKernel_AllReduce_Sum_f32", 2010, 2600),
               Kernel("spin_kernel", 2005, 3000), Kernel("ncclDevKernel_AllReduce_Sum_f32", 3010, 3500),
               Kernel("spin_kernel", 3005, 4000), Kernel("ncclDevKernel_AllReduce_Sum_f32", 4010, 4700),
               Kernel("void at::native::vectorized_elementwise_kernel", 500, 600)]
    spans = spans_from_kernels(kernels, depth=3)
    assert [s.layer for s in spans.layers] == [2, 1, 0]
    assert spans.layers[0] == LayerSpan(layer=2, start_ms=0.5, end_ms=1.5)
    assert [(s.start_ms, s.end_ms) for s in spans.collectives] == [(1.51, 2.1), (2.51, 3.0), (3.51, 4.2)]
    assert (spans.backward_end_ms, spans.step_end_ms) == (3.5, 4.2)


def test_gloo_events_are_the_collectives_of_a_step_over_cuda_tensors():
    # gloo over CUDA tensors: no kernel reduces; gloo's own profiler events span each collective.
    kernels = [Kernel("spin_kernel", 1000, 2000), Kernel("gloo:all_reduce", 2050, 2900),
               Kernel("spin_kernel", 2005, 3000), Kernel("gloo:all_reduce", 3050, 3600),
               Kernel("aten::copy_", 2020, 2040)]
    spans = spans_from_kernels(kernels, depth=2)
    assert [(s.start_ms, s.end_ms) for s in spans.collectives] == [(1.05, 1.9), (2.05, 2.6)], spans
    assert spans.step_end_ms == 2.6, spans


def test_a_profile_without_one_compute_kernel_per_layer_is_refused():
    with pytest.raises(ValueError, match="got 1 spin_kernel launches .* but should be one per layer \\(3\\)"):
        spans_from_kernels([Kernel("spin_kernel", 0, 1)], depth=3)
