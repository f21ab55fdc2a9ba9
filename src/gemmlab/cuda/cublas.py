"""cuBLAS called directly (ctypes), for the API's library path: one handle per thread, host
pointer mode, default math (no TF32 unless the call asks for it) with reduced-precision reductions
disallowed: a GemmEx with a 16-bit C may otherwise sum split-K partials in 16 bits,
which breaks the fp32-accumulation contract the hgemm kernels are verified against (an fp32 C is
unaffected: its reductions are fp32 either way).

Why not CuPy's cublas wrappers here: they rebind the handle to CuPy's current stream on every
call, so a torch caller would have to enter a CuPy stream context around each one (microseconds
per call), and CuPy's shared handle carries whatever math mode CuPy's user chose. A private
handle per thread (cuBLAS handles must not be used by two threads at once) avoids both. The
library is the one CuPy and PyTorch load, located by cuda.pathfinder.

The handle keeps cuBLAS's default workspace pool. A workspace of our own would not stay: every
cublasSetStream resets the handle to that pool (the cuBLAS documentation says so, and PyTorch sets
its workspace again after each one), and one buffer per thread set again after it would be shared
by the GEMMs a thread queues on different streams, which may run at once. PyTorch keys its buffers
by handle and stream for that reason, and since CUDA 12.2 no longer sets them at all: the pool
allocates stream-ordered (cudaMallocAsync), so captured calls need no buffer of ours.

Row-major C (MxN) = A (MxK) @ B (KxN) is column-major C^T = B^T @ A^T: every call passes B
first, with N, M, K and the row lengths as leading dimensions. A B given as its transpose (an
NxK row-major array, trans_b) is, read column-major, B itself (KxN, leading dimension K): the
first operand then takes CUBLAS_OP_T.
"""
from __future__ import annotations

import ctypes
import threading

from ..errors import LaunchError

_lock = threading.Lock()
_lib = None
_thread = threading.local()

OP_N = 0
OP_T = 1
COMPUTE_32F = 68
COMPUTE_32F_FAST_TF32 = 77
GEMM_DEFAULT = -1
MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16  # cublasMath_t flag, OR-ed onto CUBLAS_DEFAULT_MATH (0)
DATA_TYPES = {"fp32": 0, "tf32": 0, "fp16": 2, "bf16": 14}  # cudaDataType of A and B (and of a 16-bit C)


def load_library(name: str, sonames: tuple[str, ...], what: str) -> ctypes.CDLL:
    """NVIDIA library `name` ("cublas", "cublasLt") as CuPy and PyTorch load it (cuda.pathfinder:
    the wheel's copy first), else the first of `sonames` the system loader finds; when none
    loads, one LaunchError naming `what`."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        found = load_nvidia_dynamic_lib(name).abs_path
        candidates = (found,) if found else sonames  # no path: found by the system loader's search
    except Exception:  # an older pathfinder, or a system CUDA install
        candidates = sonames
    errors = []
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError as exc:
            errors.append(str(exc))
    raise LaunchError(f"{what} is not loadable ({'; '.join(errors)})")


def library():
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                lib = load_library("cublas", ("libcublas.so.13", "libcublas.so.12"), "cuBLAS")
                p, i = ctypes.c_void_p, ctypes.c_int
                lib.cublasCreate_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
                lib.cublasSetStream_v2.argtypes = [p, p]
                lib.cublasSetMathMode.argtypes = [p, i]
                _lib = lib
    return _lib


class Handle:
    """This thread's cuBLAS handle (its workspace cuBLAS's default pool: the module's docstring);
    alpha and beta live in its host slots."""

    def __init__(self):
        lib = library()
        self.handle = ctypes.c_void_p()
        check(lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        check(lib.cublasSetMathMode(self.handle, MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), "cublasSetMathMode")
        self.alpha = ctypes.c_float()
        self.beta = ctypes.c_float()
        self.alpha_ptr = ctypes.addressof(self.alpha)
        self.beta_ptr = ctypes.addressof(self.beta)
        self.stream = None
        self.lib = lib

    def bind(self, stream: int, alpha: float, beta: float) -> None:
        if stream != self.stream:
            check(self.lib.cublasSetStream_v2(self.handle, stream), "cublasSetStream")
            self.stream = stream
        self.alpha.value = alpha
        self.beta.value = beta


def handle() -> Handle:
    """This thread's handle, made on first use (a handle is never shared between threads)."""
    h = getattr(_thread, "handle", None)
    if h is None:
        h = _thread.handle = Handle()
    return h


def check(status: int, what: str) -> None:
    if status:
        raise LaunchError(f"{what} failed (cuBLAS status {status})")


