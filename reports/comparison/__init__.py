"""Comparing runs: which runs may be compared (their setups), what changed between two, and the trend over all."""
