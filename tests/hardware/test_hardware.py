"""hardware: the machine as recorded in every report, and NVML fields tolerated one by one."""

import dataclasses
import json
import os
import re
import subprocess
import sys
import time

import pynvml
import pytest
import torch

from hardware import devices, host, probe
from hardware.devices import P2pStatus, collect_nvml
from hardware.host import TorchDevice
from hardware.nvlink_traffic import (DeviceTraffic, LinkCounters, LinkTraffic, NvlinkDelta, nvlink_throughput_delta,
                                     nvlink_throughput_sample)
from hardware.nvml import ALL_LINKS_SCOPE, Unsupported
from hardware.probe import Hardware, collect_hardware
from hardware.telemetry import NoTelemetry, TelemetrySampler
from reports.render import hardware as hardware_markdown_module
from reports.render.hardware import hardware_markdown

from tests.fakes.fake_nvml import FakeNVML, fake_gpu
from tests.pytest_run import ROOT


def nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


HAS_NVML = nvml_works()
no_driver_only = pytest.mark.skipif(HAS_NVML, reason="an NVIDIA driver is present: NVML works here")


@pytest.fixture(scope="module")
def hw():
    return collect_hardware()


def test_host_and_torch_facts(hw):
    assert hw.host.logical_cores == os.cpu_count()
    assert hw.host.memory_bytes > 0
    assert hw.host.cpu_model
    assert hw.torch.torch == torch.__version__
    assert hw.torch.cuda_build == torch.version.cuda
    assert hw.torch.cuda_available == torch.cuda.is_available()
    assert hw.torch.gloo_available == torch.distributed.is_gloo_available()
    written = json.loads(json.dumps(hw.to_json()))
    assert written == hw.to_json() and Hardware.from_json(written) == hw, "the reading should survive its JSON"


def test_proc_files_parsed(tmp_path):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Fake CPU 9000\n")
    (tmp_path / "meminfo").write_text("MemTotal:        2048 kB\nMemFree:   1 kB\n")
    assert host.cpu_model(tmp_path / "cpuinfo") == "Fake CPU 9000"
    assert host.total_memory_bytes(tmp_path / "meminfo") == 2048 * 1024
    assert host.cpu_model(tmp_path / "missing"), "falls back to platform.processor()/machine()"
    assert host.total_memory_bytes(tmp_path / "missing") > 0, "falls back to sysconf"


@pytest.mark.parametrize("version, text", [
    ((2, 21, 5), "2.21.5"), ((2, 21, 5, "rc1"), "2.21.5-rc1"), (22105, "2.21.5"), (2708, "2.7.8"),
])
def test_nccl_version_string(version, text):
    assert host.nccl_version_string(version) == text


@no_driver_only
def test_no_gpu_is_said_plainly(hw):
    assert hw.nvml.available is False
    assert hw.nvml.reason, "the reason NVML is unavailable should be recorded"
    text = hardware_markdown(hw)
    assert f"No NVIDIA GPU: NVML unavailable ({hw.nvml.reason})." in text
    for row in ("CPU", "logical cores", "memory", "torch", "gloo"):
        assert re.search(rf"^\| {row} +\| \S", text, re.M), f"host table should list {row}:\n{text}"
    assert f"| {torch.__version__}" in text
    assert nvlink_throughput_sample() is None


@pytest.mark.skipif(not HAS_NVML, reason="no NVIDIA driver: NVML cannot be initialised here")
def test_real_gpus_are_listed(hw):
    nvml = hw.nvml
    assert nvml.available is True
    assert len(nvml.devices) == nvml.device_count
    text = hardware_markdown(hw)
    for device in nvml.devices:
        assert device.name in text


