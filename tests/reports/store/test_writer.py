"""The runs directory keeps every run: atomic writes, names unique from the start, the umask, latest as a user
may have made it."""

import os
import stat
import threading
from pathlib import Path

import pytest

from reports.store.runs import RunError, latest, run_names
from reports.store.writer import StoreError, check_root, latest_run, reserve, write_run


def test_write_run_is_atomic(tmp_path):
    first = write_run({"report.md": "one"}, root=tmp_path, name="r1")
    assert latest_run(tmp_path) == first
    with pytest.raises(AttributeError):  # content that cannot be written
        write_run({"report.md": "two", "bad": object()}, root=tmp_path, name="r2")
    assert not (tmp_path / "r2").exists(), "a failed run should leave no directory"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert latest_run(tmp_path) == first, "latest should still point at the last good run"


def test_runs_started_in_the_same_second_are_all_kept(tmp_path):
    names: list[str] = []
    threads = [threading.Thread(target=lambda: names.append(reserve(tmp_path))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(names)) == 8, f"got names {sorted(names)}, but eight jobs should get eight"
    for name in names:
        write_run({"report.md": name}, root=tmp_path, name=name)
    assert sorted(run_names(tmp_path)) == sorted(names)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "no reservation is left behind"


def test_runs_follow_the_umask_like_any_file(tmp_path):
    before = os.umask(0o022)
    try:
        run = write_run({"report.md": "x"}, root=tmp_path, name=reserve(tmp_path))
    finally:
        os.umask(before)
    assert stat.S_IMODE(run.stat().st_mode) == 0o755, oct(run.stat().st_mode)
    assert stat.S_IMODE((tmp_path / "latest").stat().st_mode) == 0o644


def test_a_latest_symlink_is_followed_and_a_latest_folder_refused_without_debris(tmp_path):
    run = write_run({"report.md": "x"}, root=tmp_path, name="r1")
    (tmp_path / "latest").unlink()
    (tmp_path / "latest").symlink_to("r1")
    assert latest(tmp_path) == run.resolve()
    write_run({"report.md": "y"}, root=tmp_path, name="r2")
    assert latest(tmp_path) == tmp_path / "r2", "a new run points latest at itself"
    (tmp_path / "latest").unlink()
    (tmp_path / "latest").mkdir()
    with pytest.raises(StoreError, match="got a folder, but should be a file naming the newest run"):
        check_root(tmp_path)
    with pytest.raises(RunError, match="got a folder"):
        latest(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "r1", "r2"], "nothing left behind"


def test_a_root_that_cannot_be_written_is_named_before_any_work(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="got a file, but should be a folder"):
        check_root(blocker)
    with pytest.raises(StoreError, match="cannot write there"):
        check_root(Path("/proc/ddpc-runs"))  # a file system no user writes folders into, root included
