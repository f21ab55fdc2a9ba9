"""The `bench` and `verify` commands for any op: choose the implementations and problems, run the
points with a progress bar, store each row as it comes, print the op's tables and write them
beside the database. One line and a non-zero exit for every failure (gemmlab.errors)."""
from __future__ import annotations

import io
import shlex
import sys
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

from .. import ops
from ..errors import BadArgumentError, GemmlabError
from ..outputs import batch_file_path, database_ready, distinct, output_file
from ..store import DEFAULT_DB, ResultStore
from . import dispatched
from .bench import BenchOptions, raise_on_failure, run_bench, verify_sweep
from .tables import bench_tables, clock_warnings, failures_table, to_markdown
from .tuned import usable_best
from .ui import console, params_for, progress_bar


def require_named_libraries(impls: list, names: str) -> None:
    """A baseline named in --impl whose library is missing: refused with its reason, for it would
    verify or time nothing and the run would pass. One that 'all' or the op's own reference brought
    in is left out silently (usable)."""
    named = {n.strip() for n in names.split(",")}
    for i in impls:
        why = i.name in named and i.kind != "kernel" and i.unavailable_reason()
        if why:
            raise BadArgumentError(why)


def refuse_named_without_problems(op, impls: list, names: str, problems: list) -> None:
    """An implementation named in --impl that can run none of the problems (a dtype, layout or C
    type it never takes, a shape outside its rule): refused with its reason before any GPU work.
    bench would store only ERROR rows and exit 0, verify pass having verified nothing. One that
    "all" brought in is left to the caller."""
    named = {n.strip() for n in names.split(",")}
    for i in impls:
        if i.name in named and problems:
            reasons = [op.refusal(i, p) for p in problems]
            if all(reasons):
                raise BadArgumentError(reasons[0])


def usable(impls: list) -> list:
    """Kernels, and the baselines whose library is there (the others are left out silently)."""
    return [i for i in impls if i.kind == "kernel" or not i.unavailable_reason()]


def tuned_params(store, gpu, impls, problems, chosen) -> dict:
    """(impl, shape) -> parameters tuned on this GPU at the nearest tuned shape, for the kernels
    the user did not give --params for (GEMM shapes only: the tuner tunes those)."""
    tuned = {}
    for impl in impls:
        if impl.kind != "kernel" or impl.name in chosen:
            continue
        for problem in problems:
            if not hasattr(problem, "M"):
                continue
            found = usable_best(store, gpu, impl, problem)
            if found is not None:
                tuned[(impl.name, problem.shape)] = found
    return tuned


def command_line() -> str:
    return shlex.join(["gemmlab", *sys.argv[1:]])


def record_and_report(impls: list, problems: list, options: BenchOptions, *, store, run_id: int, command: str,
                      db: Path | None, csv: Path | None, json_out: Path | None, markdown: Path | None,
                      batch_prefix: str, header: tuple[str, ...] = (),
                      describe: Callable[[Any], str] = lambda r: f"{r.impl} {r.problem.shape}") -> list:
    """Run the points with a progress bar, store each row as it comes, then print the tables,
    write them to a timestamped file beside the database (and to Markdown), export CSV/JSON."""
    with progress_bar() as progress:
        task = progress.add_task("benchmarking", total=len(impls) * len(problems))

        def record(r):
            store.add_result(run_id, **r.row(), flush=options.flush)  # so a warm-L2 run never reads as cold
            progress.update(task, advance=1, description=describe(r))

        results = run_bench(impls, problems, options, on_result=record)

    shown = bench_tables(results) + [t for t in (failures_table(results),) if t is not None]
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
        Path(markdown).parent.mkdir(parents=True, exist_ok=True)  # again: a refused command may have removed it
        Path(markdown).write_text("\n\n".join(lines) + "\n\n" + "\n".join(to_markdown(t) for t in shown))
    console.print(f"stored run {run_id} in {db or DEFAULT_DB}; table in {batch}")
    return results


