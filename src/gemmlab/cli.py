"""The gemmlab command line: list, env, compile, verify, bench, tune, profile, analyze, report.

`--op` picks the op (gemmlab.ops); the commands themselves know no op. Every failure is one
line on stderr with a non-zero exit code (2 for bad input or an environment problem, 1 for a
verification failure), never a traceback.
"""
from __future__ import annotations

import errno
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from . import ops, registry
from .archs import check_arch, refuse_if_none_builds
from .errors import BadArgumentError, GemmlabError, NoGPUError
from .harness import session
from .harness.bench import BenchOptions
from .harness.ui import DTYPE_HELP, LAYOUT_HELP, OUT_HELP, console, fmt_params, params_for
from .outputs import FILE_OPTIONS, checked_as_typed, removes_made_folders_on_failure
from .profile import analyze_command
from .profile import commands as profile_commands
from .tune.command import run_tune_command

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Write, verify, time and explain GPU GEMM and reduction kernels.")
OP_HELP = "the op: " + " | ".join(ops.names())


@app.command("list")
def list_cmd(op: str = typer.Option("sgemm", help=OP_HELP)) -> None:
    """The ladder: one row per kernel and baseline."""
    ops.get(op)
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
                op: str = typer.Option("sgemm", help=OP_HELP),
                arch: Optional[str] = typer.Option(None, help="e.g. sm_80, sm_90 (default: the GPU's)"),
                params: Optional[str] = typer.Option(None, help="NAME=VALUE,... for a single kernel")) -> None:
    """Compile kernels with NVRTC (no GPU needed with --arch) and print their resources."""
    from .cuda.compile import compile_kernel

    ops.get(op)
    impls = registry.select(impl, op=op, with_baselines=False)  # names and --params: before the GPU is asked
    if not any(i.kind == "kernel" for i in impls):  # a library baseline (cublas, ...) has nothing to build
        raise BadArgumentError(f"--impl {impl!r} names no gemmlab kernel: nothing to compile")
    chosen = params_for(impls, params)
    if arch is not None:
        check_arch(arch, f"--arch {arch!r}")
    else:
        from .cuda.device import info

        try:
            arch = info().arch
        except NoGPUError as exc:
            raise NoGPUError(f"{exc}; to compile without a GPU, pass --arch (e.g. --arch sm_90)") from None
        check_arch(arch, f"this GPU's {arch}")
    refuse_if_none_builds([i for i in impls if i.kind == "kernel"], arch)
    table = Table(title=f"compile report ({arch})")
    for col in ("kernel", "parameters", "regs", "smem B", "stack B", "spill st", "spill ld", "time s", "cached"):
        table.add_column(col, justify="right" if col not in ("kernel", "parameters") else "left", overflow="fold")
    failures, notes = [], []
    for spec in (i for i in impls if i.kind == "kernel"):
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
        notes += r.perf_notes(spec.name)
    console.print(table)
    for note in notes:  # e.g. wgmma serialised, which no spill count shows
        console.print(note, highlight=False, markup=False)
    if failures:
        more = f"{len(failures)} kernels failed to compile; the first: " if len(failures) > 1 else ""
        raise GemmlabError(more + failures[0])  # ("(and 2 more)" after ptxas's words read as part of them)


@app.command()
def verify(impl: str = typer.Option("all", help="kernel name, a,b,c or all"),
           op: str = typer.Option("sgemm", help=OP_HELP),
           dtype: Optional[str] = typer.Option(None, help=DTYPE_HELP),
           layout: Optional[str] = typer.Option(None, help=LAYOUT_HELP),
           out_dtype: Optional[str] = typer.Option(None, "--out-dtype", help=OUT_HELP),
           n: Optional[str] = typer.Option(None, "--n", help="reduce: element counts (default: the edge-case sweep)"),
           batch: Optional[int] = typer.Option(None, min=1, help="bgemm: batch count of a --M/--N/--K shape"),
           M: Optional[int] = typer.Option(None, "--M"), N: Optional[int] = typer.Option(None, "--N"),
           K: Optional[int] = typer.Option(None, "--K"),
           alpha: Optional[float] = typer.Option(None, help="GEMM ops, with --M/--N/--K (default 1.5)"),
           beta: Optional[float] = typer.Option(None, help="GEMM ops, with --M/--N/--K (default -0.75)"),
           params: Optional[str] = typer.Option(None, help="NAME=VALUE,... for a single kernel")) -> None:
    """Verify against fp64 over the op's edge-case sweep (or one --M/--N/--K shape, or --n sizes)."""
    if (alpha is not None or beta is not None) and op != "reduce" and M is None and N is None and K is None:
        raise BadArgumentError("--alpha and --beta go with --M/--N/--K: the sweep runs its own (1, 0) and (1.5, -0.75)")
    args = ops.shape_args(op, M=M, N=N, K=K, n=n, batch=batch, alpha=alpha, beta=beta, dtype=dtype, layout=layout,
                       out_dtype=out_dtype, scalars=(1.5, -0.75))
    session.verify(op, impl, args, params)


