"""What a report is made of, read from the results database alone (no GPU, nothing written).

The database is opened read-only. Tables that an older file lacks (profiles, analyses,
bandwidth) read as empty.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadArgumentError
from ..outputs import open_readonly
from ..profile import rows as prow
from ..store import RESULT_SCHEMA

# What a results row must hold for the report to read it: numbers where the schema has numbers,
# finite timings (an edited or damaged file gave a traceback from a plot or a format deep inside)
_NUMBERS = tuple(name for name, kind in RESULT_SCHEMA if kind in ("INTEGER", "REAL"))
_FINITE = ("t_min_ms", "t_median_ms", "t_mean_ms", "t_stdev_ms", "gflops", "gbps")

# FP32 lanes per SM (one FFMA each per clock), by compute capability.
FP32_LANES = {"sm_80": 64, "sm_86": 128, "sm_87": 128, "sm_89": 128, "sm_90": 128, "sm_90a": 128, "sm_100": 128,
              "sm_120": 128}


@dataclass
class Run:
    id: int
    started: str
    kind: str
    command: str
    env: dict
    git_rev: str | None
    gpu: str | None

    @property
    def label(self) -> str:
        return f"run {self.id} ({self.kind}, {self.started[:19].replace('T', ' ')})"


@dataclass
class ReportData:
    path: Path
    runs: dict[int, Run]
    results: list[dict]  # results rows (bench, tune, ...), params/extra decoded
    profiles: list[dict]
    analyses: list[dict]
    bandwidth: list[dict]
    schema_version: int = 0
    notes: list[str] = field(default_factory=list)

    def runs_of(self, kind: str) -> list[Run]:
        return [r for r in self.runs.values() if r.kind == kind]

    def results_of(self, run_id: int, op: str | None = "sgemm") -> list[dict]:
        return [r for r in self.results if r["run_id"] == run_id and (op is None or r.get("op") == op)]

    def bench_runs(self, op: str = "sgemm") -> list[Run]:
        return [run for run in self.runs_of("bench") if any(r.get("op") == op for r in self.results_of(run.id, None))]

    def tune_runs(self) -> list[Run]:
        """Tune runs of every op (hgemm's too: its rows are op 'hgemm')."""
        return [run for run in self.runs_of("tune") if self.results_of(run.id, None)]

    def profile_runs(self) -> list[Run]:
        ids = sorted({p["run_id"] for p in self.profiles})
        return [self.runs[i] for i in ids if i in self.runs]

    def analysis_runs(self) -> list[Run]:
        ids = sorted({a["run_id"] for a in self.analyses})
        return [self.runs[i] for i in ids if i in self.runs]

    def gpu_env(self, run_id: int | None = None) -> dict:
        """The GPU fields of a run's environment (the latest run with a GPU when none is named)."""
        candidates = [self.runs[run_id]] if run_id in self.runs else sorted(self.runs.values(), key=lambda r: -r.id)
        for run in candidates:
            gpu = (run.env or {}).get("gpu")
            if isinstance(gpu, dict):
                return gpu
        return {}

    def fp32_peak_gflops(self, run_id: int | None = None) -> tuple[float | None, str]:
        """SMs x FP32 lanes x 2 x max SM clock; None when the environment lacks them."""
        gpu = self.gpu_env(run_id)
        sms, mhz, cc = gpu.get("sm_count"), gpu.get("max_sm_clock_mhz"), gpu.get("compute_capability")
        lanes = FP32_LANES.get(cc or "")
        if not (sms and mhz and lanes):
            return None, "the run's environment lacks the SM count, clock or architecture"
        peak = sms * lanes * 2 * mhz / 1e3
        return peak, f"{sms} SMs x {lanes} lanes x 2 x {mhz / 1e3:.2f} GHz = {peak / 1e3:.1f} TFLOP/s"

    def dram_gbps(self, gpu: str | None = None) -> tuple[float | None, str]:
        """The newest bandwidth measured (on `gpu` when named: a roofline's ceilings are one GPU's)."""
        rows = [b for b in self.bandwidth if gpu is None or getattr(self.runs.get(b["run_id"]), "gpu", None) == gpu]
        if rows:
            b = rows[-1]
            return b["gbps"], f"{b['method']}, {b['gbps']:,.0f} GB/s (run {b['run_id']})"
        return None, "no bandwidth measurement in the database for this GPU (gemmlab profile records one)"


def _damaged(path: Path, table: str, row_id, what: str) -> BadArgumentError:
    return BadArgumentError(f"{path}: row {row_id} of {table} is damaged ({what}); "
                            "name another results database with --db")


def _object(path: Path, table: str, row_id, column: str, text) -> dict:
    """A JSON object column ({} when empty)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise _damaged(path, table, row_id, f"{column} is not a JSON object")
    return value


def _result(path: Path, row) -> dict:
    d = dict(row)
    for k in ("params", "extra"):
        d[k] = _object(path, "results", d.get("id"), k, d.get(k)) if d.get(k) else d.get(k)
    for k in _NUMBERS:
        v = d.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or (k in _FINITE and not math.isfinite(v))):
            raise _damaged(path, "results", d.get("id"), f"{k} = {str(v)[:40]!r} is not a finite number")
    return d


def load(path: str | Path) -> ReportData:
    path = Path(path)
    db = open_readonly(path)
    try:
        prow.check_tables_in(db, path)  # profiles, analyses, bandwidth: gemmlab's tables or none
        version = db.execute("PRAGMA user_version").fetchone()[0]
        runs = {}
        if prow.table_exists(db, "runs"):
            for r in db.execute("SELECT * FROM runs ORDER BY id"):
                env = _object(path, "runs", r["id"], "env", r["env"])
                runs[r["id"]] = Run(r["id"], r["started"], r["kind"], r["command"] or "", env, r["git_rev"],
                                    r["gpu"])
        results = [_result(path, r) for r in db.execute("SELECT * FROM results ORDER BY id")] \
            if prow.table_exists(db, "results") else []
        tables = {}
        for name in ("profiles", "analyses", "bandwidth"):
            try:
                tables[name] = prow.select(db, name)
            except ValueError as exc:  # a JSON column that does not parse
                raise BadArgumentError(f"{path}: a row of {name} is damaged ({exc}); "
                                       "name another results database with --db") from None
        return ReportData(path, runs, results, tables["profiles"], tables["analyses"], tables["bandwidth"], version)
    finally:
        db.close()
