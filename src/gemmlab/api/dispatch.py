"""Which implementation an API call runs when none is named: measured tables shipped with the
package (api/dispatch.json), per GPU, op, dtype and shape.

Each table entry is one shape of the suite that scripts/build_dispatch.py measured on a GPU with
`gemmlab bench` (same run, cold L2, medians): its candidates ranked fastest first. A call takes
the entry of its op and dtype nearest to its shape (log distance over the dimensions) and runs
its fastest candidate that accepts the problem - a gemmlab kernel with its parameters, or the
library (cuBLAS) where the library was measured faster. An entry may say which C it was measured
with (`out_dtype`, hgemm: a 16-bit C in the input type); without it, the op's default C (fp32).
A call writing a 16-bit C takes the nearest entry of its own C type or of an fp32 C, its own
where both are as near (a table measured for both C types at the same shapes always gives its
own), and its reason says when an fp32-C entry decided. A GPU with no table of its own uses a
table of the same architecture; a GPU with none falls back to the library for GEMMs and to
the single-pass reduction for sums (the defaults that were never slower by much anywhere we
measured; docs/api.md). `explain()` prints the choice and its evidence.
"""
from __future__ import annotations

import json
import math
import operator
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources


TABLE = "dispatch.json"
LIBRARY = {"sgemm": "cublas", "hgemm": "cublas", "bgemm": "cublas", "reduce": "cub"}
KERNEL_FALLBACK = {"reduce": "single_pass"}  # a kernel default where no table speaks
# Implementations whose call goes through a framework (CUB through CuPy: ~70-190 us of host time
# a call, measured with `gemmlab bench --api`) lose to a prepared launch unless clearly faster
# on the GPU: within this margin the fastest prepared candidate runs instead.
SLOW_HOST = {"cub"}
SLOW_HOST_MARGIN = 0.05

_tables: dict | None = None
_lock = threading.Lock()


@dataclass(frozen=True)
class Choice:
    impl: str
    params: dict = field(default_factory=dict)
    reason: str = ""
    evidence: tuple = ()  # ((impl, TFLOP/s or GB/s as measured), ...) at the measured shape, in the
    #                       order the choice ranked them (fastest first, after refit and _prefer_prepared)
    source: str = ""  # which table and shape decided
    skipped: tuple = ()  # "impl: why" of each faster candidate that refused the problem
    out_dtype: str = "fp32"  # the C the deciding entry was measured with


def tables() -> dict:
    """The shipped tables (loaded once)."""
    global _tables
    if _tables is None:
        with _lock:
            if _tables is None:
                try:
                    text = resources.files("gemmlab.api").joinpath(TABLE).read_text()
                    _tables = json.loads(text)
                except (OSError, ValueError):
                    _tables = {"gpus": []}
    return _tables


@lru_cache(maxsize=4096)
def _logs(shape: tuple) -> tuple[float, ...]:
    """The logs whose differences are the distance between two shapes, once per shape: a call's
    first use of a shape measures its distance to every table entry of its op and type (tens)."""
    return tuple(math.log(max(x, 1)) for x in shape)


def arch_of(gpu: str) -> str | None:
    """The architecture of a GPU a shipped (or named) table was measured on, else None."""
    return next((t.get("arch") for t in tables().get("gpus", []) if t.get("gpu") == gpu), None)


def _table_for(gpu: str, arch: str) -> tuple[dict | None, str]:
    gpus = tables().get("gpus", [])
    for t in gpus:
        if t.get("gpu") == gpu:
            return t, f"measured on this GPU ({gpu})"
    for t in gpus:
        if t.get("arch") == arch:
            return t, f"measured on a {t['gpu']} ({arch}, the same architecture; no table for {gpu})"
    return None, f"no table for {gpu} ({arch})"


