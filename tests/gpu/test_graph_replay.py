"""Repeated library calls replayed from a CUDA graph (cuda/graph_replay.py): every replay against
an fp64 reference with new data in the same buffers, new scalars, alternating outputs, another
stream, and through a cuBLAS plan. A user's torch.cuda.graph capture: tests/gpu/test_launch_graph.py."""
import pytest

import gemmlab
from gemmlab.cuda import cublaslt
from gemmlab.cuda.graph_replay import CAPTURE_AFTER, KEPT, GraphReplay

torch = pytest.importorskip("torch")

from .graph_checks import calls_on_a_busy_side_stream, rand, rel_err  # noqa: E402  (after the torch skip)






def _call(gemm, a, b, c, alpha, beta, stream=None):
    s = stream if stream is not None else torch.cuda.current_stream()
    gemm(alpha, a.data_ptr(), b.data_ptr(), beta, c.data_ptr(), s.cuda_stream)


@pytest.mark.parametrize("shape", [(300, 200, 100), (1024, 1024, 1024), (67, 45, 33)])
def test_replays_see_new_data_and_new_scalars(shape):
    M, N, K = shape
    gemm = GraphReplay(cublaslt.PreparedLtGemm("sgemm", M, N, K), capture_after=1)
    a, b = rand(M, K, seed=1), rand(K, N, seed=2)
    c = torch.full((M, N), float("nan"), device="cuda")
    for step in range(4):  # step 0 direct, step 1 captured, then replayed
        a.copy_(rand(M, K, seed=10 + step))  # new data in the same buffer
        c.fill_(float("nan"))  # beta = 0 never reads C, replay or not
        _call(gemm, a, b, c, 1.0, 0.0)
        torch.cuda.synchronize()
        assert rel_err(c, a.double() @ b.double()) < 1e-5, step
    assert gemm.replays == 3 and gemm.enabled, gemm.disabled_reason
    c0 = rand(M, N, seed=3)
    c.copy_(c0)
    _call(gemm, a, b, c, 2.0, 0.5)  # new scalars: a direct call, never the graph of alpha = 1
    torch.cuda.synchronize()
    assert gemm.replays == 3
    assert rel_err(c, 2.0 * (a.double() @ b.double()) + 0.5 * c0.double()) < 1e-5
    ref = c.double()
    _call(gemm, a, b, c, 2.0, 0.5)  # the same scalars again: captured, C accumulated once more
    torch.cuda.synchronize()
    assert gemm.replays == 4
    assert rel_err(c, 2.0 * (a.double() @ b.double()) + 0.5 * ref) < 1e-5


def test_alternating_outputs_replay_both_and_old_graphs_are_dropped():
    M, N, K = 256, 192, 128
    gemm = GraphReplay(cublaslt.PreparedLtGemm("sgemm", M, N, K), capture_after=1)
    a, b = rand(M, K, seed=4), rand(K, N, seed=5)
    outs = [torch.full((M, N), float("nan"), device="cuda") for _ in range(KEPT + 2)]
    ref = a.double() @ b.double()
    for c in outs:  # each output twice in a row: each is captured
        _call(gemm, a, b, c, 1.0, 0.0)
        _call(gemm, a, b, c, 1.0, 0.0)
    torch.cuda.synchronize()
    assert all(rel_err(c, ref) < 1e-5 for c in outs)
    assert len(gemm._execs) == KEPT and gemm.replays == len(outs)
    for c in outs[-2:]:  # the kept ones replay at once, alternating
        c.fill_(float("nan"))
        _call(gemm, a, b, c, 1.0, 0.0)
    torch.cuda.synchronize()
    assert gemm.replays == len(outs) + 2 and all(rel_err(c, ref) < 1e-5 for c in outs[-2:])


def test_a_replay_is_ordered_on_the_callers_stream():
    M = N = K = 512
    gemm = GraphReplay(cublaslt.PreparedLtGemm("sgemm", M, N, K), capture_after=1)
    a, b = rand(M, K, seed=6), rand(K, N, seed=7)
    c = torch.empty(M, N, device="cuda")
    calls_on_a_busy_side_stream(a, c, lambda side: _call(gemm, a, b, c, 1.0, 0.0, side))
    assert gemm.replays == 2 and rel_err(c, a.double() @ b.double()) < 1e-5


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_cublas_plans_replay_and_stay_exact(dtype):
    t = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    M, N, K = 1000, 3000, 2000
    a, b = rand(M, K, seed=12).to(t), rand(K, N, seed=13).to(t)
    c = torch.full((M, N), float("nan"), device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl="cublas")
    for step in range(4):  # CAPTURE_AFTER direct, then captured and replayed
        a.copy_(rand(M, K, seed=20 + step).to(t))
        c.fill_(float("nan"))
        plan.execute()
        torch.cuda.synchronize()
        assert rel_err(c, a.double() @ b.double()) < 1e-5, step
    assert plan._executor.call.replays == 4 - CAPTURE_AFTER
    assert "replayed from a CUDA graph" in plan.explain()


