"""The runs directory keeps every run: atomic writes, names unique from the start and given back once, the umask,
latest as a user may have made it, and the runs that cannot be read returned as data."""

import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reports.store.model import encode
from reports.store.runs import RESERVED, RunError, Runs, StoreError, Unreadable, dump_json

from ..builders import results


def test_a_run_is_written_atomically(tmp_path):
    runs = Runs(tmp_path)
    first = runs.write("r1", {"report.md": "one"})
    assert runs.latest() == first
    with pytest.raises(AttributeError):  # content that cannot be written
        runs.write("r2", {"report.md": "two", "bad": object()})
    assert not (tmp_path / "r2").exists(), "a failed run should leave no directory"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert runs.latest() == first, "latest should still point at the last good run"


def test_runs_started_in_the_same_second_are_all_kept_and_each_name_given_back_once(tmp_path):
    runs, names, barrier = Runs(tmp_path), [], threading.Barrier(8)

    def job():
        with runs.reserve() as name:
            names.append(name)
            barrier.wait()  # every name held at once
            runs.write(name, {"report.md": name})

    with ThreadPoolExecutor(8) as pool:
        for done in [pool.submit(job) for _ in range(8)]:
            done.result()  # a job's error fails the test
    assert len(set(names)) == 8, f"got names {sorted(names)}, but eight jobs should get eight"
    assert sorted(runs.names()) == sorted(names)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "no reservation is left behind"


def test_a_job_that_ends_without_a_run_gives_its_name_back(tmp_path):
    runs = Runs(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with runs.reserve() as name:
            assert (tmp_path / f"{RESERVED}{name}").is_dir()
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == [], "the reservation is given back"


def test_runs_follow_the_umask_like_any_file(tmp_path):
    before = os.umask(0o022)
    try:
        with Runs(tmp_path).reserve() as name:
            run = Runs(tmp_path).write(name, {"report.md": "x"})
    finally:
        os.umask(before)
    assert stat.S_IMODE(run.stat().st_mode) == 0o755, oct(run.stat().st_mode)
    assert stat.S_IMODE((tmp_path / "latest").stat().st_mode) == 0o644


def test_a_latest_symlink_is_followed_and_a_latest_folder_refused_without_debris(tmp_path):
    runs = Runs(tmp_path)
    run = runs.write("r1", {"report.md": "x"})
    (tmp_path / "latest").unlink()
    (tmp_path / "latest").symlink_to("r1")
    assert runs.latest() == run.resolve()
    runs.write("r2", {"report.md": "y"})
    assert runs.latest() == tmp_path / "r2", "a new run points latest at itself"
    (tmp_path / "latest").unlink()
    (tmp_path / "latest").mkdir()
    with pytest.raises(StoreError, match="got a folder, but should be a file naming the newest run"):
        runs.check()
    with pytest.raises(RunError, match="got a folder"):
        runs.latest()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "r1", "r2"], "nothing left behind"


def test_a_root_that_cannot_be_written_is_named_before_any_work(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="got a file, but should be a folder"):
        Runs(blocker).check()
    with pytest.raises(StoreError, match="cannot write there"):
        Runs(Path("/proc/ddpc-runs")).check()  # a file system no user writes folders into, root included


def test_the_runs_that_cannot_be_read_are_returned_with_why_and_the_others_read(tmp_path):
    runs = Runs(tmp_path)
    runs.write("20260101T000000Z", {"results.json": dump_json(encode(results("20260101T000000Z")))})
    runs.write("20260102T000000Z", {"report.md": "no results"})
    runs.write("20260103T000000Z", {"results.json": dump_json({"schema": 99})})
    reading = runs.read()
    assert [r.run.name for r in reading.runs] == ["20260101T000000Z"]
    assert [u.name for u in reading.unreadable] == ["20260102T000000Z", "20260103T000000Z"]
    assert all(isinstance(u, Unreadable) and u.why for u in reading.unreadable)
    assert "results.json" in reading.unreadable[0].why and "schema 99" in reading.unreadable[1].why, reading


def test_a_run_is_named_by_its_folder(tmp_path):
    Runs(tmp_path).write("copied-here", {"results.json": dump_json(encode(results("20260101T000000Z")))})
    assert Runs(tmp_path).load("copied-here").run.name == "copied-here"
