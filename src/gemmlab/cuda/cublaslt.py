"""cuBLASLt called directly (ctypes), for the API's library path: everything one cuBLAS GEMM shape
needs - the matmul descriptor, the three matrix layouts, the algorithm the heuristic picks and
that algorithm's workspace - is made once, so that a call is one cublasLtMatmul with ready
ctypes arguments. (Over 300 lines: the ctypes declarations, the descriptor set-up and the call
are one job and read best together.)

Why: cublasSgemm / cublasGemmEx choose their algorithm again on every call, most of the 10-25 us
of host time a cuBLAS plan cost per execute; cuBLASLt lets that choice be made once, at plan time.

Row-major C (MxN) = A (MxK) @ B (KxN) is column-major C^T = B^T @ A^T, as in cuda/cublas.py:
Lt's A is the caller's B, Lt's B the caller's A (column_major_layouts says how). An operand the
caller holds as a transposed view (torch's W.T: the transpose of a contiguous matrix) is read
in place, with Lt's transpose flag on it, never copied.

Handles: one cuBLASLt handle per thread, as cuda/cublas.py keeps its cuBLAS handles (a cuBLASLt
handle is not bound to a stream: the stream is cublasLtMatmul's last argument).

Workspace: each PreparedLtGemm holds one, at least the size its algorithm needs (zero for many),
allocated when it is built. Not one per thread: two streams of one thread may run cuBLASLt GEMMs
at once, and two GEMMs running at once must never share a workspace (api/executors.py marks an
executor with one as owns_workspace, so the API keeps it per stream). The API passes `allocate`,
which gives the executors of one stream one block from CuPy's pool on that stream
(api/shared_workspaces.py): dropped, it goes back there, reused only behind the work queued on
that stream. Without it the workspace is a cuMemAlloc of its own, and its cuMemFree, when the
GEMM is dropped, waits for the whole device (until session 37 the API's case too: a thread's
executor cache emptied, a plan dropped). Building allocates in relaxed capture mode, so that a
GEMM first met inside a CUDA graph capture can still be built; the call itself never allocates
or synchronizes.

Enum values are cuBLAS 13.1's headers (cublasLt.h, cublas_api.h) and the CUDA toolkit's
library_types.h and cuda.h; the same values stand in the CUDA 11 and 12 headers.
"""
from __future__ import annotations

import ctypes
import sys
import threading
import weakref
from typing import NamedTuple

from ..errors import LaunchError
from .cublas import load_library
from .launcher import DeviceMemory, relaxed_capture

WORKSPACE_BYTES = 32 << 20  # the most a GEMM's algorithm may use: what cuBLAS asks for on Hopper
# library_types.h: cudaDataType_t
CUDA_R_32F = 0
CUDA_R_16F = 2
CUDA_R_16BF = 14
# cublas_api.h: cublasComputeType_t
CUBLAS_COMPUTE_32F = 68  # fp32 multiply-add, no TF32
CUBLAS_COMPUTE_32F_FAST_TF32 = 77  # fp32 inputs rounded to TF32 for the tensor cores
# cublasLt.h: cublasLtPointerMode_t (= cublas_api.h's CUBLAS_POINTER_MODE_HOST)
CUBLASLT_POINTER_MODE_HOST = 0
# cublasLt.h: cublasLtMatmulDescAttributes_t (int32_t each)
CUBLASLT_MATMUL_DESC_POINTER_MODE = 2
CUBLASLT_MATMUL_DESC_TRANSA = 3
CUBLASLT_MATMUL_DESC_TRANSB = 4
CUBLAS_OP_T = 1  # cublas_api.h: cublasOperation_t
# cublasLt.h: cublasLtMatrixLayoutAttribute_t
CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5  # int32_t
CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6  # int64_t, in elements
# cublasLt.h: cublasLtMatmulPreferenceAttributes_t
CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1  # uint64_t
CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3  # uint32_t, default every scheme
CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2  # split-K partials summed in the compute type (fp32), in the workspace
CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5  # uint32_t each, default 256
CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6
CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7
CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8

