"""cuBLASLt's plan path without a GPU: the layouts and types it asks for, and the fallback to the
classic cuBLAS entry points when cuBLASLt cannot prepare a GEMM (GPU behaviour:
tests/gpu/test_cublaslt.py)."""
from __future__ import annotations

import ctypes

import pytest

from gemmlab.api import dispatch, executors
from gemmlab.cuda import cublas, cublaslt
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
    def __init__(self, *shape):
        self.shape = shape


def _fake_lt(fail: Exception | None):
    class FakeLt:
        workspace_bytes = 1 << 20

        def __init__(self, *shape):
            if fail:
                raise fail
            self.shape = shape

    return FakeLt


@pytest.mark.parametrize("op,kind,call", [("sgemm", "sgemm", "cublasSgemm_v2"), ("hgemm", "ex", "cublasGemmEx"),
                                          ("bgemm", "batched", "cublasSgemmStridedBatched")])
def test_classic_cublas_when_lt_has_no_algorithm(monkeypatch, op, kind, call):
    monkeypatch.setattr(cublaslt, "PreparedLtGemm", _fake_lt(cublaslt.NoAlgorithmError("no algorithm for it")))
    monkeypatch.setattr(cublas, "PreparedGemm", _Classic)
    monkeypatch.setattr(cublas, "handle", lambda: None)
    ex = executors.CublasGemm(GemmProblem(64, 48, 32, dtype="fp32" if op != "hgemm" else "bf16"), op)
    assert isinstance(ex.call, _Classic) and ex.call.shape[0] == kind
    assert ex.library_call == call and "no algorithm" in ex.lt_refusal
    assert not ex.owns_workspace


def test_lt_when_it_prepares(monkeypatch):
    monkeypatch.setattr(cublaslt, "PreparedLtGemm", _fake_lt(None))
    ex = executors.CublasGemm(GemmProblem(64, 48, 32), "sgemm")
    assert ex.library_call == "cublasLtMatmul" and ex.lt_refusal is None
    assert ex.owns_workspace, "an Lt algorithm with a workspace is kept per stream"
    text = dispatch.describe(dispatch.Choice("cublas", {}, "named by the caller"), "gemmlab.sgemm", "64x48x32",
                             "GPU", "sm_90", "none", ex.library_call)
    assert "cuBLAS called directly, one cublasLtMatmul per call" in text
