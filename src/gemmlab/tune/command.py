"""The body of `gemmlab tune`: count the space, run the chosen points in worker processes
(this machine's GPUs, or a Dask cluster's), rank them, store every trial (gemmlab.cli declares
the options)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence

from rich.table import Table

from .. import ops, registry
from ..errors import BadArgumentError
from ..harness.ui import console, fmt_params
from ..problem import GemmProblem, comma_items


TUNABLE_OPS = ("sgemm", "hgemm")  # a GemmProblem per trial; bgemm and reduce have other problems
# what a dry run counts (the kernel, its problem, the space) and the strategy it builds, which
# says how many of the kept points a run would take; every other option only shapes the run
DRY_RUN_OPTIONS = ("--impl", "--M", "--N", "--K", "--op", "--dtype", "--param", "--strategy", "--budget", "--seed")


def run_tune_command(impl: str, M: int, N: int, K: int, param: list[str], strategy: str, budget: Optional[int],
                     time_limit: Optional[float], seed: int, jobs: Optional[int], devices: Optional[str], timeout: float,
                     resume: bool, dry_run: bool, plot: bool, db: Optional[Path], command: str,
                     cluster: Optional[str] = None, compile_workers: Optional[int] = None,
                     gpu: Optional[str] = None, dtype: Optional[str] = None, op: Optional[str] = None,
                     given: Sequence[str] = ()) -> None:
    """Search a kernel's parameter space on one shape: every point verified, then timed.
    A sweep the cluster stopped ends in one error line after the others' results (its rows
    so far are kept). `given`: the options typed; a dry run refuses those not in DRY_RUN_OPTIONS."""
    from .search import STRATEGIES
    from .space import axes as space_axes
    from .space import enumerate_space, parse_param_axes

    if op is not None:
        ops.get(op)  # an unknown op named as such, before the kernel is compared with it
    if "," in impl:  # else "unknown kernel 'a,b'" and a did-you-mean
        raise BadArgumentError(f"--impl {impl!r}: gemmlab tune searches one kernel's space at a time")
    spec = registry.get(impl, op)  # with --op, an unknown name is answered with that op's names
    if spec.kind != "kernel":
        raise BadArgumentError(f"{impl} is a baseline: there is nothing to tune")
    if op is not None and op != spec.op:
        raise BadArgumentError(f"--op {op}: {impl} is a kernel of {spec.op}")
    problem, fixed = _problem(spec, M, N, K, dtype)
    if not math.isfinite(timeout):  # inf passed min=1 and then broke every Dask trial's wait
        raise BadArgumentError(f"--timeout {timeout:g}: seconds before a candidate counts as hung, a finite number")
    if strategy not in STRATEGIES:
        raise BadArgumentError(f"--strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    device_list = _parse_devices(devices)
    run_only = [name for name in given if name not in (*DRY_RUN_OPTIONS, "--dry-run")]
    if dry_run and run_only:  # after the values' own checks: a bad one is named as such first
        raise BadArgumentError(f"{', '.join(run_only)}: not taken with --dry-run, which runs nothing (it takes "
                               f"{', '.join(DRY_RUN_OPTIONS)})")
    if cluster is None and (compile_workers is not None or gpu is not None):
        raise BadArgumentError("--compile-workers and --gpu go with --cluster")
    if cluster is not None and cluster != "local" and (devices is not None or compile_workers is not None):
        raise BadArgumentError("--devices and --compile-workers shape a local cluster: with --cluster ADDRESS "
                               "the workers are whatever was started there")
    if cluster is not None and jobs is not None:
        raise BadArgumentError("--jobs sets this machine's NVRTC processes: with --cluster, any worker compiles")
    if cluster is not None:
        from .cluster import check_address, require_dask

        check_address(cluster)
        require_dask()
    overrides = parse_param_axes(param)
    for name, value in fixed.items():  # set by the problem (hgemm's DTYPE, B_KMAJOR, A_MNMAJOR, OUT16): one value
        if name in overrides and overrides[name] != (value,):
            raise BadArgumentError(f"--param {name}: set by --dtype {problem.dtype} and the problem's layout and C "
                                   "type (tune times layout nn, fp32 C), not tunable")
        overrides[name] = (value,)
    report = enumerate_space(spec, overrides)

    def make_strategy():
        return STRATEGIES[strategy](report.kept, space_axes(spec, overrides), budget, seed)

    # Built here, so that a missing Optuna is one line before the GPU is touched or a run row
    # written (and in a dry run, which would otherwise promise a sweep that cannot start).
    first_strategy = make_strategy()
    table = Table(title=f"{impl}: {report.total} points, {len(report.kept)} kept")
    table.add_column("dropped because")
    table.add_column("points", justify="right")
    for reason, count in report.dropped.most_common():
        table.add_row(reason, str(count))
    console.print(table)
    if dry_run:
        if budget is not None:
            console.print(f"--budget {budget}: a run would time {min(budget, len(report.kept))} of the "
                          f"{len(report.kept)} kept points")
        return
    if not report.kept:
        raise BadArgumentError(f"no point of {impl}'s space satisfies its constraints")
    from ..outputs import database_ready
    from ..store import DEFAULT_DB
    from .tuner import TuneOptions

    db_path = db or DEFAULT_DB
    database_ready(db_path)  # before the GPU is looked for and any point is timed
    total = budget or len(report.kept)
    if cluster is not None:
        options = TuneOptions(timeout_s=timeout, time_limit_s=time_limit, resume=resume)
        results, errors = _tune_on_cluster(spec, problem, make_strategy, options, cluster, device_list, compile_workers,
                                         gpu, db_path, command, total)
    else:
        results, errors = _tune_here(spec, problem, first_strategy, jobs, device_list, timeout, time_limit, resume,
                                   db_path, command, total)
    for model, run_id, summary in results:
        _print_summary(spec, problem, report, model, run_id, summary, db_path)
        if plot:
            from ..store import ResultStore
            from .plots import tune_plots

            with ResultStore(db_path) as store:
                rows = store.results(run_id=run_id)
            for path in tune_plots(rows, Path(db_path).parent / "plots", impl, problem.shape):
                console.print(f"plot: {path}")
    if errors:
        from .cluster import ClusterError

        raise ClusterError("; ".join(errors))


def _problem(spec, M: int, N: int, K: int, dtype: Optional[str]) -> tuple[GemmProblem, dict[str, int]]:
    """The problem a sweep times, and the parameters it fixes; one line for what cannot be tuned."""
    from .. import ops

    op = ops.get(spec.op)
    if op.name not in TUNABLE_OPS:
        raise BadArgumentError(f"{spec.name} is a {op.name} kernel: gemmlab tune takes {' and '.join(TUNABLE_OPS)} "
                               "kernels")
    if dtype is None and spec.dtypes:
        dtype = spec.dtypes[0]
    problem = GemmProblem(M, N, K, dtype=op.check_dtype(dtype))
    reason = op.refusal(spec, problem)
    if reason:
        raise BadArgumentError(reason)
    return problem, op.fixed_params(spec, problem.dtype)


def _parse_devices(devices: Optional[str]) -> list[int] | None:
    if devices is None:
        return None
    items = comma_items(devices, "--devices")
    try:
        device_list = [int(d) for d in items]
    except ValueError:
        raise BadArgumentError(f"--devices {devices!r} must be GPU indices like 0,1") from None
    shown = ",".join(map(str, device_list))
    if min(device_list) < 0:
        raise BadArgumentError(f"--devices {shown}: GPU indices start at 0")
    twice = sorted({d for d in device_list if device_list.count(d) > 1})
    if twice:  # two workers on one GPU would time each other's candidates
        raise BadArgumentError(f"--devices {shown} names GPU {', '.join(map(str, twice))} twice")
    return device_list


def _check_present(device_list: list[int]) -> None:
    """Indices past the GPUs this process sees (after CUDA_VISIBLE_DEVICES): one line. Only a
    driver can count them, so this runs on the GPU path, after the no-GPU check."""
    from ..envinfo import gpu_count

    count = gpu_count()
    if max(device_list) >= count:
        raise BadArgumentError(f"--devices {','.join(map(str, device_list))}: this machine has {count} GPU(s)"
                               + (f" (0..{count - 1})" if count else ""))


def _tune_here(spec, problem, strategy, jobs, device_list, timeout, time_limit, resume, db_path, command, total):
    """The local pool: this machine's GPUs, one worker process each (--devices), or one on the
    first GPU visible when none is named (its worker inherits CUDA_VISIBLE_DEVICES as it is)."""
    from ..cuda.device import device, info
    from ..envinfo import collect_env
    from ..store import ResultStore
    from .progress import SweepProgress
    from .tuner import TuneOptions
    from .tuner import tune as run_tune

    device()
    _check_present(device_list or [0])
    env = collect_env(device_list[0] if device_list else 0)  # the GPU the run's rows are stored under
    gpu = (env.get("gpu") or {}).get("name")
    others = {i: (collect_env(i).get("gpu") or {}).get("name") for i in (device_list or [])[1:]}
    if any(name != gpu for name in others.values()):  # one run, one GPU name: the rows would be ranked as gpu's
        models = ", ".join(f"{i}: {name}" for i, name in {device_list[0]: gpu, **others}.items())
        raise BadArgumentError(f"--devices names GPUs of different models ({models}); tune each model in its own "
                               "run, or use --cluster local, which runs one sweep per model")
    arch = (env.get("gpu") or {}).get("compute_capability") or info().arch
    options = TuneOptions(jobs=jobs, devices=device_list or [None],
                          timeout_s=timeout, time_limit_s=time_limit, resume=resume)
    with ResultStore(db_path) as store:
        run_id = store.start_run("tune", command, env)
        with SweepProgress({gpu or "this GPU": total}) as progress:
            summary = run_tune(spec, problem, strategy, options, arch, store, run_id, gpu,
                               on_result=lambda row: progress.advance(gpu or "this GPU", row))
    return [(gpu, run_id, summary)], []


def _tune_on_cluster(spec, problem, make_strategy, options, cluster, device_list, compile_workers, gpu_filter,
                     db_path, command, total):
    """Dask: one sweep per GPU model of the cluster, side by side."""
    from .cluster import connect
    from .progress import SweepProgress
    from .sweeps import select_models, tune_on_cluster

    if cluster == "local" and device_list:
        _check_present(device_list)  # a worker pinned to a GPU that is not there would see none
    session = connect(cluster, device_list, compile_workers)
    try:
        console.print(f"Dask scheduler {session.address}"
                      + (f"; dashboard {session.dashboard}" if session.dashboard else ""))
        sweeps = select_models(session, gpu_filter)
        for s in sweeps:
            console.print(f"{s.model}: {len(s.workers)} GPU worker(s): {', '.join(w.label for w in s.workers)}")
        with SweepProgress({s.model: total for s in sweeps}) as progress:
            tune_on_cluster(spec, problem, make_strategy, options, session, sweeps, db_path, command,
                            on_result=progress.advance)
    finally:
        session.close()
    errors = [f"{s.model}: {s.error}; its rows so far are in run {s.run_id} (rerun with --resume to go on)"
              for s in sweeps if s.error]
    return [(s.model, s.run_id, s.summary) for s in sweeps if s.summary is not None], errors


def _print_summary(spec, problem, report, gpu, run_id, summary, db_path) -> None:
    ranked = sorted((r for r in summary.trials if r.get("status") == "PASS" and r.get("gflops")),
                    key=lambda r: -r["gflops"])
    where = f" on {gpu}" if gpu else ""
    out = Table(title=f"{spec.name} at {problem.shape} {problem.dtype}{where}: {len(summary.trials)} trials in "
                      f"{summary.wall_seconds:.0f} s")
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
                  f"wall {summary.wall_seconds:.1f} s; stored run {run_id} in {db_path}")
    best = summary.best
    if best is not None:
        console.print(f"best: {fmt_params(best['params'])} at {best['gflops']:,.0f} GFLOP/s"
                      + ("" if best["params"] != spec.defaults else " (the defaults)"))