BENCH_IMPL_HELP = ("kernel name, a,b,c or all (with the baselines). `dispatch`: what the API runs with no "
                   "implementation named (gemmlab.sgemm(A, B), ...) at each shape on this GPU - the shipped table's "
                   "choice, with GEMMLAB_DB's parameters where it names one - timed as one more row, its choice "
                   "per shape printed above the tables (--params go to the one other kernel named), e.g. gemmlab "
                   "bench --impl dispatch,triton,cublas --sizes 1024,4096,4097,1000x3000x2000")


@app.command()
def bench(ctx: typer.Context, impl: str = typer.Option("all", help=BENCH_IMPL_HELP),
          op: str = typer.Option("sgemm", help=OP_HELP),
          dtype: Optional[str] = typer.Option(None, help=DTYPE_HELP),
          layout: Optional[str] = typer.Option(None, help=LAYOUT_HELP),
          out_dtype: Optional[str] = typer.Option(None, "--out-dtype", help=OUT_HELP),
          n: Optional[str] = typer.Option(None, "--n", help="reduce: element counts, e.g. 1024,2^20,2^20+7"),
          batch: Optional[int] = typer.Option(None, min=1, help="bgemm: batch count for --M/--N/--K or --sizes"),
          M: Optional[int] = typer.Option(None, "--M"), N: Optional[int] = typer.Option(None, "--N"),
          K: Optional[int] = typer.Option(None, "--K"),
          sizes: Optional[str] = typer.Option(None, help="e.g. 1024,4096,1000x3000x2000 (bgemm: 8x512 = batch x "
                                                          "size, or BxMxNxK)"),
          alpha: Optional[float] = typer.Option(None, help="GEMM ops (default 1)"),
          beta: Optional[float] = typer.Option(None, help="GEMM ops (default 0)"),
          warmup: int = typer.Option(3, min=0, max=1000, help="untimed rounds before the timed launches, each of two launches "
                                     "(one sizes the run, one the host's enqueue cost); 0 runs one round all the same"),
          repeat: int = typer.Option(10, min=1, max=1000, help="timed launches at least (more for a short kernel, up to 1000)"),
          check: bool = typer.Option(True, "--check/--no-check", help="verify each point before timing it"),
          flush: bool = typer.Option(True, "--flush/--no-flush", help="flush L2 before every timed launch"),
          params: Optional[str] = typer.Option(None, help="NAME=VALUE,... for a single kernel"),
          default_params: bool = typer.Option(False, "--default-params",
                                              help="ignore parameters tuned for this GPU; use the spec defaults"),
          db: Path = typer.Option(None, help="results database (default ./gemmlab-results/results.db)"),
          csv: Optional[Path] = typer.Option(None, help="also write this run's rows as CSV"),
          json_out: Optional[Path] = typer.Option(None, "--json", help="also write this run's rows as JSON"),
          markdown: Optional[Path] = typer.Option(None, help="also write the tables as Markdown"),
          api: Optional[str] = typer.Option(None, "--api", help="time the Python entry points as a program calls "
                                            "them, against torch/CuPy: all, or some of sgemm,hgemm,reduce")) -> None:
    """Verify, then time each kernel and the baselines in one run; store and print the tables."""
    if api is not None:
        from .apicommand import bench_api

        ignored = _given(ctx, "--api", "--sizes", "--n", "--markdown")
        if ignored:  # bench --api times the entry points with their own choices, and writes only --markdown
            raise BadArgumentError(f"{', '.join(ignored)}: not taken with --api (it takes --sizes, --n and --markdown)")
        bench_api(api, sizes, n, markdown)
        return
    args = ops.shape_args(op, M=M, N=N, K=K, sizes=sizes, n=n, batch=batch, alpha=alpha, beta=beta, dtype=dtype,
                       layout=layout, out_dtype=out_dtype)
    options = BenchOptions(warmup=warmup, repeat=repeat, flush=flush, check=check)
    from .apichoice import resolve  # the API's choice, handed down: the harness may not import the API

    session.bench(op, impl, args, options, params, default_params, db, csv, json_out, markdown, dispatch=resolve)


