"""The gemmlab command line: list, env, compile, verify, bench.

Every failure is one line on stderr with a non-zero exit code (2 for bad input or an
environment problem, 1 for a verification failure), never a traceback.
"""
from __future__ import annotations

import io
import shlex
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import registry
from .errors import BadArgumentError, GemmlabError
from .problem import GemmProblem, parse_shape

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Write, verify, time and explain GPU GEMM kernels.")
# Logs and pipes get wide tables instead of 80-column ones with truncated cells.
console = Console(width=None if sys.stdout.isatty() else 200)
DEFAULT_SIZES = "256,512,1024,2048,4096"


def fmt_params(values: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items()) or "-"


def parse_params(text: str | None) -> dict[str, int]:
    """'BM=64,BN=128' -> {'BM': 64, 'BN': 128}."""
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadArgumentError(f"--params item {item!r} is not NAME=VALUE")
        try:
            out[key.strip()] = int(value)
        except ValueError:
            raise BadArgumentError(f"--params {key.strip()}={value!r} is not an integer") from None
    return out


def _problems(M: Optional[int], N: Optional[int], K: Optional[int], sizes: Optional[str], alpha: float,
              beta: float, default_sizes: Optional[str]) -> list[GemmProblem]:
    given = [d for d in (M, N, K) if d is not None]
    if given and sizes:
        raise BadArgumentError("give either --M/--N/--K or --sizes, not both")
    if given:
        if len(given) != 3:
            raise BadArgumentError("give all three of --M, --N and --K (or use --sizes)")
        shapes = [(M, N, K)]
    else:
        text = sizes or default_sizes
        if not text:
            return []
        shapes = [parse_shape(s.strip()) for s in text.split(",") if s.strip()]
        if not shapes:
            raise BadArgumentError("--sizes is empty")
    return [GemmProblem(m, n, k, alpha, beta) for m, n, k in shapes]


def params_for(impls: list, params: Optional[str]) -> dict[str, dict[str, int]]:
    values = parse_params(params)
    if not values:
        return {}
    kernels = [i for i in impls if i.kind == "kernel"]
    if len(kernels) != 1:
        raise BadArgumentError("--params needs exactly one kernel in --impl")
    kernels[0].resolve(values)  # refuse a broken configuration before any GPU work
    return {kernels[0].name: values}


def _tuned_params(store, gpu, impls, problems, chosen) -> dict:
    """(impl, shape) -> parameters tuned on this GPU at the nearest tuned shape, for the
    kernels the user did not give --params for."""
    from .tune.history import best_params

    tuned = {}
    for impl in impls:
        if impl.kind != "kernel" or impl.name in chosen:
            continue
        for problem in problems:
            found = best_params(store, gpu, impl.name, problem)
            if found is not None and not impl.failed_constraints({**impl.defaults, **found[0]}):
                tuned[(impl.name, problem.shape)] = found[0]
    return tuned


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def record_and_report(run_bench_fn, impls: list, problems: list, options, tables: list, *, store, run_id: int,
                      command: str, db: Optional[Path], csv: Optional[Path], json_out: Optional[Path],
                      markdown: Optional[Path], batch_prefix: str = "bench_fp32",
                      header: tuple[str, ...] = (), describe=lambda r: f"{r.impl} {r.problem.shape}") -> list:
    """The tail every `bench` op shares: run the points with a progress bar, store each row as
    it comes, then print the tables, write them to a timestamped file beside the database
    (and to Markdown), export CSV/JSON, and exit 1 if a point failed verification.

    `tables` is a function: results -> list of rich Tables (the op's own columns)."""
    from .store import DEFAULT_DB, batch_file_path
    from .tables import clock_warnings, failures_table, to_markdown

    with progress_bar() as progress:
        task = progress.add_task("benchmarking", total=len(impls) * len(problems))

        def record(r):
            store.add_result(run_id, **r.row())
            progress.update(task, advance=1, description=describe(r))

        results = run_bench_fn(impls, problems, options, on_result=record)

    shown = tables(results) + [t for t in (failures_table(results),) if t is not None]
    recorder = Console(record=True, width=200, file=io.StringIO())  # records, prints nothing
    for line in (f"command: {command}", *header):
        recorder.print(line)
    for table in shown:
        recorder.print(table)
    for line in clock_warnings(results):
        recorder.print(f"warning: {line}")
    text = recorder.export_text()
    console.print(text, highlight=False, markup=False)
    batch = batch_file_path(Path(db).parent if db else Path(DEFAULT_DB).parent, prefix=batch_prefix)
    batch.write_text(text)
    if csv:
        store.export_csv(csv, run_id)
    if json_out:
        store.export_json(json_out, run_id)
    if markdown:
        lines = [f"Command: `{command}`", *header]
        Path(markdown).write_text("\n\n".join(lines) + "\n\n" + "\n".join(to_markdown(t) for t in shown))
    console.print(f"stored run {run_id} in {db or DEFAULT_DB}; table in {batch}")
    return results


