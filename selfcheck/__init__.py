"""The project's checks of itself, apart from what users run: which broken implementations its suites
catch (``strength``, which the main job runs as a child process for its strength phase), how sensitive its gate
is and whether its bisection finds a planted commit (``gate_check``, ``planted``), which change-point detector
the trend uses (``detectors``), how large the site grows (``site_size``). What users run (``reports``,
``suites``, ``benchmarks``) imports nothing of this room; this room imports ``fixtures/`` (the catalogue of
broken implementations, a deliberately slowed reference, the busy wait the bisection plants)."""