@app.command()
def tune(ctx: typer.Context, impl: str = typer.Option(..., help="one kernel name"),
         M: int = typer.Option(4096, "--M", min=1), N: int = typer.Option(4096, "--N", min=1),
         K: int = typer.Option(4096, "--K", min=1),
         op: Optional[str] = typer.Option(None, help="sgemm or hgemm: checked against the kernel's op (default: "
                                          "the kernel's)"),
         dtype: Optional[str] = typer.Option(None, help="input dtype of the tuned problem: fp32 (sgemm kernels), "
                                             "fp16, bf16 or tf32 (hgemm kernels; default the kernel's first)"),
         param: list[str] = typer.Option([], help="NAME=V1,V2,... replaces that parameter's declared values"),
         strategy: str = typer.Option("exhaustive", help="exhaustive | random | bayes (needs optuna)"),
         budget: Optional[int] = typer.Option(None, min=1, help="at most this many points"),
         time_limit: Optional[float] = typer.Option(None, "--time", min=1, help="start no candidate after SECONDS"),
         seed: int = typer.Option(0, min=0, max=2**32 - 1, help="seed of the random and bayes strategies "
                                                                 "(0 to 2^32 - 1, Optuna's range)"),
         jobs: Optional[int] = typer.Option(None, min=1, help="parallel NVRTC processes (default: the cores the GPU workers leave)"),
         devices: Optional[str] = typer.Option(None, help="GPUs to run candidates on, e.g. 0,1 (one worker each; "
                                                         "default 0, or every GPU with --cluster local)"),
         timeout: float = typer.Option(120.0, min=1, help="seconds before a candidate counts as hung"),
         resume: bool = typer.Option(False, "--resume", help="skip points already recorded for this GPU and shape"),
         dry_run: bool = typer.Option(False, "--dry-run", help="only count the space and the dropped points"),
         plot: bool = typer.Option(False, "--plot", help="write heatmaps and the best-so-far curve (PNG)"),
         db: Path = typer.Option(None, help="results database (default ./gemmlab-results/results.db)"),
         cluster: Optional[str] = typer.Option(None, help="run on Dask: a scheduler address (tcp://host:8786) or "
                                               "'local' (a worker per GPU here); needs gemmlab[cluster]"),
         compile_workers: Optional[int] = typer.Option(None, min=0, help="with --cluster local: CPU workers for "
                                                       "NVRTC (default: the cores not given to a GPU)"),
         gpu: Optional[str] = typer.Option(None, help="with --cluster: tune only GPU models whose name contains "
                                           "this (default: every model, each its own run)")) -> None:
    """Search a kernel's parameter space on one shape: every point verified, then timed."""
    run_tune_command(impl, M, N, K, param, strategy, budget, time_limit, seed, jobs, devices, timeout, resume,
                     dry_run, plot, db, session.command_line(), cluster, compile_workers, gpu, dtype, op, _given(ctx))


