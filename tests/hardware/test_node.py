"""hardware.node.Node: what a node records, read from and written to results.json exactly as the probes wrote it
before the records were typed, and rendered into the same report section.

``data/nodes.json`` and ``data/hardware_section.md`` were written by the probes and the renderer as they were
before typing (dicts): a node of two fake-NVML GPUs and one whose handle NVML refused (refused fields, NVLink
links, pairs, traffic with an unreadable and a reset counter, telemetry, a noise reading from a made-up /proc and
/sys), a node whose NVML sees no GPU, and this CPU host. ``data/old_node.json`` is the first node as a schema-3
run wrote it (no noise, telemetry, usable_cores or compute_mode), ``data/old_node_section.md`` its section.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import types
import typing
from pathlib import Path

import pynvml
import pytest

from hardware import probe
from hardware.host import TorchBuild, torch_devices
from datamodel.codec import typed_fields
from hardware.node import Node, NodeProbe
from hardware.noise import NoiseProbe
from reports.render.hardware import hardware_markdown, nodes_markdown, noise_markdown

from tests.fakes.fake_nvml import FakeNVML, fake_gpu

DATA = Path(__file__).parent / "data"
RECORDED = json.loads((DATA / "nodes.json").read_text())
OLD = json.loads((DATA / "old_node.json").read_text())


def section(nodes: list[Node]) -> str:
    """The report's hardware section as ``reports.render.report`` puts it together."""
    parts = ["## Hardware", nodes_markdown(nodes), "### What made the nodes noisy while the benchmarks ran",
             noise_markdown(nodes)]
    parts += [f"### Node {n.node_rank}: {n.host.hostname}\n\n"
              + hardware_markdown(n.hardware, n.nvlink_delta, n.telemetry) for n in nodes]
    return "\n\n".join(parts) + "\n"


def as_written(value: dict) -> dict:
    """What results.json holds: the JSON text read back (tuples are lists, keys sorted)."""
    return json.loads(json.dumps(value, sort_keys=True))


@pytest.mark.parametrize("index", range(len(RECORDED)), ids=["fake GPUs", "NVML without GPUs", "this CPU host"])
def test_a_recorded_node_reads_and_writes_back_exactly(index):
    node = Node.from_json(RECORDED[index])
    assert node.to_json() == RECORDED[index]
    assert json.dumps(node.to_json(), sort_keys=True) == json.dumps(RECORDED[index], sort_keys=True)


def test_the_hardware_section_renders_byte_identical_from_the_typed_nodes():
    assert section([Node.from_json(n) for n in RECORDED]) == (DATA / "hardware_section.md").read_text()
    assert section([Node.from_json(OLD)]) == (DATA / "old_node_section.md").read_text()


def test_the_section_comparison_sees_a_changed_value():
    changed = copy.deepcopy(RECORDED)
    changed[0]["hardware"]["nvml"]["devices"][0]["compute_mode"] = "PROHIBITED"
    text = section([Node.from_json(n) for n in changed])
    assert text != (DATA / "hardware_section.md").read_text() and "GPU 0 (PROHIBITED)" in text


def test_a_node_recorded_before_noise_and_compute_modes_loads():
    node = Node.from_json(OLD)
    assert node.noise is None and node.telemetry is None and node.host.usable_cores is None
    assert [getattr(d, "compute_mode", None) for d in node.hardware.nvml.devices] == [None, None, None]
    assert "noise" not in node.to_json() and "compute_mode" not in node.to_json()["hardware"]["nvml"]["devices"][0]
    back = node.to_json()
    for host in (back["host"], back["hardware"]["host"]):
        assert host.pop("usable_cores") is None, "a field older runs lacked and that can be null is written null"
    assert back == OLD, "and nothing else changes"


def broken(path: list, value):
    node = copy.deepcopy(RECORDED[0])
    target = node
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return node


