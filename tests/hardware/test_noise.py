"""What made a node noisy: a reading from a made-up /proc and /sys, and which of it is named as a suspect."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hardware.noise import LIMITS, Noise, NoiseProbe, SleepOvershoot, Spread, suspects


def write_stat(proc: Path, user: int, idle: int, steal: int, own: dict[int, tuple[int, int]]) -> None:
    """/proc/stat's cpu line, and /proc/<pid>/stat for the processes (pid -> (parent, user+system ticks))."""
    proc.mkdir(exist_ok=True)
    (proc / "stat").write_text(f"cpu  {user} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4\n")
    for pid, (parent, ticks) in own.items():
        (proc / str(pid)).mkdir(exist_ok=True)
        (proc / str(pid) / "stat").write_text(f"{pid} (python (x)) S {parent} 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0")


def test_other_processes_share_is_the_busy_time_this_job_did_not_use(tmp_path):
    proc, sys_dir = tmp_path / "proc", tmp_path / "sys"
    write_stat(proc, user=1000, idle=1000, steal=0, own={100: (1, 50), 101: (100, 50), 200: (1, 0)})
    probe = NoiseProbe(root_pid=100, proc=proc, sys=sys_dir).start()
    # 1000 ticks pass: 600 busy, of which this job's two processes (100 and its child 101) took 300; 50 stolen.
    write_stat(proc, user=1600, idle=1350, steal=50, own={100: (1, 200), 101: (100, 200), 200: (1, 500)})
    reading = probe.stop()
    assert reading.own_share == 0.3 and reading.other_processes_share == 0.3, reading
    assert reading.steal_share == 0.05, reading
    assert reading.governors is None and reading.frequency_mhz is None, "no cpufreq here: said so"
    written = reading.to_json()
    assert written["governors"] is None and written["frequency_mhz"] is None, "written as null, as before"


def test_without_proc_stat_the_shares_are_left_out(tmp_path):
    reading = NoiseProbe(root_pid=1, proc=tmp_path / "none", sys=tmp_path / "none").start().stop()
    assert set(reading.to_json()) == {"cores", "seconds", "load_before", "load_after", "governors",
                                      "frequency_mhz"}, reading


def test_governors_and_frequencies_are_read_where_cpufreq_exposes_them(tmp_path):
    for cpu, (governor, khz) in enumerate([("powersave", 1_200_000), ("powersave", 3_000_000)]):
        freq = tmp_path / "sys" / "devices/system/cpu" / f"cpu{cpu}" / "cpufreq"
        freq.mkdir(parents=True)
        (freq / "scaling_governor").write_text(governor + "\n")
        (freq / "scaling_cur_freq").write_text(f"{khz}\n")
    reading = NoiseProbe(root_pid=1, proc=tmp_path / "proc", sys=tmp_path / "sys").start().stop()
    assert reading.governors == {"powersave": 2}
    assert reading.to_json()["frequency_mhz"] == {"min": 1200.0, "median": 2100.0, "max": 3000.0}
    found = suspects(reading)
    assert any("governor powersave" in s for s in found) and any("1200-3000 MHz" in s for s in found), found


def test_a_quiet_reading_names_nothing_and_each_limit_names_its_cause():
    quiet = Noise(cores=2, load_before=(0.2, 0.3, 0.3), other_processes_share=0.01, steal_share=0.0,
                  governors={"performance": 2}, frequency_mhz=Spread(min=3000.0, median=3000.0, max=3000.0))
    assert suspects(quiet, SleepOvershoot(n=10, median=1.01, p90=1.05, max=1.3)) == []
    assert suspects(None) == [], "a node without a reading names nothing"
    loaded = dataclasses.replace(quiet, load_before=(2.0 * LIMITS.load_per_core + 0.5, 1.0, 1.0),
                                 other_processes_share=0.25, steal_share=0.08)
    found = suspects(loaded, SleepOvershoot(n=10, median=1.3, p90=2.0, max=3.0))
    assert [s.split(" ")[1] for s in found] == ["load", "processes", "hypervisor", "emulated"], found
