"""The bucket-size tuner: which bucket size, for a model, on this machine, with its evidence.

``python -m reports.tune`` asks it (``tune``), and the nightly job's bucket-size
benchmark checks its method (``benchmarks.bucket_size``). Its parts, in the
order an answer takes them (docs/tuning.md):

- ``compute``: each parameter's backward time (measured layer shapes, a
  FLOP rate, or a given total);
- ``curve``: a collective's time at any size, from a measured curve;
- ``schedule``: one backward simulated bucket by bucket;
- ``method``: the candidates, each one predicted, the recommendation, and
  the verdict of its check;
- ``inputs`` and ``measure``: what the prediction rests on and its check,
  measured on the ranks (with the curve swept there when no run gives one);
- ``records``: what it leaves behind, readable without torch;
- ``tune``: one answer for a user's model.
"""
