"""The user's own tuning database, used by the API only when named: gemmlab.use_tuning(path) or
$GEMMLAB_DB. Never picked up from the working directory, so a program is as fast in any folder.

A named database overrides the shipped table's parameters for a kernel where it holds tuned
results for this GPU (at the tuned shape nearest the call's; harness.tuned).
"""
from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path

from ..errors import BadArgumentError
from ..readonly_db import irregular

_named: str | None = None
_cache: dict[tuple, dict] = {}
_lock = threading.Lock()
_MISSING = object()  # a key not looked up yet (None is a lookup that found nothing)
_warned: set[str] = set()  # missing databases already warned of, once a path per process
_env_files: dict[str, str] = {}  # a GEMMLAB_DB value -> the file it named when first read (absolute)


def use_tuning(path: str | os.PathLike | None) -> None:
    """Use the results database at `path` (written by `gemmlab tune`) for kernel parameters from now
    on; None stops using one. A path that is not a gemmlab results database raises ValueError."""
    global _named
    if path is None:
        with _lock:
            _named = None
            _cache.clear()
        return
    if not isinstance(path, (str, os.PathLike)):
        raise BadArgumentError(f"gemmlab.use_tuning: path must be a file path (str or os.PathLike) or None, not {path!r}")
    p = Path(path).resolve()  # the file named now: a later os.chdir must not swap it for another
    if p.is_dir():
        raise BadArgumentError(f"gemmlab.use_tuning: {p} is a directory: name a results database file")
    if not p.is_file():
        what = f"is {irregular(p)}" if p.exists() else "does not exist"
        raise BadArgumentError(f"gemmlab.use_tuning: no tuning database at {p}: it {what}")
    if p.stat().st_size == 0:  # SQLite would take it as a new database, and the store write a schema into it
        raise BadArgumentError(f"gemmlab.use_tuning: {p} is empty, not a results database written by gemmlab tune")
    from ..store import ResultStore

    try:  # a read-only file of tuned parameters serves; the store's refusals are one line as they are
        with ResultStore(p, write=False, named_by="gemmlab.use_tuning(path)") as store:
            store.query("SELECT 1 FROM runs LIMIT 1")
    except BadArgumentError:
        raise
    except Exception as exc:  # anything else SQLite says
        raise BadArgumentError(f"gemmlab.use_tuning: {p} is not a gemmlab results database ({exc})") from None
    with _lock:
        _named = str(p)
        _cache.clear()


def database() -> str | None:
    """The database in use: the one named by use_tuning(), else $GEMMLAB_DB, else none."""
    if _named:
        return _named
    env = os.environ.get("GEMMLAB_DB")
    if not env:
        return None
    # A relative GEMMLAB_DB is the file it named when first read, as use_tuning's path is: read
    # again after an os.chdir it named another file (or none), so the shapes looked up before the
    # chdir kept one file's parameters, and those after it took another's or warned of a missing one.
    path = _env_files.get(env)  # the common case: one dict hit, no path built
    if path is None:  # setdefault keeps the first reader's path if two threads race here
        path = _env_files.setdefault(env, str(Path(env).absolute()))
    return path


def describe() -> str:
    db = database()
    if db is None:
        return "no database named (gemmlab.use_tuning(path) or GEMMLAB_DB); the shipped table's parameters"
    absent = {"missing": ": no such file", "empty": ": an empty file"}.get(_absent(db))
    missing = f"{absent}, so the shipped table's parameters" if absent else ""
    return f"{db} ({'use_tuning' if _named else 'GEMMLAB_DB'}){missing}"


def _absent(db: str) -> str:
    """Why a named database has no tuned results to read: "missing", "empty" (a tune about to
    write it), or "" for a file to read."""
    path = Path(db)
    return "missing" if not path.is_file() else "empty" if path.stat().st_size == 0 else ""


def tuned_params(spec, problem, gpu: str) -> dict | None:
    """The named database's best parameters for this kernel near `problem`, or None."""
    db = database()
    if db is None or getattr(spec, "kind", "") != "kernel":
        return None
    key = (db, spec.name, problem.op, getattr(problem, "dtype", ""), problem.M, problem.N, problem.K, gpu,
           getattr(problem, "layout", "nn"), getattr(problem, "out_dtype", "fp32"))
    found = _cache.get(key, _MISSING)  # one read: another thread's use_tuning may clear the cache at any time
    if found is _MISSING:
        from ..harness.tuned import usable_best
        from ..store import ResultStore

        found = None
        source = "gemmlab.use_tuning(path)" if _named else "GEMMLAB_DB"
        if _absent(db):
            _warn_missing(db)
        else:
            try:
                # integrity checked when named (use_tuning), not again at each new shape's first call
                with ResultStore(Path(db), integrity=False, write=False, named_by=source) as store:
                    found = usable_best(store, gpu, spec, problem)
            except BadArgumentError as exc:  # the store's refusals name the file and what to change
                raise BadArgumentError(f"the tuning database: {exc}") from None
            except Exception as exc:
                raise BadArgumentError(f"cannot read the tuning database {db} (named by {source}): {exc}") from None
        with _lock:
            _cache[key] = found
    return found


def _warn_missing(db: str) -> None:
    """A named database that is not there (a mistyped GEMMLAB_DB, a file removed after
    use_tuning) would otherwise slow a program with no word: the shipped table's parameters
    serve, as explain() says, and the first call that looks it up warns, once a path."""
    with _lock:
        if db in _warned:
            return
        _warned.add(db)
    source = "gemmlab.use_tuning" if _named else "GEMMLAB_DB"
    what = f"no tuning database at {db}" if _absent(db) == "missing" else f"the tuning database {db} is empty"
    warnings.warn(f"gemmlab: {what} (named by {source}): the shipped table's parameters serve",
                  UserWarning, stacklevel=2)
