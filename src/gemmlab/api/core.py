"""The machinery every entry point shares: one-time setup under a lock, the compiled-kernel cache,
the per-thread executor cache, and dispatch with its `accepts` rule (the operand checks are in
api/checks.py, the call bodies in api/calls.py, the plans in api/plans.py).

Thread safety: the first use (imports, the registry, the device, the primary context) runs
once under one lock; compiled kernels are shared through a cache filled under a lock; executors,
which own launch slots and workspaces, are kept per thread (and per stream), so threads never
share mutable launch state. A new thread gets the device's primary context made current.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import replace
from typing import Any, Mapping

from ..errors import BadArgumentError, NoGPUError, UnknownKernelError
from . import dispatch, tuning
from .candidates import refusal, round_fill, slow_path
from .launches import launching_on
from .tma_executors import copies_to_row_major

_setup_lock = threading.Lock()
_compile_lock = threading.Lock()
_state: dict[str, Any] = {}
_runners: dict[tuple, Any] = {}
_thread = threading.local()
forgotten = [0]  # forget_executors calls so far: what was decided before one is not kept after it


class ThreadCache(dict):
    """A thread's executors, or its plain calls' cache: a dict that can be referred to weakly."""

    __slots__ = ("__weakref__",)


# Every live thread's caches by id, held weakly (they go with their thread): use_tuning empties them
# all, so no thread keeps running what the database now named would change.
_thread_caches: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
# Per thread: enough for every shape a program cycles through. 2048 since session 39: each costs
# 23-68 KiB of host memory (H100; scripts/changing_shapes.py --cycle), and the cuBLAS replay's
# captured graphs, which cost device memory, have a bound of their own (graph_replay.GRAPHS_LIMIT;
# the kernels' graphs, cuda/launch_graph.py, have none and were not measured apart). At 512 a
# program cycling through 2000 shapes rebuilt each at every call (bf16 x @ W: 813 us a call
# against torch.mm's 14).
MAX_EXECUTORS = 2048


def setup() -> dict:
    """Imports, registry, device and context, once per process (under a lock); the context made
    current on the calling thread, once per thread."""
    state = _state
    if not state:
        with _setup_lock:
            if not _state:
                import ctypes

                import cupy  # noqa: F401  (imported here, once, not concurrently by many threads)

                from .. import ops, registry
                from ..cuda.device import device, info
                from ..cuda.launcher import driver

                registry.all_impls()  # the registry is filled before any thread looks a name up
                ops.names()
                dev = device()
                ctx = ctypes.c_void_p()
                err = driver().cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.device_id)
                if err:
                    raise NoGPUError(f"no GPU: cannot retain the primary context (CUresult {err})")
                gpu = info()
                _state.update(context=ctx.value, device=dev.device_id, gpu=gpu.name, arch=gpu.arch)
    if getattr(_thread, "context", None) is None:
        from ..cuda.launcher import ensure_context

        ensure_context(state["context"])
        _thread.executors = ThreadCache()
        _thread.hot_calls = ThreadCache()  # the plain calls' own cache (api/calls.py), dropped with the executors
        with _setup_lock:
            for cache in (_thread.executors, _thread.hot_calls):
                _thread_caches[id(cache)] = cache
        _thread.context = state["context"]
    return state


def forget_executors() -> None:
    """Every thread's executors dropped (use_tuning): each shape decides again with the database named (keep)."""
    with _setup_lock:
        forgotten[0] += 1
        for cache in list(_thread_caches.values()):
            cache.clear()


def compiled_runner(op_name: str, impl: Any, params: Mapping[str, int] | None, dtype: str, problem=None):
    """The shared prepared runner of (op, implementation, parameters, and what of the problem the
    op builds its kernel for: the dtype, and for hgemm the operand layout and C's type), compiled
    once and its module loaded under the lock (so no two threads load it)."""
    from .. import ops

    op = ops.get(op_name)
    built_for = dtype if problem is None else op.runner_key(problem)
    key = (op_name, impl.name, tuple(sorted((params or {}).items())), built_for)
    runner = _runners.get(key)
    if runner is None:
        with _compile_lock:
            runner = _runners.get(key)
            if runner is None:
                runner = op.prepare(impl, params, dtype) if problem is None else op.prepare_for(impl, params, problem)
                if runner.compiled is not None:
                    runner.compiled.kernel()
                    if getattr(runner, "reduce", None) is not None:
                        runner.reduce.kernel()
                _runners[key] = runner
    return runner


def lookup(op_name: str, name: str):
    from .. import registry

    try:
        impl = registry.get(name, op_name)
    except UnknownKernelError:
        raise BadArgumentError(f"unknown {op_name} implementation {name!r} (gemmlab list --op {op_name})") from None
    if impl.op != op_name:
        raise BadArgumentError(f"{name} is a {impl.op} implementation, not {op_name}")
    return impl


