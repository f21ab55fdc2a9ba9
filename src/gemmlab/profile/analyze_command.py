"""The body of `gemmlab analyze` (gemmlab.cli registers it on its app): registers, shared memory,
occupancy and the SASS mix of kernels, with no GPU."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .. import ops
from ..errors import BadArgumentError
from ..harness.ui import DTYPE_HELP, LAYOUT_HELP, OUT_HELP, console, params_for
from .commands import DEFAULT_REDUCE_N, DEFAULT_SHAPE, _problem, _select, command_text, refuse_gemm_shape


def analyze(ctx: typer.Context, impl: str = typer.Option("ladder", help="ladder, all, a kernel name or a,b,c"),
            op: str = typer.Option("sgemm", help="the op: " + " | ".join(ops.names())),
            n: Optional[int] = typer.Option(None, "--n", min=1, help=f"reduce: element count for the launch "
                                                                      f"geometry (default {DEFAULT_REDUCE_N})"),
            dtype: Optional[str] = typer.Option(None, help=DTYPE_HELP),
            layout: Optional[str] = typer.Option(None, help=LAYOUT_HELP),
            out_dtype: Optional[str] = typer.Option(None, "--out-dtype", help=OUT_HELP),
            batch: Optional[int] = typer.Option(None, min=1, help="bgemm: batch count (default 1)"),
            arch: str = typer.Option("sm_90", help="sm_80 | sm_86 | sm_89 | sm_90"),
            params: Optional[str] = typer.Option(None, help="NAME=VALUE,... for a single kernel"),
            M: int = typer.Option(DEFAULT_SHAPE, "--M", min=1, help="shape for the launch geometry"),
            N: int = typer.Option(DEFAULT_SHAPE, "--N", min=1), K: int = typer.Option(DEFAULT_SHAPE, "--K", min=1),
            explain: Optional[bool] = typer.Option(None, "--explain/--no-explain",
                                                   help="the occupancy calculation line by line (default: one kernel)"),
            loop: bool = typer.Option(False, "--loop", help="print the SASS of each kernel's main loop"),
            db: Optional[Path] = typer.Option(None, help="store the rows here (default ./gemmlab-results/results.db)"),
            store_rows: bool = typer.Option(True, "--store/--no-store", help="write the rows to the database")) -> None:
    """Registers, shared memory, theoretical occupancy and SASS mix of kernels; no GPU needed.
    Every op: the tensor-core rungs (--op hgemm, built for the --dtype, --layout and --out-dtype
    given, as bench builds them) show their wgmma (HGMMA) main loop."""
    from ..envinfo import collect_env
    from ..outputs import database_ready
    from ..store import DEFAULT_DB, ResultStore
    from . import rows
    from .analysis import analyze as run_analysis
    from .occupancy import limits_for
    from .sass import MIX_COLUMNS, find_tool

    the_op = ops.get(op)
    refuse_gemm_shape(ctx, op)
    if db is not None and not store_rows:
        raise BadArgumentError("--db with --no-store: nothing would be written to it")
    limits = limits_for(arch)
    specs = [i for i in _select(impl, with_baselines=False, op=op) if i.kind == "kernel"]
    if not specs:
        raise BadArgumentError(f"--impl {impl!r} names no kernel (baselines have no code to analyze)")
    chosen = params_for(specs, params, the_op)
    given = dict(n=None if n is None else str(n), batch=batch, dtype=dtype, layout=layout, out_dtype=out_dtype)
    problem = _problem(op, given, M, N, K, n)
    # the database checked (a foreign, newer or read-only one refused, a new one's folder tried)
    # before the kernels compile; a new one is made only when there are rows to put in it
    db_path = Path(db or DEFAULT_DB)
    if store_rows:
        database_ready(db_path)
        rows.check_tables(db_path)
    tool = find_tool()
    skipped = []  # kernels not built, each with its reason, said below the tables
    for s in list(specs):
        try:
            s.arch_for(arch)
        except BadArgumentError:  # a wgmma rung on sm_80
            skipped.append(f"{s.name}: not built for {arch} (needs {s.arch})")
            specs.remove(s)
            continue
        reason = the_op.refusal(s, problem)  # e.g. a tf32-only rung for fp16: bench would not build it either
        if reason:
            skipped.append(f"{s.name}: not built: {reason}")
            specs.remove(s)
    if not specs:
        raise BadArgumentError("; ".join(skipped))
    results = [run_analysis(s, the_op.kernel_params(s, chosen.get(s.name), problem), arch, problem, tool=tool)
               for s in specs]

    comp = Table(title=f"compile report ({arch}, ptxas)")
    for col in ("kernel", "parameters", "regs", "smem static B", "smem dynamic B", "stack B", "spill st B", "spill ld B"):
        comp.add_column(col, justify="left" if col in ("kernel", "parameters") else "right", overflow="fold")
    for a in results:
        r = a.resources
        comp.add_row(a.impl, ",".join(f"{k}={v}" for k, v in a.params.items()) or "-", str(r.registers),
                     str(r.smem_static), str(a.smem_dynamic), str(r.stack_frame), str(r.spill_stores),
                     str(r.spill_loads))
    console.print(comp)
    # e.g. wgmma serialised: no spill count shows it, and the kernel runs at a fraction
    for note in (n for a in results for n in a.resources.perf_notes(a.impl)):
        console.print(note, highlight=False, markup=False)

    occ = Table(title=f"theoretical occupancy on {arch} ({limits.example}: {limits.max_warps_per_sm} warps, "
                      f"{limits.regs_per_sm} regs, {limits.smem_per_sm // 1024} KiB smem, "
                      f"{limits.max_blocks_per_sm} blocks per SM)")
    for col in ("kernel", "threads", "regs", "smem B", "blocks by regs", "by smem", "by threads", "by block cap",
                "by barriers", "blocks/SM", "warps/SM", "occupancy", "limited by", "cluster"):
        occ.add_column(col, justify="left" if col in ("kernel", "limited by") else "right")
    for a in results:
        o = a.occupancy
        b = o.blocks_by
        cluster = "x".join(map(str, a.cluster)) if a.cluster != (1, 1, 1) else "-"  # CTAs co-scheduled per cluster
        occ.add_row(a.impl, str(a.threads), str(o.registers_per_thread), str(o.smem_per_block), str(b["registers"]),
                    str(b["shared memory"]), str(b["threads"]), str(b["blocks per SM"]), str(b.get("barriers", "-")),
                    str(o.blocks_per_sm), f"{o.active_warps}/{o.max_warps}", f"{100 * o.occupancy:.1f}%", o.limiter,
                    cluster)
    console.print(occ)
    if explain or (explain is None and len(results) == 1):
        for a in results:
            console.print(f"{a.impl}:", highlight=False)
            for line in a.occupancy.explain():
                console.print(f"  {line}", highlight=False, markup=False)

    with_mix = [a for a in results if a.sass is not None]
    if with_mix:
        cols = [name for name, _ in MIX_COLUMNS]
        mix = Table(title=f"SASS instruction mix, main loop (whole kernel in brackets); {with_mix[0].sass.tool}")
        mix.add_column("kernel")
        for c in cols:
            mix.add_column(c, justify="right")
        for a in with_mix:
            s = a.sass
            body = s.loop or {}
            mix.add_row(a.impl, *(f"{body.get(c, 0)} ({s.whole[c]})" if s.loop else f"- ({s.whole[c]})" for c in cols))
        console.print(mix)
        _print_registers([a for a in with_mix if a.sass.registers and a.sass.registers.ffma])
        if loop:
            for a in with_mix:
                if a.sass.loop_range:
                    fn_text = _loop_text(a)
                    console.print(f"{a.impl}: main loop {a.sass.loop_range[0]:#06x}..{a.sass.loop_range[1]:#06x}",
                                  highlight=False)
                    console.print(fn_text, highlight=False, markup=False)
    reasons = {a.sass_reason for a in results if a.sass_reason}
    for reason in reasons:
        console.print(reason, highlight=False, markup=False)
    for line in skipped:
        console.print(line, highlight=False, markup=False)

    if store_rows:
        store = ResultStore(db_path)
        conn = rows.connect(db_path)  # its tables first: nothing recorded if they cannot be made
        run_id = store.start_run("analyze", command_text(ctx), collect_env())
        for a in results:
            rows.insert(conn, "analyses", run_id, **a.row())
        console.print(f"stored run {run_id} in {db_path}")


def _print_registers(analyses: list) -> None:
    """The main loop's register-file traffic (profile/regfile.py): FFMA share, operand reuse
    and FFMAs that read three registers of one bank."""
    if not analyses:
        return
    from .regfile import MODEL

    table = Table(title="main loop register traffic (static)")
    for col in ("kernel", "FFMA share", ".reuse flags", "FFMA reads from reuse", "FFMA bank conflicts"):
        table.add_column(col, justify="left" if col == "kernel" else "right")
    for a in analyses:
        r = a.sass.registers
        table.add_row(a.impl, f"{100 * r.ffma_share:.1f}% ({r.ffma}/{r.instructions})", str(r.reuse_flags),
                      f"{100 * r.reuse_share:.1f}% ({r.ffma_from_reuse}/{r.ffma_reads})",
                      f"{r.ffma_conflicts} of {r.ffma}")
    console.print(table)
    console.print(f"bank model: {MODEL}; measured on Volta and Turing, assumed for newer GPUs", highlight=False,
                  markup=False)
    for a in analyses:
        for line in a.sass.registers.examples[:3]:
            console.print(f"  {a.impl} conflict: {line}", highlight=False, markup=False)


def _loop_text(a) -> str:
    from .sass import function_for, parse_sass

    fn = function_for(parse_sass(a.sass_text), a.mangled)
    return fn.text_between(*a.sass.loop_range)
