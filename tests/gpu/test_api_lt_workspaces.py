"""cuBLASLt's workspace is one block per stream, shared by the executors built for that stream
(api/library_workspaces.py, session 37): fp32 asks for 2-29 MiB per shape, and one each held
gigabytes in a program whose shapes change. Work on one stream runs in order, so sharing is
safe there; this checks it: executors of several shapes on one stream, called back to back
without a wait (direct, then replayed from their graphs), each result against fp64."""
import numpy as np
import pytest

cp = pytest.importorskip("cupy")

N = K = 4096
SHAPES = (218, 505, 1002, 1401)  # M of x @ W.T: shapes for which cuBLASLt asked fp32 workspaces (H200)


def test_the_executors_of_one_stream_share_one_workspace_and_stay_exact():
    from gemmlab.api import core
    from gemmlab.api.launches import launching_on
    from gemmlab.cuda import cublaslt

    core.setup()
    needs = {M: cublaslt.PreparedLtGemm("sgemm", M, N, K, trans_b=True).workspace_bytes for M in SHAPES}
    shapes = sorted((M for M in SHAPES if needs[M]), key=lambda M: -needs[M])  # the largest first
    if len(shapes) < 2:
        pytest.skip(f"cuBLASLt asked for a workspace for fewer than two of {SHAPES} here: {needs}")
    stream = cp.cuda.Stream(non_blocking=True)
    with launching_on(stream.ptr):  # as core.executor builds a call's
        executors = [core.new_executor("sgemm", "fp32", (M, N, K), "cublas", None, (False, True)) for M in shapes]
    assert all(ex.lt_refusal is None for ex in executors)
    ptrs = {ex.call.call.workspace_ptr for ex in executors}
    assert len(ptrs) == 1 and 0 not in ptrs, "one block, made for the largest need, serves every shape"
    rng = np.random.default_rng(37)
    X = cp.asarray(rng.standard_normal((max(shapes), K), dtype=np.float32))
    W = cp.asarray(rng.standard_normal((N, K), dtype=np.float32))
    outs = [cp.full((M, N), np.nan, dtype=cp.float32) for M in shapes]
    with stream:
        for _ in range(4):  # direct twice, then captured (graph_replay.CAPTURE_AFTER) and replayed
            for M, ex, C in zip(shapes, executors, outs):
                ex.run(X.data.ptr, W.data.ptr, C.data.ptr, 1.0, 0.0, stream.ptr)  # W.T: B transposed
    stream.synchronize()
    assert all(ex.call.replays >= 1 for ex in executors), "the graphs, recorded with the shared block, ran"
    x, w = cp.asnumpy(X).astype(np.float64), cp.asnumpy(W).astype(np.float64)
    for M, C in zip(shapes, outs):
        ref = x[:M] @ w.T
        err = np.abs(cp.asnumpy(C) - ref).max() / np.abs(ref).max()
        assert err < 1e-5, f"{M}x{N}x{K}: relative error {err:.2e}"