# The API hands every executor 16-byte aligned operands (api/operands.py ALIGN). Lt's heuristic
# assumes 256-byte aligned ones unless told, and could pick an algorithm those would break.
ALIGNMENT = 16
CALL = "cublasLtMatmul"


class MatmulAlgo(ctypes.Structure):
    """cublasLtMatmulAlgo_t (cublasLt.h): uint64_t data[8], 64 bytes, opaque."""

    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t (cublasLt.h): the algorithm, the workspace it needs, its
    status (cublasStatus_t, an int), wavesCount and int reserved[4]: 96 bytes."""

    _fields_ = [("algo", MatmulAlgo), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


class Layout(NamedTuple):
    """One column-major matrix as cublasLtMatrixLayoutCreate takes it; batch_stride in elements."""

    rows: int
    cols: int
    ld: int
    batch_stride: int


def column_major_layouts(M: int, N: int, K: int, trans_a: bool = False,
                         trans_b: bool = False) -> tuple[Layout, Layout, Layout]:
    """Lt's (A, B, C) for row-major C (MxN) = A (MxK) @ B (KxN), computed as column-major
    C^T (NxM) = B^T (NxK) @ A^T (KxM): Lt's A is the caller's B, Lt's B the caller's A, and the row
    lengths are the leading dimensions. cublas.PreparedGemm's arguments say the same:
    (m, n, k) = (N, M, K), ldb = N, lda = K, ldc = N, batch strides K*N, M*K, M*N.

    trans_b: the caller's B is the transpose of a contiguous N x K matrix W. W's memory read
    column-major with ld K is B itself (K x N), so Lt's A is that, with TRANSA set. trans_a
    likewise: A is the transpose of a contiguous K x M matrix, read as M x K with ld M, TRANSB set."""
    lt_a = Layout(K, N, K, K * N) if trans_b else Layout(N, K, N, K * N)
    lt_b = Layout(M, K, M, M * K) if trans_a else Layout(K, M, K, M * K)
    return lt_a, lt_b, Layout(N, M, N, M * N)


C_TYPES = {"fp32": CUDA_R_32F, "fp16": CUDA_R_16F, "bf16": CUDA_R_16BF}


def c_type(kind: str, dtype: str, out_dtype: str) -> int:
    """cudaDataType of C and D: fp32, or the 16-bit input type itself (GemmEx kind only; the
    compute type and the fp32 alpha and beta stay, so the result is rounded once, in the epilogue)."""
    if out_dtype == "fp32":
        return CUDA_R_32F
    if kind != "ex" or out_dtype != dtype:
        raise ValueError(f"a {out_dtype} C needs {out_dtype} A and B (GemmEx kind), not {kind} {dtype}")
    return C_TYPES[out_dtype]


def lt_types(kind: str, dtype: str) -> tuple[int, int]:
    """(cudaDataType of A and B, cublasComputeType_t) for a cuda/cublas.py GEMM kind; alpha and
    beta are fp32 for all of them, C and D fp32 unless c_type says otherwise."""
    if kind in ("sgemm", "batched"):
        if dtype != "fp32":
            raise ValueError(f"cuBLAS {kind} GEMM takes fp32, not {dtype!r}")
        return CUDA_R_32F, CUBLAS_COMPUTE_32F
    if kind == "ex":
        types = {"fp16": (CUDA_R_16F, CUBLAS_COMPUTE_32F), "bf16": (CUDA_R_16BF, CUBLAS_COMPUTE_32F),
                 "tf32": (CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32), "fp32": (CUDA_R_32F, CUBLAS_COMPUTE_32F)}
        if dtype not in types:
            raise ValueError(f"cuBLAS GemmEx takes fp16, bf16, tf32 or fp32, not {dtype!r}")
        return types[dtype]
    raise ValueError(f"unknown cuBLAS GEMM kind {kind!r}")


class NoAlgorithmError(LaunchError):
    """cuBLASLt's heuristic offers no algorithm for this GEMM (the caller falls back to cuBLAS)."""


# -- the library and this thread's handle -----------------------------------------------------

_lock = threading.Lock()
_lib = None
_raw = None
_thread = threading.local()
SONAMES = ("libcublasLt.so.13", "libcublasLt.so.12")


