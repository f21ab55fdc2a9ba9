"""cuBLASLt's plan path without a GPU: the layouts and types it asks for, and the fallback to the
classic cuBLAS entry points when cuBLASLt cannot prepare a GEMM (GPU behaviour:
tests/gpu/test_cublaslt.py)."""
from __future__ import annotations

import ctypes

import pytest

from gemmlab.api import dispatch, executors, shared_workspaces
from gemmlab.cuda import cublas, cublaslt, launcher
from gemmlab.errors import LaunchError
from gemmlab.problem import GemmProblem


def test_layouts_are_the_classic_calls_arguments():
    # cublasSgemm(N, M, K, B, ldb=N, A, lda=K, C, ldc=N): Lt's A is B (N x K), its B is A (K x M)
    a, b, c = cublaslt.column_major_layouts(M=5, N=7, K=3)
    assert (a.rows, a.cols, a.ld, a.batch_stride) == (7, 3, 7, 21)
    assert (b.rows, b.cols, b.ld, b.batch_stride) == (3, 5, 3, 15)
    assert (c.rows, c.cols, c.ld, c.batch_stride) == (7, 5, 7, 35)


@pytest.mark.parametrize("kind,dtype,expected", [
    ("sgemm", "fp32", (cublaslt.CUDA_R_32F, cublaslt.CUBLAS_COMPUTE_32F)),
    ("batched", "fp32", (cublaslt.CUDA_R_32F, cublaslt.CUBLAS_COMPUTE_32F)),
    ("ex", "fp16", (cublaslt.CUDA_R_16F, cublaslt.CUBLAS_COMPUTE_32F)),
    ("ex", "bf16", (cublaslt.CUDA_R_16BF, cublaslt.CUBLAS_COMPUTE_32F)),
    ("ex", "tf32", (cublaslt.CUDA_R_32F, cublaslt.CUBLAS_COMPUTE_32F_FAST_TF32)),
])
def test_types_match_the_classic_calls(kind, dtype, expected):
    assert cublaslt.lt_types(kind, dtype) == expected
    if kind == "ex":  # the same data type as cublasGemmEx is given
        assert expected[0] == cublas.DATA_TYPES[dtype]


@pytest.mark.parametrize("kind,dtype", [("sgemm", "fp16"), ("ex", "fp8"), ("strided", "fp32")])
def test_unsupported_types_are_refused(kind, dtype):
    with pytest.raises(ValueError):
        cublaslt.lt_types(kind, dtype)


def test_struct_sizes_are_the_headers():
    assert ctypes.sizeof(cublaslt.MatmulAlgo) == 64
    assert ctypes.sizeof(cublaslt.HeuristicResult) == 96


class _Classic:
    def __init__(self, *shape, out_dtype="fp32", trans_a=False, trans_b=False):
        self.shape, self.out, self.trans = shape, out_dtype, (trans_a, trans_b)


def _fake_lt(fail: Exception | None):
    class FakeLt:
        workspace_bytes = 1 << 20

        def __init__(self, *shape, trans_a=False, trans_b=False, out_dtype="fp32", allocate=None):
            if fail:
                raise fail
            self.shape, self.trans, self.out, self.allocate = shape, (trans_a, trans_b), out_dtype, allocate

    return FakeLt


@pytest.mark.parametrize("op,kind,call", [("sgemm", "sgemm", "cublasSgemm_v2"), ("hgemm", "ex", "cublasGemmEx"),
                                          ("bgemm", "batched", "cublasSgemmStridedBatched")])
def test_classic_cublas_when_lt_has_no_algorithm(monkeypatch, op, kind, call):
    monkeypatch.setattr(cublaslt, "PreparedLtGemm", _fake_lt(cublaslt.NoAlgorithmError("no algorithm for it")))
    monkeypatch.setattr(cublas, "PreparedGemm", _Classic)
    monkeypatch.setattr(cublas, "handle", lambda: None)
    ex = executors.CublasGemm(GemmProblem(64, 48, 32, dtype="fp32" if op != "hgemm" else "bf16"), op)
    assert isinstance(ex.call.call, _Classic) and ex.call.shape[0] == kind  # inside its graph replay
    assert ex.library_call == call and "no algorithm" in ex.lt_refusal
    assert not ex.owns_workspace


