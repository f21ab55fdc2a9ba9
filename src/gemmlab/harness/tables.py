"""Benchmark tables as seed 002 prints them, for any op: one row per implementation, one column
per problem - the op's figures of merit, its shares of named baselines, and the speedup over the
previous rung of the same ladder (all from the same run). The op says which, as data."""
from __future__ import annotations

from typing import Iterable

from rich.table import Table

from .. import ops
from ..ops.base import ratio
from .bench import Point
from .dispatched import DISPATCH


def _ordered(results: list[Point]) -> tuple[list[str], list]:
    impls: dict[str, None] = {}
    problems: dict = {}
    for r in results:
        impls.setdefault(r.impl, None)
        problems.setdefault(r.problem.shape, r.problem)
    return list(impls), list(problems.values())


def _cell(r: Point | None, value, fmt: str) -> str:
    if r is None:
        return "-"
    v = value(r) if r.timed else None
    if v is None:
        return r.status
    return fmt.format(v) + ("" if r.status == "PASS" else " (unchecked)")


def _table(title: str, op, problems: list) -> Table:
    table = Table(title=title)
    table.add_column("impl")
    for p in problems:
        table.add_column(op.label(p), justify="right")
    return table


def bench_tables(results: Iterable[Point]) -> list[Table]:
    """The op's tables (the op of the first result; a run measures one op)."""
    results = list(results)
    if not results:
        return []
    op = ops.of(results[0].problem)
    names, problems = _ordered(results)
    names = op.row_order(names)
    at = {(r.impl, r.problem.shape): r for r in results}
    metrics = [(_table(m.title, op, problems), m) for m in op.metrics]
    shares = [(_table(s.title, op, problems), s) for s in op.shares]
    speedup = _table(op.speedup_title, op, problems)
    previous_in: dict[str, str] = {}  # the previous rung of each ladder
    for name in names:
        row = [at.get((name, p.shape)) for p in problems]
        for table, m in metrics:
            table.add_row(name, *(_cell(r, m.value, m.fmt) for r in row))
        for table, s in shares:
            cells = []
            for p, r in zip(problems, row):
                v = None if name in s.skip else ratio(s.metric, r, at.get((s.reference, p.shape)))
                cells.append(f"{100 * v:.1f}%" if v is not None else "-")
            table.add_row(name, *cells)
        # the dispatch climbs no ladder: its kernel changes from shape to shape
        if name != DISPATCH and next((r.impl_kind for r in row if r is not None), "baseline") == "kernel":
            ladder = op.family(name)
            previous = previous_in.get(ladder)
            cells = []
            for p, r in zip(problems, row):
                v = ratio(lambda q: 1.0 / q.stats.median if q.stats else None, r,
                           at.get((previous, p.shape))) if previous else None
                cells.append(f"{v:.2f}x" if v is not None else "-")
            speedup.add_row(name, *cells)
            previous_in[ladder] = name
    shown = [t for t, _ in metrics]
    shown += [t for t, s in shares if any((s.reference, p.shape) in at for p in problems)]
    if speedup.row_count:
        shown.append(speedup)
    return shown


def to_markdown(table: Table) -> str:
    """A rich Table as a GitHub Markdown table (title as a bold line above it)."""
    headers = [str(c.header) for c in table.columns]
    rows = list(zip(*(c._cells for c in table.columns)))  # rich keeps cells per column
    align = ["---" if c.justify != "right" else "---:" for c in table.columns]
    lines = [f"**{table.title}**", "", "| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def failures_table(results: Iterable[Point]) -> Table | None:
    bad = [r for r in results if r.status in ("FAIL", "ERROR")]
    if not bad:
        return None
    table = Table(title="points without a time")
    for col in ("impl", "shape", "status", "reason"):
        table.add_column(col)
    for r in bad:
        table.add_row(r.impl, r.problem.shape, r.status, r.reason)
    return table


def clock_warnings(results: Iterable[Point]) -> list[str]:
    return [f"{r.impl} at {r.problem.shape}: SM clock fell to {r.clocks.get('sm_clock_min_mhz')} MHz "
            f"(< 90% of max) while timing" for r in results if r.clocks.get("clock_warning")]