@pytest.mark.parametrize("op, impl", [("sgemm", "vectorize"), ("sgemm", "cublas"), ("sgemm", None),
                                      ("hgemm", "persistent"), ("hgemm", "cublas"), ("hgemm", None)])
def test_alpha_minus_zero_keeps_its_sign_through_graphs(op, impl):
    """alpha -0.0 == 0.0 as a Python key, but -0.0 * A@B (A@B > 0) is -0.0: a graph or argument
    update made for one sign must not serve the other. gemmlab's kernels write the sign; for
    cuBLAS (and the default, which may be cuBLAS) a repeat must write what the first call of
    the same alpha wrote."""
    M, N, K = 96, 80, 64
    dtype = torch.float32 if op == "sgemm" else torch.bfloat16
    A = (torch.rand(M, K, device="cuda") + 0.5).to(dtype)  # A@B > 0 everywhere
    B = (torch.rand(K, N, device="cuda") + 0.5).to(dtype)
    C = torch.empty(M, N, device="cuda")
    gemm = getattr(gemmlab, op)

    def signs(alpha):
        C.fill_(float("nan"))  # beta = 0 never reads C
        gemm(A, B, C, alpha=alpha, beta=0.0, impl=impl)
        torch.cuda.synchronize()
        assert not C.isnan().any() and (C == 0).all()
        return torch.signbit(C)

    direct = {str(a): signs(a) for a in (-0.0, 0.0)}  # each sign's first call
    if impl not in (None, "cublas"):
        assert direct["-0.0"].all() and not direct["0.0"].any()
    for alpha in (0.0, 0.0, -0.0, -0.0, 0.0, -0.0):  # repeats: captured, replayed, updated
        assert torch.equal(signs(alpha), direct[str(alpha)]), alpha


def _no_idle_freeing(monkeypatch, graph_replay) -> None:
    """No graph freed as idle during the test (earlier tests' replays, idle by now, would give
    their places to the call the test expects refused): a fresh look-record, never looked again."""
    import threading

    monkeypatch.setattr(graph_replay, "_threads", threading.local())
    monkeypatch.setattr(graph_replay, "IDLE_SECONDS", float("inf"))


def test_past_the_graph_limit_calls_run_directly_and_stay_exact(monkeypatch):
    """At most GRAPHS_LIMIT graphs live in the process (a graph costs device memory the driver
    keeps: 676 KiB, H100, session 38): past it a repeat is made directly, not captured, and is as
    exact; once a graph is freed the next repeat captures again."""
    import gc

    from gemmlab.cuda import graph_replay

    gc.collect()  # earlier tests' graphs freed now, not in the middle (that would free a place)
    _no_idle_freeing(monkeypatch, graph_replay)
    monkeypatch.setattr(graph_replay, "GRAPHS_LIMIT", graph_replay.live_graphs() + 1)
    M, N, K = 300, 200, 100
    first, second = (GraphReplay(cublaslt.PreparedLtGemm("sgemm", M, N, K), capture_after=1) for _ in range(2))
    a, b = rand(M, K, seed=6), rand(K, N, seed=7)
    ref = a.double() @ b.double()
    for gemm in (first, second):
        c = torch.full((M, N), float("nan"), device="cuda")
        for _ in range(3):
            c.fill_(float("nan"))
            _call(gemm, a, b, c, 1.0, 0.0)
            torch.cuda.synchronize()
            assert rel_err(c, ref) < 1e-5
    assert (first.replays, second.replays) == (2, 0) and second.refused == 2 and second.enabled
    del first
    gc.collect()
    c = torch.full((M, N), float("nan"), device="cuda")
    _call(second, a, b, c, 1.0, 0.0)
    _call(second, a, b, c, 1.0, 0.0)  # a repeat: captured now, replayed
    torch.cuda.synchronize()
    assert second.replays >= 1 and rel_err(c, ref) < 1e-5


def test_a_plan_replays_past_the_graph_limit_and_a_plain_call_does_not(monkeypatch):
    """The limit bounds the graphs plain calls keep on their own; a plan, kept on purpose for its
    cost per call, still replays (counted, never refused)."""
    import gc

    from gemmlab.cuda import graph_replay

    gc.collect()
    _no_idle_freeing(monkeypatch, graph_replay)
    monkeypatch.setattr(graph_replay, "GRAPHS_LIMIT", graph_replay.live_graphs())  # no room left
    M, N, K = 520, 330, 270  # a shape no other test here calls plainly (a fresh executor)
    a, b = rand(M, K, seed=30), rand(K, N, seed=31)
    c = torch.full((M, N), float("nan"), device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl="cublas")
    for _ in range(4):
        c.fill_(float("nan"))
        plan.execute()
        torch.cuda.synchronize()
        assert rel_err(c, a.double() @ b.double()) < 1e-5
    assert plan._executor.call.replays == 4 - CAPTURE_AFTER and plan._executor.call.refused == 0
    assert graph_replay.live_graphs() > graph_replay.GRAPHS_LIMIT  # the plan's graph is counted
    d = torch.full((M, N), float("nan"), device="cuda")
    for _ in range(4):
        d.fill_(float("nan"))
        gemmlab.sgemm(a, b, d, impl="cublas")
        torch.cuda.synchronize()
        assert rel_err(d, a.double() @ b.double()) < 1e-5
    from gemmlab.api import core

    # this very call's executor (cached: the lookup builds nothing), not any other test's
    ex = core.executor("sgemm", "fp32", (M, N, K), "cublas", None, torch.cuda.current_stream().cuda_stream)
    assert ex.path == "library" and ex.call is not plan._executor.call
    assert (ex.call.replays, ex.call.refused) == (0, 4 - CAPTURE_AFTER) and ex.call.enabled


