"""Launching the TMA rungs (3-6): tensor maps over the operands, row-stride padding where a
row is not a multiple of 16 bytes (TMA's rule); a B given as NxK (layout nt) and an A given as
KxM (tn, tt) are read in place by the rungs built for them (B_KMAJOR, A_MNMAJOR), and the tf32
rung reads a KxN B in place too (its transposed product, or in tn a transpose inside the CTA:
persistent.cuh), so nothing is transposed here.

A tensor map describes a 2-D tensor by its logical size and its row stride, so padding needs
no zeros: the operand is copied into a buffer with a wider row stride and the map keeps the
logical size; TMA reads zeros past the logical edge and clips stores there. The copies run on
the launch stream and are part of the timed work (only shapes with unaligned rows pay them).
Tensor maps are cached by (address, shape, strides, box): a map encodes no data, only where
it is, so the cache is exact.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import BadArgumentError
from ..kernels.hgemm.tma_rows import padded_row, row_rule, tma_row
from ..problem import GemmProblem

_MAPS: dict[tuple, Any] = {}
_MAX_MAPS = 64


def _tma_enum(name: str):
    """A tensor-map enum of cuda.core (its module path differs between cuda.core builds)."""
    from ..cuda.core_import import cuda_core

    return getattr(sys.modules[cuda_core().TensorMapDescriptor.__module__], name)


SWIZZLES = {0: "NONE", 32: "SWIZZLE_32B", 64: "SWIZZLE_64B", 128: "SWIZZLE_128B"}  # by span in bytes


def tensor_map(x, box: tuple[int, int], swizzle: int = 128):
    """A TensorMapDescriptor over the 2-D CuPy array (or strided view) `x`: `box` = (rows, columns)
    per copy, `swizzle` the span in bytes of the shared-memory swizzle (128: the layout wgmma's
    descriptors assume; 0: none), zeros out of bounds."""
    key = (x.data.ptr, x.shape, x.strides, x.dtype.str, box, swizzle)
    desc = _MAPS.get(key)
    if desc is None:
        from cuda.core.utils import StridedMemoryView

        view = StridedMemoryView.from_cuda_array_interface(x, stream_ptr=-1)
        try:
            desc = view.as_tensor_map(box_dim=box, swizzle=getattr(_tma_enum("TensorMapSwizzle"), SWIZZLES[swizzle]),
                                      l2_promotion=_tma_enum("TensorMapL2Promotion").L2_256B)
        except Exception as exc:  # the driver's own reason (alignment, box size)
            raise BadArgumentError(f"cannot describe a {x.shape} {x.dtype} operand for TMA: {exc}") from None
        if len(_MAPS) >= _MAX_MAPS:
            _MAPS.clear()
        _MAPS[key] = desc
    return desc


class TmaOperands:
    """The operands of one TMA launch, padded into workspaces kept between calls where TMA needs it."""

    def __init__(self):
        self._ws: dict[str, Any] = {}
        self._splitk = None  # the split-K workspace, grown on demand
        self._zero_flags = 0  # how many of its leading floats are known to be zero

    def splitk_workspace(self, floats: int, flags: int, stream_handle: int) -> int:
        """The address of a split-K workspace of at least `floats` whose first `flags` floats
        (the tile flags) are zero (0 for none). Allocated zeroed, on the launch stream. A launch
        leaves its own flags zero again but writes partial tiles right behind them, so a later
        shape with more flags would find partials where its flags lie: those floats are cleared
        again first (a memset of a few KB, on the launch stream), only then."""
        if floats == 0:
            return 0
        import cupy as cp

        from ..cuda.device import cupy_stream

        with cupy_stream(stream_handle):
            if self._splitk is None or self._splitk.size < floats:
                self._splitk = cp.zeros(floats, dtype=cp.float32)
            elif flags > self._zero_flags:
                self._splitk[:flags].fill(0)
        self._zero_flags = flags  # after this launch: its flags zero, its partials behind them
        return self._splitk.data.ptr

    def _padded(self, name: str, src, rows: int, cols: int, copy_in: bool = True):
        """`src` (rows x cols) in a buffer whose rows are 16-byte multiples (copied in unless
        `copy_in` is off: a C that is only written). The view keeps the logical width - except
        for a single row: CUDA's array interface calls a one-row view contiguous and drops its
        stride, so the whole padded row is described, its tail zero. A buffer is reused by the next
        problem of its size, which may be narrower (K = 5 after K = 7 in one 8-wide row): a single
        row's tail is zeroed again then, or the old values would meet TMA's zeros from the other
        operand, and an inf or NaN among them would make the row NaN."""
        import cupy as cp

        width = padded_row(cols, src.itemsize)
        buf = self._ws.get(name)
        if buf is None or buf.shape != (rows, width) or buf.dtype != src.dtype:
            buf = self._ws[name] = cp.zeros((rows, width), dtype=src.dtype)
        elif rows == 1 and cols < width:
            buf[:, cols:] = 0
        view = buf[:, :cols]
        if copy_in:
            view[...] = src
        return buf if rows == 1 else view

    def prepare(self, problem: GemmProblem, A, B, C, pads: bool, kmajor_b: bool, stream_handle: int,
                name: str = "this kernel"):
        """(A view, B view, C view, copy_back) with 16-byte row strides; copy_back() (or None)
        moves a padded C back. Without `pads`, unaligned rows are refused (the harness checked).
        kmajor_b: the kernel reads B^T (NxK), which the problem gives so (layout nt); otherwise B
        as KxN. A transposed A or B reaches only the rungs tagged "layout_tn" / "layout_nt" (the
        runner's check refuses the others), all of which pad."""
        from ..cuda.device import cupy_stream

        M, N, K = problem.M, problem.N, problem.K
        if problem.b_transposed != kmajor_b:  # B_KMAJOR is set from the layout: unreachable
            raise BadArgumentError(f"{name} reads B as {'NxK' if kmajor_b else 'KxN'}; this problem gives it as "
                                   f"{'NxK (layout nt)' if problem.b_transposed else 'KxN'}")
        with cupy_stream(stream_handle):
            a = A
            if problem.a_transposed:  # A^T (KxM) as given, read M-major: in place where TMA can describe it
                a = A if tma_row(M, A.itemsize) else self._padded("At", A, K, M)
            elif not tma_row(K, A.itemsize):
                if not pads:
                    raise BadArgumentError(f"{name}: rows of A need {row_rule(problem, 'K', A.itemsize)}")
                a = self._padded("A", A, M, K)
            if kmajor_b:  # B^T as given: in place where TMA can describe it
                b = B if tma_row(K, B.itemsize) else self._padded("Bt", B, N, K)
            elif not tma_row(N, B.itemsize):
                if not pads:
                    raise BadArgumentError(f"{name}: rows of B need {row_rule(problem, 'N', B.itemsize)}")
                b = self._padded("B", B, K, N)
            else:
                b = B
            c, copy_back = C, None
            if not tma_row(N, C.itemsize):
                c = self._padded("C", C, M, N, copy_in=problem.beta != 0.0)

                def copy_back():
                    with cupy_stream(stream_handle):
                        C[...] = c[:, :N]
        return a, b, c, copy_back


def max_active_clusters(ck, geometry) -> int:
    """How many clusters of this kernel the GPU runs at once (cuOccupancyMaxActiveClusters):
    a persistent grid larger than this runs its last clusters in a second wave, which can
    double the time. Cached per kernel and size; the SM count over the cluster size if the
    driver cannot say."""
    key = (geometry.cluster, geometry.shmem, geometry.block)
    cache = ck.__dict__.setdefault("_cluster_slots", {})
    if key not in cache:
        from cuda.bindings import driver

        from ..cuda.launch import allow_dynamic_smem
        from ..kernels.hgemm.specs import cluster_slots, note_cluster_slots

        # Why the order below: API threads share compiled kernels. A thread that finds this
        # kernel's count cached goes on to size the workspace and then write the schedule, both
        # from cluster_slots; so the driver's count is noted BEFORE it is cached, and only the
        # final value is cached (never the estimate while the driver is asked). Otherwise the two
        # reads could straddle the note, and a workspace sized for whole tiles would meet a
        # schedule that slices them (a null workspace written by the kernel).
        count = cluster_slots(geometry.cluster[0])
        try:
            allow_dynamic_smem(ck, geometry.shmem)
            handle = ck.kernel().handle
            if isinstance(handle, driver.CUkernel):
                err, handle = driver.cuKernelGetFunction(handle)
            config = driver.CUlaunchConfig()
            config.gridDimX, config.gridDimY, config.gridDimZ = geometry.cluster[0] * 64, 1, 1
            config.blockDimX, config.blockDimY, config.blockDimZ = geometry.block
            config.sharedMemBytes = geometry.shmem
            attr = driver.CUlaunchAttribute()
            attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = geometry.cluster
            config.attrs = [attr]
            config.numAttrs = 1
            err, reported = driver.cuOccupancyMaxActiveClusters(handle, config)
            if err == driver.CUresult.CUDA_SUCCESS and reported > 0:
                count = int(reported)
                note_cluster_slots(geometry.cluster[0], count)  # the schedule plans on it
        except Exception:  # an older driver binding: keep the estimate
            pass
        cache[key] = count
    return cache[key]


def tma_geometry(runner, problem: GemmProblem):
    """The launch of a TMA rung; a persistent one gets no more clusters than run at once (one
    wave, no tail), balanced over its rounds (specs.persistent_clusters). Shared by the bench
    runner and the API's prepared launches."""
    from ..kernels.hgemm.specs import persistent_clusters

    geometry = runner.impl.launch(problem, runner.params)
    if "persistent" in runner.impl.tags:
        slots = max_active_clusters(runner.compiled, geometry)
        clusters = persistent_clusters(problem, runner.params, slots)
        geometry = replace(geometry, grid=(clusters * geometry.cluster[0], 1, 1))
    return geometry


def launch_tma(runner, problem: GemmProblem, A, B, C, stream) -> None:
    """Enqueue a TMA rung: maps for A, B (and C), then the kernel, then C's copy back if padded."""
    from ..cuda.launch import launch_kernel
    from ..kernels.hgemm.specs import b_kmajor, persistent_flag_floats, persistent_schedule, tma_boxes

    spec, params = runner.impl, runner.params
    if getattr(runner, "_tma_operands", None) is None:
        runner._tma_operands = TmaOperands()
    a, b, c, copy_back = runner._tma_operands.prepare(problem, A, B, C, "pads" in spec.tags, b_kmajor(spec, params),
                                                      int(stream.handle), spec.name)
    boxes = tma_boxes(spec, params)
    geometry = tma_geometry(runner, problem)
    scalars = (np.int32(problem.M), np.int32(problem.N), np.int32(problem.K), np.float32(problem.alpha),
               np.float32(problem.beta))
    maps = (tensor_map(a, boxes["A"]), tensor_map(b, boxes["B"]))
    if "C" in boxes:  # rungs 5-6: C by TMA store, and read directly (beta != 0) with its row stride
        ldc = c.strides[0] // c.itemsize
        # and the split-K workspace, the whole tiles and the slices (rungs 5-6 are the persistent ones)
        w = runner._tma_operands.splitk_workspace(spec.workspace_floats(problem, params),
                                                  persistent_flag_floats(problem, params), int(stream.handle))
        launch_kernel(runner.compiled, geometry, stream, *maps, tensor_map(c, boxes["C"]), *scalars, c.data.ptr,
                      np.int32(ldc), w, *(np.int32(x) for x in persistent_schedule(problem, params)))
    else:
        launch_kernel(runner.compiled, geometry, stream, *maps, *scalars, c.data.ptr)
    if copy_back is not None:
        copy_back()
