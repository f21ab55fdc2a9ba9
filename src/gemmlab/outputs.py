"""The files a command writes besides its database (--markdown, --csv, --json, report's --out),
checked before any work: a benchmark must not run for minutes and then fail to write its table.
Each is refused in one line (BadArgumentError: exit 2) where it names a directory, lies under a
plain file or in a folder this user cannot write, or would overwrite a results database (the
command's own, or any SQLite file); a missing parent folder is made, as the database's is, and
made folders still empty when the command is refused are removed (remove_made_folders).
Writability is tried, not asked: os.access says yes to root on /proc or /sys, where the write
then failed after the run. Also the name of a batch's raw text file (batch_file_path)."""
from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Callable

from .errors import BadArgumentError
from .readonly_db import connect_reading, refuse_irregular


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database
SIDECARS = ("", "-wal", "-shm", "-journal")  # the database's own file and SQLite's files beside it
# what a file option named as a folder is told to give instead (typed_file_path)
FILE_OPTIONS = {"--db": "results.db", "--csv": "results.csv", "--json": "results.json", "--markdown": "results.md"}
_made: list[Path] = []  # the folders make_folder made in this command, each after its parent


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
        if not _writable(path):
            raise BadArgumentError(f"{option} {str(path)!r} is not writable")
        if _sqlite(path):
            raise BadArgumentError(f"{option} {str(path)!r} is an SQLite database (results of earlier runs?): "
                                   "not overwritten; name another file")
        return path
    _folder(path.parent, option, path)
    return path


def distinct(*named: tuple[str, Path | None]) -> None:
    """(option, path) pairs of one command: two options naming one file would overwrite each other
    (a device or a pipe such as /dev/null or /dev/stdout may take both)."""
    seen: dict[Path, str] = {}
    for option, path in named:
        if path is None or (path.exists() and not path.is_file()):
            continue
        key = path.resolve()
        if key in seen:
            raise BadArgumentError(f"{seen[key]} and {option} both name {str(path)!r}: each needs its own file")
        seen[key] = option


def database_ready(path: str | os.PathLike) -> None:
    """Refuse a --db this command could not record into before any work, and before the GPU is
    looked for, writing nothing: an existing file is read (another program's, a newer or a
    damaged one refused, as the run's own open would) and must take writes, with its folder
    (SQLite's -wal and -shm files); for a new one, the nearest existing folder must take a file."""
    path = Path(path)
    refuse_irregular(path, "--db")  # also '' (the current directory), as the store says
    if path.exists():
        open_readonly(path).close()
        why = "read-only" if not _writable(path) else _refuses_files(path.parent)
    else:
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        why = _refuses_files(folder)
    if why:
        raise BadArgumentError(f"cannot open {path} as a results database ({why}); name another one with --db")


def open_readonly(path: Path) -> sqlite3.Connection:
    """A connection that cannot write the file (readonly_db: it leaves nothing beside it either),
    the file checked first (store.refusal: another program's, a newer or a damaged one is one
    line, the file untouched)."""
    from .store import refusal

    refuse_irregular(Path(path), "--db")
    try:
        db = connect_reading(path)
        why = refusal(db, Path(path))
    except sqlite3.OperationalError:
        raise BadArgumentError(f"cannot read {path} as a results database (a directory, or no permission?)") from None
    except sqlite3.DatabaseError as exc:  # not SQLite, or damaged: one line, the file untouched
        raise BadArgumentError(f"{path} is not a usable gemmlab results database ({exc})") from None
    if why:
        db.close()
        raise BadArgumentError(why)
    db.row_factory = sqlite3.Row
    return db


def _writable(path: Path) -> bool:
    """An existing regular file opened for appending, which changes nothing in it; anything else
    (a terminal, /dev/stdout, a pipe that opening would block on) as the kernel's access check says."""
    if not path.is_file():
        return os.access(path, os.W_OK)
    try:
        with open(path, "ab"):
            return True
    except OSError:
        return False


