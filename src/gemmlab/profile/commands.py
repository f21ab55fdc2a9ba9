"""The body of `gemmlab profile` (gemmlab.cli registers it on its app), and what it shares with
`gemmlab analyze` (analyze_command.py): the command line as typed, the --impl selection, the problem."""
from __future__ import annotations

import math
import shlex
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .. import ops, registry
from ..errors import BadArgumentError, GemmlabError
from ..outputs import database_ready, distinct, output_file, output_folder
from ..harness.ui import DTYPE_HELP, LAYOUT_HELP, OUT_HELP, console, fmt_params, params_for

DEFAULT_SHAPE = 4096
# (problem, GPU name, architecture) -> (implementation, parameters, where from): what the API would
# run, for `profile --impl dispatch`. The API is above this layer, so gemmlab.cli hands it in
# (apichoice.resolve), as it does to bench.
dispatch_resolver = None
# (problem, kernel name, GPU name, architecture) -> (parameters, where from): the dispatch table's
# best parameters of one kernel, for `profile --from-table` (apichoice.table_params, handed in too)
table_params = None


def command_text(ctx: typer.Context | None = None) -> str:
    """The command line as typed; rebuilt from the parsed options when gemmlab was called
    from Python (main([...])), where sys.argv is not this command's."""
    argv = sys.argv[1:]
    if ctx is None or (argv and argv[0] == ctx.info_name):
        return shlex.join(["gemmlab", *argv])
    parts = ["gemmlab", ctx.info_name or ""]
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if value is None or value == param.default or not getattr(param, "opts", None):
            continue
        if isinstance(value, bool):
            names = param.opts if value else (getattr(param, "secondary_opts", None) or [])
            if names:
                parts.append(names[0])
            continue
        parts += [param.opts[0], str(value)]
    return shlex.join(parts)


def _select(impl: str, with_baselines: bool = True, op: str = "sgemm") -> list:
    """'all', 'name', 'a,b,c'; 'ladder' stands for the rungs in order, also inside a list
    ('ladder,cublas'), as for bench, verify and compile (registry.select)."""
    return registry.select(impl, op=op, with_baselines=with_baselines)


DEFAULT_REDUCE_N = 1 << 24


def refuse_gemm_shape(ctx, op: str) -> None:
    """--M/--N/--K given with --op reduce (they have defaults, so only the command line tells
    them from the default GEMM shape; otherwise silently ignored): one line."""
    named = {name for name in ("M", "N", "K") if ctx.get_parameter_source(name).name == "COMMANDLINE"}
    if op == "reduce" and named:
        raise BadArgumentError(f"--{'/--'.join(sorted(named))}: for the GEMM ops; --op reduce takes --n")


def _problem(op: str, given: dict, M: int, N: int, K: int, n: int | None, alpha: float | None = None,
             beta: float | None = None):
    """The one problem `profile` and `analyze` build their kernels for. --M/--N/--K have
    defaults, so for reduce only the options given are checked (each refused in one line where
    the op does not take it)."""
    the_op = ops.get(op)
    if op == "reduce":
        ops.shape_args(op, alpha=alpha, beta=beta, **given)
        from ..problem import ReduceProblem

        return ReduceProblem(n or DEFAULT_REDUCE_N)
    return the_op.problems(ops.shape_args(op, M=M, N=N, K=K, alpha=alpha, beta=beta, **given))[0]