def _prefer_prepared(ranked: list[dict]) -> list[dict]:
    """The ranking with a slow-host library moved behind prepared candidates within the margin."""
    if not ranked or ranked[0]["impl"] not in SLOW_HOST:
        return ranked
    top = ranked[0]["figure"]
    close = [c for c in ranked[1:] if c["impl"] not in SLOW_HOST and c["figure"] >= (1 - SLOW_HOST_MARGIN) * top]
    if not close:
        return ranked
    return close[:1] + [c for c in ranked if c is not close[0]]


def entry_out(entry: dict) -> str:
    """The C type an entry was measured with: its `out_dtype`, or the default fp32 C."""
    return entry.get("out_dtype", "fp32")


ELEMENT_BYTES = {"fp16": 2, "bf16": 2}  # the rest (fp32, tf32) 4


def aligned(op: str, dtype: str, shape) -> bool:
    """Whether a GEMM's rows are whole 16-byte units: N and K (the row lengths of a row-major A,
    B and C) multiples of 16 bytes' worth of elements. The libraries' fast paths need it, so an
    entry at an odd shape (4097^3, where cuBLAS pads and runs at half speed) speaks only for calls
    with odd rows, and an aligned entry for aligned ones. M is no row length here: 4095x4096x4096
    ran cuBLAS at 730 TFLOP/s, as 4096^3 does. Sums have no such classes (always True)."""
    if op == "reduce" or len(shape) < 3:
        return True
    unit = 16 // ELEMENT_BYTES.get(dtype, 4)
    return shape[1] % unit == 0 and shape[2] % unit == 0


def _counted(c: dict, lowered: dict) -> str:
    """A candidate's figure as the ranking counted it: lowered ones with what was measured."""
    if id(c) in lowered:
        return f"{lowered[id(c)][0]:.1f} (measured {c['figure']:.1f})"
    return f"{c['figure']:.1f}"


REFIT_TOLERANCE = 0.002  # a fill within 0.2% of the measured shape's is the same (16383 rows against 16384)


def refit(ranked: list[dict], measured: tuple, dims: tuple, fill) -> tuple[list[dict], dict]:
    """The candidates of an entry measured at `measured`, for a call at `dims`: a kernel whose
    tile rounds fill less of the GPU at dims than at the measured shape (`fill(impl, params,
    shape)`, None where not modelled) has its figure lowered in that ratio, never raised, and the
    ranking is sorted again. The library is left as measured: it picks its tiles per shape (cuBLAS
    at 4096x4224x4096 took 1.2% longer than at 4096^3 for 3.1% more work, where rung 5's rounds
    went from 4 to 5 and it took 12% longer). Returns (ranking, {id(candidate): (figure, fill
    here, fill there)} for the lowered ones)."""
    if fill is None or tuple(measured) == tuple(dims):
        return ranked, {}
    lowered = {}
    for c in ranked:
        here, there = fill(c["impl"], c.get("params") or {}, tuple(dims)), fill(c["impl"], c.get("params") or {}, tuple(measured))
        if here is not None and there and here < there * (1 - REFIT_TOLERANCE):
            lowered[id(c)] = (c["figure"] * here / there, here, there)
    if not lowered:
        return ranked, {}
    figure = {id(c): lowered.get(id(c), (c["figure"],))[0] for c in ranked}
    return sorted(ranked, key=lambda c: -figure[id(c)]), lowered


POOLS_KEPT = 256
_pools: dict = {}  # (id(table), op, dtype, C) -> (table, its entries, how many, aligned, the pool)


