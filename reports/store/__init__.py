"""Writing a run and reading runs back: the runs directory, ``results.json`` and its schema, a run's metrics."""
