"""What the pointer-level executors share (api/executors.py, api/tma_executors.py): the FastGemm
interface, the argument kinds of their launches, and prepared(), a compiled kernel bound to one
launch configuration."""
from __future__ import annotations

import threading
from contextlib import contextmanager

from ..cuda.launch import STATIC_SMEM_LIMIT, allow_dynamic_smem
from ..cuda.launcher import PreparedLaunch
from .operands import Operand

# The argument kinds of the API's prepared launches, by executor (tests/cpu/test_prepared_signatures.py
# compares each with the parameter list of the compiled kernels it is used with).
GEMM_SIGNATURE = ("i32", "i32", "i32", "f32", "ptr", "ptr", "f32", "ptr")  # M N K alpha A B beta C
BGEMM_SIGNATURE = ("i32", "i32", "i32", "f32", "ptr", "i64", "ptr", "i64", "f32", "ptr", "i64", "i32")
SPLITK_REDUCE_SIGNATURE = ("i32", "i32", "i32", "f32", "ptr", "f32", "ptr")  # M N slices alpha W beta C
# x n out, then a single-pass rung's partials and counters; by whether the rung runs in one pass
REDUCE_SIGNATURES = {False: ("ptr", "i64", "ptr"), True: ("ptr", "i64", "ptr", "ptr", "ptr")}


def gemm_signature(impl, batched: bool) -> tuple[str, ...]:
    """KernelGemm's main launch of kernel `impl`: BGEMM_SIGNATURE batched, else GEMM_SIGNATURE and
    the workspace pointer where the kernel takes one; rung 15 (tag tma_maps): two tensor maps
    lead, and a trailing flag says whether they describe A and B."""
    if batched:
        return BGEMM_SIGNATURE
    maps = "tma_maps" in impl.tags
    tail = (("ptr",) if impl.takes_workspace else ()) + (("i32",) if maps else ())
    return (("tmap", "tmap") if maps else ()) + GEMM_SIGNATURE + tail


def tma_signature(store_c: bool) -> tuple[str, ...]:
    """TmaGemm's launch of a TMA hgemm rung: maps of A and B (and C where the rung stores C by TMA:
    rungs 5-6), M N K alpha beta, then C; rungs 5-6: C, ldc, the split-K workspace, whole tiles, slices."""
    maps = ("tmap", "tmap", "tmap") if store_c else ("tmap", "tmap")
    tail = ("ptr", "i32", "ptr", "i32", "i32") if store_c else ("ptr",)
    return maps + ("i32", "i32", "i32", "f32", "f32") + tail


class FastGemm:
    """What the pointer-level GEMM executors share: `run(a, b, c, alpha, beta, stream)` takes raw
    device pointers; `run_operands` (the generic entry every executor has) unwraps Operands."""

    fast = True

    def run_operands(self, a: Operand, b: Operand, c: Operand, alpha: float, beta: float, stream: int) -> None:
        self.run(a.ptr, b.ptr, c.ptr, alpha, beta, stream)


_building = threading.local()  # .stream: the one stream the executors being built will launch on


@contextmanager
def launching_on(stream: int):
    """Executors built in this block launch on `stream` and on no other (core.executor keeps one
    per stream wherever it owns a workspace), so their workspaces are made and cleared there."""
    outer = getattr(_building, "stream", None)
    _building.stream = stream
    try:
        yield
    finally:
        _building.stream = outer


def ordered_stream() -> int | None:
    """The stream the executors being built will launch on (launching_on), where their buffers
    can be made ahead of their first kernel; None for a plan's (no one stream) and while that
    stream is being captured (work queued there would only be recorded; a failed query counts
    as a capture). The rule for every buffer an executor owns: workspace(), and cuBLASLt's
    (api/shared_workspaces.py)."""
    from ..cuda.launch_graph import is_captured

    stream = getattr(_building, "stream", None)
    return None if stream is None or is_captured(stream) else stream


def workspace(count: int, dtype: str = "float32", zeroed: bool = True):
    """A buffer an executor owns: split-K and stream-K flags, a reduction's counters (zeroed: they
    must start at zero, and the kernels leave them so), a reduction's partials (not zeroed).

    - Built for one stream (launching_on, a call's executor): taken from CuPy's pool on that stream
      and cleared there, ahead of the first kernel, so the host does not wait; freed, it goes back
      to that stream's blocks, reused only behind the kernels that used it. Until session 36 every
      first call of a shape (for reduce_sum, of each n) waited on the host for the work queued on
      CuPy's current stream: the legacy stream, and with it every blocking stream, torch's default.
    - Otherwise (a plan, which may launch on any stream; a call's built while its stream is being
      captured, where a clearing would only be recorded): made on CuPy's current stream and
      waited for before this returns, zeroed or not, so that neither the clearing nor a block
      that CuPy just freed with work still queued on that stream can race a first launch on
      another (a torch side stream does not wait for CuPy's). Under a CuPy stream capture the
      clearing is captured on the same stream instead, ahead of the kernel. A plan's blocks go
      back to that stream's when it is dropped, to the next allocation there at once: a plan run
      on another stream must be kept until its work there is done (docs/api.md, "Plans")."""
    import cupy as cp

    make = cp.zeros if zeroed else cp.empty
    stream = ordered_stream()
    if stream is not None:
        from ..cuda.device import cupy_stream

        with cupy_stream(stream):
            return make(count, dtype=dtype)
    buf = make(count, dtype=dtype)
    current = cp.cuda.get_current_stream()
    if not current.is_capturing():
        current.synchronize()
    return buf


def prepared(ck, geometry, signature) -> PreparedLaunch:
    """A PreparedLaunch of compiled kernel `ck` with `geometry` (dynamic shared memory allowed)."""
    if geometry.shmem > STATIC_SMEM_LIMIT:
        allow_dynamic_smem(ck, geometry.shmem)
    return PreparedLaunch(int(ck.kernel().handle), ck.spec.name, geometry.grid, geometry.block, geometry.shmem,
                          signature, geometry.cluster)