class PreparedGemm:
    """One cuBLAS GEMM of fixed shape with its arguments as ready ctypes objects: a call sets the
    three pointers and the scalars, and crosses into cuBLAS with no per-argument conversion.

    kind: "sgemm" (cublasSgemm), "ex" (cublasGemmEx: fp16/bf16, or fp32 as tf32) or "batched"
    (cublasSgemmStridedBatched). The handle is the calling thread's, looked up on each call.
    """

    def __init__(self, kind: str, M: int, N: int, K: int, dtype: str = "fp32", batch: int = 1,
                 trans_b: bool = False, out_dtype: str = "fp32", trans_a: bool = False):
        library()
        global _raw
        if _raw is None:
            with _lock:
                if _raw is None:
                    _raw = ctypes.CDLL(_lib._name)
        i, ll = ctypes.c_int, ctypes.c_longlong
        self.a, self.b, self.c = ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_void_p(0)
        self._handle = ctypes.c_void_p(0)
        self._alpha_ptr, self._beta_ptr = ctypes.c_void_p(0), ctypes.c_void_p(0)
        n_n = (i(OP_N), i(OP_N), i(N), i(M), i(K))
        if (trans_a or trans_b or out_dtype != "fp32") and kind != "ex":
            raise ValueError(f"trans_a, trans_b and a 16-bit C are taken by the GemmEx kind only, not {kind!r}")
        if kind == "sgemm":
            self._fn = _raw.cublasSgemm_v2
            tail = (self._alpha_ptr, self.b, i(N), self.a, i(K), self._beta_ptr, self.c, i(N))
        elif kind == "ex":
            t = i(DATA_TYPES[dtype])
            compute = COMPUTE_32F_FAST_TF32 if dtype == "tf32" else COMPUTE_32F
            self._fn = _raw.cublasGemmEx
            # cuBLAS's first operand is the caller's B, its second the caller's A (C^T = B^T A^T).
            # B's NxK array read column-major is KxN with leading dimension K; A's KxM array
            # read column-major is MxK with leading dimension M: both then with the T flag.
            n_n = (i(OP_T if trans_b else OP_N), i(OP_T if trans_a else OP_N), i(N), i(M), i(K))
            # C's type: fp32, or 16-bit (compute and the fp32 alpha/beta unchanged; one rounding)
            tail = (self._alpha_ptr, self.b, t, i(K if trans_b else N), self.a, t, i(M if trans_a else K), self._beta_ptr, self.c,
                    i(DATA_TYPES[out_dtype]), i(N), i(compute), i(GEMM_DEFAULT))
        elif kind == "batched":
            self._fn = _raw.cublasSgemmStridedBatched
            tail = (self._alpha_ptr, self.b, i(N), ll(K * N), self.a, i(K), ll(M * K), self._beta_ptr, self.c, i(N),
                    ll(M * N), i(batch))
        else:
            raise ValueError(f"unknown cuBLAS GEMM kind {kind!r}")
        self._args = (self._handle, *n_n, *tail)
        self.kind = kind
        self._owner = None

    def __call__(self, alpha: float, a: int, b: int, beta: float, c: int, stream: int) -> None:
        h = handle()
        if h is not self._owner:  # first call, or a call from another thread: its handle and slots
            self._handle.value = h.handle.value
            self._alpha_ptr.value, self._beta_ptr.value = h.alpha_ptr, h.beta_ptr
            self._owner = h
        h.bind(stream, alpha, beta)
        self.a.value, self.b.value, self.c.value = a, b, c
        status = self._fn(*self._args)
        if status:
            raise LaunchError(f"cuBLAS {self.kind} GEMM failed (status {status})")


_raw = None


def sgemm(M: int, N: int, K: int, alpha: float, a: int, b: int, beta: float, c: int, stream: int) -> None:
    """Row-major fp32 C = alpha*A@B + beta*C on `stream` (C is not read when beta == 0)."""
    PreparedGemm("sgemm", M, N, K)(alpha, a, b, beta, c, stream)


def gemm_ex(dtype: str, M: int, N: int, K: int, alpha: float, a: int, b: int, beta: float, c: int,
            stream: int, trans_b: bool = False, out_dtype: str = "fp32", trans_a: bool = False) -> None:
    """Row-major C = alpha*A@B + beta*C with A and B fp16, bf16 (fp32 accumulation), or fp32
    read as tf32 (dtype "tf32"); trans_b: `b` holds B's NxK transpose (x @ W.T); trans_a: `a`
    holds A's KxM transpose; C fp32, or (out_dtype) fp16/bf16."""
    PreparedGemm("ex", M, N, K, dtype, trans_b=trans_b, out_dtype=out_dtype, trans_a=trans_a)(alpha, a, b, beta, c,
                                                                                              stream)


def sgemm_strided_batched(batch: int, M: int, N: int, K: int, alpha: float, a: int, b: int, beta: float, c: int,
                          stream: int) -> None:
    """C[i] = alpha*A[i]@B[i] + beta*C[i] over contiguous row-major batches."""
    PreparedGemm("batched", M, N, K, batch=batch)(alpha, a, b, beta, c, stream)
