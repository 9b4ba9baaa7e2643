"""Each benchmark's measuring (``Benchmark.runner``): what needs torch and the ranks, apart from the records."""


def implementations_for(specs, config, ctx) -> list:
    """The implementations of ``specs`` a benchmark can wrap with ``config`` on ``ctx``'s ranks: installed, at the
    ``ddp`` level, and with no row of their table refusing the configuration (ZeRO-1 refuses overlapped reduction,
    for one) or the transport (megatron-core refuses gloo with CUDA tensors). The others are left out of the
    benchmark, as the suites skip what an implementation cannot run."""
    from suites.impls import load_implementation
    from suites.impls.support import why_not

    impls = [load_implementation(spec) for spec in specs]
    return [i for i in impls if i.unavailable is None and "ddp" in i.capabilities
            and why_not(i, config) is None and why_not(i, ctx.transport) is None]
