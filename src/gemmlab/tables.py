"""Benchmark tables as seed 002 prints them: GFLOP/s, share of cuBLAS, speedup over the
previous rung - one row per implementation, one column per problem."""
from __future__ import annotations

from typing import Iterable

from rich.table import Table

from .bench import PointResult


def _columns(results: list[PointResult]) -> list[str]:
    seen: dict[str, None] = {}
    for r in results:
        seen.setdefault(r.problem.shape, None)
    return list(seen)


def _impls(results: list[PointResult]) -> list[str]:
    seen: dict[str, None] = {}
    for r in results:
        seen.setdefault(r.impl, None)
    return list(seen)


def _cell(r: PointResult | None) -> str:
    if r is None:
        return "-"
    if r.gflops is None:
        return r.status
    return f"{r.gflops:,.0f}" + ("" if r.status == "PASS" else " (unchecked)")


def bench_tables(results: Iterable[PointResult], baseline: str = "cublas") -> list[Table]:
    results = list(results)
    shapes, impls = _columns(results), _impls(results)
    at = {(r.impl, r.problem.shape): r for r in results}

    gflops = Table(title="GFLOP/s (median, 2MNK / time)")
    share = Table(title=f"share of {baseline} (same run)")
    speedup = Table(title="speedup over the previous rung (of the same ladder: main, seed 002, seed 004)")
    for table in (gflops, share, speedup):
        table.add_column("impl")
        for shape in shapes:
            table.add_column(shape, justify="right")

    from .registry import family, get

    previous_in: dict[str, str] = {}  # the previous step of each family (main ladder, seed 002, 004)
    for impl in impls:
        gflops.add_row(impl, *(_cell(at.get((impl, s))) for s in shapes))
        cells = []
        for s in shapes:
            mine, base = at.get((impl, s)), at.get((baseline, s))
            ok = mine and base and mine.gflops and base.gflops
            cells.append(f"{100 * mine.gflops / base.gflops:.1f}%" if ok else "-")
        share.add_row(impl, *cells)
        kind = at[next(((impl, s) for s in shapes if (impl, s) in at))].impl_kind
        if kind == "kernel":
            fam = family(get(impl))
            previous = previous_in.get(fam)
            cells = []
            for s in shapes:
                mine = at.get((impl, s))
                prev = at.get((previous, s)) if previous else None
                ok = mine and prev and mine.gflops and prev.gflops
                cells.append(f"{mine.gflops / prev.gflops:.2f}x" if ok else "-")
            speedup.add_row(impl, *cells)
            previous_in[fam] = impl
    tables = [gflops]
    if any((baseline, s) in at for s in shapes):
        tables.append(share)
    tables.append(speedup)
    return tables


def to_markdown(table: Table) -> str:
    """A rich Table as a GitHub Markdown table (title as a bold line above it)."""
    headers = [str(c.header) for c in table.columns]
    rows = list(zip(*(c._cells for c in table.columns)))  # rich keeps cells per column
    align = ["---" if c.justify != "right" else "---:" for c in table.columns]
    lines = [f"**{table.title}**", "", "| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def failures_table(results: Iterable[PointResult]) -> Table | None:
    bad = [r for r in results if r.status in ("FAIL", "ERROR")]
    if not bad:
        return None
    table = Table(title="points without a time")
    for col in ("impl", "shape", "status", "reason"):
        table.add_column(col)
    for r in bad:
        table.add_row(r.impl, r.problem.shape, r.status, r.reason)
    return table


def clock_warnings(results: Iterable[PointResult]) -> list[str]:
    return [f"{r.impl} at {r.problem.shape}: SM clock fell to {r.clocks.get('sm_clock_min_mhz')} MHz "
            f"(< 90% of max) while timing" for r in results if r.clocks.get("clock_warning")]