@pytest.mark.parametrize("path, value, message", [
    (["hardware", "nvml", "devices", 1, "power_draw_w"], "fast",
     "Node.hardware.nvml.devices[1].power_draw_w: got 'fast', but should be float | Unsupported"),
    (["node_rank"], "0", "Node.node_rank: got '0', but should be int"),
    (["first_rank"], True, "Node.first_rank: got True, but should be int"),
    (["backend"], KeyError, "Node.backend: got nothing, but should be 'gloo' or 'nccl'"),
    (["hardware", "nvml", "pairs", 0, "topology"], {"level": 40},
     "Node.hardware.nvml.pairs[0].topology.name: got nothing, but should be str"),
    (["hardware", "nvml", "devices", 0, "nvlink", "unanswered", "InvalidArgument", 0], "18",
     "Node.hardware.nvml.devices[0].nvlink.unanswered['InvalidArgument'][0]: got '18', but should be int"),
    (["hardware", "host", "gpus"], 8, "Node.hardware.host: got keys ['gpus'], but Host has only"),
    (["telemetry", "devices", 1, "power_w", "median"], None,
     "Node.telemetry.devices[1].power_w.median: got None, but should be float"),
    (["nvlink_delta", "devices", 0, "counters", "1", "rx_kib"], -0.5,
     "Node.nvlink_delta.devices[0].counters['1'].rx_kib: got -0.5, but should be int | None"),
    (["noise"], None, "Node.noise: got null, but should be Noise or absent"),
    (["noise", "load_before"], "high", "Node.noise.load_before: got 'high', but should be tuple[float, ...] | None"),
])
def test_a_type_error_names_the_field_path_and_the_value(path, value, message):
    with pytest.raises(ValueError) as caught:
        Node.from_json(broken(path, value))
    assert str(caught.value).startswith(message), str(caught.value)


def test_a_node_probed_on_this_machine_reads_back_as_written():
    ctx = types.SimpleNamespace(rank=0, world_size=1, backend="gloo")
    node = NodeProbe(ctx).finish()
    written = as_written(node.to_json())
    assert Node.from_json(written) == node
    assert Node.from_json(written).to_json() == written


VOLATILE = ("host", "benchmark_seconds")
"""What a probe reads from the machine or the clock: set aside when a node probed now meets the recorded one."""


def steady(node: dict) -> dict:
    node = {k: v for k, v in copy.deepcopy(node).items() if k not in VOLATILE}
    node["hardware"].pop("host")
    for key in ("cores", "seconds", "load_before", "load_after"):
        node["noise"].pop(key)
    node["nvlink_delta"].pop("seconds")
    for device in node["telemetry"]["devices"]:
        for name in set(device) - {"index"}:
            device[name].pop("n")
    return node


def fake_torch() -> types.SimpleNamespace:
    """torch seeing two CUDA devices: the GPU NVML numbers 1, and one another process holds."""
    def properties(index):
        if index == 1:
            raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable\nmore")
        return types.SimpleNamespace(name="Fake H100 1", uuid="00000001-aaaa-bbbb-cccc-dddddddddddd",
                                     total_memory=80 * 1024**3, major=9, minor=0)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(device_count=lambda: 2,
                                                            get_device_properties=properties))


def fake_proc_sys(root: Path) -> tuple[Path, Path]:
    proc, sys_dir = root / "proc", root / "sys"
    proc.mkdir(parents=True)
    (proc / "stat").write_text("cpu  1000 0 0 1000 0 0 0 0 0 0\n")
    for cpu, (governor, khz) in enumerate([("powersave", 1_200_000), ("performance", 3_000_000)]):
        freq = sys_dir / "devices/system/cpu" / f"cpu{cpu}" / "cpufreq"
        freq.mkdir(parents=True)
        (freq / "scaling_governor").write_text(governor + "\n")
        (freq / "scaling_cur_freq").write_text(f"{khz}\n")
    return proc, sys_dir


