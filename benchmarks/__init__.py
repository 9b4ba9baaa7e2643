"""The benchmarks, each one registered unit (``benchmarks.registry.Benchmark``), in report order."""

from . import bucket_size, bucketing, busbw, harness_overhead, overlap, quantized_params, single_process, step_time

BENCHMARKS = (
    busbw.BENCHMARK,
    harness_overhead.BENCHMARK,
    overlap.BENCHMARK,
    bucket_size.BENCHMARK,
    step_time.BENCHMARK,
    bucketing.BENCHMARK,
    quantized_params.BENCHMARK,
    single_process.SHARD_CACHE,
    single_process.PLANNING,
)