def choose(op_name: str, problem, dims: tuple, impl: str | None, params: Mapping[str, int] | None,
           gpu: str | None = None, arch: str | None = None):
    """(Choice, registry entry, parameters) for a problem: the caller's implementation or the
    dispatch table's, with the named tuning database's parameters where it has some. `gpu` and
    `arch` default to this process's GPU (naming them needs none: explain on a CPU)."""
    gpu = gpu or _state["gpu"]
    arch = arch or _state["arch"]
    if impl is not None:
        choice = dispatch.named(impl, params)
        named_refusal(op_name, impl, problem, arch)
    else:
        choice = dispatch.choose(op_name, problem_dtype(op_name, problem), dims, gpu, arch,
                                 lambda name: refusal(op_name, name, problem, arch) or slow_path(op_name, name, problem),
                                 out_dtype=getattr(problem, "out_dtype", "fp32"), fill=round_fill(op_name, problem))
    spec = lookup(op_name, choice.impl)
    if params:
        from .. import ops

        if spec.kind != "kernel":  # a library or framework baseline has no template parameters to take them
            raise BadArgumentError(f"{spec.name} is a library baseline, not a gemmlab kernel, and takes no params "
                                   f"(given {dict(params)})")
        flags = sorted(set(params) & ops.get(op_name).problem_flags(spec))
        if flags:  # the operands' value would win over the one given, without a word
            raise BadArgumentError(f"params {', '.join(flags)}: set by the operands' types and layouts and by "
                                   "out_dtype, not by params")
        spec.resolve(ops.get(op_name).kernel_params(spec, params, problem))  # one line, before any compile
    chosen = dict(params) if params else choice.params  # params={}: no overrides, as None
    if not params and spec.kind == "kernel" and op_name != "reduce":
        tuned = tuning.tuned_params(spec, problem, gpu)
        if tuned:
            chosen = tuned
            choice = replace(choice, params=tuned, reason=choice.reason + TUNED_NOTE)
    return choice, spec, chosen


def named_refusal(op_name: str, impl: str, problem, arch: str) -> None:
    """Refuse a kernel the caller named for a problem it cannot run (its input types, shape rule,
    architecture) when the call is decided, as the executor would later: explain answers the same.
    A library baseline's availability is left to its call (explain answers for it on a CPU)."""
    spec = lookup(op_name, impl)
    if spec.kind == "kernel":  # the rule without the layout, as gemm_executor asks it
        plain = replace(problem, layout="nn") if getattr(problem, "layout", "nn") != "nn" else problem
        why = refusal(op_name, spec.name, plain, arch)
        if why:
            raise BadArgumentError(why)


def decide(op_name: str, problem, dims: tuple, impl: str | None, params: Mapping[str, int] | None,
           gpu: str | None = None, arch: str | None = None):
    """choose(), with what a call adds to its answer (explain and the executors alike): operands
    given as transposed views, with no implementation named, go to cuBLAS (IN_PLACE_REASON); a
    16-bit C decided by entries measured with an fp32 C says so."""
    layout = (getattr(problem, "a_transposed", False), getattr(problem, "b_transposed", False))
    forced = impl is None and any(layout)
    if impl is not None and copies_to_row_major(lookup(op_name, impl), problem, layout):
        problem = replace(problem, layout="nn")  # the call runs the nn kernel on row-major copies (calls.gemm)
    choice, spec, chosen = choose(op_name, problem, dims, "cublas" if forced else impl, params, gpu, arch)
    if forced:
        return dispatch.Choice("cublas", {}, IN_PLACE_REASON), spec, chosen
    out = getattr(problem, "out_dtype", "fp32")
    if out != "fp32" and impl is None and choice.source not in ("", "fallback") and choice.out_dtype != out:
        choice = replace(choice, reason=choice.reason + OUT16_NOTE.format(out=out))
    return choice, spec, chosen


def problem_dtype(op_name: str, problem) -> str:
    return "fp32" if op_name == "reduce" else problem.dtype


def layout_letters(layout: tuple[bool, bool]) -> str:
    """(A transposed, B transposed) -> the problem's layout, op(A) op(B): (False, True) -> "nt"."""
    return ("t" if layout[0] else "n") + ("t" if layout[1] else "n")


def make_problem(op_name: str, dtype: str, dims: tuple, layout: tuple[bool, bool] = (False, False),
                 out: str = "fp32"):
    from ..problem import BatchedGemmProblem, GemmProblem, ReduceProblem

    if op_name == "reduce":
        return ReduceProblem(dims[0])
    if op_name == "bgemm":
        return BatchedGemmProblem(dims[0], dims[1], dims[2], 1.0, 0.0, batch=dims[3])
    return GemmProblem(dims[0], dims[1], dims[2], 1.0, 0.0, dtype, layout_letters(layout), out)


TUNED_NOTE = "; parameters from the tuning database"
OUT16_NOTE = "; the table was measured with an fp32 C, this call writes a {out} C"
IN_PLACE_REASON = ("a transposed operand: cuBLAS reads it in place with its transpose flag, where a gemmlab "
                   "kernel needs a row-major copy first (the dispatch table measured row-major operands)")