class Selection:
    """What `profile` runs: the kernels and baselines --impl names (minus those that refuse the
    problem, each with its line), `dispatch` where named (the API's choice, resolved on the GPU),
    and each one's parameters (--params, or the dispatch table's with --from-table)."""

    def __init__(self, the_op, problem, impls: list, chosen: dict, refused: list, after, from_table: bool):
        self.op, self.problem, self.impls, self.chosen, self.refused = the_op, problem, impls, chosen, refused
        self.after, self.from_table = after, from_table  # after: the names given after `dispatch` (None: not named)
        self.lines: list[str] = []

    @classmethod
    def named(cls, the_op, problem, impl: str, params: str | None, from_table: bool) -> "Selection":
        """The selection as far as it is known without a GPU; bad input is one line here."""
        from ..harness import dispatched

        named, after = dispatched.split(impl)
        if after is not None and params:
            raise BadArgumentError(dispatched.PARAMS_REFUSED)
        if from_table and params:
            raise BadArgumentError("--from-table takes the table's parameters; --params gives your own: one or the other")
        impls = _select(named, op=the_op.name) if named.strip() else []
        chosen = params_for(impls, params, the_op)
        refused = [r for r in (the_op.refusal(i, problem) for i in impls) if r]  # each names its kernel
        impls = [i for i in impls if not the_op.refusal(i, problem)]
        if not impls and after is None:
            raise BadArgumentError("; ".join(refused) or f"--impl {impl!r} names nothing to profile")
        if after is not None and dispatch_resolver is None:
            raise BadArgumentError("--impl dispatch: this caller gives no dispatch resolver (gemmlab profile does)")
        return cls(the_op, problem, impls, chosen, refused, after, from_table)

    def on_gpu(self, gpu: str, arch: str, shape: str) -> None:
        """What needs the GPU's name and architecture: kernels not built for it refused (a wgmma
        rung off Hopper, as analyze says), the table's parameters, the API's choice."""
        from ..harness import dispatched

        for i in list(self.impls):
            if i.kind == "kernel":
                try:
                    i.arch_for(arch)
                except BadArgumentError:
                    self.refused.append(f"{i.name}: not built for {arch} (needs {i.arch})")
                    self.impls.remove(i)
        if self.from_table:
            if table_params is None:
                raise BadArgumentError("--from-table: this caller gives no dispatch table (gemmlab profile does)")
            for i in self.impls:
                if i.kind == "kernel":
                    params, where = self._table_pick(i, gpu, arch)
                    self.chosen[i.name] = params
                    self.lines.append(f"{i.name}: {fmt_params(params) if params else 'defaults'} ({where})")
        if self.after is not None:  # the API's choice on this GPU, profiled under the name `dispatch`
            name, params, where = dispatch_resolver(self.problem, gpu, arch)
            stand = dispatched.stand_in(self.op.name, name, params)
            self.chosen[stand.name] = dict(stand.defaults) if stand.kind == "kernel" else {}
            self.impls = dispatched.place(self.impls, stand, self.after)
            self._pick = dispatched.Pick(stand, name, self.chosen[stand.name], where)
            self.lines.insert(0, self._pick.line(shape))
        if not self.impls:
            raise BadArgumentError("; ".join(self.refused))

    def _table_pick(self, impl, gpu: str, arch: str) -> tuple[dict, str]:
        """The table's parameters of `impl` for this problem, or ({}, why) where they do not apply:
        the table measured row-major operands (layout nn), and a pick must hold in this problem's
        layout and C type (tf32 in layout tn refuses rung 6's 128 x 256 default, for one)."""
        layout = getattr(self.problem, "layout", "nn")
        if layout != "nn":
            return {}, f"the table measured layout nn, not {layout}: the kernel's defaults for {layout}"
        params, where = table_params(self.problem, impl.name, gpu, arch)
        broken = impl.failed_constraints(impl.defaults | self.op.kernel_params(impl, params, self.problem))
        if broken:
            return {}, f"the table's pick breaks {broken[0]} here: the kernel's defaults"
        return params, where

    @property
    def record(self) -> dict | None:
        """What a `dispatch` row keeps of the choice (its `extra`), as bench keeps it."""
        return self._pick.record if getattr(self, "_pick", None) else None