def _given(ctx: typer.Context, *taken: str) -> list[str]:
    """The options typed on the command line, in the order declared (a flag's --no- form as
    such), less those in `taken`; one typed at its default value counts (`--warmup 3` as 4)."""
    params = [p for p in ctx.command.params if getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"]
    names = [p.secondary_opts[0] if p.secondary_opts and ctx.params[p.name] is False else p.opts[0] for p in params]
    return [name for name in names if name not in taken]


def _api_choice(problem, gpu: str, arch: str):  # what the API would run (apichoice, imported on first use)
    from .apichoice import resolve
    return resolve(problem, gpu, arch)


def _table_params(problem, impl: str, gpu: str, arch: str):  # the dispatch table's best parameters of one kernel
    from .apichoice import table_params
    return table_params(problem, impl, gpu, arch)


profile_commands.dispatch_resolver = _api_choice  # profile --impl dispatch asks the API, as bench does
profile_commands.table_params = _table_params  # and --from-table its table
app.command()(profile_commands.profile)
app.command()(analyze_command.analyze)


@app.command()
def report(ctx: typer.Context, db: Path = typer.Option(None, help="results database (default ./gemmlab-results/results.db)"),
           out: Path = typer.Option(Path("gemmlab-report"), help="folder for report.md, report.html and plots/"),
           size: Optional[str] = typer.Option(None, help="shape of the ladder bar chart, e.g. 4096 (default: the "
                                                          "largest one every rung was measured at)"),
           title: str = typer.Option("gemmlab report", help="the report's title")) -> None:
    """Markdown and HTML report (tables, plots, the command behind each number) from the database alone."""
    from .problem import parse_shape
    from .report.render import write_report
    from .store import DEFAULT_DB

    db_path = Path(db or DEFAULT_DB)
    if not db_path.exists():
        raise BadArgumentError(f"no results database at {db_path} (run gemmlab bench/profile first, or pass --db)")
    if db_path.is_file() and db_path.stat().st_size == 0:  # SQLite reads it as a new, empty database
        raise BadArgumentError(f"{db_path} is empty: no runs are recorded in it (pass the --db a bench wrote)")
    if size is not None:
        parse_shape(size)  # '--size abc' refused whatever the database holds
    written = write_report(db_path, out, size=size, title=title, command=profile_commands.command_text(ctx))
    for path in written:
        console.print(f"wrote {path}", highlight=False)


def _line(text: str, limit: int = 480) -> str:
    """A message on one line of bounded length: inputs are echoed in messages, and a 100,000-
    character --op must not become a 100 KB line (480: room for an unknown name's hint and
    sgemm's 27 implementation names)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 30] + f" ... ({len(text)} characters)"


def _utf8(text: str) -> bool:  # os.fsdecode keeps an undecodable byte as a lone surrogate, no UTF-8
    return not any("\ud800" <= c <= "\udfff" for c in text)


def _command():
    """`app` as click runs it, each file option (outputs.FILE_OPTIONS) checked as typed."""
    group = typer.main.get_command(app)
    for param in (p for command in group.commands.values() for p in command.params):
        option = next((o for o in param.opts if o in FILE_OPTIONS), None)
        if option:  # click hands process_value the string as typed; typer makes the Path in it
            param.process_value = checked_as_typed(option, param.process_value)
    return group


@removes_made_folders_on_failure  # a refused command leaves no empty folder it made for an output
def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning every failure into one line and an exit code."""
    err = Console(stderr=True)
    def say(line): err.print(line, highlight=False, markup=False, soft_wrap=True)
    # a non-UTF-8 argument (a file name's stray byte) cannot go into a report, database or message
    bad = next((a for a in (sys.argv[1:] if argv is None else argv) if not _utf8(a)), None)
    if bad is not None:
        say(f"error: argument {ascii(bad)[:80]} is not UTF-8 text")
        return 2
    try:
        code = _command()(args=argv, standalone_mode=False)  # Typer returns Ctrl-C in a command as 130
    except GemmlabError as exc:
        say(f"error: {_line(exc)}")
        return exc.exit_code
    except Exception as exc:
        # Typer may vendor its own copy of click, so match click's exceptions by shape.
        kind = type(exc).__name__
        if kind.startswith("NoArgsIsHelp"):
            console.print(exc.format_message(), highlight=False, markup=False)
            return 0
        if kind == "Abort":
            code = 130
        elif hasattr(exc, "format_message"):  # usage errors: unknown option, non-integer value...
            say(f"error: {_line(exc.format_message())}")
            return 2
        elif getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO,
                                             errno.ENAMETOOLONG):
            # a write no check could foresee (a disk that filled during the run); what was stored is kept
            say(f"error: {_line(exc.strerror)}" + (f": {_line(exc.filename)}" if exc.filename else ""))
            return 2
        else:  # a bug (a packaged file missing, ...): still one line, with what it was
            say(f"internal error: {type(exc).__name__}: {_line(exc)}")
            return 3
    except KeyboardInterrupt:  # outside a command's body (typer's own Ctrl-C handling is above)
        code = 130
    if code == 130:
        say("error: interrupted (results recorded so far are kept)")
    return code if type(code) is int else 0


if __name__ == "__main__":
    sys.exit(main())
