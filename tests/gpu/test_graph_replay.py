"""Repeated library calls replayed from a CUDA graph (cuda/graph_replay.py): every replay against
an fp64 reference with new data in the same buffers, new scalars, alternating outputs, another
stream, inside a user's torch.cuda.graph capture, and through a cuBLAS plan."""
import pytest

import gemmlab
from gemmlab.cuda import cublaslt
from gemmlab.cuda.graph_replay import KEPT, GraphReplay

torch = pytest.importorskip("torch")


def _rand(*shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.rand(shape, device="cuda", generator=g) - 0.5


def _err(c, ref):
    return float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))


def _call(gemm, a, b, c, alpha, beta, stream=None):
    s = stream if stream is not None else torch.cuda.current_stream()
    gemm(alpha, a.data_ptr(), b.data_ptr(), beta, c.data_ptr(), s.cuda_stream)


@pytest.mark.parametrize("shape", [(300, 200, 100), (1024, 1024, 1024), (67, 45, 33)])
def test_replays_see_new_data_and_new_scalars(shape):
    M, N, K = shape
    gemm = GraphReplay(cublaslt.PreparedLtGemm("sgemm", M, N, K))
    a, b = _rand(M, K, seed=1), _rand(K, N, seed=2)
    c = torch.full((M, N), float("nan"), device="cuda")
    for step in range(4):  # step 0 direct, step 1 captured, then replayed
        a.copy_(_rand(M, K, seed=10 + step))  # new data in the same buffer
        c.fill_(float("nan"))  # beta = 0 never reads C, replay or not
        _call(gemm, a, b, c, 1.0, 0.0)
        torch.cuda.synchronize()
        assert _err(c, a.double() @ b.double()) < 1e-5, step
    assert gemm.replays == 3 and gemm.enabled, gemm.disabled_reason
    c0 = _rand(M, N, seed=3)
    c.copy_(c0)
    _call(gemm, a, b, c, 2.0, 0.5)  # new scalars: a direct call, never the graph of alpha = 1
    torch.cuda.synchronize()
    assert gemm.replays == 3
    assert _err(c, 2.0 * (a.double() @ b.double()) + 0.5 * c0.double()) < 1e-5
    ref = c.double()
    _call(gemm, a, b, c, 2.0, 0.5)  # the same scalars again: captured, C accumulated once more
    torch.cuda.synchronize()
    assert gemm.replays == 4
    assert _err(c, 2.0 * (a.double() @ b.double()) + 0.5 * ref) < 1e-5


def test_alternating_outputs_replay_both_and_old_graphs_are_dropped():
    M, N, K = 256, 192, 128
    gemm = GraphReplay(cublaslt.PreparedLtGemm("sgemm", M, N, K))
    a, b = _rand(M, K, seed=4), _rand(K, N, seed=5)
    outs = [torch.full((M, N), float("nan"), device="cuda") for _ in range(KEPT + 2)]
    ref = a.double() @ b.double()
    for c in outs:  # each output twice in a row: each is captured
        _call(gemm, a, b, c, 1.0, 0.0)
        _call(gemm, a, b, c, 1.0, 0.0)
    torch.cuda.synchronize()
    assert all(_err(c, ref) < 1e-5 for c in outs)
    assert len(gemm._execs) == KEPT and gemm.replays == len(outs)
    for c in outs[-2:]:  # the kept ones replay at once, alternating
        c.fill_(float("nan"))
        _call(gemm, a, b, c, 1.0, 0.0)
    torch.cuda.synchronize()
    assert gemm.replays == len(outs) + 2 and all(_err(c, ref) < 1e-5 for c in outs[-2:])


def test_a_replay_is_ordered_on_the_callers_stream():
    M = N = K = 512
    gemm = GraphReplay(cublaslt.PreparedLtGemm("sgemm", M, N, K))
    a, b = _rand(M, K, seed=6), _rand(K, N, seed=7)
    c = torch.empty(M, N, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for step in range(3):
            c.fill_(float("nan"))
            # the side stream kept busy (~25 ms) before its update of A: a replay not ordered after
            # it would read the old A, or be overwritten by the fill, and fail
            torch.cuda._sleep(50_000_000)
            a.mul_(-1.0)  # on the side stream, right before the call on the same stream
            _call(gemm, a, b, c, 1.0, 0.0, side)
    side.synchronize()
    assert gemm.replays == 2 and _err(c, a.double() @ b.double()) < 1e-5


def test_a_users_graph_capture_records_the_library_call_not_a_replay():
    M, N, K = 384, 256, 320
    a, b = _rand(M, K, seed=8), _rand(K, N, seed=9)
    c = torch.empty(M, N, device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl="cublas")
    plan.execute()
    plan.execute()  # captured and replayed outside the user's capture
    torch.cuda.synchronize()
    replays = plan._executor.call.replays
    assert replays == 1
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph, stream=side):
            plan.execute()
    torch.cuda.current_stream().wait_stream(side)
    assert plan._executor.call.replays == replays  # direct inside the capture
    a.copy_(_rand(M, K, seed=11))
    c.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert _err(c, a.double() @ b.double()) < 1e-5


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_cublas_plans_replay_and_stay_exact(dtype):
    t = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    M, N, K = 1000, 3000, 2000
    a, b = _rand(M, K, seed=12).to(t), _rand(K, N, seed=13).to(t)
    c = torch.full((M, N), float("nan"), device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl="cublas")
    for step in range(3):
        a.copy_(_rand(M, K, seed=20 + step).to(t))
        c.fill_(float("nan"))
        plan.execute()
        torch.cuda.synchronize()
        assert _err(c, a.double() @ b.double()) < 1e-5, step
    assert plan._executor.call.replays == 2
    assert "replayed from a CUDA graph" in plan.explain()


@pytest.mark.parametrize("impl,params,shape", [("tma_ffma", None, (1024, 1024, 1024)),
                                               ("bigtile", {"SPLITK": 4, "STREAMK": 0}, (512, 384, 4096))])
def test_split_k_plans_replay_both_launches_as_one_graph(impl, params, shape):
    """A kernel executor with a split-K reduction makes two launches a call; its repeats replay
    both from one graph, and every replay reads the buffers' new data."""
    M, N, K = shape
    a, b = _rand(M, K, seed=30), _rand(K, N, seed=31)
    c = torch.full((M, N), float("nan"), device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl=impl, params=params)
    ex = plan._executor
    assert ex.reduce is not None and ex._replay is not None, "this shape was meant to run split-K"
    for step in range(3):
        a.copy_(_rand(M, K, seed=40 + step))
        c.fill_(float("nan"))
        plan.execute()
        torch.cuda.synchronize()
        assert _err(c, a.double() @ b.double()) < 1e-5, step
    c0 = _rand(M, N, seed=50)
    c.copy_(c0)
    plan.execute(alpha=0.5, beta=2.0)
    torch.cuda.synchronize()
    assert _err(c, 0.5 * (a.double() @ b.double()) + 2.0 * c0.double()) < 1e-5
    assert ex._replay.replays == 2 and ex._replay.enabled, ex._replay.disabled_reason
