"""Each benchmark's measuring (``Benchmark.runner``): what needs torch and the ranks, apart from the records."""


def implementations_for(specs, config) -> list:
    """The implementations of ``specs`` a benchmark can wrap with ``config``: installed, at the ``ddp`` level, and
    with no row of their table refusing the configuration (ZeRO-1 refuses overlapped reduction, for one). The
    others are left out of the benchmark, as the suites skip what an implementation cannot express."""
    from suites.impls import load_implementation
    from suites.impls.support import why_not

    impls = [load_implementation(spec) for spec in specs]
    return [i for i in impls if i.unavailable is None and "ddp" in i.capabilities and why_not(i, config) is None]