def test_a_fake_gpu_node_is_written_as_the_probes_wrote_it_before(monkeypatch, tmp_path):
    """The recorded GPU node, probed again the same way: every value not read from this machine or the clock."""
    torch_info = TorchBuild(torch="2.13.0+cu124", cuda_build="12.4", cuda_available=True, cuda_device_count=2,
                            cuda_visible_devices="1,0", distributed_available=True, gloo_available=True,
                            nccl_available=True, nccl_version="2.21.5", devices=torch_devices(fake_torch()))
    monkeypatch.setattr(probe, "collect_torch", lambda: torch_info)
    for name, value in {"GROUP_RANK": "0", "LOCAL_WORLD_SIZE": "2", "NCCL_DEBUG": "INFO",
                        "NCCL_IB_DISABLE": "1"}.items():
        monkeypatch.setenv(name, value)
    refuse = {("nvmlDeviceGetPowerUsage", 0): pynvml.NVMLError_NotSupported,
              ("nvmlDeviceGetTemperature", 0): pynvml.NVMLError_NoPermission,
              ("nvmlDeviceGetMaxClockInfo", 1): pynvml.NVMLError_FunctionNotFound,
              ("nvmlDeviceGetNvLinkRemotePciInfo", 1): pynvml.NVMLError_NotSupported,
              ("nvmlDeviceGetTopologyCommonAncestor", 1): pynvml.NVMLError_NoPermission,
              ("nvmlDeviceGetHandleByIndex", 2): pynvml.NVMLError_GpuIsLost}
    fake = FakeNVML([fake_gpu(0), fake_gpu(1), fake_gpu(2)], refuse=refuse)
    fake.gpus[1]["compute_mode"] = pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
    fake.p2p[(1, 0)] = pynvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY
    del fake.gpus[0]["counters"][2]
    fake.gpus[0]["counters"][1][1] = 7
    node_probe = NodeProbe(types.SimpleNamespace(rank=0, world_size=2, backend="nccl"), fake)
    proc, sys_dir = fake_proc_sys(tmp_path)
    node_probe.noise = NoiseProbe(root_pid=1, proc=proc, sys=sys_dir).start()
    (proc / "stat").write_text("cpu  1600 0 0 1350 0 0 0 50 0 0\n")
    for gpu in fake.gpus:
        gpu["counters"][0xFFFFFFFF][0] += 3 * 1024**2
        gpu["counters"][0][1] += 1000
    fake.gpus[0]["counters"][1][1] = 0
    node = node_probe.finish()
    assert steady(as_written(node.to_json())) == steady(RECORDED[0])
    assert Node.from_json(as_written(node.to_json())) == node


def reachable(cls: type, seen: set | None = None) -> set:
    """Every dataclass a record holds, through its fields' types."""
    seen = set() if seen is None else seen
    if dataclasses.is_dataclass(cls) and cls not in seen:
        seen.add(cls)
        for _, hint in typed_fields(cls):
            for arg in [hint, *typing.get_args(hint), *(a for h in typing.get_args(hint) for a in typing.get_args(h))]:
                reachable(arg, seen)
    return seen


def test_every_field_a_node_records_says_what_it_means():
    classes = reachable(Node)
    assert {"Node", "Host", "TorchBuild", "TorchDevice", "Nvml", "NoNvml", "NvmlDevice", "UnreachableDevice",
            "NvLinks", "NvLink", "DevicePair", "P2pStatus", "TopologyLevel", "Unsupported", "NvlinkDelta",
            "DeviceTraffic", "LinkTraffic", "Telemetry", "NoTelemetry", "DeviceTelemetry", "FieldSummary",
            "Noise", "Spread", "Hardware"} <= {c.__name__ for c in classes}
    undocumented = [f"{c.__name__}.{f.name}" for c in classes for f in dataclasses.fields(c)
                    if not f.metadata.get("doc")]
    assert undocumented == [], f"fields without a doc: {undocumented}"
