"""Opening an existing SQLite file to read it without changing it: the API's tuning database (a
user's file, named by gemmlab.use_tuning or GEMMLAB_DB) and report's results databases.

gemmlab's results files are in WAL mode, which makes reading them without a trace subtle:
- a read-only (mode=ro) connection to a WAL file makes -wal and -shm files beside it and cannot
  remove them when it closes; only a read-write one does. So a file this process may write is
  opened read-write (mode=rw never creates a file) with PRAGMA query_only, which refuses writes;
- a file it may not write is opened mode=ro, which needs a -shm file SQLite can make or find;
- in a folder no one can write (a read-only mount, an image's folder) neither opens, and the file
  is read as immutable: no writer can be at work there. Never over a -wal file holding rows: the
  immutable reader would skip them and read an older or empty database.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path


def irregular(path: Path) -> str | None:
    """Why an existing `path` is no database file ("a directory", a pipe or a device, which SQLite
    would block on for good or read as an empty database); None for a regular file or none."""
    if path.is_dir():
        return "a directory"
    if path.exists() and not path.is_file():
        return "not a regular file (a pipe or a device?)"
    return None


def refuse_irregular(path: Path, named_by: str) -> None:
    """One line for a database path that is an existing directory, pipe or device (irregular)."""
    why = irregular(path)
    if why:
        from .errors import BadArgumentError

        raise BadArgumentError(f"{named_by} {str(path)!r} is {why}: name a results database file")


def connect_reading(path: str | Path, **connect_args) -> sqlite3.Connection:
    """A connection to the existing file at `path` that cannot write it, tried read-write, then
    read-only, then immutable (see above), each with one read to see that it opens (SQLite opens
    lazily). sqlite3.OperationalError where none opens it (a missing file, no permission);
    sqlite3.DatabaseError for a file that is not SQLite."""
    resolved = Path(path).resolve()  # links followed: the folder and -wal looked at are the file's own
    why = irregular(resolved)
    if why:
        raise sqlite3.OperationalError(f"{path} is {why}")
    wal = Path(f"{resolved}-wal")
    modes = ["mode=rw", "mode=ro"] + ([] if wal.exists() and wal.stat().st_size else ["immutable=1"])
    failure = None
    for mode in modes:
        db = None
        try:
            db = sqlite3.connect(f"{resolved.as_uri()}?{mode}", uri=True, **connect_args)
            db.execute("PRAGMA query_only = 1")
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError as exc:  # this mode cannot open it: the next one may
            failure = exc
        except BaseException:
            if db is not None:
                db.close()
            raise
        if db is not None:
            db.close()
    raise failure
