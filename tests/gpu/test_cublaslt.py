"""cuBLASLt prepared GEMMs (cuda/cublaslt.py) on the GPU: every kind against an fp64 reference on
odd shapes, beta = 0 never reading C, a call from another thread, a GEMM first built inside a
CUDA graph capture, and the API's cuBLAS plans taking this path."""
import threading

import pytest

import gemmlab
from gemmlab.cuda import cublaslt
from gemmlab.errors import LaunchError

torch = pytest.importorskip("torch")


def _operands(kind, dtype, M, N, K, batch, beta, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    shape = (lambda *s: (batch, *s)) if kind == "batched" else (lambda *s: s)
    t = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype, torch.float32)
    a = (torch.rand(shape(M, K), device="cuda", generator=g) - 0.5).to(t)
    b = (torch.rand(shape(K, N), device="cuda", generator=g) - 0.5).to(t)
    c0 = torch.rand(shape(M, N), device="cuda", generator=g) - 0.5 if beta else \
        torch.full(shape(M, N), float("nan"), device="cuda")
    return a, b, c0


def _run(gemm, a, b, c, alpha, beta):
    gemm(alpha, a.data_ptr(), b.data_ptr(), beta, c.data_ptr(), torch.cuda.current_stream().cuda_stream)


def _error(c, a, b, c0, alpha, beta):
    ref = alpha * (a.double() @ b.double()) + (beta * c0.double() if beta else 0.0)
    return float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))


CASES = [("sgemm", "fp32", (67, 45, 33), 1), ("sgemm", "fp32", (129, 257, 511), 1),
         ("sgemm", "fp32", (1024, 1024, 1024), 1), ("ex", "fp16", (333, 191, 1031), 1),
         ("ex", "bf16", (1000, 3000, 2000), 1), ("ex", "bf16", (97, 33, 65), 1), ("ex", "tf32", (129, 257, 511), 1),
         ("batched", "fp32", (65, 47, 33), 3), ("batched", "fp32", (128, 128, 128), 16)]


@pytest.mark.parametrize("kind,dtype,shape,batch", CASES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, 0.75)])
def test_every_kind_matches_fp64(kind, dtype, shape, batch, alpha, beta):
    M, N, K = shape
    gemm = cublaslt.PreparedLtGemm(kind, M, N, K, dtype, batch)
    a, b, c0 = _operands(kind, dtype, M, N, K, batch, beta, seed=M + N + K)
    c = c0.clone()
    _run(gemm, a, b, c, alpha, beta)
    torch.cuda.synchronize()
    assert not torch.isnan(c).any(), "beta = 0 must not read C (it holds NaN)"
    assert _error(c, a, b, c0, alpha, beta) < (2e-3 if dtype == "tf32" else 1e-5)


def test_a_call_from_another_thread_uses_that_threads_handle():
    gemm = cublaslt.PreparedLtGemm("sgemm", 300, 200, 100)
    a, b, c0 = _operands("sgemm", "fp32", 300, 200, 100, 1, 0.0, seed=7)
    c = c0.clone()
    _run(gemm, a, b, c, 1.0, 0.0)
    torch.cuda.synchronize()
    first = c.clone()
    c.fill_(float("nan"))
    errors = []

    def other():
        try:
            with torch.cuda.stream(torch.cuda.Stream()):
                _run(gemm, a, b, c, 1.0, 0.0)
                torch.cuda.current_stream().synchronize()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert not errors, errors
    assert torch.equal(c, first)


def test_misaligned_operands_are_refused():
    gemm = cublaslt.PreparedLtGemm("sgemm", 64, 64, 64)
    a, b, c = _operands("sgemm", "fp32", 64, 64, 64, 1, 0.5, seed=3)
    with pytest.raises(LaunchError, match="aligned"):
        gemm(1.0, a.data_ptr() + 4, b.data_ptr(), 0.0, c.data_ptr(), 0)


def test_built_and_recorded_inside_a_graph_capture():
    a, b, c0 = _operands("ex", "bf16", 512, 384, 256, 1, 0.0, seed=11)
    c = c0.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # global capture mode: building must not invalidate it
        gemm = cublaslt.PreparedLtGemm("ex", 512, 384, 256, "bf16")
        _run(gemm, a, b, c, 1.0, 0.0)
    for _ in range(2):
        a.copy_((torch.rand_like(a, dtype=torch.float32) - 0.5).to(a.dtype))
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _error(c, a, b, c0, 1.0, 0.0) < 1e-5