def _fmt(value, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def profile_table(kernels: list, title: str) -> Table:
    from .ncu import METRICS

    table = Table(title=title)
    table.add_column("metric")
    ok = [k for k in kernels if k.status != "ERROR"]
    for k in ok:
        table.add_column(k.label, justify="right")
    for m in METRICS:
        table.add_row(m.label, *(_fmt(k.headline.get(m.key), m.digits) for k in ok))
    table.add_row("verified", *("yes" if k.target.get("verified") else "no" if k.target.get("verified") is False
                                else "-" for k in ok))
    return table


def profile(ctx: typer.Context, impl: str = typer.Option("ladder", help="ladder (the rungs in order), all, a name or "
                                                         "a,b,c (e.g. ladder,cublas); dispatch: what the API "
                                                         "would run for this problem"),
            op: str = typer.Option("sgemm", help="the op: " + " | ".join(ops.names())),
            M: int = typer.Option(DEFAULT_SHAPE, "--M", min=1), N: int = typer.Option(DEFAULT_SHAPE, "--N", min=1),
            K: int = typer.Option(DEFAULT_SHAPE, "--K", min=1),
            n: Optional[int] = typer.Option(None, "--n", min=1, help=f"reduce: element count (default {DEFAULT_REDUCE_N})"),
            dtype: Optional[str] = typer.Option(None, help=DTYPE_HELP),
            layout: Optional[str] = typer.Option(None, help=LAYOUT_HELP),
            out_dtype: Optional[str] = typer.Option(None, "--out-dtype", help=OUT_HELP),
            batch: Optional[int] = typer.Option(None, min=1, help="bgemm: batch count (default 1)"),
            alpha: Optional[float] = typer.Option(None, help="GEMM ops (default 1)"),
            beta: Optional[float] = typer.Option(None, help="GEMM ops (default 0)"),
            warmup: int = typer.Option(3, min=1, help="launches before the profiled one (the first is verified)"),
            params: Optional[str] = typer.Option(None, help="NAME=VALUE,... for a single kernel"),
            check: bool = typer.Option(True, "--check/--no-check", help="verify the first warm-up launch"),
            db: Path = typer.Option(None, help="results database (default ./gemmlab-results/results.db)"),
            csv: Optional[Path] = typer.Option(None, help="also write this run's profile rows as CSV"),
            json_out: Optional[Path] = typer.Option(None, "--json", help="also write them as JSON"),
            reports: Optional[Path] = typer.Option(None, help="keep ncu's .ncu-rep files in this folder"),
            from_table: bool = typer.Option(False, "--from-table",
                                            help="each named kernel with the parameters the dispatch table ranks "
                                                 "best for it near this shape on this GPU (not with --params)"),
            source: bool = typer.Option(False, "--source/--no-source",
                                        help="also sample where the warps stall, per SASS instruction: in the main "
                                             "loop or outside it (prologue, epilogue), the leading stall reasons and "
                                             "the hottest instructions"),
            timeout: float = typer.Option(600, help="seconds one ncu run may take")) -> None:
    """Nsight Compute metrics of each kernel, side by side (ncu runs a small target process).
    Every op: --op hgemm profiles the tensor-core rungs built for the --dtype, --layout and
    --out-dtype given (and cuBLAS/torch on the same problem), --op bgemm takes --batch."""
    from ..store import DEFAULT_DB, ResultStore

    refuse_gemm_shape(ctx, op)
    target = db or DEFAULT_DB  # no table may be written over it
    csv, json_out = output_file(csv, "--csv", target), output_file(json_out, "--json", target)  # before ncu runs
    distinct(("--csv", csv), ("--json", json_out))
    if reports is not None:
        reports = output_folder(reports, "--reports")
    if not math.isfinite(timeout) or timeout <= 0:  # nan passed `<= 0` and then broke subprocess.run
        raise BadArgumentError(f"--timeout {timeout:g}: seconds one ncu run may take, a number more than 0")
    given = dict(n=None if n is None else str(n), batch=batch, dtype=dtype, layout=layout, out_dtype=out_dtype)
    problem = _problem(op, given, M, N, K, n, alpha, beta)
    from ..cuda.device import device, info
    from ..envinfo import collect_env
    from . import ncu as N_
    from . import rows
    from .profiler import measure_dram_bandwidth, ncu_version, profile_many

    the_op = ops.get(op)
    shape = f"n={problem.n}" if op == "reduce" else the_op.label(problem)
    picks = Selection.named(the_op, problem, impl, params, from_table)  # checked before any GPU work
    database_ready(target)  # the database's problem first, as the other files': it only reads
    rows.check_tables(target)
    ncu = N_.find_ncu()
    if ncu is None:
        raise GemmlabError(N_.no_ncu())
    device()  # one line when there is no GPU
    arch = info().arch
    picks.on_gpu(info().name, arch, shape)
    impls, chosen, refused = picks.impls, picks.chosen, picks.refused
    impls = [i for i in impls if i.kind == "kernel" or not i.unavailable_reason()]
    version = ncu_version(ncu)
    db_path = Path(db or DEFAULT_DB)
    store = ResultStore(db_path)
    command = command_text(ctx)
    env = collect_env()
    env["ncu"] = {"path": ncu, "version": version}
    conn = rows.connect(db_path)  # its tables first: nothing recorded if they cannot be made
    run_id = store.start_run("profile", command, env)
    bw = measure_dram_bandwidth()
    rows.insert(conn, "bandwidth", run_id, **bw)
    console.print(f"ncu {version}; {info().name} ({arch}); DRAM copy {bw['gbps']:,.0f} GB/s; "
                  f"profiling {len(impls)} implementation(s) at {shape}")
    for line in picks.lines:  # the API's choice, the table's parameters
        console.print(line, highlight=False, markup=False)
    for line in refused:  # what --impl named but cannot run this problem
        console.print(f"  not profiled: {line}", highlight=False, markup=False)
    errors: list[str] = []

    def record(plan, k) -> None:
        row = k.row(problem, plan.params, version, plan.skip, plan.count)
        if k.impl == "dispatch" and picks.record:  # which implementation the API chose, and why
            row["extra"] = {**row["extra"], "chosen": picks.record}
        rows.insert(conn, "profiles", run_id, **row)
        state = "ok" if k.status == "OK" else f"{k.status}: {k.reason}"
        console.print(f"  {k.label}: {state}", highlight=False, markup=False)
        if k.status != "OK":
            errors.append(f"{k.label}: {k.reason}")

    kernels = profile_many(impls, problem, lambda i: chosen.get(i.name, {}), warmup, arch, reports=reports,
                           timeout=timeout, check=check, on_kernel=record, source=source)
    console.print(f"command: {command}", highlight=False, markup=False)
    console.print(profile_table(kernels, f"Nsight Compute, {shape}, {info().name} (run {run_id})"))
    if source:
        from .source import summary_lines

        for k in kernels:
            lines = summary_lines(k.label, k.source) if k.source else [f"{k.label}: no warp samples in ncu's source page"]
            for line in lines:
                console.print(line, highlight=False, markup=False)
    stored = rows.select(conn, "profiles", run_id)
    if csv:
        rows.export_csv(stored, csv)
    if json_out:
        rows.export_json(stored, json_out, run_id=run_id, command=command, bandwidth=bw)
    console.print(f"stored run {run_id} in {db_path}")
    if errors:
        raise GemmlabError(errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
