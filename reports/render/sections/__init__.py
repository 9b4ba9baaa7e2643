"""How each benchmark's section of the report looks: one module per benchmark, found by the benchmark's name.

A section module has ``markdown(records) -> str`` and, where the section has
plots, ``plots(records, out_dir) -> [paths]``. ``tests/reports/test_main.py``
checks that every registered benchmark has one.
"""

from . import bucket_size, bucketing, busbw, harness_overhead, overlap, quantized_params, single_process, step_time

SECTIONS = {
    "busbw": busbw,
    "harness_overhead": harness_overhead,
    "overlap": overlap,
    "bucket_size": bucket_size,
    "step_time": step_time,
    "bucketing": bucketing,
    "quantized_params": quantized_params,
    "shard_cache": single_process,
    "planning": single_process,
}