def _pool(table: dict | None, op: str, dtype: str, out_dtype: str) -> list[tuple]:
    """The entries of `table` a call of op and dtype writing a C of out_dtype chooses among (its
    own C's and the fp32 C's, in the table's order), each as (entry, the logs of its shape, whether
    its rows are whole 16-byte units, whether it was measured with another C than out_dtype): what
    choose compares that does not change from call to call. Remembered per table (a table is read
    once and not changed; one replaced, or with entries added or removed, is read again, as is
    every table where `aligned` is replaced): a program whose shapes change paid the filter, the
    logs and the alignment of every entry at each new shape, 50-90 us of a decision (session 38)."""
    if table is None:
        return []
    entries = table.get("entries", [])
    key = (id(table), op, dtype, out_dtype)
    kept = _pools.get(key)
    if kept is not None and kept[0] is table and kept[1] is entries and kept[2] == len(entries) and kept[3] is aligned:
        return kept[4]
    pool = [(e, _logs(tuple(e["shape"])), aligned(op, dtype, e["shape"]), entry_out(e) != out_dtype)
            for e in entries if e["op"] == op and e["dtype"] == dtype and entry_out(e) in (out_dtype, "fp32")]
    if len(_pools) >= POOLS_KEPT:
        _pools.clear()
    _pools[key] = (table, entries, len(entries), aligned, pool)
    return pool


def choose(op: str, dtype: str, dims: tuple[int, ...], gpu: str, arch: str,
           accepts=lambda impl: "", out_dtype: str = "fp32", fill=None) -> Choice:
    """The implementation for `op` at `dims` (M, N, K[, batch] or (n,)) in `dtype` on this GPU,
    writing a C of `out_dtype`: the nearest entry measured with that C or with an fp32 C, that C's
    at equal distance (Choice.out_dtype says which decided).

    `accepts(impl_name)` returns why an implementation cannot run the problem ("" when it can);
    `fill(impl_name, params, shape)` how much of the GPU its rounds fill at a shape (refit).
    """
    table, where = _table_for(gpu, arch)
    pool = _pool(table, op, dtype, out_dtype)
    if pool:
        logs, rows = _logs(tuple(dims)), aligned(op, dtype, dims)
        # nearest first: (distance, not its own C, shape), then the place in the table (min's first)
        near = [((sum(map(abs, map(operator.sub, shape_logs, logs))), other_c, e["shape"]), i, e, e_rows)
                for i, (e, shape_logs, e_rows, other_c) in enumerate(pool)]
        nearest = min(near)[2]
        alike = min((n for n in near if n[3] == rows), default=None)
        entry = nearest if alike is None else alike[2]
        where_shape = "this shape" if tuple(entry["shape"]) == tuple(dims) else "the nearest measured shape"
        if entry is not nearest:  # the alignment class passed over a nearer entry
            where_shape += (" whose rows are whole 16-byte units, as this call's are" if rows
                            else " whose rows are not whole 16-byte units, as this call's are not")
        shape = "x".join(map(str, entry["shape"]))
        measured_out = entry_out(entry)
        c_text = f" C {measured_out}" if measured_out != "fp32" else ""
        ranked, lowered = refit(entry["candidates"], entry["shape"], dims, fill)
        ranked = _prefer_prepared(ranked)
        evidence = tuple((c["impl"], c["figure"]) for c in ranked)
        refused = []
        for c in ranked:
            why = accepts(c["impl"])
            if why:
                refused.append(f"{c['impl']}: {why}")
                continue
            lead = "fastest" if not refused else "fastest that accepts this problem"
            first = entry["candidates"][0]
            if c is not first and not refused and first["impl"] in SLOW_HOST and id(first) not in lowered:
                lead = (f"within {SLOW_HOST_MARGIN:.0%} of {first['impl']} (whose call costs far more "
                        "host time) and a prepared launch")
            unit = "GB/s" if op == "reduce" else "TFLOP/s"
            reason = (f"{lead} at {shape} ({where_shape}), {where}: {c['impl']} {_counted(c, lowered)} {unit}")
            if len(ranked) > 1:
                others = [f"{o['impl']} {_counted(o, lowered)}" for o in ranked if o is not c][:3]
                reason += f" (then {', '.join(others)})"
            # the candidates measured faster than the choice that the tile rounds put behind it
            passed = [o for o in ranked[ranked.index(c) + 1:] if id(o) in lowered and o["figure"] > c["figure"]]
            if passed:
                here, there = lowered[id(passed[0])][1:]
                reason += (f"; tile rounds counted at this shape: {passed[0]['impl']} measured {passed[0]['figure']:.1f}"
                           f" counts {lowered[id(passed[0])][0]:.1f}, its rounds filling {here:.0%} of the GPU here and"
                           f" {there:.0%} at {shape}")
            if refused:
                reason += f"; skipped {'; '.join(refused)}"
            return Choice(c["impl"], dict(c.get("params") or {}), reason, evidence,
                          f"{TABLE}: {table['gpu']}, {op} {dtype} {shape}{c_text}", tuple(refused), measured_out)
    fallback = KERNEL_FALLBACK.get(op) or LIBRARY[op]
    if accepts(fallback):
        fallback = LIBRARY[op]
    return Choice(fallback, {}, f"{where} for {op} {dtype}: the fallback ({fallback})", (), "fallback")