def test_classic_gemm_ex_takes_the_transposes_when_lt_has_no_algorithm(monkeypatch):
    monkeypatch.setattr(cublaslt, "PreparedLtGemm", _fake_lt(cublaslt.NoAlgorithmError("no algorithm for it")))
    monkeypatch.setattr(cublas, "PreparedGemm", _Classic)
    monkeypatch.setattr(cublas, "handle", lambda: None)
    ex = executors.CublasGemm(GemmProblem(64, 48, 32, dtype="bf16", layout="tt", out_dtype="bf16"), "hgemm",
                              (True, True))
    assert ex.call.trans == (True, True) and ex.call.out == "bf16" and ex.library_call == "cublasGemmEx"


def test_a_transposed_operand_is_never_left_to_the_classic_path(monkeypatch):
    from gemmlab.api.executors import LayoutNotSupported

    monkeypatch.setattr(cublaslt, "PreparedLtGemm", _fake_lt(cublaslt.NoAlgorithmError("no algorithm for it")))
    with pytest.raises(LayoutNotSupported):  # the API then copies the operand to row-major
        executors.CublasGemm(GemmProblem(64, 48, 32), "sgemm", (False, True))
    monkeypatch.setattr(cublaslt, "PreparedLtGemm", _fake_lt(None))
    ex = executors.CublasGemm(GemmProblem(64, 48, 32), "sgemm", (True, False))
    assert ex.call.trans == (True, False) and ex.layout == (True, False)


@pytest.mark.parametrize("out,expected", [("fp32", cublaslt.CUDA_R_32F), ("bf16", cublaslt.CUDA_R_16BF)])
def test_c_type_is_fp32_or_the_inputs_16bit_type(out, expected):
    assert cublaslt.c_type("ex", "bf16", "fp32" if out == "fp32" else "bf16") == expected
    assert cublaslt.c_type("ex", "fp16", "fp16") == cublaslt.CUDA_R_16F


@pytest.mark.parametrize("kind,dtype,out", [("ex", "bf16", "fp16"), ("ex", "tf32", "bf16"), ("sgemm", "fp32", "fp16"),
                                            ("batched", "fp32", "bf16")])
def test_a_16bit_c_of_another_type_is_refused(kind, dtype, out):
    with pytest.raises(ValueError):
        cublaslt.c_type(kind, dtype, out)


@pytest.mark.parametrize("lt_fails", [False, True])
def test_the_executor_hands_cublas_the_c_type(monkeypatch, lt_fails):
    monkeypatch.setattr(cublaslt, "PreparedLtGemm", _fake_lt(cublaslt.NoAlgorithmError("none") if lt_fails else None))
    monkeypatch.setattr(cublas, "PreparedGemm", _Classic)
    monkeypatch.setattr(cublas, "handle", lambda: None)
    ex = executors.CublasGemm(GemmProblem(64, 48, 32, dtype="bf16", out_dtype="bf16"), "hgemm")
    assert ex.call.out == "bf16"


def test_lt_when_it_prepares(monkeypatch):
    monkeypatch.setattr(cublaslt, "PreparedLtGemm", _fake_lt(None))
    ex = executors.CublasGemm(GemmProblem(64, 48, 32), "sgemm")
    assert ex.library_call == "cublasLtMatmul" and ex.lt_refusal is None
    assert ex.owns_workspace, "an Lt algorithm with a workspace is kept per stream"
    assert ex.call.call.allocate is shared_workspaces.library_workspace, "its stream's shared workspace"
    text = dispatch.describe(dispatch.Choice("cublas", {}, "named by the caller"), "gemmlab.sgemm", "64x48x32",
                             "GPU", "sm_90", "none", ex.library_call)
    assert "cuBLAS called directly, one cublasLtMatmul per call" in text


