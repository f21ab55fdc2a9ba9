"""`gemmlab bench --op reduce` and `gemmlab verify --op reduce` (called by gemmlab.cli).

Same conventions as the SGEMM commands: failures raise gemmlab.errors types, which the CLI
prints as one line with exit code 2 (bad input, no GPU, compile failure) or 1 (verification
failure); every point is a row in the results database; tables are printed, written to a
timestamped text file beside the database, and optionally as Markdown.
"""
from __future__ import annotations

import io
import shlex
import sys
from pathlib import Path
from typing import Optional

from rich.console import Console
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
    from ..envinfo import collect_env
    from ..store import DEFAULT_DB, ResultStore, batch_file_path
    from ..tables import to_markdown
    from .bench import ReduceOptions, raise_on_failure, run_bench
    from .tables import bench_tables, clock_warnings, failures_table

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
    with _progress() as progress:
        task = progress.add_task("benchmarking", total=len(impls) * len(ns))

        def record(r):
            store.add_result(run_id, **r.row())
            progress.update(task, advance=1, description=f"{r.impl} n={r.problem.n}")

        results = run_bench(impls, ns, options, on_result=record)

    tables = bench_tables(results)
    bad = failures_table(results)
    recorder = Console(record=True, width=200, file=io.StringIO())  # records, prints nothing
    recorder.print(f"command: {command}")
    for table in tables:
        recorder.print(table)
    if bad is not None:
        recorder.print(bad)
    for line in clock_warnings(results):
        recorder.print(f"warning: {line}")
    text = recorder.export_text()
    console.print(text, highlight=False, markup=False)
    out_dir = Path(db).parent if db else Path(DEFAULT_DB).parent
    batch = batch_file_path(out_dir, prefix="bench_reduce")
    batch.write_text(text)
    if csv:
        store.export_csv(csv, run_id)
    if json_out:
        store.export_json(json_out, run_id)
    if markdown:
        gpu = _gpu_name()
        md = [t for t in tables] + ([bad] if bad is not None else [])
        Path(markdown).write_text(f"Command: `{command}`\n\nDevice: {gpu}\n\n" + "\n".join(to_markdown(t) for t in md))
    console.print(f"stored run {run_id} in {db or DEFAULT_DB}; table in {batch}")
    raise_on_failure(results)  # exit 1 after everything is stored and shown


def _gpu_name() -> str:
    try:
        from ..cuda.device import info

        i = info()
        return f"{i.name} ({i.arch}, {i.sm_count} SMs)"
    except GemmlabError:
        return "unknown"
