"""The nightly job, ``python -m reports``: ``preflight.py`` refuses what it cannot do before any work, ``job.py``
runs the suites and the benchmarks, decides, and writes the run, its report and the site."""