def test_an_idle_graph_gives_its_place_to_a_new_shape_and_both_stay_exact(monkeypatch):
    """Past the limit, a capture refused in this thread frees the graphs of the thread's replays
    that launched nothing for IDLE_SECONDS (a clock the test moves): the new shape replays, the
    idle one's next calls are made directly, and every result is checked against fp64."""
    import gc
    import threading

    from gemmlab.cuda import graph_replay

    now = [0.0]
    monkeypatch.setattr(graph_replay, "_now", lambda: now[0])
    monkeypatch.setattr(graph_replay, "_threads", threading.local())
    gc.collect()
    monkeypatch.setattr(graph_replay, "GRAPHS_LIMIT", graph_replay.live_graphs() + 1)
    gemms = {shape: GraphReplay(cublaslt.PreparedLtGemm("sgemm", *shape), capture_after=1)
             for shape in ((300, 200, 100), (260, 140, 90))}
    (old, old_gemm), (new, new_gemm) = gemms.items()

    def call(shape, gemm, seed):
        M, N, K = shape
        a, b = rand(M, K, seed=seed), rand(K, N, seed=seed + 1)
        c = torch.full((M, N), float("nan"), device="cuda")
        _call(gemm, a, b, c, 1.0, 0.0)
        torch.cuda.synchronize()
        assert rel_err(c, a.double() @ b.double()) < 1e-5, shape
        return a, b, c

    args_old = call(old, old_gemm, 40)
    for _ in range(2):
        _call(old_gemm, *args_old[:2], args_old[2], 1.0, 0.0)
    assert old_gemm.replays == 2
    a, b, c = call(new, new_gemm, 50)
    for step in range(3):  # refused (first look), refused (too soon), then the old graph's place
        now[0] += 0.6
        c.fill_(float("nan"))
        _call(new_gemm, a, b, c, 1.0, 0.0)
        torch.cuda.synchronize()
        assert rel_err(c, a.double() @ b.double()) < 1e-5, step
    assert (new_gemm.refused, new_gemm.replays, old_gemm.reclaimed) == (2, 1, 1)
    a, b, c = args_old
    c.fill_(float("nan"))
    _call(old_gemm, a, b, c, 1.0, 0.0)  # made directly now (no place), as exact
    torch.cuda.synchronize()
    assert rel_err(c, a.double() @ b.double()) < 1e-5 and old_gemm.replays == 2


@pytest.mark.parametrize("impl", ["cublas", "vectorize"])  # the cuBLAS replay's graphs; a kernel's launch graph
def test_an_executor_dropped_inside_a_users_capture_frees_its_graphs_and_the_capture_holds(monkeypatch, impl):
    """A full executor cache drops its oldest executor at a new shape's first call. Inside a user's
    torch.cuda.graph capture (global mode) that executor's graphs are freed there and then: in the
    capture's mode the driver refuses the destroys (error 900) and may invalidate the capture, so
    they run in relaxed mode. The capture must record, and its replay be exact; the dropped shape
    is built again after it."""
    import gc

    from gemmlab.api import core

    core.forget_executors()
    gc.collect()
    monkeypatch.setattr(core, "MAX_EXECUTORS", 1)
    (M1, N1, K1), (M2, N2, K2) = (192, 160, 96), (224, 136, 88)
    a1, b1, a2, b2 = rand(M1, K1, seed=60), rand(K1, N1, seed=61), rand(M2, K2, seed=62), rand(K2, N2, seed=63)
    c1 = torch.full((M1, N1), float("nan"), device="cuda")
    for _ in range(4):  # built, then its graphs: captured (cuBLAS) or instantiated (the kernel's)
        gemmlab.sgemm(a1, b1, c1, impl=impl)
    torch.cuda.synchronize()
    assert rel_err(c1, a1.double() @ b1.double()) < 1e-5
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    c2 = torch.full((M2, N2), float("nan"), device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph, stream=side):
            gemmlab.sgemm(a2, b2, c2, impl=impl)  # a new shape: the first one's executor dropped here
    torch.cuda.current_stream().wait_stream(side)
    assert len(core._thread.executors) == 1
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(c2, a2.double() @ b2.double()) < 1e-5
    c1.fill_(float("nan"))
    gemmlab.sgemm(a1, b1, c1, impl=impl)  # built again
    torch.cuda.synchronize()
    assert rel_err(c1, a1.double() @ b1.double()) < 1e-5
