"""The class run's guards, one at a time: leftover processes, the gradebook, notebooks."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import nbformat
import psutil
import pytest

from tilelab.classroom import guards, submissions


def test_the_reaper_kills_what_the_block_left_running():
    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with guards.Reaper() as reaper:
            # a daemon: its parent exits at once, the sleeper is orphaned
            subprocess.run([sys.executable, "-c",
                            "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
                            "'import time; time.sleep(60)'], start_new_session=True)"], check=True)
        assert len(reaper.killed) == 1
        assert not psutil.pid_exists(reaper.killed[0]) or (
            psutil.Process(reaper.killed[0]).status() == psutil.STATUS_ZOMBIE)
        assert before.poll() is None  # started before the block: left alone
    finally:
        before.kill()
        before.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux subreaper")
def test_after_the_reapers_block_an_orphan_is_not_this_processs_zombie():
    """A long-lived worker is a subreaper only inside the block: orphans of later processes
    (a sandbox's, say) go to init, not to a worker that would never reap them."""
    with guards.Reaper():
        pass
    orphan = subprocess.run(  # a child that ends at once, leaving a short-lived grandchild
        [sys.executable, "-c", "import subprocess, sys; print(subprocess.Popen([sys.executable,"
         " '-c', 'import time; time.sleep(0.5)']).pid)"],
        check=True, capture_output=True, text=True)
    pid = int(orphan.stdout)
    time.sleep(1.0)  # it has ended
    assert pid not in {p.pid for p in psutil.Process().children()}  # init's, not our zombie


def _gradebook(path, rows):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE IF NOT EXISTS student (id TEXT, note TEXT)")
    con.executemany("INSERT INTO student VALUES (?, ?)", rows)
    con.commit()
    con.close()


def test_the_gradebook_guard_restores_on_leaving_the_block(tmp_path):
    db = tmp_path / "gradebook.db"
    _gradebook(db, [("alice", "a"), ("bob", "b")])
    with guards.GradebookGuard(db, "alice") as own:
        _gradebook(db, [("alice", "mine")])  # a student's own row: allowed
    assert own.tampered is None
    with guards.GradebookGuard(db, "alice") as other:
        _gradebook(db, [("bob", "forged")])
    assert other.tampered and "changed the gradebook" in other.tampered
    # the copy (every student's rows) was in a folder of its own, gone after the block
    assert own.folder and not own.folder.exists() and not other.folder.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gradebook.db"]
    con = sqlite3.connect(db)
    assert ("bob", "forged") not in con.execute("SELECT * FROM student").fetchall()
    con.close()


def _notebook(path, cells):
    nb = nbformat.v4.new_notebook(cells=cells)
    nbformat.write(nb, path)
    return path


def test_interrupted_cells_are_counted(tmp_path):
    cell = nbformat.v4.new_code_cell("import time; time.sleep(1e6)")
    cell.outputs = [nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="",
                                           traceback=[])]
    path = _notebook(tmp_path / "n.ipynb", [cell, nbformat.v4.new_code_cell("1")])
    assert submissions.interrupted_cells(path) == 1
    (tmp_path / "bad.ipynb").write_text("{ not json")
    assert submissions.interrupted_cells(tmp_path / "bad.ipynb") == 0


def test_links_and_special_files_in_a_submission_are_found(tmp_path):
    import socket

    from tilelab.classroom.submissions import unsafe_entries

    folder = tmp_path / "submitted" / "mallory" / "01-naive"
    (folder / "data").mkdir(parents=True)
    (folder / "naive.ipynb").write_text("{}")
    (folder / "data" / "plain.txt").write_text("fine")
    assert unsafe_entries(folder) == []  # plain files and folders only
    secret = tmp_path / "gradebook.db"
    secret.write_text("grades")
    (folder / "data" / "grades.txt").symlink_to(secret)
    (folder / "zero").symlink_to("/dev/zero")
    (folder / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    os.link(secret, folder / "data" / "copy.txt")  # the gradebook's bytes, under a new name
    os.mkfifo(folder / "pipe")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(folder / "sock"))
        found = unsafe_entries(folder, limit=10)
    assert sorted(found) == sorted([
        "data/grades.txt (a symbolic link)", "zero (a symbolic link)",
        "elsewhere (a symbolic link)", "pipe (not a plain file)", "sock (not a plain file)",
        "data/copy.txt (a hard link: the file has another name on this disk)"])
    assert len(unsafe_entries(folder, limit=2)) == 2
    linked = tmp_path / "submitted" / "eve"
    linked.symlink_to(folder.parent, target_is_directory=True)  # the student's folder a link
    assert unsafe_entries(linked / "01-naive") == ["eve (a symbolic link)"]


def test_sizes_are_checked_by_apparent_size_before_anything_reads(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "naive.ipynb").write_text("{}")
    assert submissions.refused_entries(sub, 100 << 20) == []
    with open(sub / "data.bin", "wb") as f:
        f.truncate(2 << 30)  # sparse: 2 GiB to a reader, no block on disk
    assert os.stat(sub / "data.bin").st_blocks == 0
    found = submissions.refused_entries(sub, 100 << 20)
    assert found[0] == "data.bin (2048 MiB; a file may be at most 100 MiB)"
    assert "in all" in found[-1]
    assert "nothing of it was read" in submissions.refusal(found)
    (sub / "data.bin").unlink()
    with open(sub / "naive.ipynb", "wb") as f:
        f.truncate(submissions.NOTEBOOK_LIMIT + 1)
    assert submissions.oversized(sub, 100 << 20) == [
        "naive.ipynb (16 MiB; a notebook may be at most 16 MiB)"]


def test_a_submission_of_too_many_files_is_refused_before_nbgrader_lists_them(tmp_path):
    """60,000 empty files pass every size cap, but nbgrader's copy checks each against its
    ignore rules by a scan of the folder: time quadratic in the count (a stalled class)."""
    sub = tmp_path / "sub"
    (sub / "many").mkdir(parents=True)
    (sub / "naive.ipynb").write_text("{}")
    for i in range(submissions.FILE_COUNT_LIMIT):
        (sub / "many" / f"f{i}").touch()
    assert submissions.refused_entries(sub, 100 << 20) == [
        f"more than {submissions.FILE_COUNT_LIMIT} files (a submission may hold at most "
        f"{submissions.FILE_COUNT_LIMIT})"]
    (sub / "naive.ipynb").unlink()
    assert submissions.refused_entries(sub, 100 << 20) == []


def test_a_kernel_cell_nested_too_deeply_is_refused_with_a_message():
    with pytest.raises(submissions.KernelCellError, match="nested too deeply"):
        submissions.kernel_from_cell("KERNEL = " + "-" * 200000 + "1")