def _col_major(mem, layout):
    """The column-major matrix cuBLASLt reads from flat `mem` under `layout`."""
    import numpy as np

    idx = np.arange(layout.rows)[:, None] + layout.ld * np.arange(layout.cols)[None, :]
    return mem[idx]


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_layouts_compute_the_row_major_product_for_every_transpose(trans_a, trans_b):
    """Emulates cuBLASLt on the layouts: op(Lt A) @ op(Lt B) must be C^T, C = A @ B row-major,
    with A and B held the way the caller holds them (a transposed view: the transpose of a
    contiguous matrix, whose memory is that matrix's)."""
    import numpy as np

    rng = np.random.default_rng(0)
    M, N, K = 5, 7, 3
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    mem_a = (A.T.copy() if trans_a else A).ravel()  # x.T of a contiguous K x M x: memory is x
    mem_b = (B.T.copy() if trans_b else B).ravel()  # W.T of a contiguous N x K W: memory is W
    lt_a, lt_b, lt_c = cublaslt.column_major_layouts(M, N, K, trans_a, trans_b)
    op_a = _col_major(mem_b, lt_a)  # Lt's A is the caller's B
    op_b = _col_major(mem_a, lt_b)
    op_a = op_a.T if trans_b else op_a
    op_b = op_b.T if trans_a else op_b
    c_t = op_a @ op_b
    assert c_t.shape == (lt_c.rows, lt_c.cols)
    np.testing.assert_allclose(c_t, (A @ B).T, rtol=1e-12)


class PreferenceLib:
    """cublasLtMatmulPreference{Create,SetAttribute}, recording what each attribute was set to."""

    def __init__(self):
        self.attrs = {}

    def cublasLtMatmulPreferenceCreate(self, ref):
        ref._obj.value = 1
        return 0

    def cublasLtMatmulPreferenceSetAttribute(self, pref, attr, value, size):
        self.attrs[attr] = ctypes.cast(value, ctypes.POINTER(ctypes.c_uint32 if size == 4 else ctypes.c_uint64))[0]
        return 0


@pytest.mark.parametrize("narrow_c", [False, True])
def test_a_16bit_c_sums_split_k_partials_in_fp32_only(narrow_c):
    """cuBLASLt's default lets split-K partials be summed in C's type: with a 16-bit C each partial
    would be rounded to 16 bits before the sum (the classic handle refuses that with
    MATH_DISALLOW_REDUCED_PRECISION_REDUCTION). A 16-bit C's preference allows the compute type's
    reduction only; an fp32 C's keeps the default (every scheme sums in fp32 there)."""
    lib = PreferenceLib()
    cublaslt._preference(lib, [], narrow_c)
    mask = lib.attrs.get(cublaslt.CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK)
    assert mask == (cublaslt.CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE if narrow_c else None)
    assert lib.attrs[cublaslt.CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES] == cublaslt.WORKSPACE_BYTES


class _NoCalls:
    """A library stand-in that fails the test if the finalizer calls anything in it."""

    def __getattr__(self, name):
        raise AssertionError(f"the finalizer called {name}")


def test_a_workspace_from_allocate_is_held_then_handed_back_by_dropping_its_owner_no_free_called(monkeypatch):
    import gc
    import weakref

    class Block:  # stands in for a CuPy array from the call stream's pool
        ptr = 0x7000

    monkeypatch.setattr(launcher, "device_free", lambda *a: pytest.fail("cuMemFree called: it waits for the whole device"))
    owned, made = [], [Block()]
    alive = weakref.ref(made[0])
    got = cublaslt._allocate(4096, owned, lambda n: (made[0].ptr, made.pop()))  # handed over, none kept here
    assert got == 0x7000 and alive() is not None, "held while the prepared GEMM lives"
    cublaslt._release(_NoCalls(), owned)
    gc.collect()
    assert alive() is None and owned == []


def test_no_workspace_allocates_nothing():
    owned = []
    assert cublaslt._allocate(0, owned, lambda n: pytest.fail("allocated 0 bytes")) == 0
    assert owned == []


