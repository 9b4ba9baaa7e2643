"""What the figures were measured on: the host, the torch build, the GPUs as NVML sees them, links and
traffic.

Probing only: every reading is a frozen dataclass that reads and writes itself
as JSON (``datamodel``), recorded in a run's ``results.json`` under ``nodes``
(``node.Node``); ``reports.render.hardware`` renders it. The benchmarks probe
while they run (``node``: which rank describes which node, telemetry sampled
during the benchmarks, NVLink counters around the sweep).

``python -m hardware`` prints this machine's reading as JSON.
"""