@app.command("list")
def list_cmd(op: str = typer.Option("sgemm", help="which ladder: sgemm | reduce | hgemm")) -> None:
    """The ladder: one row per kernel and baseline."""
    table = Table(title=f"gemmlab {op} implementations")
    for col in ("name", "rung", "title", "idea", "default parameters"):
        table.add_column(col, overflow="fold")
    for impl in registry.all_impls(op):
        rung = str(impl.rung) if impl.rung is not None else (f"= {impl.same_as}" if impl.same_as else impl.kind)
        table.add_row(impl.name, rung, impl.title, impl.idea, fmt_params(impl.defaults))
    console.print(table)


@app.command()
def env() -> None:
    """The environment: GPU, driver, CUDA, NVRTC, packages (works without a GPU)."""
    from .envinfo import collect_env, env_rows

    table = Table(title="gemmlab environment", show_header=False)
    table.add_column("key")
    table.add_column("value", overflow="fold")
    for key, value in env_rows(collect_env()):
        table.add_row(key, value)
    console.print(table)


@app.command("compile")
def compile_cmd(impl: str = typer.Option("all", help="kernel name, a,b,c or all"),
                op: str = typer.Option("sgemm", help="sgemm | reduce | hgemm"),
                arch: Optional[str] = typer.Option(None, help="e.g. sm_80, sm_90 (default: the GPU's)"),
                params: Optional[str] = typer.Option(None, help="NAME=VALUE,... for a single kernel")) -> None:
    """Compile kernels with NVRTC (no GPU needed with --arch) and print their resources."""
    from .cuda.compile import compile_kernel

    if arch is None:
        from .cuda.device import info

        arch = info().arch
    if not arch.startswith("sm_"):
        raise BadArgumentError(f"--arch {arch!r} must look like sm_90")
    if op not in ("sgemm", "reduce", "hgemm"):
        raise BadArgumentError(f"--op {op!r}: choose sgemm, reduce or hgemm")
    impls = registry.select(impl, op=op, with_baselines=False)
    chosen = params_for(impls, params)
    table = Table(title=f"compile report ({arch})")
    for col in ("kernel", "parameters", "regs", "smem B", "stack B", "spill st", "spill ld", "time s", "cached"):
        table.add_column(col, justify="right" if col not in ("kernel", "parameters") else "left", overflow="fold")
    failures = []
    for spec in impls:
        if spec.kind != "kernel":
            continue
        try:
            target = spec.arch_for(arch)
        except BadArgumentError:  # e.g. a wgmma rung asked for sm_80: not a failure, not built
            table.add_row(spec.name, f"skipped: needs {spec.arch}", *["-"] * 7)
            continue
        try:
            ck = compile_kernel(spec, chosen.get(spec.name), arch=target)
        except GemmlabError as exc:
            failures.append(str(exc))
            table.add_row(spec.name, "FAILED", *["-"] * 7)
            continue
        r = ck.resources
        table.add_row(spec.name, fmt_params(ck.params), str(r.registers), str(r.smem_static),
                      str(r.stack_frame), str(r.spill_stores), str(r.spill_loads), f"{ck.compile_seconds:.2f}",
                      "yes" if ck.cached else "no")
    console.print(table)
    if failures:
        raise GemmlabError(failures[0] + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""))


