"""The files a command writes besides its database (--markdown, --csv, --json, report's --out),
checked before any work: a benchmark must not run for minutes and then fail to write its table.
Each is refused in one line (BadArgumentError: exit 2) where it names a directory, lies under a
plain file or in a folder this user cannot write, or would overwrite a results database (the
command's own, or any SQLite file); a missing parent folder is made, as the database's is."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import BadArgumentError


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database
SIDECARS = ("", "-wal", "-shm", "-journal")  # the database's own file and SQLite's files beside it


def output_file(path: str | os.PathLike | None, option: str,
                database: str | os.PathLike | None = None) -> Path | None:
    """`path` ready to be written (its folder made), or None when not given. Never the results
    `database` the command writes (or SQLite's files beside it), nor any existing SQLite
    database: a table written over one would destroy every run recorded in it."""
    if path is None:
        return None
    path = Path(path)
    if str(path) in ("", ".") or path.is_dir():
        raise BadArgumentError(f"{option} {str(path)!r} is a directory: name a file")
    if database is not None:
        target, db = path.resolve(), str(Path(database).resolve())
        if any(str(target) == db + end for end in SIDECARS):
            raise BadArgumentError(f"{option} {str(path)!r} is the results database this command writes: "
                                   "name another file")
    if path.exists():  # a file (or /dev/stdout) that can be written, wherever it lies
        if not os.access(path, os.W_OK):
            raise BadArgumentError(f"{option} {str(path)!r} is not writable")
        if _sqlite(path):
            raise BadArgumentError(f"{option} {str(path)!r} is an SQLite database (results of earlier runs?): "
                                   "not overwritten; name another file")
        return path
    _folder(path.parent, option, path)
    return path


def _sqlite(path: Path) -> bool:
    """Whether a regular file starts as an SQLite database does (a pipe or terminal is not read)."""
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def output_folder(path: str | os.PathLike, option: str) -> Path:
    """A folder to write files into (made where missing)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise BadArgumentError(f"{option} {str(path)!r} is a file: name a folder")
    _folder(path, option, path)
    return path


def _folder(folder: Path, option: str, named: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a parent that is a plain file, no permission, a read-only file system
        raise BadArgumentError(f"{option} {str(named)!r}: cannot make folder {str(folder)!r} "
                               f"({exc.strerror or exc})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadArgumentError(f"{option} {str(named)!r}: folder {str(folder)!r} is not writable")