def library():
    """libcublasLt with the set-up entry points typed (loaded once, under a lock)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                lib = load_library("cublasLt", SONAMES, "cuBLASLt")
                _declare(lib)
                _lib = lib
    return _lib


def _declare(lib) -> None:
    p, i, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    out = ctypes.POINTER(ctypes.c_void_p)
    lib.cublasLtCreate.argtypes = [out]
    lib.cublasLtMatmulDescCreate.argtypes = [out, i, i]
    lib.cublasLtMatmulDescSetAttribute.argtypes = [p, i, p, size]
    lib.cublasLtMatmulDescDestroy.argtypes = [p]
    lib.cublasLtMatrixLayoutCreate.argtypes = [out, i, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64]
    lib.cublasLtMatrixLayoutSetAttribute.argtypes = [p, i, p, size]
    lib.cublasLtMatrixLayoutDestroy.argtypes = [p]
    lib.cublasLtMatmulPreferenceCreate.argtypes = [out]
    lib.cublasLtMatmulPreferenceSetAttribute.argtypes = [p, i, p, size]
    lib.cublasLtMatmulPreferenceDestroy.argtypes = [p]
    lib.cublasLtMatmulAlgoGetHeuristic.argtypes = [p, p, p, p, p, p, p, i, ctypes.POINTER(HeuristicResult),
                                                   ctypes.POINTER(ctypes.c_int)]
    lib.cublasLtGetStatusName.argtypes = [i]
    lib.cublasLtGetStatusName.restype = ctypes.c_char_p


def raw_library():
    """A second handle on libcublasLt with no argtypes: the call passes ready ctypes objects,
    which then cross with no per-argument conversion (as cublas.PreparedGemm and the launcher)."""
    global _raw
    if _raw is None:
        lib = library()
        with _lock:
            if _raw is None:
                _raw = ctypes.CDLL(lib._name)
    return _raw


def status_name(status: int) -> str:
    try:
        name = library().cublasLtGetStatusName(status)
    except Exception:  # an error path must not fail in turn
        name = None
    return name.decode() if name else f"cuBLAS status {status}"


def check(status: int, what: str) -> None:
    if status:
        raise LaunchError(f"{what} failed ({status_name(status)})")


def handle() -> ctypes.c_void_p:
    """This thread's cuBLASLt handle, made on first use."""
    h = getattr(_thread, "handle", None)
    if h is None:
        h = ctypes.c_void_p()
        with relaxed_capture():
            check(library().cublasLtCreate(ctypes.byref(h)), "cublasLtCreate")
        _thread.handle = h
    return h


# -- one prepared GEMM ------------------------------------------------------------------------

def _set(setter, obj, attr: int, value) -> None:
    check(setter(obj, attr, ctypes.byref(value), ctypes.sizeof(value)), setter.__name__)


def _create(lib, name: str, owned: list, *args) -> ctypes.c_void_p:
    """cublasLt<name>Create(&out, *args); the object joins `owned`, which the finalizer destroys."""
    out = ctypes.c_void_p()
    check(getattr(lib, f"cublasLt{name}Create")(ctypes.byref(out), *args), f"cublasLt{name}Create")
    owned.append((f"cublasLt{name}Destroy", out.value))
    return out


def _layout(lib, owned: list, dtype: int, layout: Layout, batch: int) -> ctypes.c_void_p:
    out = _create(lib, "MatrixLayout", owned, dtype, layout.rows, layout.cols, layout.ld)
    if batch > 1:
        _set(lib.cublasLtMatrixLayoutSetAttribute, out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, ctypes.c_int32(batch))
        _set(lib.cublasLtMatrixLayoutSetAttribute, out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
             ctypes.c_int64(layout.batch_stride))
    return out


def _preference(lib, owned: list, narrow_c: bool) -> ctypes.c_void_p:
    """The heuristic's limits: workspace, alignment, and for a 16-bit C (`narrow_c`) split-K
    partials summed in fp32 only. Lt's default also lets them be summed in C's type (in place
    or not), which rounds every partial to 16 bits: the classic handle refuses that too
    (cublas.MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), and the checks' bound (accumulated in
    fp32, rounded once) assumes it."""
    pref = _create(lib, "MatmulPreference", owned)
    setter = lib.cublasLtMatmulPreferenceSetAttribute
    _set(setter, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(WORKSPACE_BYTES))
    if narrow_c:
        _set(setter, pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             ctypes.c_uint32(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE))
    for attr in (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                 CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES):
        _set(setter, pref, attr, ctypes.c_uint32(ALIGNMENT))
    return pref