@app.command()
def verify(impl: str = typer.Option("all", help="kernel name, a,b,c or all"),
           op: str = typer.Option("sgemm", help="sgemm | reduce | hgemm"),
           dtype: Optional[str] = typer.Option(None, help="hgemm: input type fp16 | bf16 (default fp16)"),
           n: Optional[str] = typer.Option(None, "--n", help="reduce: element counts (default: the edge-case sweep)"),
           M: Optional[int] = typer.Option(None, "--M"), N: Optional[int] = typer.Option(None, "--N"),
           K: Optional[int] = typer.Option(None, "--K"),
           alpha: float = typer.Option(1.5), beta: float = typer.Option(-0.75),
           params: Optional[str] = typer.Option(None, help="NAME=VALUE,... for a single kernel")) -> None:
    """Verify against fp64 over the odd-shape sweep (or one --M/--N/--K shape)."""
    if op == "hgemm":
        from .hgemm.cli import verify_hgemm

        return verify_hgemm(impl=impl, dtype=dtype, M=M, N=N, K=K, alpha=alpha, beta=beta, params=params)
    if dtype is not None:
        raise BadArgumentError("--dtype is for --op hgemm")
    if op == "reduce":
        from .reduce.cli import verify_reduce

        return verify_reduce(impl=impl, sizes=n, params=params)
    if op != "sgemm":
        raise BadArgumentError(f"--op {op!r}: choose sgemm, reduce or hgemm")
    from .bench import raise_on_failure, verify_sweep
    from .verify import sweep_problems

    impls = registry.select(impl)
    chosen = params_for(impls, params)
    problems = _problems(M, N, K, None, alpha, beta, None) if M or N or K else sweep_problems()
    if M or N or K:  # one shape: check both the beta == 0 (poisoned) and the given scalars
        problems = [GemmProblem(p.M, p.N, p.K, 1.0, 0.0) for p in problems] + problems
    table = Table(title="verification against fp64")
    for col in ("impl", "shape", "alpha", "beta", "result", "rel err", "tol", "detail"):
        table.add_column(col)
    with progress_bar() as progress:
        task = progress.add_task("verifying", total=len(impls) * len(problems))

        def show(r):
            v = r.verdict
            table.add_row(r.impl, r.problem.shape, f"{r.problem.alpha:g}", f"{r.problem.beta:g}", r.status,
                          f"{v.rel_err:.2e}" if v else "-", f"{v.tol:.1e}" if v else "-", r.reason)
            progress.advance(task)

        results = verify_sweep(impls, problems, chosen, on_result=show)
    console.print(table)
    errors = [r for r in results if r.status == "ERROR"]
    raise_on_failure(results)
    if errors:
        raise GemmlabError(f"{errors[0].impl}: {errors[0].reason}")
    console.print(f"all {len(results)} checks passed")