@pytest.mark.parametrize("error, words", [
    (pynvml.NVMLError_LibraryNotFound, "NVML library not found: no NVIDIA driver on this machine"),
    (pynvml.NVMLError_DriverNotLoaded, "NVIDIA driver not loaded"),
    (pynvml.NVMLError_Unknown, "nvmlInit failed: Unknown Error"),
])
def test_init_failure_reason(error, words):
    fake = FakeNVML([fake_gpu(0)], init_error=error)
    section = collect_nvml(fake)
    assert section.available is False
    assert section.reason.startswith(words), section
    assert error.__name__ in section.reason
    assert fake.calls == ["init"], "no shutdown after a failed init"
    assert nvlink_throughput_sample(fake) is None


def test_pynvml_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    section = collect_nvml()
    assert section.available is False and "nvidia-ml-py" in section.reason, section


# ---------------------------------------------------------------- two fake GPUs

REFUSED = {
    ("nvmlDeviceGetPowerUsage", 0): pynvml.NVMLError_NotSupported,
    ("nvmlDeviceGetTemperature", 0): pynvml.NVMLError_NoPermission,
    ("nvmlDeviceGetMaxClockInfo", 1): pynvml.NVMLError_FunctionNotFound,
    ("nvmlDeviceGetNvLinkRemotePciInfo", 1): pynvml.NVMLError_NotSupported,
    ("nvmlDeviceGetTopologyCommonAncestor", 1): pynvml.NVMLError_NoPermission,
}


def two_gpus():
    return FakeNVML([fake_gpu(0), fake_gpu(1)], refuse=dict(REFUSED))


def expected_device(index):
    gpu = fake_gpu(index)
    return {
        "index": index,
        "name": gpu["name"],
        "uuid": gpu["uuid"],
        "pci_bus_id": gpu["bus_id"],
        "memory_total_bytes": gpu["memory"][0],
        "memory_used_bytes": gpu["memory"][1],
        "sm_clock_mhz": 1755,
        "sm_clock_max_mhz": 1980,
        "memory_clock_mhz": 2619,
        "memory_clock_max_mhz": 2619,
        "power_draw_w": gpu["power_mw"][0] / 1000,
        "power_limit_w": 700.0,
        "temperature_c": 30 + index,
        "compute_mode": "DEFAULT",
        "pcie_generation": 5,
        "pcie_generation_max": 5,
        "pcie_width": 16,
        "pcie_width_max": 16,
    }


def test_refused_fields_are_recorded_and_the_rest_collected():
    fake = two_gpus()
    section = collect_nvml(fake)
    assert fake.calls == ["init", "shutdown"]
    assert section.available is True
    assert (section.driver_version, section.cuda_driver_version, section.nvml_version) == (
        "550.54.15", "12.4", "12.550.54.15")
    want = [expected_device(0), expected_device(1)]
    want[0]["power_draw_w"] = {"unsupported": "NotSupported"}
    want[0]["temperature_c"] = {"unsupported": "NoPermission"}
    want[1]["sm_clock_max_mhz"] = want[1]["memory_clock_max_mhz"] = {"unsupported": "FunctionNotFound"}
    got = [{k: v for k, v in d.to_json().items() if k not in ("nvlink", "torch_index")} for d in section.devices]
    assert got == want, "as written to results.json"


def test_nvlinks_decoded_and_unanswering_links_grouped():
    section = collect_nvml(two_gpus())
    for device in section.devices:
        links = device.nvlink.links
        assert [link.link for link in links] == list(range(18))
        beyond = tuple(range(18, pynvml.NVML_NVLINK_MAX_LINKS))
        assert device.nvlink.unanswered == {"InvalidArgument": beyond}
        up = [link for link in links if link.active]
        assert [link.link for link in up] == [0, 1, 2, 3]
        assert {(link.version_enum, link.generation) for link in up} == {(6, "4.0")}
    remotes0, remotes1 = ([link.remote_pci_bus_id for link in d.nvlink.links if link.active]
                          for d in section.devices)
    assert remotes0 == ["00000000:C0:00.0", "00000000:C1:00.0", "00000000:C2:00.0", "00000000:C3:00.0"]
    assert remotes1 == [Unsupported("NotSupported")] * 4
    assert section.devices[1].nvlink.to_json()["links"][0] == {
        "link": 0, "active": True, "version_enum": 6, "generation": "4.0",
        "remote_pci_bus_id": {"unsupported": "NotSupported"}}
    assert section.devices[1].nvlink.to_json()["links"][4] == {"link": 4, "active": False}, "a down link: state only"


