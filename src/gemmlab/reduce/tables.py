"""Reduce benchmark tables: time, GB/s, share of the copy ceiling, share of CUB, speedup over
the previous rung - one row per implementation, one column per size (same run)."""
from __future__ import annotations

from typing import Iterable

from rich.table import Table

from .bench import CEILING, REFERENCE, ReducePoint, share_of, share_of_copy


def _ordered(results: list[ReducePoint]) -> tuple[list[str], list[int]]:
    impls: dict[str, None] = {}
    sizes: dict[int, None] = {}
    for r in results:
        impls.setdefault(r.impl, None)
        sizes.setdefault(r.problem.n, None)
    # the ladder first (as given), then the library baselines, the ceiling last
    names = [i for i in impls if i not in (REFERENCE, "torch", CEILING)]
    names += [i for i in (REFERENCE, "torch", CEILING) if i in impls]
    return names, list(sizes)


def _label(n: int) -> str:
    from .problem import size_label

    return size_label(n)


def _cell(r: ReducePoint | None, fmt) -> str:
    if r is None:
        return "-"
    if not r.timed:
        return r.status
    return fmt(r) + ("" if r.status == "PASS" else " (unchecked)")


def bench_tables(results: Iterable[ReducePoint]) -> list[Table]:
    results = list(results)
    names, sizes = _ordered(results)
    at = {(r.impl, r.problem.n): r for r in results}
    tables = {
        "time": Table(title="time (us, median of CUDA-event timings, L2 flushed)"),
        "gbps": Table(title="GB/s (bytes read / time; copy: bytes read + written)"),
        "copy": Table(title="share of the copy bandwidth (GB/s / copy GB/s, same run)"),
        "cub": Table(title="share of cub (cupy.sum time / time; > 100% is faster)"),
        "speedup": Table(title="speedup over the previous rung"),
    }
    for table in tables.values():
        table.add_column("impl")
        for n in sizes:
            table.add_column(_label(n), justify="right")
    previous = None
    for name in names:
        row = [at.get((name, n)) for n in sizes]
        tables["time"].add_row(name, *(_cell(r, lambda r: f"{r.time_us:,.1f}") for r in row))
        tables["gbps"].add_row(name, *(_cell(r, lambda r: f"{r.gbps:,.0f}") for r in row))
        shares_copy, shares_cub = [], []
        for n, r in zip(sizes, row):
            c = share_of_copy(r, at.get((CEILING, n))) if r else None
            shares_copy.append(f"{100 * c:.1f}%" if c is not None else "-")
            s = share_of(r, at.get((REFERENCE, n))) if r else None
            shares_cub.append(f"{100 * s:.1f}%" if s is not None and name != CEILING else "-")
        tables["copy"].add_row(name, *shares_copy)
        tables["cub"].add_row(name, *shares_cub)
        kind = next((r.impl_kind for r in row if r is not None), "baseline")
        if kind == "kernel":
            cells = []
            for n, r in zip(sizes, row):
                p = at.get((previous, n)) if previous else None
                s = share_of(r, p) if r and p else None
                cells.append(f"{s:.2f}x" if s is not None else "-")
            tables["speedup"].add_row(name, *cells)
            previous = name
    out = [tables["time"], tables["gbps"]]
    if any((CEILING, n) in at for n in sizes):
        out.append(tables["copy"])
    if any((REFERENCE, n) in at for n in sizes):
        out.append(tables["cub"])
    if any(r.impl_kind == "kernel" for r in results):
        out.append(tables["speedup"])
    return out