@app.command()
def bench(impl: str = typer.Option("all", help="kernel name, a,b,c or all (with the baselines)"),
          op: str = typer.Option("sgemm", help="sgemm | reduce | hgemm"),
          dtype: Optional[str] = typer.Option(None, help="hgemm: input type fp16 | bf16 (default fp16)"),
          n: Optional[str] = typer.Option(None, "--n", help="reduce: element counts, e.g. 1024,1048576"),
          M: Optional[int] = typer.Option(None, "--M"), N: Optional[int] = typer.Option(None, "--N"),
          K: Optional[int] = typer.Option(None, "--K"),
          sizes: Optional[str] = typer.Option(None, help=f"e.g. 1024,4096,1000x3000x2000 (default {DEFAULT_SIZES})"),
          alpha: float = typer.Option(1.0), beta: float = typer.Option(0.0),
          warmup: int = typer.Option(3, min=0), repeat: int = typer.Option(10, min=1),
          check: bool = typer.Option(True, "--check/--no-check", help="verify each point before timing it"),
          flush: bool = typer.Option(True, "--flush/--no-flush", help="flush L2 before every timed launch"),
          params: Optional[str] = typer.Option(None, help="NAME=VALUE,... for a single kernel"),
          default_params: bool = typer.Option(False, "--default-params",
                                              help="ignore parameters tuned for this GPU; use the spec defaults"),
          db: Path = typer.Option(None, help="results database (default ./gemmlab-results/results.db)"),
          csv: Optional[Path] = typer.Option(None, help="also write this run's rows as CSV"),
          json_out: Optional[Path] = typer.Option(None, "--json", help="also write this run's rows as JSON"),
          markdown: Optional[Path] = typer.Option(None, help="also write the tables as Markdown")) -> None:
    """Verify, then time each kernel and the baselines in one run; store and print the tables."""
    if op == "hgemm":
        if n is not None:
            raise BadArgumentError("--n is for --op reduce; use --M/--N/--K or --sizes for hgemm")
        from .hgemm.cli import bench_hgemm

        return bench_hgemm(impl=impl, dtype=dtype, M=M, N=N, K=K, sizes=sizes, alpha=alpha, beta=beta,
                           warmup=warmup, repeat=repeat, check=check, flush=flush, params=params, db=db,
                           csv=csv, json_out=json_out, markdown=markdown)
    if dtype is not None:
        raise BadArgumentError("--dtype is for --op hgemm")
    if op == "reduce":
        from .reduce.cli import bench_reduce

        return bench_reduce(impl=impl, sizes=n, warmup=warmup, repeat=repeat, check=check, flush=flush,
                            params=params, db=db, csv=csv, json_out=json_out, markdown=markdown)
    if op != "sgemm":
        raise BadArgumentError(f"--op {op!r}: choose sgemm, reduce or hgemm")
    if n is not None:
        raise BadArgumentError("--n is for --op reduce; use --M/--N/--K or --sizes for sgemm")
    from .bench import BenchOptions, raise_on_failure, run_bench
    from .cuda.device import device
    from .envinfo import collect_env
    from .store import DEFAULT_DB, ResultStore
    from .tables import bench_tables

    impls = registry.select(impl)
    chosen = params_for(impls, params)
    problems = _problems(M, N, K, sizes, alpha, beta, DEFAULT_SIZES)
    impls = [i for i in impls if i.kind == "kernel" or not i.unavailable_reason()]
    device()  # fail early, with one line, when there is no GPU
    store = ResultStore(db or DEFAULT_DB)
    command = shlex.join(["gemmlab", *sys.argv[1:]])
    run_env = collect_env()
    run_id = store.start_run("bench", command, run_env)
    gpu = (run_env.get("gpu") or {}).get("name")
    tuned = {} if default_params else _tuned_params(store, gpu, impls, problems, chosen)
    options = BenchOptions(warmup=warmup, repeat=repeat, flush=flush, check=check, params=chosen, tuned=tuned)
    results = record_and_report(run_bench, impls, problems, options, bench_tables, store=store, run_id=run_id,
                                command=command, db=db, csv=csv, json_out=json_out, markdown=markdown)
    raise_on_failure(results)  # exit 1 after everything is stored and shown


