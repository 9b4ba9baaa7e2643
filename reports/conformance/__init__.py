"""Running the conformance suites as child processes, and the suite-strength catalogue; their tallies."""