def _heuristic(lib, h, desc, layouts, pref, what: str) -> HeuristicResult:
    """The heuristic's first choice (cuBLASLt ranks its answers, best first)."""
    la, lb, lc = layouts
    result = HeuristicResult()
    count = ctypes.c_int(0)
    status = lib.cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 1, ctypes.byref(result),
                                                ctypes.byref(count))
    if status or count.value < 1 or result.state:
        why = status_name(status or result.state) if (status or result.state) else "no algorithm returned"
        raise NoAlgorithmError(f"cuBLASLt has no algorithm for {what} ({why})")
    return result


def _allocate(nbytes: int, owned: list, allocate=None) -> int:
    """`nbytes` of device memory, released by the finalizer: `allocate(nbytes)`'s (pointer, owner),
    the owner kept until then, or a cuMemAlloc of its own (as cublas.Handle's workspace)."""
    if not nbytes:
        return 0
    if allocate is not None:
        try:
            ptr, owner = allocate(nbytes)
        except MemoryError as exc:  # CuPy's OutOfMemoryError: the caller falls back, as to a failed cuMemAlloc
            raise LaunchError(f"could not allocate cuBLASLt's workspace of {nbytes} bytes ({exc})") from None
        owned.append(("owner", owner))  # dropped by the finalizer, no call made
        return ptr
    memory = DeviceMemory(nbytes, "cuBLASLt's workspace")
    owned.append(("owner", memory))
    return memory.ptr


def _release(lib, owned: list) -> None:
    """The finalizer: destroy what a PreparedLtGemm made, newest first. Not at interpreter exit
    (the libraries may be gone by then; the process's end frees everything anyway)."""
    if sys.is_finalizing():
        return
    while owned:
        entry = owned.pop()
        try:
            if entry[0] != "owner":  # an owner's memory goes back with it, popped here
                getattr(lib, entry[0])(entry[1])
        except Exception:  # a finalizer must not raise; a leak is the lesser harm
            pass