@app.command()
def tune(impl: str = typer.Option(..., help="one kernel name"),
         M: int = typer.Option(4096, "--M", min=1), N: int = typer.Option(4096, "--N", min=1),
         K: int = typer.Option(4096, "--K", min=1),
         param: list[str] = typer.Option([], help="NAME=V1,V2,... replaces that parameter's declared values"),
         strategy: str = typer.Option("exhaustive", help="exhaustive | random | bayes (needs optuna)"),
         budget: Optional[int] = typer.Option(None, min=1, help="at most this many points"),
         time_limit: Optional[float] = typer.Option(None, "--time", min=1, help="start no candidate after SECONDS"),
         seed: int = typer.Option(0, help="seed of the random and bayes strategies"),
         jobs: Optional[int] = typer.Option(None, min=1, help="parallel NVRTC processes (default: all cores)"),
         devices: str = typer.Option("0", help="GPUs to run candidates on, e.g. 0,1 (one worker each)"),
         timeout: float = typer.Option(120.0, min=1, help="seconds before a candidate counts as hung"),
         resume: bool = typer.Option(False, "--resume", help="skip points already recorded for this GPU and shape"),
         dry_run: bool = typer.Option(False, "--dry-run", help="only count the space and the dropped points"),
         plot: bool = typer.Option(False, "--plot", help="write heatmaps and the best-so-far curve (PNG)"),
         db: Path = typer.Option(None, help="results database (default ./gemmlab-results/results.db)")) -> None:
    """Search a kernel's parameter space on one shape: every point verified, then timed."""
    from .tune.search import STRATEGIES
    from .tune.space import axes as space_axes
    from .tune.space import enumerate_space, parse_param_axes

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

    from .cuda.device import device, info
    from .envinfo import collect_env
    from .store import DEFAULT_DB, ResultStore
    from .tune.tuner import TuneOptions
    from .tune.tuner import tune as run_tune

    device()
    if max(d for d in device_list if d is not None) >= _device_count():
        raise BadArgumentError(f"--devices {devices}: this machine has {_device_count()} GPU(s)")
    store = ResultStore(db or DEFAULT_DB)
    env = collect_env()
    command = shlex.join(["gemmlab", *sys.argv[1:]])
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
        from .tune.plots import tune_plots

        rows = store.results(run_id=run_id)
        for path in tune_plots(rows, Path(db or DEFAULT_DB).parent / "plots", impl, problem.shape):
            console.print(f"plot: {path}")


def _device_count() -> int:
    from cuda.bindings import driver

    err, count = driver.cuDeviceGetCount()
    return count


# Commands that live with their subsystem register themselves on `app` when imported.
_EXTENSIONS = ("gemmlab.profile.cli",)


def _load_extensions() -> None:
    import importlib

    for module in _EXTENSIONS:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise  # a real missing dependency inside the extension, not an absent extension


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning every failure into one line and an exit code."""
    err = Console(stderr=True)
    try:
        _load_extensions()
        app(args=argv, standalone_mode=False)
    except GemmlabError as exc:
        err.print(f"error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("error: interrupted (results recorded so far are kept)", highlight=False, markup=False)
        return 130
    except Exception as exc:
        # Typer may vendor its own copy of click, so match click's exceptions by shape.
        kind = type(exc).__name__
        if kind.startswith("NoArgsIsHelp"):
            console.print(exc.format_message(), highlight=False, markup=False)
            return 0
        if kind == "Abort":
            err.print("error: interrupted (results recorded so far are kept)", highlight=False, markup=False)
            return 130
        if hasattr(exc, "format_message"):  # usage errors: unknown option, non-integer value...
            err.print(f"error: {exc.format_message()}", highlight=False, markup=False, soft_wrap=True)
            return 2
        # A bug: still one line, with what it was.
        err.print(f"internal error: {type(exc).__name__}: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 3
    return 0


if __name__ == "__main__":
    # Run the imported module's main, not this __main__ copy: extension commands register
    # themselves on gemmlab.cli.app, which `python -m gemmlab.cli` would otherwise not use.
    from gemmlab.cli import main as _main

    sys.exit(_main())
