"""The project's checks of itself, apart from what users run: how sensitive its gate is and whether its
bisection finds a planted commit (``gate_check``, ``planted``), which change-point detector the trend uses
(``detectors``), how large the site grows (``site_size``). What users run (``reports``, ``suites``,
``benchmarks``) imports nothing of this room; this room imports ``fixtures/`` (a deliberately slowed reference,
the busy wait the bisection plants)."""
