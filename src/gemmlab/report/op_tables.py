"""Benchmark tables of the ops besides SGEMM (hgemm, bgemm, reduce) in the report: the tables
`gemmlab bench` prints for them (harness.tables.bench_tables, from what each op says of itself:
its figures and its shares of reference baselines), built again from the database rows alone.

harness.tables reads benchmark points (harness.bench.Point); a database row is given to it as a
`RowPoint`, with the row's problem, status and the figures the point had (GFLOP/s, GB/s, the
median time) as the row stored them.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from types import SimpleNamespace

from ..harness.tables import bench_tables, failures_table
from ..problem import problem_from_dict
from .data import ReportData, Run
from .tables import SimpleTable, _ordered, run_note

OTHER_OPS = ("hgemm", "bgemm", "reduce")  # the SGEMM ladder has its own tables and plots (tables.py)


def problem_of_row(op: str, r: dict):
    """The problem a results row was measured on: n for a sum (stored as M), the batch of bgemm
    and the layout and C type of hgemm from `extra`."""
    extra = r.get("extra") or {}
    if op == "reduce":
        return problem_from_dict({"op": op, "n": r["M"]})
    fields = {"op": op, "M": r["M"], "N": r["N"], "K": r["K"], "dtype": r.get("dtype") or "fp32"}
    fields.update({k: r[k] for k in ("alpha", "beta") if r.get(k) is not None})
    if op == "bgemm":
        fields["batch"] = extra.get("batch", 1)
    if op == "hgemm":
        fields.update(layout=extra.get("layout", "nn"), out_dtype=extra.get("out_dtype", "fp32"))
    return problem_from_dict(fields)


def _known(impl: str, op: str) -> bool:
    from .. import registry
    from ..errors import GemmlabError

    try:
        registry.get(impl, op)
    except GemmlabError:
        return False
    return True


@dataclass(frozen=True)
class RowPoint:
    """A results row where harness.tables and an op's metric functions expect a benchmark point."""

    row: dict
    op: str

    @property
    def impl(self) -> str:
        return self.row["impl"]

    @property
    def impl_kind(self) -> str:
        """The row's kind; a kernel this gemmlab does not know (renamed or removed since the run) as
        'unknown': harness.tables would look its ladder up in the registry for the speedup table, which
        the report does not show, and the whole report was refused over it."""
        kind = self.row.get("impl_kind") or "kernel"
        return "unknown" if kind == "kernel" and not _known(self.impl, self.op) else kind

    @property
    def status(self) -> str:
        return self.row.get("status") or "-"

    @property
    def reason(self) -> str:
        return self.row.get("reason") or ""

    @cached_property
    def problem(self):
        return problem_of_row(self.op, self.row)

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

    @property
    def timed(self) -> bool:
        return self.stats is not None


def _problem_note(op: str, rows: list[dict]) -> str:
    """What every row of the run shares beyond its shape: hgemm's input type, layout and C type."""
    if op != "hgemm" or not rows:
        return ""
    extra = rows[0].get("extra") or {}
    bits = [rows[0].get("dtype") or "", f"layout {extra.get('layout', 'nn')}", f"C {extra.get('out_dtype', 'fp32')}"]
    return ", ".join(b for b in bits if b)


def _simple(table, title: str, note: str) -> SimpleTable:
    """A rich table of harness.tables as the report's SimpleTable."""
    t = SimpleTable(title, [str(c.header) for c in table.columns], note=note,
                    right={i for i, c in enumerate(table.columns) if c.justify == "right"})
    for row in zip(*(c._cells for c in table.columns)):  # rich keeps cells per column
        t.add(*row)
    return t


def op_bench_tables(data: ReportData, run: Run, op_name: str) -> list[SimpleTable]:
    """The op's figure and share tables as `gemmlab bench` prints them (not its speedup table,
    which the report keeps for the SGEMM ladder), and the points without a time."""
    from .. import ops

    rows = data.results_of(run.id, op_name)
    if not rows:
        return []
    points = [RowPoint(r, op_name) for r in rows]
    note = run_note(run)
    what = _problem_note(op_name, rows)
    prefix = f"{op_name}{f' ({what})' if what else ''}: "
    shown = [t for t in bench_tables(points) if t.title != ops.get(op_name).speedup_title]
    bad = failures_table(points)
    return [_simple(t, prefix + str(t.title), note) for t in shown + ([bad] if bad else [])]


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
    shape = {id(r): problem_of_row(op_name, r).shape for r in rows}
    label = max(_ordered(shape[id(r)] for r in rows),
                key=lambda lab: max(r["M"] * r["N"] * r["K"] * ((r.get("extra") or {}).get("batch") or 1)
                                    for r in rows if shape[id(r)] == lab))
    at = {r["impl"]: r for r in rows if shape[id(r)] == label}
    ref = at.get(share.reference)
    kernels = [r for r in at.values() if r.get("impl_kind") == "kernel" and r["impl"] != "dispatch"
               and share.metric(RowPoint(r, op_name))]  # dispatch stands for one of them (or for a library)
    if ref is None or not kernels or not share.metric(RowPoint(ref, op_name)):
        return None
    best = max(kernels, key=lambda r: share.metric(RowPoint(r, op_name)))
    pct = 100 * share.metric(RowPoint(best, op_name)) / share.metric(RowPoint(ref, op_name))
    what = _problem_note(op_name, rows)
    return (f"{op_name}{f' ({what})' if what else ''} at {label}: the fastest gemmlab kernel is **{best['impl']}**, "
            f"{pct:.1f}% of {share.reference} (run {run.id}).")