def named(impl: str, params: dict | None) -> Choice:
    return Choice(impl, dict(params or {}), "named by the caller", (), "caller")


def validate_tables(data: dict) -> list[str]:
    """What is wrong with a dispatch table (empty when nothing): used by the tests and the builder."""
    problems = []
    for t in data.get("gpus", []):
        for key in ("gpu", "arch", "command", "entries"):
            if key not in t:
                problems.append(f"a table lacks {key!r}")
        for e in t.get("entries", []):
            figures = [c.get("figure") for c in e.get("candidates", [])]
            # a NaN passes "<= 0" and the fastest-first check (a list compares the same NaN object
            # equal), and json writes it: a failed measurement would ship as the fastest candidate
            if not figures or any(isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f)
                                  or f <= 0 for f in figures):
                problems.append(f"{t.get('gpu')} {e.get('op')} {e.get('shape')}: candidates without figures")
            elif figures != sorted(figures, reverse=True):
                problems.append(f"{t.get('gpu')} {e.get('op')} {e.get('shape')}: candidates not fastest first")
            # one kernel measured twice is one candidate refitted twice at each new shape's decision
            listed = [(c.get("impl"), json.dumps(c.get("params", {}), sort_keys=True)) for c in e.get("candidates", [])]
            repeated = len(listed) - len(set(listed))
            if repeated:
                problems.append(f"{t.get('gpu')} {e.get('op')} {e.get('dtype')} {e.get('shape')}: {repeated} repeated "
                                f"candidate{'s' if repeated > 1 else ''} (the same impl and params listed again)")
    return problems


def _path_note(impl: str, library_call: str | None) -> str:
    if impl == "cublas":
        via = (f", one {library_call} per call, replayed from a CUDA graph when a call repeats the"
               " operands and scalars of one of the last four (cuda/graph_replay.py; a plain call's only"
               " while the process holds fewer than graph_replay.GRAPHS_LIMIT such graphs)") if library_call else ""
        return f" (library path: cuBLAS called directly{via})"
    if impl == "cub":
        return " (library path)"
    return (" (gemmlab kernel; through a prepared executor its launches run as one CUDA graph, the"
            " arguments copied in when a call changes them: cuda/launch_graph.py)")


def describe(choice: Choice, caller: str, problem_text: str, gpu: str, arch: str, tuning: str,
             library_call: str | None = None, graphs_off: str = "") -> str:
    """The text explain() prints; `library_call` (a plan's executor knows it) names the one
    library function each call makes, `graphs_off` why its CUDA graphs were turned off."""
    lines = [f"{caller} {problem_text} on {gpu} ({arch})",
             f"  runs:    {choice.impl}{_path_note(choice.impl, library_call)}",
             f"  why:     {choice.reason}"]
    if choice.params:
        lines.append("  params:  " + ", ".join(f"{k}={v}" for k, v in sorted(choice.params.items())))
    if choice.source not in ("", "caller", "fallback"):
        lines.append(f"  table:   {choice.source}")
    lines.append(f"  tuning:  {tuning}")
    if graphs_off:
        lines.append(f"  graphs:  off, each call launches directly: {graphs_off}")
    return "\n".join(lines)
