"""What a suite session writes into its JUnit XML besides the tests: the implementation under test, as properties
of the test suite, so that a reader (the main job) takes them as data instead of parsing the header's words."""

IMPLEMENTATION = "implementation"
"""One property: the implementation's name and version, as the header names them ("reference 0.1.0")."""
LEVEL = "level"
"""One property per capability level the implementation provides."""
CRASH_RERUN = "crash-rerun"
"""One property of a test per rerun of a check whose rank died of a signal (``--crash-reruns``): what died, and
where. The test's outcome is its last run's."""
