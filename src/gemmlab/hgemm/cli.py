"""`gemmlab bench --op hgemm` and `gemmlab verify --op hgemm` (called by gemmlab.cli).

The SGEMM commands' conventions: one-line failures (exit 2 for bad input, no GPU or a compile
failure, 1 for a verification failure), every point a row in the results database, tables
printed and written beside the database (and as Markdown on request). --dtype picks fp16 or bf16.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

from rich.table import Table

from .. import registry
from ..cli import DEFAULT_SIZES, _problems, console, params_for, progress_bar, record_and_report
from ..errors import BadArgumentError, GemmlabError
from ..problem import GemmProblem
from .verify import ALIGNED_SHAPES, DTYPES, SWEEP_SHAPES, sweep_problems


def check_dtype(dtype: Optional[str]) -> str:
    dtype = dtype or "fp16"
    if dtype not in DTYPES:
        raise BadArgumentError(f"--dtype {dtype!r}: choose fp16, bf16 or tf32")
    return dtype


def for_dtype(impls: list, impl: str, dtype: str) -> list:
    """--impl all keeps the kernels that take `dtype` (a named one is kept, and refused loudly)."""
    if impl.strip() != "all":
        return impls
    return [i for i in impls if not getattr(i, "dtypes", ()) or dtype in i.dtypes]


def with_dtype(problems: list[GemmProblem], dtype: str) -> list[GemmProblem]:
    return [GemmProblem(p.M, p.N, p.K, p.alpha, p.beta, dtype) for p in problems]


def verify_hgemm(impl: str = "all", dtype: Optional[str] = None, M: Optional[int] = None, N: Optional[int] = None,
                 K: Optional[int] = None, alpha: float = 1.5, beta: float = -0.75,
                 params: Optional[str] = None) -> None:
    """Every selected implementation against fp64 over the sweep its shape rule allows (or one
    --M/--N/--K shape, with beta = 0 and with the given scalars)."""
    from ..cuda.device import device
    from .bench import raise_on_failure, verify_sweep
    from .runner import refusal

    dtype = check_dtype(dtype)
    impls = for_dtype(registry.select(impl, op="hgemm"), impl, dtype)
    chosen = params_for(impls, params)
    impls = [i for i in impls if i.kind == "kernel" or not i.unavailable_reason()]
    one = M is not None or N is not None or K is not None
    if one:
        given = with_dtype(_problems(M, N, K, None, alpha, beta, None), dtype)
        candidates = [GemmProblem(p.M, p.N, p.K, 1.0, 0.0, dtype) for p in given] + given
        for i in impls:  # a named shape a rung cannot take: refused before any GPU work
            reason = refusal(i, given[0])
            if reason:
                raise BadArgumentError(reason)
    else:
        candidates = sweep_problems(dtype, SWEEP_SHAPES + ALIGNED_SHAPES)
    device()
    table = Table(title=f"hgemm ({dtype} inputs, fp32 accumulate and output): verification against fp64")
    for col in ("impl", "shape", "alpha", "beta", "result", "rel err", "tol", "detail"):
        table.add_column(col)
    plan = []
    skipped = 0
    for i in impls:  # a whole sweep keeps to the shapes each rung takes; one shape is refused loudly
        mine = candidates if one else [p for p in candidates if not refusal(i, p)]
        skipped += len(candidates) - len(mine)
        plan.append((i, mine))
    results = []
    with progress_bar() as progress:
        task = progress.add_task("verifying", total=sum(len(ps) for _, ps in plan))

        def show(r):
            v = r.verdict
            table.add_row(r.impl, r.problem.shape, f"{r.problem.alpha:g}", f"{r.problem.beta:g}", r.status,
                          f"{v.rel_err:.2e}" if v else "-", f"{v.tol:.1e}" if v else "-", r.reason)
            progress.advance(task)

        for i, mine in plan:
            results += verify_sweep([i], mine, dtype, chosen, on_result=show)
    console.print(table)
    errors = [r for r in results if r.status == "ERROR"]
    raise_on_failure(results)
    if errors:
        raise GemmlabError(errors[0].reason if errors[0].reason.startswith(errors[0].impl)
                           else f"{errors[0].impl}: {errors[0].reason}")
    console.print(f"all {len(results)} checks passed"
                  + (f" ({skipped} shapes outside a rung's shape rule not run)" if skipped else ""))


def bench_hgemm(impl: str = "all", dtype: Optional[str] = None, M: Optional[int] = None, N: Optional[int] = None,
                K: Optional[int] = None, sizes: Optional[str] = None, alpha: float = 1.0, beta: float = 0.0,
                warmup: int = 3, repeat: int = 10, check: bool = True, flush: bool = True,
                params: Optional[str] = None, db: Optional[Path] = None, csv: Optional[Path] = None,
                json_out: Optional[Path] = None, markdown: Optional[Path] = None) -> None:
    """Verify, then time each hgemm kernel and cuBLAS in one run; store and print the tables."""
    from ..bench import BenchOptions
    from ..cuda.device import device
    from ..envinfo import collect_env
    from ..store import DEFAULT_DB, ResultStore
    from ..tables import bench_tables
    from .bench import raise_on_failure, run_bench

    dtype = check_dtype(dtype)
    impls = for_dtype(registry.select(impl, op="hgemm"), impl, dtype)
    chosen = params_for(impls, params)
    problems = with_dtype(_problems(M, N, K, sizes, alpha, beta, DEFAULT_SIZES), dtype)
    impls = [i for i in impls if i.kind == "kernel" or not i.unavailable_reason()]
    device()  # fail early, with one line, when there is no GPU
    store = ResultStore(db or DEFAULT_DB)
    command = shlex.join(["gemmlab", *sys.argv[1:]])
    run_id = store.start_run("bench", command, collect_env())
    options = BenchOptions(warmup=warmup, repeat=repeat, flush=flush, check=check, params=chosen)
    results = record_and_report(run_bench, impls, problems, options, bench_tables, store=store, run_id=run_id,
                                command=command, db=db, csv=csv, json_out=json_out, markdown=markdown,
                                batch_prefix=f"bench_hgemm_{dtype}",
                                header=(("hgemm: fp32 inputs multiplied as tf32 (lower precision than SGEMM), "
                                         "fp32 accumulation, fp32 output") if dtype == "tf32" else
                                        f"hgemm: {dtype} inputs, fp32 accumulation, fp32 output",))
    raise_on_failure(results)  # exit 1 after everything is stored and shown