def test_p2p_and_topology_pairs():
    fake = two_gpus()
    fake.p2p[(1, 0)] = pynvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY
    pairs = {(p.a, p.b): p for p in collect_nvml(fake).pairs}
    assert set(pairs) == {(0, 1), (1, 0)}
    assert pairs[(0, 1)].p2p_nvlink == P2pStatus(status=0, name="OK")
    assert pairs[(1, 0)].p2p_nvlink == P2pStatus(status=4, name="DISABLED_BY_REGKEY")
    assert pairs[(0, 1)].topology.name == "NODE" and pairs[(0, 1)].topology.level == 40
    assert pairs[(1, 0)].to_json()["topology"] == {"unsupported": "NoPermission"}


def test_function_missing_from_pynvml():
    fake = two_gpus()
    fake.nvmlDeviceGetNvLinkVersion = None  # an older pynvml without the call
    links = collect_nvml(fake).devices[0].nvlink.links
    missing = "FunctionNotFound (pynvml has no nvmlDeviceGetNvLinkVersion)"
    assert links[0].version_enum == Unsupported(missing)
    assert links[0].generation == links[0].version_enum
    assert links[0].remote_pci_bus_id == "00000000:C0:00.0"


def test_fake_pynvml_injected_through_sys_modules(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", two_gpus())
    hw = collect_hardware()
    assert [d.name for d in hw.nvml.devices] == ["Fake H100 0", "Fake H100 1"]
    assert Hardware.from_json(json.loads(json.dumps(hw.to_json()))) == hw


def test_torch_index_mapped_by_uuid():
    torch_info = dataclasses.replace(host.collect_torch(), devices=(
        TorchDevice(index=0, name="H100", uuid="00000001-aaaa-bbbb-cccc-dddddddddddd"),))
    fake = FakeNVML([fake_gpu(0), fake_gpu(1), fake_gpu(2), fake_gpu(3)],
                    refuse={("nvmlDeviceGetUUID", 2): pynvml.NVMLError_NotSupported,
                            ("nvmlDeviceGetHandleByIndex", 3): pynvml.NVMLError_GpuIsLost})
    nvml_info = devices.map_torch_devices(torch_info, collect_nvml(fake))
    assert [d.torch_index for d in nvml_info.devices] == [None, 0, None, None]
    assert nvml_info.devices[3].to_json() == {"index": 3, "handle": {"unsupported": "GpuIsLost"}, "torch_index": None}


# ---------------------------------------------------------------- decoding tables against pynvml


def constants(prefix):
    return {name.removeprefix(prefix): getattr(pynvml, name)
            for name in dir(pynvml) if name.startswith(prefix)}


def test_nvlink_generations_match_pynvml_enums():
    versions = {name: value for name, value in constants("NVML_NVLINK_VERSION_").items() if name != "INVALID"}
    assert versions["4_0"] == 6, "NVML_NVLINK_VERSION_4_0 should be the enum value 6"
    for name, value in versions.items():
        got, want = devices.NVLINK_GENERATIONS.get(value), name.replace("_", ".")
        assert got == want, f"enum {value}: got {got!r}, but should be {want!r}"
    assert devices.nvlink_generations(pynvml)[6] == "4.0"
    assert devices.nvlink_generation(99, devices.nvlink_generations(pynvml)) == "unknown (enum 99)"


def test_topology_and_p2p_tables_match_pynvml():
    assert set(devices.TOPOLOGY_LEVELS) == set(constants("NVML_TOPOLOGY_").values())
    statuses = constants("NVML_P2P_STATUS_")
    for value, name in devices.P2P_STATUSES.items():
        assert statuses[name] == value, f"{name}: got {value}, but pynvml says {statuses[name]}"


# ---------------------------------------------------------------- NVLink traffic


def test_nvlink_throughput_delta_per_link():
    fake = two_gpus()
    before = nvlink_throughput_sample(fake)
    assert set(before.devices[0].counters) == {"total", "0", "1", "2", "3"}, "active links and total"
    for index, gpu in enumerate(fake.gpus):
        for link in range(4):
            gpu["counters"][link][0] += 1000 * (link + 1) + index  # tx
            gpu["counters"][link][1] += 10 * (link + 1)  # rx
        gpu["counters"][ALL_LINKS_SCOPE] = [sum(gpu["counters"][k][d] for k in range(4)) for d in (0, 1)]
    after = nvlink_throughput_sample(fake)
    delta = nvlink_throughput_delta(before, after)
    assert delta.seconds >= 0
    assert [d.uuid for d in delta.devices] == [fake_gpu(0)["uuid"], fake_gpu(1)["uuid"]]
    dev1 = delta.devices[1].counters
    assert {link: dev1[str(link)] for link in range(4)} == {
        link: LinkTraffic(tx_kib=1000 * (link + 1) + 1, rx_kib=10 * (link + 1)) for link in range(4)}
    assert delta.to_json()["devices"][1]["counters"]["total"] == {"tx_kib": 10_004, "rx_kib": 100}
    assert fake.calls == ["init", "shutdown"] * 2


def test_nvlink_counter_unreadable_or_reset_gives_none():
    fake = two_gpus()
    del fake.gpus[0]["counters"][2]  # NVML answers NotSupported for this link's counters
    fake.gpus[0]["counters"][1][1] = 7
    before = nvlink_throughput_sample(fake)
    refused = Unsupported("NotSupported")
    assert before.devices[0].counters["2"] == LinkCounters(tx_kib=refused, rx_kib=refused)
    fake.gpus[0]["counters"][ALL_LINKS_SCOPE][0] += 5
    fake.gpus[0]["counters"][1][1] = 0  # the counter went back: it was reset
    delta = nvlink_throughput_delta(before, nvlink_throughput_sample(fake)).devices[0].counters
    assert delta["2"] == LinkTraffic(tx_kib=None, rx_kib=None)
    assert delta["1"] == LinkTraffic(tx_kib=0, rx_kib=None)
    assert delta["total"] == LinkTraffic(tx_kib=5, rx_kib=0)


def test_field_values_refused_as_a_whole():
    fake = two_gpus()
    fake.refuse[("nvmlDeviceGetFieldValues", 1)] = pynvml.NVMLError_NotSupported
    sample = nvlink_throughput_sample(fake)
    assert sample.devices[1].error == "NotSupported"
    assert nvlink_throughput_delta(sample, sample).devices[1].counters == {}
    nothing = NvlinkDelta(seconds=1.0, devices=(DeviceTraffic(index=0, uuid=None, counters={}),))
    assert "no NVLink counter could be read" in hardware_markdown_module.traffic_table(nothing)


# ---------------------------------------------------------------- markdown


def test_markdown_with_gpus_shows_unsupported_fields():
    hw = Hardware(host=host.collect_host(), torch=host.collect_torch(), nvml=collect_nvml(two_gpus()))
    fake = two_gpus()
    before = nvlink_throughput_sample(fake)
    fake.gpus[0]["counters"][ALL_LINKS_SCOPE][0] += 2 * 1024**2
    text = hardware_markdown(hw, nvlink_throughput_delta(before, nvlink_throughput_sample(fake)))
    assert "No NVIDIA GPU" not in text
    assert "NVIDIA driver 550.54.15, CUDA driver 12.4" in text
    for needle in ("Fake H100 0", "00000000:19:00.0", "n/a (NotSupported) / 700", "n/a (NoPermission)",
                   "1755 / n/a (FunctionNotFound)", "5 x16 (5 x16)", "1 GiB / 80 GiB",
                   "4 of 18 answering", "18 (InvalidArgument)", "| 6 ", "| 4.0 ",
                   "OK / NODE", "OK / n/a (NoPermission)", "2,097,152 KiB (2.00 GiB)"):
        assert needle in text, f"{needle!r} missing from:\n{text}"


def test_cli_prints_the_reading_as_json():
    run = subprocess.run([sys.executable, "-m", "hardware"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["host"]["logical_cores"] == os.cpu_count()
    assert probe.main([]) == 0


# ---------------------------------------------------------------- a node during the benchmarks


def test_exclusive_compute_modes_get_a_plain_sentence():
    fake = FakeNVML([fake_gpu(0), fake_gpu(1)])
    fake.gpus[1]["compute_mode"] = pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
    hw = Hardware(host=host.collect_host(), torch=host.collect_torch(), nvml=collect_nvml(fake))
    assert [d.compute_mode for d in hw.nvml.devices] == ["DEFAULT", "EXCLUSIVE_PROCESS"]
    text = hardware_markdown(hw)
    assert "Compute mode: GPU 1 (EXCLUSIVE_PROCESS). Only one process may use such a GPU" in text, text
    fake.gpus[1]["compute_mode"] = pynvml.NVML_COMPUTEMODE_DEFAULT
    assert "Compute mode:" not in hardware_markdown(dataclasses.replace(hw, nvml=collect_nvml(fake)))


def test_a_device_torch_may_not_use_is_recorded_not_fatal(monkeypatch):
    fake_torch = type("T", (), {})()
    fake_torch.cuda = type("C", (), {"device_count": staticmethod(lambda: 2)})()

    def properties(index):
        if index == 1:
            raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable\nmore")
        return type("P", (), {"name": "H100", "uuid": "u0", "total_memory": 1, "major": 9, "minor": 0})()

    fake_torch.cuda.get_device_properties = properties
    devices = host.torch_devices(fake_torch)
    assert devices[0].to_json() == {"index": 0, "name": "H100", "uuid": "u0", "total_memory_bytes": 1,
                                    "capability": "9.0"}
    assert devices[1].to_json() == {"index": 1, "name": "unusable", "uuid": None,
                                    "error": "CUDA error: all CUDA-capable devices are busy or unavailable"}


def test_telemetry_summarizes_every_gpu_while_it_runs():
    fake = FakeNVML([fake_gpu(0), fake_gpu(1)], refuse={("nvmlDeviceGetPowerUsage", 1): pynvml.NVMLError_NotSupported})
    telemetry = TelemetrySampler(fake, interval=0.01).start()
    deadline = time.monotonic() + 5
    while len(telemetry.readings) < 3 and time.monotonic() < deadline:
        fake.gpus[0]["clocks"][pynvml.NVML_CLOCK_SM] = (1755 - 100 * len(telemetry.readings), 1980)
        time.sleep(0.01)
    summary = telemetry.stop()
    assert summary.available and summary.interval_s == 0.01
    first, second = summary.devices
    assert first.sm_clock_mhz.max == 1755 and first.sm_clock_mhz.min < 1755, first
    assert first.utilization_pct.median == 40 and first.power_w.median == pytest.approx(71.0)
    assert second.power_w is None and "power_w" not in second.to_json(), "a refused field is left out"
    assert fake.calls.count("init") == fake.calls.count("shutdown") == 1
    text = hardware_markdown_module.telemetry_table(summary)
    assert "| 0      | " in text and "40 / 40 / 40" in text and "n/a" in text, text


def test_no_nvml_means_no_telemetry_and_says_why():
    summary = TelemetrySampler(FakeNVML([], init_error=pynvml.NVMLError_LibraryNotFound)).start().stop()
    assert isinstance(summary, NoTelemetry) and "NVML library not found" in summary.reason
    assert summary.to_json() == {"available": False, "reason": summary.reason}
    assert "none (NVML library not found" in hardware_markdown_module.telemetry_table(summary)