@pytest.mark.parametrize("op,dtype", [("sgemm", torch.float32), ("hgemm", torch.bfloat16), ("hgemm", torch.float16)])
def test_cublas_plans_call_cublaslt(op, dtype):
    a = (torch.rand(300, 200, device="cuda") - 0.5).to(dtype)
    b = (torch.rand(200, 136, device="cuda") - 0.5).to(dtype)
    plan = gemmlab.Matmul(a, b, impl="cublas")
    assert plan._executor.library_call == "cublasLtMatmul", plan._executor.lt_refusal
    assert "one cublasLtMatmul per call" in plan.explain()
    out = plan.execute()
    torch.cuda.synchronize()
    assert _error(out, a, b, None, 1.0, 0.0) < 1e-5


def _t_operands(dtype, M, N, K, trans_a, trans_b, seed):
    """A (M x K) and B (K x N) as the caller holds them: a transposed view where asked."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    t = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype, torch.float32)
    a = (torch.rand((K, M) if trans_a else (M, K), device="cuda", generator=g) - 0.5).to(t)
    b = (torch.rand((N, K) if trans_b else (K, N), device="cuda", generator=g) - 0.5).to(t)
    return (a.t() if trans_a else a), (b.t() if trans_b else b)


@pytest.mark.parametrize("kind,dtype,shape", [("sgemm", "fp32", (67, 45, 33)), ("ex", "bf16", (333, 192, 1032)),
                                              ("ex", "fp16", (129, 264, 72)), ("ex", "tf32", (129, 257, 511))])
@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (True, False), (True, True)])
def test_transposed_operands_are_read_in_place(kind, dtype, shape, trans_a, trans_b):
    M, N, K = shape
    a, b = _t_operands(dtype, M, N, K, trans_a, trans_b, seed=M * N)
    assert a.is_contiguous() != trans_a and b.is_contiguous() != trans_b
    gemm = cublaslt.PreparedLtGemm(kind, M, N, K, dtype, trans_a=trans_a, trans_b=trans_b)
    c = torch.full((M, N), float("nan"), device="cuda")
    _run(gemm, a, b, c, 0.5, 0.0)
    torch.cuda.synchronize()
    assert _error(c, a, b, None, 0.5, 0.0) < (2e-3 if dtype == "tf32" else 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (True, False), (True, True)])
def test_plain_calls_read_torch_transposed_views_in_place(dtype, trans_a, trans_b):
    """x @ W.T (torch.nn.functional.linear's layout) through gemmlab.sgemm / hgemm: cuBLAS with
    its transpose flags, no copy; the result against fp64, C given with beta as well."""
    from gemmlab.api import core

    name = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    M, N, K = 200, 136, 264
    a, b = _t_operands(name, M, N, K, trans_a, trans_b, seed=5)
    call = gemmlab.sgemm if dtype == torch.float32 else gemmlab.hgemm
    out = call(a, b)
    c0 = torch.rand(M, N, device="cuda")
    c = c0.clone()
    call(a, b, c, alpha=2.0, beta=0.5)
    torch.cuda.synchronize()
    assert _error(out, a, b, None, 1.0, 0.0) < 1e-5
    assert _error(c, a, b, c0, 2.0, 0.5) < 1e-5
    in_place = [ex for key, ex in core._thread.executors.items() if key[5:6] == ((trans_a, trans_b),) and key[2] == (M, N, K) and key[3] is None]
    assert in_place and all(ex.fast and ex.library_call == "cublasLtMatmul" for ex in in_place)


def test_a_named_kernel_still_takes_a_transposed_view_through_a_copy():
    a, b = _t_operands("fp32", 130, 70, 90, False, True, seed=9)
    out = gemmlab.sgemm(a, b, impl="async_pipeline")
    torch.cuda.synchronize()
    assert _error(out, a, b, None, 1.0, 0.0) < 1e-5


def test_explain_names_the_in_place_path(capsys):
    a, b = _t_operands("bf16", 256, 128, 512, False, True, seed=3)
    text = gemmlab.explain(a, b)
    assert "runs:    cublas" in text and "transposed operand" in text
