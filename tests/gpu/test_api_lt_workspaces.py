"""cuBLASLt's workspace is one block per stream, shared by the executors built for that stream
(api/shared_workspaces.py, session 37): fp32 asks for 2-29 MiB per shape, and one each held
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


def test_a_users_capture_records_a_workspace_of_its_own_and_replays_beside_the_streams_calls():
    """Warmed up on the stream it then captures (torch.cuda.graph(stream=s)), an executor holds s's
    shared block; the user's graph must not record it, or a replay on another stream races with
    every call still made on s (session 37's review). Replays on one stream and calls of another
    shape on s run at once here, both checked against fp64."""
    torch = pytest.importorskip("torch")
    from gemmlab.api import core
    from gemmlab.api.launches import launching_on
    from gemmlab.cuda import cublaslt

    core.setup()
    needs = {M: cublaslt.PreparedLtGemm("sgemm", M, N, K, trans_b=True).workspace_bytes for M in SHAPES}
    shapes = sorted((M for M in SHAPES if needs[M]), key=lambda M: -needs[M])[:2]  # one block for both
    if len(shapes) < 2:
        pytest.skip(f"cuBLASLt asked for a workspace for fewer than two of {SHAPES} here: {needs}")
    s, other = torch.cuda.Stream(), torch.cuda.Stream()
    with launching_on(s.cuda_stream):
        recorded, eager = (core.new_executor("sgemm", "fp32", (M, N, K), "cublas", None, (False, True))
                           for M in shapes)
    X = torch.randn(max(shapes), K, device="cuda")
    W = torch.randn(N, K, device="cuda")
    C1 = torch.full((shapes[0], N), float("nan"), device="cuda")
    C2 = torch.full((shapes[1], N), float("nan"), device="cuda")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warmed up on s: direct, then replayed from gemmlab's own graph
            recorded.run(X.data_ptr(), W.data_ptr(), C1.data_ptr(), 1.0, 0.0, s.cuda_stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        recorded.run(X.data_ptr(), W.data_ptr(), C1.data_ptr(), 1.0, 0.0, s.cuda_stream)
    lt = recorded.call.call
    assert lt._capture_workspace not in (None, 0) and lt._capture_workspace != lt.workspace_ptr
    assert eager.call.call.workspace_ptr == lt.workspace_ptr, "the two shapes share s's block"
    torch.cuda.synchronize()
    C1.fill_(float("nan"))
    other.wait_stream(torch.cuda.current_stream())
    for _ in range(20):  # the user's graph on `other`, the other shape on s, at the same time
        with torch.cuda.stream(other):
            graph.replay()
        eager.run(X.data_ptr(), W.data_ptr(), C2.data_ptr(), 1.0, 0.0, s.cuda_stream)
    torch.cuda.synchronize()
    x, w = X.double(), W.double()
    for M, C in zip(shapes, (C1, C2)):
        ref = x[:M] @ w.T
        err = ((C.double() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-5, f"{M}x{N}x{K}: relative error {err:.2e}"