class PreparedLtGemm:
    """One cuBLASLt GEMM of fixed shape, with the descriptors, the heuristic's algorithm and its
    workspace made once and every argument a ready ctypes object: a call sets the three pointers,
    the two scalars and the stream, and crosses into cublasLtMatmul.

    kind as cublas.PreparedGemm's: "sgemm" (fp32, no TF32), "ex" (fp16/bf16 A and B with fp32
    accumulation and an fp32 C, or with out_dtype the input type a C of that type; fp32 as tf32
    with dtype "tf32") or "batched" (strided fp32 batches, each matrix packed). Raises NoAlgorithmError when cuBLASLt has no algorithm, LaunchError when the
    library or the GPU refuses; the caller then keeps cublas.PreparedGemm. The handle is the
    calling thread's, looked up on each call; alpha and beta are read from host memory during
    the call (CUBLASLT_POINTER_MODE_HOST), so a graph capture records the values of that call.
    `allocate`: where the workspace comes from (the module's docstring, "Workspace").
    """

    call_name = CALL

    def __init__(self, kind: str, M: int, N: int, K: int, dtype: str = "fp32", batch: int = 1,
                 trans_a: bool = False, trans_b: bool = False, out_dtype: str = "fp32", allocate=None):
        ab_type, compute = lt_types(kind, dtype)
        cd_type = c_type(kind, dtype, out_dtype)
        batch = batch if kind == "batched" else 1
        self.kind = kind
        lib = library()
        owned: list = []
        self._owned, self._capture_workspace = owned, None  # captured_call's workspace, made at its first use
        self._finalizer = weakref.finalize(self, _release, lib, owned)
        self._finalizer.atexit = False
        what = (f"{kind} {M}x{N}x{K} {dtype}" + (f" x{batch}" if batch > 1 else "")
                + (" A transposed" if trans_a else "") + (" B transposed" if trans_b else "")
                + (f" C {out_dtype}" if out_dtype != "fp32" else ""))
        with relaxed_capture():
            h = handle()
            desc = _create(lib, "MatmulDesc", owned, compute, CUDA_R_32F)
            _set(lib.cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_POINTER_MODE,
                 ctypes.c_int32(CUBLASLT_POINTER_MODE_HOST))
            for flag, attr in ((trans_b, CUBLASLT_MATMUL_DESC_TRANSA), (trans_a, CUBLASLT_MATMUL_DESC_TRANSB)):
                if flag:  # Lt's A is the caller's B (see column_major_layouts)
                    _set(lib.cublasLtMatmulDescSetAttribute, desc, attr, ctypes.c_int32(CUBLAS_OP_T))
            types = (ab_type, ab_type, cd_type)
            layouts = [_layout(lib, owned, t, lay, batch)
                       for t, lay in zip(types, column_major_layouts(M, N, K, trans_a, trans_b))]
            result = _heuristic(lib, h, desc, layouts, _preference(lib, owned, out_dtype != "fp32"), what)
            self.workspace_bytes = int(result.workspaceSize)
            self.workspace_ptr = workspace = _allocate(self.workspace_bytes, owned, allocate)
        self._algo = MatmulAlgo.from_buffer_copy(result.algo)
        self._prepare(desc, layouts, workspace)

    def _prepare(self, desc, layouts, workspace: int) -> None:
        p = ctypes.c_void_p
        self._fn = raw_library().cublasLtMatmul
        self._handle, self._stream = p(0), p(0)
        self._alpha, self._beta = ctypes.c_float(), ctypes.c_float()
        self.a, self.b, self.c = p(0), p(0), p(0)
        self._workspace = p(workspace or None)  # settable: captured_call swaps its own in
        la, lb, lc = (p(x.value) for x in layouts)
        # D = C in place (same layout), Lt's A = the caller's B, Lt's B = the caller's A
        self._args = (self._handle, p(desc.value), p(ctypes.addressof(self._alpha)), self.b, la, self.a, lb,
                      p(ctypes.addressof(self._beta)), self.c, lc, self.c, lc, p(ctypes.addressof(self._algo)),
                      self._workspace, ctypes.c_size_t(self.workspace_bytes), self._stream)
        self._owner = None

    def __call__(self, alpha: float, a: int, b: int, beta: float, c: int, stream: int) -> None:
        h = getattr(_thread, "handle", None)
        if h is None:
            h = handle()
        if h is not self._owner:  # first call, or a call from another thread: that thread's handle
            self._handle.value = h.value
            self._owner = h
        if (a | b | c) & (ALIGNMENT - 1):
            raise LaunchError(f"cublasLtMatmul was prepared for {ALIGNMENT}-byte aligned operands")
        self._alpha.value, self._beta.value = alpha, beta
        self.a.value, self.b.value, self.c.value, self._stream.value = a, b, c, stream
        status = self._fn(*self._args)
        if status:
            raise LaunchError(f"cublasLtMatmul ({self.kind} GEMM) failed ({status_name(status)})")

    def captured_call(self, alpha: float, a: int, b: int, beta: float, c: int, stream: int) -> None:
        """The call as a user's capture records it (cuda/graph_replay.py calls this on a stream being
        captured): on a workspace of this GEMM's own, made at its first capture (cuMemAlloc, relaxed
        mode) and kept while the GEMM lives, which launch_graph's pin makes for good. The workspace
        `allocate` gave may be shared with the other GEMMs of its stream (api/shared_workspaces.py);
        a graph holding that one would race with them wherever it is replayed on another stream."""
        if not self.workspace_bytes:
            return self(alpha, a, b, beta, c, stream)
        if self._capture_workspace is None:  # its own cuMemAlloc (relaxed mode: a capture is under way)
            self._capture_workspace = _allocate(self.workspace_bytes, self._owned)
        given = self._workspace.value
        self._workspace.value = self._capture_workspace
        try:
            self(alpha, a, b, beta, c, stream)
        finally:
            self._workspace.value = given
