"""Profile, analysis and bandwidth rows, in the results database beside `results`.

The tables live in the same SQLite file as ResultStore's runs/results and point at its
`runs` table (a profile or analyze run is started with ResultStore.start_run, so it carries
the environment and the command like every other run). They are created here with
CREATE TABLE IF NOT EXISTS rather than through store.py's migrations, so that this module
can add them to any results file, old or new, without changing the schema version the
rest of gemmlab manages. Columns holding JSON: params, metrics, extra, occupancy, sass.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from .ncu import METRIC_KEYS

PROFILE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "INTEGER PRIMARY KEY AUTOINCREMENT"),
    ("run_id", "INTEGER NOT NULL"),
    ("created", "TEXT NOT NULL"),
    ("op", "TEXT"), ("impl", "TEXT"), ("impl_kind", "TEXT"), ("kernel", "TEXT"), ("params", "TEXT"),
    ("M", "INTEGER"), ("N", "INTEGER"), ("K", "INTEGER"), ("elements", "INTEGER"),
    ("status", "TEXT"), ("reason", "TEXT"),
    ("verified", "INTEGER"), ("rel_err", "REAL"),
    ("launch_skip", "INTEGER"), ("launch_count", "INTEGER"), ("grid", "TEXT"), ("block", "TEXT"),
    *((key, "REAL") for key in METRIC_KEYS),
    ("dram_bytes", "REAL"), ("flops", "REAL"),
    ("ncu_version", "TEXT"), ("ncu_command", "TEXT"),
    ("metrics", "TEXT"),  # every collected metric, by its ncu name, in ncu's base units
    ("extra", "TEXT"),
    # the GEMM's input type, layout, C type and batch (NULL in rows written before they were kept)
    ("dtype", "TEXT"), ("layout", "TEXT"), ("out_dtype", "TEXT"), ("batch", "INTEGER"),
)
ANALYSIS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "INTEGER PRIMARY KEY AUTOINCREMENT"),
    ("run_id", "INTEGER NOT NULL"),
    ("created", "TEXT NOT NULL"),
    ("op", "TEXT"), ("impl", "TEXT"), ("arch", "TEXT"), ("params", "TEXT"), ("mangled", "TEXT"),
    ("registers", "INTEGER"), ("smem_static", "INTEGER"), ("smem_dynamic", "INTEGER"),
    ("stack_frame", "INTEGER"), ("spill_stores", "INTEGER"), ("spill_loads", "INTEGER"),
    ("threads", "INTEGER"), ("blocks_per_sm", "INTEGER"), ("occupancy_pct", "REAL"), ("limiter", "TEXT"),
    ("occupancy", "TEXT"),
    ("sass_tool", "TEXT"), ("sass_reason", "TEXT"), ("sass", "TEXT"),
)
BANDWIDTH_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "INTEGER PRIMARY KEY AUTOINCREMENT"),
    ("run_id", "INTEGER NOT NULL"),
    ("created", "TEXT NOT NULL"),
    ("method", "TEXT"), ("bytes", "INTEGER"), ("median_ms", "REAL"), ("gbps", "REAL"),
)
TABLES = {"profiles": PROFILE_COLUMNS, "analyses": ANALYSIS_COLUMNS, "bandwidth": BANDWIDTH_COLUMNS}
JSON_COLUMNS = ("params", "metrics", "extra", "occupancy", "sass")


def _now() -> str:
    return datetime.now().astimezone().isoformat(timespec="milliseconds")


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") and callable(value.item) else value


def connect(path: str | os.PathLike, create: bool = True) -> sqlite3.Connection:
    db = sqlite3.connect(Path(path), timeout=30, isolation_level=None)
    db.row_factory = sqlite3.Row
    if create:
        ensure_tables(db)
    return db


def ensure_tables(db: sqlite3.Connection) -> None:
    for name, columns in TABLES.items():
        cols = ", ".join(f"{c} {t}" for c, t in columns)
        db.execute(f"CREATE TABLE IF NOT EXISTS {name} ({cols})")
        have = {r[1] for r in db.execute(f"PRAGMA table_info({name})")}
        for c, t in columns:  # a file made by an older gemmlab: add what is missing
            if c not in have:
                db.execute(f"ALTER TABLE {name} ADD COLUMN {c} {t.replace('NOT NULL', '')}")


def check_tables(path: str | os.PathLike) -> None:
    """Refuse, before a run is recorded in it, a results file whose profiles, analyses or
    bandwidth is not gemmlab's table: a view or an index of that name, or a table without
    gemmlab's id, run_id and created or with a column an insert of gemmlab's cannot fill (NOT NULL,
    no default). Another program's table would be widened column by column, or fail after the
    run's row was committed. Other extra columns pass: a newer gemmlab's metrics, a user's notes.
    Read without writing (readonly_db)."""
    path = Path(path)
    if not path.exists():
        return
    from ..readonly_db import connect_reading

    with contextlib.closing(connect_reading(path)) as db:
        check_tables_in(db, path)


def check_tables_in(db: sqlite3.Connection, path: Path) -> None:
    """check_tables on a connection already open to `path` (report's)."""
    from ..errors import BadArgumentError
    from ..store import unfillable

    for name, columns in TABLES.items():
        kind = db.execute("SELECT type FROM sqlite_master WHERE name = ? COLLATE NOCASE AND type IN "
                          "('table', 'view', 'index') ORDER BY type = 'table' DESC", (name,)).fetchone()
        if kind is None:
            continue
        have = {r[1] for r in db.execute(f"PRAGMA table_info({name})")}
        ours = {c for c, _ in columns}
        if kind[0] != "table" or not {"id", "run_id", "created"} <= have or unfillable(db, name, ours):
            what = f"a {kind[0]} named {name}" if kind[0] != "table" else f"a {name} table not gemmlab's"
            raise BadArgumentError(f"{path} has {what} (gemmlab keeps its {name} rows there): "
                                   "name another file with --db")


def table_exists(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def insert(db: sqlite3.Connection, table: str, run_id: int, **fields: Any) -> int:
    known = {c for c, _ in TABLES[table]}
    unknown = set(fields) - known
    if unknown:
        raise ValueError(f"unknown {table} field(s): {', '.join(sorted(unknown))}")
    row = {"run_id": run_id, "created": _now()}
    for k, v in fields.items():
        v = _plain(v)
        if k in JSON_COLUMNS and v is not None:
            v = json.dumps(v, sort_keys=True, default=_plain)
        elif isinstance(v, bool):
            v = int(v)
        row[k] = v
    sql = f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
    return db.execute(sql, tuple(row.values())).lastrowid


def select(db: sqlite3.Connection, table: str, run_id: int | None = None) -> list[dict]:
    if not table_exists(db, table):
        return []
    sql = f"SELECT * FROM {table}" + (" WHERE run_id = ?" if run_id is not None else "") + " ORDER BY id"
    out = []
    for r in db.execute(sql, (run_id,) if run_id is not None else ()):
        d = dict(r)
        for k in JSON_COLUMNS:
            if k in d and d[k] is not None:
                d[k] = json.loads(d[k])
        out.append(d)
    return out


def export_csv(rows: Iterable[dict], path: str | os.PathLike, table: str = "profiles") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [c for c, _ in TABLES[table]]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=names, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v, sort_keys=True) if k in JSON_COLUMNS and v is not None else v
                        for k, v in r.items()})
    return path


def export_json(rows: Iterable[dict], path: str | os.PathLike, **extra: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**extra, "rows": list(rows)}, indent=1, default=_plain) + "\n")
    return path
