"""The bucket-size section's recommendation line, written out by hand for a size and for one bucket."""

from benchmarks.tuner.records import Recommendation
from reports.render.sections.bucket_size import recommendation_line


def test_a_size_is_named_in_elements_and_bytes():
    line = recommendation_line(Recommendation(1_048_576, 150.2, 0.05, (1_048_576, 2_097_152)), 4)
    assert line == ("Recommended: 1,048,576 (4 MiB) elements per bucket, 150.2 ms exposed; within 5% of it: "
                    "1,048,576 (4 MiB) to 2,097,152 (8 MiB)."), line


def test_one_bucket_is_said_as_such():
    line = recommendation_line(Recommendation(None, 424_131.0, 0.05, (None,)), 2)
    assert line == "Recommended: one bucket per buffer, 424,131 ms exposed; within 5% of it: one bucket.", line
