"""The results database: every bench/verify/tune point is a row, never only console text.

SQLite (stdlib) because one file holds a whole history, needs no server, and survives
being copied off a GPU machine. Design choices:
- autocommit + WAL: each add_result is its own committed transaction, so a benchmark that
  crashes or is interrupted keeps every row written before; WAL lets readers (a report)
  run while a benchmark writes.
- busy_timeout: two processes (a tuner's workers, two shells) may write at once; SQLite
  serialises them and the loser waits instead of failing with "database is locked".
- PRAGMA user_version: the schema version; MIGRATIONS upgrades an old file in place.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import shlex
import sqlite3
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable

from .errors import BadArgumentError
from .readonly_db import connect_reading, refuse_irregular

DEFAULT_DB = Path("gemmlab-results") / "results.db"
BUSY_TIMEOUT_MS = 30_000

RUN_COLUMNS = ("id", "started", "kind", "command", "env", "git_rev", "gpu")

# (name, SQL type) of schema version 1 in CSV column order, frozen: refusal checks a file's columns
_V1_RESULT_SCHEMA: tuple[tuple[str, str], ...] = (
    ("id", "INTEGER PRIMARY KEY AUTOINCREMENT"),
    ("run_id", "INTEGER NOT NULL REFERENCES runs(id)"),
    ("created", "TEXT NOT NULL"),
    ("op", "TEXT"), ("impl", "TEXT"), ("impl_kind", "TEXT"), ("params", "TEXT"),
    ("M", "INTEGER"), ("N", "INTEGER"), ("K", "INTEGER"),
    ("alpha", "REAL"), ("beta", "REAL"), ("dtype", "TEXT"),
    ("status", "TEXT"), ("reason", "TEXT"), ("rel_err", "REAL"), ("tol", "REAL"),
    ("seed", "INTEGER"), ("flush", "INTEGER"),
    ("t_min_ms", "REAL"), ("t_median_ms", "REAL"), ("t_mean_ms", "REAL"), ("t_stdev_ms", "REAL"),
    ("count", "INTEGER"), ("gflops", "REAL"), ("gbps", "REAL"),
    ("sm_clock_min_mhz", "INTEGER"), ("sm_clock_max_mhz", "INTEGER"), ("temp_max_c", "INTEGER"),
    ("clock_warning", "INTEGER"),
    ("registers", "INTEGER"), ("spill_stores", "INTEGER"), ("smem_static", "INTEGER"),
    ("extra", "TEXT"),
)
RESULT_SCHEMA = _V1_RESULT_SCHEMA  # a migration adding columns appends them here as well
RESULT_COLUMNS = tuple(name for name, _ in RESULT_SCHEMA)
JSON_COLUMNS = ("params", "extra")
BOOL_COLUMNS = ("flush", "clock_warning")
STATUSES = ("PASS", "FAIL", "ERROR", "UNCHECKED")
IMPL_KINDS = ("kernel", "baseline")


def _schema_v1(db: sqlite3.Connection) -> None:
    db.execute("""CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL, kind TEXT NOT NULL,
        command TEXT, env TEXT, git_rev TEXT, gpu TEXT)""")
    cols = ",\n        ".join(f"{name} {sqltype}" for name, sqltype in _V1_RESULT_SCHEMA)
    db.execute(f"CREATE TABLE results (\n        {cols})")
    db.execute("CREATE INDEX results_run ON results(run_id)")
    db.execute("CREATE INDEX results_op_impl ON results(op, impl)")


# MIGRATIONS[i] takes a database at user_version i to i + 1. A later issue appends a
# function (ALTER TABLE results ADD COLUMN ..., CREATE TABLE ...) and never edits old ones;
# RESULT_SCHEMA must then list the new columns too (after _V1_RESULT_SCHEMA's), and readers
# (write=False, which never migrate) must take a file of an older version as it is.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_schema_v1]
SCHEMA_VERSION = len(MIGRATIONS)


def _now() -> str:
    return datetime.now().astimezone().isoformat(timespec="milliseconds")


def _plain(value: Any) -> Any:
    """numpy scalars (np.float32 rel_err, np.int64 sizes) -> Python; sqlite3 rejects them."""
    return value.item() if hasattr(value, "item") and callable(value.item) else value


def _to_json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, sort_keys=True, default=_plain)


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def unfillable(db: sqlite3.Connection, table: str, ours: set[str]) -> bool:
    """Whether `table` has a column besides `ours` that our INSERTs cannot fill (NOT NULL, no default, no key)."""
    return any(r[3] and r[4] is None and not r[5] and r[1] not in ours for r in db.execute(f"PRAGMA table_info({table})"))


def _has_columns_of(db: sqlite3.Connection, version: int) -> bool:
    """Whether the file's runs and results tables have every column gemmlab's schema `version`
    gives them (its migrations run on an in-memory database): tables of those names alone do not
    make a file ours (another program's, stamped with a user_version of its own, failed at the
    first INSERT, after the WAL switch had changed the file), nor do columns it cannot fill (unfillable)."""
    with contextlib.closing(sqlite3.connect(":memory:")) as ours:
        for step in MIGRATIONS[:version]:
            step(ours)
        return all(_columns(ours, t) <= _columns(db, t) and not unfillable(db, t, _columns(ours, t))
                   for t in ("runs", "results"))


def refusal(db: sqlite3.Connection, path: Path, integrity: bool = True, named_by: str = "--db") -> str | None:
    """Why gemmlab must not use this SQLite file as its results database, read without writing:
    another program's database (gemmlab stamps user_version when it creates its tables, so tables
    under version 0, or a version without runs and results of that version's columns, are not ours), one from a newer
    gemmlab, or (with `integrity`) a damaged one (PRAGMA quick_check, which reads the whole
    file). None for a gemmlab file or an empty one. `named_by`: where the user names another file."""
    # version and tables from one snapshot: another process creating the schema in between would
    # otherwise show tables under version 0 (a fresh file opened by two processes at once)
    own = not db.in_transaction
    if own:
        db.execute("BEGIN")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        if own:
            db.execute("COMMIT")
    if (version == 0 and tables) or (version > 0 and not {"runs", "results"} <= tables) \
            or (0 < version <= SCHEMA_VERSION and not _has_columns_of(db, version)):
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        return f"{path} is an SQLite database of another program (tables: {shown}); name another file with {named_by}"
    if version > SCHEMA_VERSION:
        return f"{path} has schema version {version}; this gemmlab knows only up to {SCHEMA_VERSION} (upgrade gemmlab)"
    if tables and integrity:
        problems = [r[0] for r in db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            first = " ".join(problems[0].split())  # SQLite's report may span lines: one line here
            return f"{path} is damaged (SQLite quick_check: {first}); name another one with {named_by}"
    return None


class ResultStore:
    """One SQLite file of runs and their result rows."""

    def __init__(self, path: str | os.PathLike = DEFAULT_DB, integrity: bool = True, write: bool = True,
                 named_by: str = "--db"):
        """`integrity`: also check the whole file for damage before writing to it (PRAGMA quick_check:
        0.14 s for 112 MB). `write`: refuse a file this process cannot write (read-only, immutable)
        here, not at the first row after the work; False opens an existing gemmlab file so that it
        cannot be written (readonly_db: no schema, no WAL switch, no migration, no files left beside
        it). `named_by`: what the refusals say to change."""
        self.path = Path(path)
        refuse_irregular(self.path, named_by)  # a directory (also '', the current one), a pipe, a device
        # timeout= is SQLite's busy timeout. isolation_level=None: autocommit, so every statement
        # outside a BEGIN is committed when it returns. check_same_thread=False + a lock: a tuner
        # may record from worker threads.
        args = dict(timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        try:
            if write:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, **args) if write else connect_reading(self.path, **args)
        except (OSError, sqlite3.OperationalError) as exc:  # a parent that is a file, no permission, ...
            raise BadArgumentError(f"cannot open {self.path} as a results database "
                                   f"({getattr(exc, 'strerror', None) or exc}); name another one with {named_by}") from None
        except sqlite3.DatabaseError as exc:  # a reader's first read: not SQLite at all
            raise BadArgumentError(f"{self.path} is not a usable gemmlab results database ({exc}); "
                                   f"name another one with {named_by}") from None
        self._db.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        try:
            why = self._retry(lambda: refusal(self._db, self.path, integrity, named_by))  # read only: before the WAL switch
            if why:
                raise BadArgumentError(why)
            self._db.execute("PRAGMA foreign_keys = ON")
            if write:  # the last, a write that changes nothing: SQLite refuses it on a file it cannot write
                self._retry(lambda: self._db.execute("PRAGMA journal_mode = WAL"))
                self._retry(self._migrate)
                self._retry(lambda: self._db.execute("DELETE FROM runs WHERE 0"))
            elif self.schema_version == 0:  # an empty file (one with tables at version 0 is refused above)
                raise BadArgumentError(f"{self.path} holds no gemmlab results (an empty database); name another one with {named_by}")
        except sqlite3.DatabaseError as exc:  # not SQLite at all, or damaged: refuse it, change nothing
            self._db.close()
            reason = "read-only" if "readonly" in str(exc) else str(exc)
            raise BadArgumentError(f"{self.path} is not a usable gemmlab results database ({reason}); "
                                   f"name another one with {named_by}") from None
        except BaseException:  # a refusal, a failed migration, an interrupt: the file is not left open
            self._db.close()
            raise

    @staticmethod
    def _retry(fn: Callable[[], Any], tries: int = 50):
        """Switching journal mode and creating the schema take a lock that SQLite's busy
        handler does not always wait for when two processes open a new file together."""
        for attempt in range(tries):
            try:
                return fn()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or attempt == tries - 1:
                    raise
                time.sleep(0.05)

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version >= SCHEMA_VERSION:  # a newer file was refused before (refusal)
            return
        # BEGIN IMMEDIATE takes the write lock first, then re-reads the version: of two
        # processes opening a fresh file, only one creates the tables.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            for step in range(version, SCHEMA_VERSION):
                MIGRATIONS[step](self._db)
                self._db.execute(f"PRAGMA user_version = {step + 1}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    @property
    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    # -- writing ----------------------------------------------------------------------

    def start_run(self, kind: str, command: str | Iterable[str] | None = None,
                  env: dict | None = None) -> int:
        """A new run; git revision and GPU name are copied out of `env` (collect_env's dict)
        into columns so that runs can be filtered without parsing JSON."""
        env = env or {}
        if command is not None and not isinstance(command, str):
            command = shlex.join(str(c) for c in command)
        gpu = (env.get("gpu") or {}).get("name") if isinstance(env.get("gpu"), dict) else None
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO runs (started, kind, command, env, git_rev, gpu) VALUES (?,?,?,?,?,?)",
                (_now(), kind, command, _to_json(env), env.get("git"), gpu))
        return cur.lastrowid

    def add_result(self, run_id: int, **fields: Any) -> int:
        """Record one point; committed before this returns."""
        unknown = set(fields) - set(RESULT_COLUMNS[2:])
        if unknown:
            raise ValueError(f"unknown result field(s): {', '.join(sorted(unknown))}")
        if fields.get("status") is not None and fields["status"] not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {fields['status']!r}")
        if fields.get("impl_kind") is not None and fields["impl_kind"] not in IMPL_KINDS:
            raise ValueError(f"impl_kind must be one of {IMPL_KINDS}, not {fields['impl_kind']!r}")
        row = {"run_id": run_id, "created": _now()}
        for name, value in fields.items():
            value = _plain(value)
            if name in JSON_COLUMNS:
                value = _to_json(value)
            elif name in BOOL_COLUMNS and value is not None:
                value = int(bool(value))
            row[name] = value
        names = ", ".join(row)
        marks = ", ".join("?" * len(row))
        with self._lock:
            cur = self._db.execute(f"INSERT INTO results ({names}) VALUES ({marks})", tuple(row.values()))
        return cur.lastrowid

    # -- reading ----------------------------------------------------------------------

    def results(self, run_id: int | None = None, op: str | None = None,
                impl: str | None = None) -> list[dict]:
        where, args = [], []
        for column, value in (("run_id", run_id), ("op", op), ("impl", impl)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT * FROM results" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            for name in JSON_COLUMNS:
                d[name] = json.loads(d[name]) if d[name] is not None else None
            out.append(d)
        return out

    def query(self, sql: str, args: Iterable[Any] = ()) -> list[dict]:
        """Rows of a read-only SQL query as dicts (JSON columns left as text)."""
        with self._lock:
            return [dict(r) for r in self._db.execute(sql, tuple(args)).fetchall()]

    def runs(self) -> list[dict]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM runs ORDER BY id").fetchall()
        return [{**dict(r), "env": json.loads(r["env"]) if r["env"] else None} for r in rows]

    def last_run_id(self) -> int | None:
        with self._lock:
            return self._db.execute("SELECT MAX(id) FROM runs").fetchone()[0]

    # -- export -----------------------------------------------------------------------

    def export_csv(self, path: str | os.PathLike, run_id: int | None = None) -> Path:
        """Result rows, one per line, params/extra as JSON text."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=RESULT_COLUMNS)
            w.writeheader()
            for r in self.results(run_id=run_id):
                w.writerow({k: _to_json(v) if k in JSON_COLUMNS else v for k, v in r.items()})
        return path

    def export_json(self, path: str | os.PathLike, run_id: int | None = None) -> Path:
        """{"schema_version", "runs": [...], "results": [...]}: the runs carry their env."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        runs = [r for r in self.runs() if run_id is None or r["id"] == run_id]
        doc = {"schema_version": self.schema_version, "runs": runs, "results": self.results(run_id=run_id)}
        path.write_text(json.dumps(doc, indent=1, default=_plain) + "\n")
        return path

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