def layout_note(spec, problem, layout: tuple[bool, bool]) -> str:
    """What a call with the named implementation does with transposed operands (for explain):
    read them in place, or copy them to row-major first, and why."""
    if spec.name == "cublas":
        return "transposed operands read in place (cuBLAS's transpose flags)"
    if spec.kind != "kernel":
        return "transposed operands copied to row-major first"
    from .tma_executors import in_place_refusal

    why = in_place_refusal(spec, problem, layout)
    if why:
        return why
    parts = (["A given transposed: read in place as KxM, M-major"] if layout[0] else []) + \
        (["B given transposed (x @ W.T): read in place as NxK, K-major"] if layout[1] else [])
    return f"{'; '.join(parts)} (layout {layout_letters(layout)})"


def new_executor(op_name: str, dtype: str, dims: tuple, impl: str | None, params: Mapping[str, int] | None,
                 layout: tuple[bool, bool] = (False, False), out: str = "fp32"):
    """_new_executor in relaxed capture mode: built on a stream that torch.cuda.graph captures (global
    mode), its workspace allocation and module load would invalidate the user's capture."""
    from ..cuda.launcher import relaxed_capture

    with relaxed_capture():
        return _new_executor(op_name, dtype, dims, impl, params, layout, out)


def _new_executor(op_name: str, dtype: str, dims: tuple, impl: str | None, params: Mapping[str, int] | None,
                  layout: tuple[bool, bool] = (False, False), out: str = "fp32"):
    """A fresh executor (with its Choice in .choice) for one problem shape. With a transposed
    `layout` and no implementation named, cuBLAS: it reads the transposed operand in place,
    where a gemmlab kernel would need a copy first (the dispatch table measured row-major
    operands). A named kernel reads a transposed B in place where it can (the TMA rungs that
    take layout nt, e.g. persistent). An executor that cannot read the layout in place is a
    NoInPlaceLayout, carrying why (the call then copies). `out`: C's type (hgemm: fp32 or the
    16-bit input type); the dispatch then skips the kernels that write an fp32 C only."""
    from .. import ops
    from .executors import LayoutNotSupported, NoInPlaceLayout, gemm_executor, reduce_executor

    problem = make_problem(op_name, dtype, dims, layout, out)
    choice, spec, chosen = decide(op_name, problem, dims, impl, params)
    op = ops.get(op_name)

    def shared():
        return compiled_runner(op_name, spec, chosen, dtype, problem if op_name != "reduce" else None)

    if any(layout):
        try:
            executor = gemm_executor(op, op_name, spec, problem, shared, None, layout)
        except LayoutNotSupported as exc:
            return NoInPlaceLayout(choice, str(exc))
        executor.choice = choice
        return executor

    def fresh():
        return op.prepare(spec, chosen, dtype) if op_name == "reduce" else op.prepare_for(spec, chosen, problem)

    if op_name == "reduce":
        executor = reduce_executor(spec, dims[0], shared, fresh)
    else:
        executor = gemm_executor(op, op_name, spec, problem, shared, fresh)
    executor.choice = choice
    return executor


def executor(op_name: str, dtype: str, dims: tuple, impl: str | None, params, stream: int,
             layout: tuple[bool, bool] = (False, False), out: str = "fp32"):
    """This thread's executor for (op, dtype, shape, implementation, parameters[, layout]); one
    per stream where the executor owns a workspace (two streams must not race on it). Executors
    without one are shared by every stream of the thread, so a CUDA graph captured on a side
    stream reuses the executor warmed up on another (nothing is allocated during a capture).
    `layout`: (A transposed, B transposed), operands given as transposed views; `out`: C's type."""
    # No overrides ({} or None) is one key: a dict is not hashable, and {} means the defaults.
    key = (op_name, dtype, dims, impl, tuple(sorted(params.items())) if params else None)
    if layout[0] or layout[1] or out != "fp32":
        key = key + (layout, out)
    cache = _thread.executors
    ex = cache.get(key)
    if ex is not None and ex.owns_workspace and ex.stream != stream:
        key = key + (stream,)
        ex = cache.get(key)
    if ex is None:  # built for this stream, and kept unless a use_tuning came meanwhile (keep)
        before = forgotten[0]
        with launching_on(stream):  # a workspace is cleared on this stream, the host not waiting
            ex = new_executor(op_name, dtype, dims, impl, params, layout, out)
        ex.stream = stream
        keep(cache, key, ex, before)
    return ex


def keep(cache: dict, key, value, before: int) -> None:
    """value under key in a thread's bounded cache (executors, or the plain calls'), unless a
    use_tuning came since `before` (forgotten[0] when the caller began deciding). Full, it drops
    the entry kept first (not the least recently used: a hit moves nothing, to keep the hot path
    as it is), so a program with more shapes than the bound rebuilds the ones dropped, one at a
    time, where until session 37 the whole cache was emptied and every shape was built again (a
    few hundred us each: docs/api.md, "Programs whose shapes change")."""
    if len(cache) >= MAX_EXECUTORS:
        try:
            del cache[next(iter(cache))]
        except (KeyError, RuntimeError, StopIteration):  # emptied meanwhile by use_tuning's forget
            pass
    cache[key] = value
    if forgotten[0] != before:  # tested after the store: a use_tuning at any moment since is seen
        cache.pop(key, None)
