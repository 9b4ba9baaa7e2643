"""What a page says, computed once from a run's results: the Markdown report and the HTML site only format it."""