def _refuses_files(folder: Path) -> str | None:
    """Why `folder` cannot take a new file (None when it can): one made, then removed (a folder
    that takes files but refuses removals, chattr +a, is judged by the making)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".gemmlab-probe-", dir=folder)
    except OSError as exc:  # a parent that is a file, no permission, a read-only file system, /proc
        return exc.strerror or str(exc)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


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


def typed_file_path(option: str, typed: str | None) -> None:
    """Refuse a file option's value that names a folder as typed (`--db new/`)."""
    if typed is not None and str(typed).endswith(("/", "/.")):
        named = Path(typed)  # a file written with a '/' after it is shown as itself
        example = str(named if named.is_file() else named / FILE_OPTIONS.get(option, "results"))
        raise BadArgumentError(f"{option} {str(typed)!r} names a folder: give a file path such as {example!r}")


def checked_as_typed(option: str, process):
    """A click parameter's process_value, run after typed_file_path on the value as typed: it
    makes typer's Path, which drops a trailing '/' or '/.', so `--db new/` made a FILE named new."""
    def process_typed(ctx, value):
        typed_file_path(option, value)
        return process(ctx, value)
    return process_typed


def make_folder(folder: str | os.PathLike) -> None:
    """`mkdir -p folder`, remembering each level it made itself: not one that was there, nor one
    another process made first (FileExistsError), for neither is this command's to remove."""
    folder = Path(folder).absolute()
    missing = []
    for level in (folder, *folder.parents):
        if level.exists():
            break
        missing.append(level)
    for level in reversed(missing):
        try:
            level.mkdir()
        except FileExistsError:
            continue
        _made.append(level)
    folder.mkdir(parents=True, exist_ok=True)  # nothing left to make; raises for a file in the way


def remove_made_folders() -> None:
    """For a command refused or failed after make_folder (bad input found later, no GPU): each
    folder it made that is still empty, deepest first. rmdir removes no folder holding anything
    (an output written, another process's file), and then none of its parents either. Another
    command that found such a folder already there may still mean to write into it at its end:
    every writer makes its file's folder again just before writing (the stores' exports, bench's
    and bench --api's markdown, report's pages and plots through output_file)."""
    while _made:
        with contextlib.suppress(OSError):
            _made.pop().rmdir()


def removes_made_folders_on_failure(entry: Callable[..., int]) -> Callable[..., int]:
    """`entry` (a command line's main, returning its exit code) that, when the code is not 0,
    removes the folders made during it that are still empty (remove_made_folders); folders made
    before it (an earlier command in this process) are not its own, so forgotten first."""
    @functools.wraps(entry)
    def run(*args, **kwargs) -> int:
        _made.clear()
        code = entry(*args, **kwargs)
        if code:
            remove_made_folders()
        return code
    return run


def _folder(folder: Path, option: str, named: Path) -> None:
    try:
        make_folder(folder)
    except OSError as exc:  # a parent that is a plain file, no permission, a read-only file system
        raise BadArgumentError(f"{option} {str(named)!r}: cannot make folder {str(folder)!r} "
                               f"({exc.strerror or exc})") from None
    why = _refuses_files(folder)
    if why:
        raise BadArgumentError(f"{option} {str(named)!r}: folder {str(folder)!r} is not writable ({why})")


def batch_file_path(folder: str | os.PathLike, prefix: str = "bench_fp32") -> Path:
    """folder/prefix_YYYYmmdd_HHMMSS.txt (seed 002's naming), never an existing file.

    The file is created empty here (exclusive create), so two batches started in the
    same second, even from two processes, get two different names (_1, _2, ...).
    """
    folder = Path(folder)
    make_folder(folder)
    stem = f"{prefix}_{time.strftime('%Y%m%d_%H%M%S')}"
    for n in range(10_000):
        path = folder / (f"{stem}.txt" if n == 0 else f"{stem}_{n}.txt")
        try:
            with open(path, "x"):
                return path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for {stem} in {folder}")
