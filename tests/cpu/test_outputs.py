"""The output-file checks (outputs.py), each pinned where a mutant of it passed every other CPU
test (the fourth audit): an existing --db this command could not record into (the file
read-only, or its folder taking no -wal/-shm file), a non-regular output judged by the kernel's
access check and never opened, and a folder another process made first not counted as this
command's to remove. These tests run as root too: where root could write anyway, the answer of
the one probe in question is set by monkeypatch."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from gemmlab import outputs
from gemmlab.errors import BadArgumentError


def _database(path: Path) -> Path:
    from gemmlab.store import ResultStore

    with ResultStore(path):
        pass
    return path


def test_an_existing_database_that_cannot_be_written_is_refused_as_read_only(tmp_path, monkeypatch):
    """database_ready refuses a --db whose file takes no writes before any work (the run's
    first insert would fail after it), saying why: read-only."""
    db = _database(tmp_path / "r.db")
    outputs.database_ready(db)  # writable, in a folder that takes files: taken
    monkeypatch.setattr(outputs, "_writable", lambda path: path != db)
    with pytest.raises(BadArgumentError, match=r"^cannot open .*r\.db as a results database \(read-only\)"):
        outputs.database_ready(db)


def test_an_existing_database_in_a_folder_that_takes_no_file_is_refused(tmp_path, monkeypatch):
    """SQLite writes its -wal and -shm files beside the database: an existing, writable file in a
    folder that refuses new files cannot record a run either, and is refused with the reason."""
    db = _database(tmp_path / "r.db")
    monkeypatch.setattr(outputs, "_refuses_files",
                        lambda folder: "Permission denied" if Path(folder) == tmp_path else None)
    with pytest.raises(BadArgumentError, match=r"^cannot open .*r\.db as a results database \(Permission denied\)"):
        outputs.database_ready(db)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_output_is_judged_by_the_access_check_without_being_opened(tmp_path, monkeypatch):
    """A non-regular output (a pipe, a terminal) is not opened to try it (a pipe would block
    until a reader came): os.access answers, and a no is one line."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert outputs.output_file(fifo, "--csv") == fifo  # would hang here if the pipe were opened
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == fifo else access(path, mode, **kw))
    with pytest.raises(BadArgumentError, match=r"^--csv '.*pipe' is not writable$"):
        outputs.output_file(fifo, "--csv")


def test_a_folder_another_process_made_first_is_not_removed_as_this_commands(tmp_path, monkeypatch):
    """make_folder remembers only the levels it made itself: a level that another process made
    between the look and the mkdir (FileExistsError) is that process's, and remove_made_folders
    leaves it, with its parents, even when empty."""
    monkeypatch.setattr(outputs, "_made", [])
    raced = tmp_path / "a" / "b"
    mkdir = Path.mkdir

    def racing_mkdir(self, *args, **kwargs):
        if self == raced and not args and not kwargs:  # the other process is first
            mkdir(self)
            raise FileExistsError(17, "File exists", str(self))
        return mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    outputs.make_folder(raced / "c")
    assert (raced / "c").is_dir()
    outputs.remove_made_folders()
    assert raced.is_dir() and not (raced / "c").exists(), "its own level removed, the raced one kept"
