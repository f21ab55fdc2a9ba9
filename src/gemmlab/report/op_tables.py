"""Benchmark tables of the ops besides SGEMM (hgemm, bgemm, reduce) in the report, built from
what each op says of itself (ops/base.py: its metrics and its shares of reference baselines), so
the report shows them as `gemmlab bench` prints them, from the database rows alone.

The op's metric functions read benchmark points (harness.bench.Point); a database row is given
to them as a `RowPoint`, which has the figures a point computes (GFLOP/s, GB/s, the median time)
as the row stored them.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from ..problem import size_label
from .data import ReportData, Run
from .tables import SimpleTable, _ordered, run_note

OTHER_OPS = ("hgemm", "bgemm", "reduce")  # the SGEMM ladder has its own tables and plots (tables.py)


@dataclass(frozen=True)
class RowPoint:
    """A results row where an op's metric functions expect a benchmark point."""

    row: dict

    @property
    def gflops(self) -> float | None:
        return self.row.get("gflops")

    @property
    def gbps(self) -> float | None:
        return self.row.get("gbps")

    @property
    def stats(self):
        t = self.row.get("t_median_ms")
        return SimpleNamespace(median=t) if t else None


def problem_label(op: str, r: dict) -> str:
    """A row's problem as its op's tables name it: n for a sum (stored as M), batch x M x N x K
    for bgemm (the batch is in `extra`), M x N x K otherwise."""
    if op == "reduce":
        return size_label(r["M"])
    batch = (r.get("extra") or {}).get("batch")
    shape = f"{r['M']}x{r['N']}x{r['K']}"
    return f"{batch}x{shape}" if op == "bgemm" and batch is not None else shape


def _problem_note(op: str, rows: list[dict]) -> str:
    """What every row of the run shares beyond its shape: hgemm's input type, layout and C type."""
    if op != "hgemm" or not rows:
        return ""
    extra = rows[0].get("extra") or {}
    bits = [rows[0].get("dtype") or "", f"layout {extra.get('layout', 'nn')}", f"C {extra.get('out_dtype', 'fp32')}"]
    return ", ".join(b for b in bits if b)


def op_bench_tables(data: ReportData, run: Run, op_name: str) -> list[SimpleTable]:
    """One table per metric of the op, then one per share of a reference baseline, over the run's
    problems (columns) and implementations (rows, in the op's order); the points without a time."""
    from .. import ops

    op = ops.get(op_name)
    rows = data.results_of(run.id, op_name)
    if not rows:
        return []
    labels = _ordered(problem_label(op_name, r) for r in rows)
    impls = op.row_order(_ordered(r["impl"] for r in rows))
    at = {(r["impl"], problem_label(op_name, r)): r for r in rows}
    note = run_note(run)
    what = _problem_note(op_name, rows)
    prefix = f"{op_name}{f' ({what})' if what else ''}: "
    right = set(range(1, len(labels) + 1))
    tables = []
    for metric in op.metrics:
        t = SimpleTable(prefix + metric.title, ["impl", *labels], right=right, note=note)
        for impl in impls:
            cells = []
            for label in labels:
                r = at.get((impl, label))
                value = metric.value(RowPoint(r)) if r is not None else None
                cells.append(metric.fmt.format(value) if value is not None else (r or {}).get("status") or "-")
            t.add(impl, *cells)
        tables.append(t)
    for share in op.shares:
        if not any((share.reference, label) in at for label in labels):
            continue
        t = SimpleTable(prefix + share.title, ["impl", *labels], right=right, note=note)
        for impl in impls:
            cells = []
            for label in labels:
                mine, ref = at.get((impl, label)), at.get((share.reference, label))
                a = share.metric(RowPoint(mine)) if mine is not None and impl not in share.skip else None
                b = share.metric(RowPoint(ref)) if ref is not None else None
                cells.append(f"{100 * a / b:.1f}%" if a and b else "-")
            t.add(impl, *cells)
        tables.append(t)
    bad = [r for r in rows if r.get("status") in ("FAIL", "ERROR")]
    if bad:
        t = SimpleTable(prefix + "points without a time", ["impl", "problem", "status", "reason"], note=note)
        for r in bad:
            t.add(r["impl"], problem_label(op_name, r), r["status"], r.get("reason") or "")
        tables.append(t)
    return tables


def op_headline(data: ReportData, op_name: str) -> str | None:
    """One line for the report's summary from the op's latest bench run: its fastest kernel at the
    run's largest problem, as a share of the op's first reference (cuBLAS, the copy)."""
    from .. import ops

    runs = data.bench_runs(op_name)
    if not runs:
        return None
    op = ops.get(op_name)
    run = runs[-1]
    rows = [r for r in data.results_of(run.id, op_name) if r.get("status") == "PASS"]
    if not rows or not op.shares:
        return None
    # against the library the op names as its rival (cuBLAS, CUB), not a ceiling such as the copy
    share = next((s for s in op.shares if s.reference == getattr(op, "reference", None)), op.shares[0])
    label = max(_ordered(problem_label(op_name, r) for r in rows),
                key=lambda lab: max(r["M"] * r["N"] * r["K"] * ((r.get("extra") or {}).get("batch") or 1)
                                    for r in rows if problem_label(op_name, r) == lab))
    at = {r["impl"]: r for r in rows if problem_label(op_name, r) == label}
    ref = at.get(share.reference)
    kernels = [r for r in at.values() if r.get("impl_kind") == "kernel" and r["impl"] != "dispatch"
               and share.metric(RowPoint(r))]  # dispatch stands for one of them (or for a library)
    if ref is None or not kernels or not share.metric(RowPoint(ref)):
        return None
    best = max(kernels, key=lambda r: share.metric(RowPoint(r)))
    pct = 100 * share.metric(RowPoint(best)) / share.metric(RowPoint(ref))
    what = _problem_note(op_name, rows)
    return (f"{op_name}{f' ({what})' if what else ''} at {label}: the fastest gemmlab kernel is **{best['impl']}**, "
            f"{pct:.1f}% of {share.reference} (run {run.id}).")
