"""Each benchmark's measuring (``Benchmark.runner``): what needs torch and the ranks, apart from the records."""