def test_an_allocator_out_of_memory_is_a_launch_error_so_the_executor_falls_back():
    def full(nbytes):
        raise MemoryError("out of memory allocating 4,096 bytes")

    with pytest.raises(LaunchError, match="could not allocate cuBLASLt's workspace of 4096 bytes"):
        cublaslt._allocate(4096, [], full)


def _bare_lt(monkeypatch, workspace_bytes):
    """A PreparedLtGemm without cuBLASLt: its call records the workspace pointer it would pass."""
    import contextlib

    seen = []
    gemm = cublaslt.PreparedLtGemm.__new__(cublaslt.PreparedLtGemm)
    gemm.workspace_bytes, gemm._owned, gemm._capture_workspace = workspace_bytes, [], None
    gemm._workspace = ctypes.c_void_p(0x5000 if workspace_bytes else None)
    monkeypatch.setattr(cublaslt.PreparedLtGemm, "__call__", lambda self, *args: seen.append(self._workspace.value))
    monkeypatch.setattr(cublaslt, "relaxed_capture", contextlib.nullcontext)
    made = []
    monkeypatch.setattr(cublaslt, "_allocate", lambda n, owned: made.append(n) or owned.append(("workspace", 0x9000)) or 0x9000)
    return gemm, seen, made


def test_a_captured_call_records_a_workspace_of_its_own_made_once(monkeypatch):
    # the stream's shared block (api/shared_workspaces.py) would be shared by the user's graph and
    # every other call on that stream (session 37's review)
    gemm, seen, made = _bare_lt(monkeypatch, 4096)
    gemm.captured_call(1.0, 16, 32, 0.0, 48, 7)
    gemm(1.0, 16, 32, 0.0, 48, 7)  # a call outside the capture: the given (shared) workspace again
    gemm.captured_call(1.0, 16, 32, 0.0, 48, 7)  # a later capture: the same own workspace
    assert seen == [0x9000, 0x5000, 0x9000] and made == [4096]
    assert ("workspace", 0x9000) in gemm._owned, "freed with the GEMM (the pin keeps it for good)"


def test_a_captured_call_without_a_workspace_allocates_nothing(monkeypatch):
    gemm, seen, made = _bare_lt(monkeypatch, 0)
    gemm.captured_call(1.0, 16, 32, 0.0, 48, 7)
    assert seen == [None] and made == []


def test_the_given_workspace_comes_back_after_a_captured_call_that_failed(monkeypatch):
    gemm, seen, made = _bare_lt(monkeypatch, 4096)

    def refused(self, *args):
        raise LaunchError("cublasLtMatmul (sgemm GEMM) failed")

    monkeypatch.setattr(cublaslt.PreparedLtGemm, "__call__", refused)
    with pytest.raises(LaunchError):
        gemm.captured_call(1.0, 16, 32, 0.0, 48, 7)
    assert gemm._workspace.value == 0x5000


def test_the_classic_handle_keeps_cublas_default_workspace_pool(monkeypatch):
    """A thread's classic handle is bound to each stream it calls on, and cublasSetStream resets the
    handle to cuBLAS's default pool: a buffer of our own set again after it would be shared by that
    thread's GEMMs on different streams, which may run at once. So the handle sets none, and
    allocates none (until session 46 it allocated 32 MiB that the first bind discarded)."""
    calls = []

    class Lib:
        def __getattr__(self, name):
            return lambda *args: calls.append(name) or 0

    monkeypatch.setattr(cublas, "library", Lib)
    monkeypatch.setattr(launcher, "driver", lambda: pytest.fail("the handle allocated device memory"))
    h = cublas.Handle()
    h.bind(11, 1.0, 0.0)
    h.bind(12, 2.0, 0.5)
    h.bind(12, 3.0, 0.0)  # the same stream again: no call into cuBLAS
    assert calls == ["cublasCreate_v2", "cublasSetMathMode", "cublasSetStream_v2", "cublasSetStream_v2"]
    assert (h.alpha.value, h.beta.value) == (3.0, 0.0)
