"""`gemmlab bench --op reduce` and `gemmlab verify --op reduce` (called by gemmlab.cli).

Same conventions as the SGEMM commands: failures raise gemmlab.errors types, which the CLI
prints as one line with exit code 2 (bad input, no GPU, compile failure) or 1 (verification
failure); every point is a row in the results database; tables are printed, written to a
timestamped text file beside the database, and optionally as Markdown.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

from rich.table import Table

from .. import registry
from ..cli import console, params_for
from ..cli import progress_bar as _progress
from ..errors import GemmlabError
from .problem import DEFAULT_BENCH_SIZES, EDGE_SIZES, parse_sizes, size_label

ALWAYS_MEASURED = ("copy", "cub")  # the ceiling and the reference of every share column


def verify_reduce(impl: str = "all", sizes: Optional[str] = None, params: Optional[str] = None) -> None:
    """Every selected implementation against fp64 over the edge sizes (or --n)."""
    from .bench import raise_on_failure, verify_sweep

    impls = registry.select(impl, op="reduce")
    chosen = params_for(impls, params)
    ns = parse_sizes(sizes, EDGE_SIZES)
    impls = [i for i in impls if i.kind == "kernel" or not i.unavailable_reason()]
    from ..cuda.device import device

    device()
    table = Table(title="reduce: verification against fp64 (exact integers, uniform floats, NaN/inf)")
    for col in ("impl", "n", "launches", "result", "rel err", "bound", "detail"):
        table.add_column(col)
    with _progress() as progress:
        task = progress.add_task("verifying", total=len(impls) * len(ns))

        def show(r):
            v = r.verdict
            table.add_row(r.impl, size_label(r.problem.n), "x".join(map(str, r.grids)) or "-", r.status,
                          f"{v.rel_err:.2e}" if v else "-", f"{v.tol:.1e}" if v else "-", r.reason)
            progress.advance(task)

        results = verify_sweep(impls, ns, chosen, on_result=show)
    console.print(table)
    errors = [r for r in results if r.status == "ERROR"]
    raise_on_failure(results)
    if errors:
        raise GemmlabError(f"{errors[0].impl}: {errors[0].reason}")
    console.print(f"all {len(results)} checks passed")


def bench_reduce(impl: str = "all", sizes: Optional[str] = None, warmup: int = 3, repeat: int = 10,
                 check: bool = True, flush: bool = True, params: Optional[str] = None, db: Optional[Path] = None,
                 csv: Optional[Path] = None, json_out: Optional[Path] = None,
                 markdown: Optional[Path] = None) -> None:
    """Verify, then time each implementation, CUB and the copy ceiling in one run; store, print."""
    from ..cli import record_and_report
    from ..envinfo import collect_env
    from ..store import DEFAULT_DB, ResultStore
    from .bench import ReduceOptions, raise_on_failure, run_bench
    from .tables import bench_tables

    impls = registry.select(impl, op="reduce")
    chosen = params_for(impls, params)
    ns = parse_sizes(sizes, DEFAULT_BENCH_SIZES)
    names = {i.name for i in impls}
    impls += [registry.get(name, "reduce") for name in ALWAYS_MEASURED if name not in names]
    impls = [i for i in impls if i.kind == "kernel" or not i.unavailable_reason()]
    from ..cuda.device import device

    device()  # fail early, with one line, when there is no GPU
    store = ResultStore(db or DEFAULT_DB)
    command = shlex.join(["gemmlab", *sys.argv[1:]])
    run_id = store.start_run("bench", command, collect_env())
    options = ReduceOptions(warmup=warmup, repeat=repeat, flush=flush, check=check, params=chosen)
    results = record_and_report(run_bench, impls, ns, options, bench_tables, store=store, run_id=run_id, command=command,
                                db=db, csv=csv, json_out=json_out, markdown=markdown, batch_prefix="bench_reduce",
                                header=(f"Device: {_gpu_name()}",), describe=lambda r: f"{r.impl} n={r.problem.n}")
    raise_on_failure(results)  # exit 1 after everything is stored and shown


def _gpu_name() -> str:
    try:
        from ..cuda.device import info

        i = info()
        return f"{i.name} ({i.arch}, {i.sm_count} SMs)"
    except GemmlabError:
        return "unknown"
