"""The nightly site: every run's conformance and figures as static web pages, the history at a glance.

``python -m reports.website`` (and ``python -m reports`` after each run) writes
it from the runs alone, read through ``reports.store``; it stands over the
report's floors (store, comparison, render) and under the commands.
"""
