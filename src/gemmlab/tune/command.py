"""The body of `gemmlab tune`: count the space, run the chosen points in worker processes,
rank them, store every trial (gemmlab.cli declares the options)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.table import Table

from .. import registry
from ..errors import BadArgumentError
from ..harness.ui import console, fmt_params, progress_bar
from ..problem import GemmProblem


def run_tune_command(impl: str, M: int, N: int, K: int, param: list[str], strategy: str, budget: Optional[int],
                     time_limit: Optional[float], seed: int, jobs: Optional[int], devices: str, timeout: float,
                     resume: bool, dry_run: bool, plot: bool, db: Optional[Path], command: str) -> None:
    """Search a kernel's parameter space on one shape: every point verified, then timed."""
    from .search import STRATEGIES
    from .space import axes as space_axes
    from .space import enumerate_space, parse_param_axes

    spec = registry.get(impl)
    if spec.kind != "kernel":
        raise BadArgumentError(f"{impl} is a baseline: there is nothing to tune")
    if strategy not in STRATEGIES:
        raise BadArgumentError(f"--strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    try:
        device_list: list[int | None] = [int(d) for d in devices.split(",") if d.strip()]
    except ValueError:
        raise BadArgumentError(f"--devices {devices!r} must be GPU indices like 0,1") from None
    if not device_list:
        raise BadArgumentError("--devices is empty")
    overrides = parse_param_axes(param)
    report = enumerate_space(spec, overrides)
    table = Table(title=f"{impl}: {report.total} points, {len(report.kept)} kept")
    table.add_column("dropped because")
    table.add_column("points", justify="right")
    for reason, count in report.dropped.most_common():
        table.add_row(reason, str(count))
    console.print(table)
    if dry_run:
        return
    if not report.kept:
        raise BadArgumentError(f"no point of {impl}'s space satisfies its constraints")
    chosen = STRATEGIES[strategy](report.kept, space_axes(spec, overrides), budget, seed)

    from ..cuda.device import device, info
    from ..envinfo import collect_env
    from ..store import DEFAULT_DB, ResultStore
    from .tuner import TuneOptions
    from .tuner import tune as run_tune

    device()
    if max(d for d in device_list if d is not None) >= _device_count():
        raise BadArgumentError(f"--devices {devices}: this machine has {_device_count()} GPU(s)")
    store = ResultStore(db or DEFAULT_DB)
    env = collect_env()
    run_id = store.start_run("tune", command, env)
    gpu = (env.get("gpu") or {}).get("name")
    problem = GemmProblem(M, N, K)
    options = TuneOptions(jobs=jobs, devices=device_list if len(device_list) > 1 else [None],
                          timeout_s=timeout, time_limit_s=time_limit, resume=resume)
    with progress_bar() as progress:
        task = progress.add_task("tuning", total=budget or len(report.kept))
        summary = run_tune(spec, problem, chosen, options, info().arch, store, run_id, gpu,
                           on_result=lambda row: progress.advance(task))
    ranked = sorted((r for r in summary.trials if r.get("status") == "PASS" and r.get("gflops")),
                    key=lambda r: -r["gflops"])
    out = Table(title=f"{impl} at {problem.shape}: {len(summary.trials)} trials in {summary.wall_seconds:.0f} s")
    for col in ("rank", "GFLOP/s", "median ms", "regs", "parameters"):
        out.add_column(col)
    for n, r in enumerate(ranked[:15], 1):
        out.add_row(str(n), f"{r['gflops']:,.0f}", f"{r['t_median_ms']:.4f}", str(r.get("registers") or "-"),
                    fmt_params(r["params"]))
    console.print(out)
    statuses: dict[str, int] = {}
    for r in summary.trials:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    rate = summary.compiled / summary.compile_seconds if summary.compile_seconds else 0.0
    console.print(f"kept {len(report.kept)} points; ran {len(summary.trials)} ({statuses}); skipped "
                  f"{summary.skipped} already recorded; compiled {summary.compiled} in "
                  f"{summary.compile_seconds:.1f} s ({rate:.1f}/s); {summary.restarts} worker restarts; "
                  f"wall {summary.wall_seconds:.1f} s; stored run {run_id} in {db or DEFAULT_DB}")
    default = spec.defaults
    best = summary.best
    if best is not None:
        console.print(f"best: {fmt_params(best['params'])} at {best['gflops']:,.0f} GFLOP/s"
                      + ("" if best["params"] != default else " (the defaults)"))
    if plot:
        from .plots import tune_plots

        rows = store.results(run_id=run_id)
        for path in tune_plots(rows, Path(db or DEFAULT_DB).parent / "plots", impl, problem.shape):
            console.print(f"plot: {path}")


def _device_count() -> int:
    from cuda.bindings import driver

    err, count = driver.cuDeviceGetCount()
    return count
