"""Liveness files (`sa_jobqueue.worker.liveness`): a process's ``flock``, released by its death.

Real processes hold them, and one is killed with kill -9.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import make_url

from sa_jobqueue.worker.liveness import LivenessFiles, Probe

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from sa_jobqueue.worker.liveness import LivenessFiles
    held = LivenessFiles("db", Path(sys.argv[1])).hold(sys.argv[2])
    print("held" if held is not None else "not held", flush=True)
    time.sleep(600)
    """
)


@pytest.fixture
def files(tmp_path: Path) -> LivenessFiles:
    return LivenessFiles("db", tmp_path / "live")


def hold_in_process(files: LivenessFiles, worker_id: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(files.directory), worker_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_holder_is_alive_and_after_kill_9_dead_with_its_file_held_here(files):
    proc = hold_in_process(files, "w-1")
    try:
        assert files.probe("w-1") == (Probe.ALIVE, None)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        probe, held = files.probe("w-1")
        assert probe is Probe.DEAD
        assert held is not None
        # Held here, a second look (another worker's) finds it alive meanwhile...
        assert files.probe("w-1") == (Probe.ALIVE, None)
        held.release()
        # ...and after the recovery the file is gone: nothing more to say of it.
        assert not files.path("w-1").exists()
        assert files.probe("w-1") == (Probe.UNKNOWN, None)
    finally:
        proc.kill()
        proc.wait()


def test_a_clean_stop_deletes_the_file_and_a_kill_leaves_it_for_the_next_holder(files):
    held = files.hold("w-1")
    assert held is not None
    assert not held.found
    held.release()
    assert files.probe("w-1") == (Probe.UNKNOWN, None)  # a clean stop: no file
    proc = hold_in_process(files, "w-1")
    proc.kill()
    proc.wait()
    again = files.hold("w-1")  # the same id restarted: it finds what the kill left
    assert again is not None
    assert again.found
    again.release()


def test_unlock_leaves_a_dead_workers_file_for_the_recovery(files):
    proc = hold_in_process(files, "w-1")
    proc.kill()
    proc.wait()
    probe, held = files.probe("w-1")
    assert probe is Probe.DEAD
    assert held is not None
    held.unlock()  # only looked at (`Registration.dead_here`)
    probe, again = files.probe("w-1")
    assert probe is Probe.DEAD
    assert again is not None
    again.unlock()
    assert files.path("w-1").exists()


def test_a_file_held_by_a_live_process_is_not_taken(files, monkeypatch):
    monkeypatch.setattr("sa_jobqueue.worker.liveness.HOLD_WAIT", 0.2)
    proc = hold_in_process(files, "w-1")
    try:
        assert files.hold("w-1") is None  # two live processes of one id: the second runs without
        assert files.probe("w-1") == (Probe.ALIVE, None)
    finally:
        proc.kill()
        proc.wait()


def test_files_are_per_database_table_and_worker(files):
    other_db = LivenessFiles("db2", files.directory)
    assert files.path("w-1") != files.path("w-2")
    assert files.path("w-1") != other_db.path("w-1")
    url_files = LivenessFiles.for_database(make_url("postgresql://u:secret@h/db"), "jobs")
    assert "secret" not in url_files.identity
    assert url_files.path("w") != LivenessFiles.for_database("postgresql://u@h/db", "other").path(
        "w"
    )


def test_an_unwritable_directory_holds_nothing_and_knows_nothing(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    files = LivenessFiles("db", blocked / "live")
    assert files.hold("w-1") is None
    assert files.probe("w-1") == (Probe.UNKNOWN, None)


def test_a_worker_starting_deletes_dead_files_a_day_old_and_keeps_live_and_recent_ones(files):
    live = hold_in_process(files, "live")
    try:
        for worker_id in ("old-dead", "new-dead"):
            proc = hold_in_process(files, worker_id)
            proc.kill()
            proc.wait()
        day_ago = time.time() - 86_401
        for worker_id in ("old-dead", "live"):
            os.utime(files.path(worker_id), (day_ago, day_ago))
        held = files.hold("starting")
        assert held is not None
        assert not files.path("old-dead").exists()
        assert files.path("new-dead").exists()  # its row may still be recovered
        assert files.probe("live") == (Probe.ALIVE, None)
        held.release()
    finally:
        live.kill()
        live.wait()


def test_a_directory_others_can_write_in_says_nothing(files):
    proc = hold_in_process(files, "w-1")
    proc.kill()
    proc.wait()
    files.directory.chmod(0o777)  # anyone could have planted that unlocked file
    try:
        assert files.probe("w-1") == (Probe.UNKNOWN, None)
        assert files.hold("w-2") is None
    finally:
        files.directory.chmod(0o700)
    probe, again = files.probe("w-1")
    assert probe is Probe.DEAD
    assert again is not None
    again.unlock()


def test_relative_sqlite_files_in_two_directories_are_two_databases(tmp_path, monkeypatch):
    url = make_url("sqlite:///app.db")
    monkeypatch.chdir(tmp_path)
    here = LivenessFiles.for_database(url, "jobs")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert LivenessFiles.for_database(url, "jobs").path("w") != here.path("w")