def bench(op_name: str, impl: str, args: ops.ShapeArgs, options: BenchOptions, params: str | None,
          default_params: bool, db: Path | None, csv: Path | None, json_out: Path | None,
          markdown: Path | None, dispatch: dispatched.Resolver | None = None) -> None:
    """Verify, then time each implementation and the op's baselines in one run; store and print.
    `dispatch` among the names: what the API would run at each problem, as `resolve` chooses it
    (harness.dispatched), with its choice per shape above the tables."""
    from ..cuda.device import device, info
    from ..envinfo import collect_env

    target = db or DEFAULT_DB  # no table may be written over it
    csv, json_out = output_file(csv, "--csv", target), output_file(json_out, "--json", target)  # before any work
    markdown = output_file(markdown, "--markdown", target)
    distinct(("--csv", csv), ("--json", json_out), ("--markdown", markdown))
    op = ops.get(op_name)
    dtype = op.check_dtype(args.dtype)
    named, after = dispatched.split(impl)
    impls = op.select(named, dtype) if after is None or named.strip() else []
    if after is not None and params and not any(i.kind == "kernel" for i in impls):
        raise BadArgumentError(dispatched.PARAMS_REFUSED)
    chosen = params_for(impls, params, op)
    require_named_libraries(impls, named)
    problems = op.problems(args)
    refuse_named_without_problems(op, impls, named, problems)
    names = {i.name for i in impls}
    impls += [i for name in op.always_measured for i in op.select(name, dtype) if name not in names]
    impls = usable(impls)
    database_ready(target)  # a database it could not record into: said before "no GPU" and any work
    device()  # fail early, with one line, when there is no GPU
    header = op.header_for(args)
    if after is not None:  # the API's own names for this GPU, as a call would look them up
        gpu_info = info()
        slot = dispatched.slot(problems, dispatch, gpu_info.name, gpu_info.arch)
        header += tuple(slot.at(p).line(op.label(p)) for p in problems)
        impls = dispatched.place(impls, slot, after)
    store = ResultStore(db or DEFAULT_DB)
    command = command_line()
    run_env = collect_env()
    run_id = store.start_run("bench", command, run_env)
    gpu = (run_env.get("gpu") or {}).get("name")
    options.params = chosen
    options.tuned = {} if default_params else tuned_params(store, gpu, impls, problems, chosen)
    results = record_and_report(impls, problems, options, store=store, run_id=run_id, command=command, db=db,
                                csv=csv, json_out=json_out, markdown=markdown, batch_prefix=op.batch_prefix(dtype),
                                header=header, describe=lambda r: f"{r.impl} {op.label(r.problem)}")
    raise_on_failure(results)  # exit 1 after everything is stored and shown


def verify(op_name: str, impl: str, args: ops.ShapeArgs, params: str | None) -> None:
    """Every selected implementation against fp64 over the op's sweep (each implementation on the
    problems its shape rule allows), or over the one shape given (refused loudly if it cannot)."""
    from ..cuda.device import device

    op = ops.get(op_name)
    dtype = op.check_dtype(args.dtype)
    if dispatched.split(impl)[1] is not None:
        raise BadArgumentError("--impl dispatch is for gemmlab bench (which verifies each point before timing it)")
    impls = op.select(impl, dtype)
    chosen = params_for(impls, params, op)
    require_named_libraries(impls, impl)
    impls = usable(impls)
    candidates = op.sweep(args)
    one = args.one_gemm
    if one:
        for i in impls:  # a named shape a rung cannot take: refused before any GPU work
            reason = op.refusal(i, candidates[-1])
            if reason:
                raise BadArgumentError(reason)
    # a named implementation that takes none of the sweep's problems would pass having verified
    # nothing; one that "all" or "ladder" brought in is skipped, unless nothing at all is left
    refuse_named_without_problems(op, impls, impl, candidates)
    plan = [(i, [p for p in candidates if not op.refusal(i, p)]) for i in impls]
    for i, mine in plan:
        if not mine and not any(ps for _, ps in plan):
            raise BadArgumentError(op.refusal(i, candidates[0]) or f"{i.name} takes none of the problems to verify")
    device()
    table = Table(title=f"{op.name} ({op.title}): verification against fp64")
    for col in ("impl", "shape", "alpha", "beta", "launches", "result", "rel err", "tol", "detail"):
        table.add_column(col)
    skipped = sum(len(candidates) - len(mine) for _, mine in plan)
    results = []
    with progress_bar() as progress:
        task = progress.add_task("verifying", total=sum(len(ps) for _, ps in plan))

        def show(r):
            v, p = r.verdict, r.problem
            table.add_row(r.impl, op.label(p), f"{getattr(p, 'alpha', 1.0):g}", f"{getattr(p, 'beta', 0.0):g}",
                          "x".join(map(str, r.grids)) or "-", r.status, f"{v.rel_err:.2e}" if v else "-",
                          f"{v.tol:.1e}" if v else "-", r.reason)
            progress.advance(task)

        for i, mine in plan:
            results += verify_sweep([i], mine, chosen, on_result=show)
    console.print(table)
    errors = [r for r in results if r.status == "ERROR"]
    raise_on_failure(results)
    if errors:
        reason = errors[0].reason
        raise GemmlabError(reason if reason.startswith(errors[0].impl) else f"{errors[0].impl}: {reason}")
    console.print(f"all {len(results)} checks passed"
                  + (f" ({skipped} shapes outside a rung's shape rule not run)" if skipped else ""))
