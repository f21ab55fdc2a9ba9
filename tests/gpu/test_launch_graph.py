"""gemmlab's own kernels launched through one CUDA graph per executor (cuda/launch_graph.py):
every call against an fp64 reference with new data in the same buffers, new pointers, new
scalars, alternating outputs, clusters, split-K's two launches, multi-pass reductions, two
streams, and a user's torch.cuda.graph capture (which must record the kernels themselves)."""
import pytest

import gemmlab

torch = pytest.importorskip("torch")

from .graph_checks import calls_on_a_busy_side_stream, capture_on_side_stream, rand, rel_err  # noqa: E402  (after the torch skip)


def _graph(plan):
    graph = plan._executor.graph
    assert graph.enabled, graph.disabled_reason
    return graph


@pytest.mark.parametrize("impl,params,shape", [("tma_ffma", None, (1024, 1024, 1024)),
                                               ("bigtile", {"SPLITK": 4, "STREAMK": 0}, (512, 384, 4096))])
def test_split_k_launches_run_as_one_graph(impl, params, shape):
    M, N, K = shape
    a, b = rand(M, K, seed=30), rand(K, N, seed=31)
    c = torch.full((M, N), float("nan"), device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl=impl, params=params)
    ex = plan._executor
    assert ex.reduce is not None and len(ex.graph.launches) == 2, "this shape was meant to run split-K"
    for step in range(3):  # the same pointers and scalars: one update, then the graph as it is
        a.copy_(rand(M, K, seed=40 + step))
        c.fill_(float("nan"))
        plan.execute()
        torch.cuda.synchronize()
        assert rel_err(c, a.double() @ b.double()) < 1e-5, step
    graph = _graph(plan)
    assert (graph.graph_launches, graph.updates) == (3, 1)
    c0 = rand(M, N, seed=50)
    c.copy_(c0)
    plan.execute(alpha=0.5, beta=2.0)  # new scalars reach both nodes (the slices and their sum)
    torch.cuda.synchronize()
    assert rel_err(c, 0.5 * (a.double() @ b.double()) + 2.0 * c0.double()) < 1e-5
    assert (graph.graph_launches, graph.updates) == (4, 2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_cluster_kernel_through_the_graph_with_new_pointers_and_outputs(dtype):
    """Rung 5 in 2x1 clusters (the node carries the cluster dimensions): new A and B arrays,
    alternating outputs, beta != 0; every result against fp64."""
    M, N, K = 1000, 768, 512
    A = [rand(M, K, seed=60 + i, dtype=dtype) for i in range(2)]
    B = [rand(K, N, seed=62 + i, dtype=dtype) for i in range(2)]
    C = [torch.full((M, N), float("nan"), device="cuda") for _ in range(2)]
    plan = gemmlab.Matmul(A[0], B[0], C[0], impl="persistent", params={"CM": 2})
    ex = plan._executor
    assert ex.launch.cluster != (1, 1, 1), ex.launch.cluster
    for step in range(6):
        a, b, c = A[step % 2], B[(step // 2) % 2], C[step % 2]
        c.fill_(float("nan"))
        plan.execute(A=a, B=b, C=c)
        torch.cuda.synchronize()
        assert rel_err(c, a.double() @ b.double()) < 1e-3, step
    c0 = rand(M, N, seed=64)
    C[0].copy_(c0)
    plan.execute(A=A[0], B=B[0], C=C[0], alpha=-1.0, beta=0.5)
    torch.cuda.synchronize()
    assert rel_err(C[0], -(A[0].double() @ B[0].double()) + 0.5 * c0.double()) < 1e-3
    graph = _graph(plan)
    assert graph.graph_launches == 7 and graph.updates == 7


def test_plain_calls_reuse_the_graph_and_allocate_new_outputs():
    M, N, K = 512, 512, 512
    a, b = rand(M, K, seed=70, dtype=torch.bfloat16), rand(K, N, seed=71, dtype=torch.bfloat16)
    outs = [gemmlab.hgemm(a, b, impl="persistent") for _ in range(4)]  # four live outputs
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert len({o.data_ptr() for o in outs}) == 4
    assert all(rel_err(o, ref) < 1e-3 for o in outs)


@pytest.mark.parametrize("impl,n", [("single_pass", 1 << 20), ("shuffle", 3_000_001), ("tile_queue", 1 << 22)])
def test_sum_plans_through_the_graph(impl, n):
    xs = [rand(n, seed=80 + i) for i in range(2)]
    plan = gemmlab.Sum(xs[0], impl=impl)
    ex = plan._executor
    for step in range(5):
        x = xs[step // 3]
        x.copy_(rand(n, seed=90 + step))  # new data in the same buffer
        out = plan.execute(x=x)
        torch.cuda.synchronize()
        ref = x.double().sum()
        assert abs(float(out) - float(ref)) <= 1e-4 * float(x.double().abs().sum()), step
    graph = _graph(plan)
    assert graph.graph_launches == 5 and graph.updates == 2, (len(ex.launches), graph.updates)


def test_two_streams_each_get_their_own_graph_and_stay_ordered():
    M = N = K = 512
    a, b = rand(M, K, seed=100), rand(K, N, seed=101)
    c = torch.empty(M, N, device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl="tma_ffma")
    plan.execute()
    calls_on_a_busy_side_stream(a, c, lambda side: plan.execute())  # the side stream is current
    assert rel_err(c, a.double() @ b.double()) < 1e-5
    graph = _graph(plan)
    assert len(graph._execs) == 2 and graph.graph_launches == 4


def _graph_uses(plan) -> int:
    """Calls a plan's executor served from a graph: gemmlab's kernels' launch graph, or the
    captured cuBLAS calls it replays."""
    ex = plan._executor
    return ex.call.replays if ex.path == "library" else _graph(plan).graph_launches


@pytest.mark.parametrize("impl", ["tma_ffma", "cublas"])
def test_a_users_graph_capture_records_the_kernels_not_a_graph_launch(impl):
    M, N, K = 384, 256, 320
    a, b = rand(M, K, seed=110), rand(K, N, seed=111)
    c = torch.empty(M, N, device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl=impl)
    plan.execute()
    plan.execute()
    plan.execute()  # cuBLAS: captured (graph_replay.CAPTURE_AFTER) and replayed outside the user's capture
    torch.cuda.synchronize()
    uses = _graph_uses(plan)
    assert uses >= 1
    user = capture_on_side_stream(plan.execute)
    assert _graph_uses(plan) == uses  # direct inside the capture
    a.copy_(rand(M, K, seed=112))
    c.fill_(float("nan"))
    user.replay()
    torch.cuda.synchronize()
    assert rel_err(c, a.double() @ b.double()) < 1e-5


@pytest.mark.parametrize("impl", ["tma_ffma", "cublas"])
def test_a_graph_made_during_a_users_capture_of_another_stream_keeps_that_capture(impl):
    """A plan's first graph (gemmlab's kernels: at its first call on a stream; cuBLAS: at a
    repeat) made while the user captures another stream in torch's default global mode:
    instantiating then counts as unsafe unless done in relaxed mode, and would lose the capture."""
    M, N, K = 256, 192, 320
    a, b = rand(M, K, seed=120), rand(K, N, seed=121)
    c_user, c_other = torch.empty(M, N, device="cuda"), torch.empty(M, N, device="cuda")
    plan_user = gemmlab.Matmul(a, b, c_user, impl=impl)
    plan_other = gemmlab.Matmul(a, b, c_other, impl=impl)
    plan_user.execute()
    torch.cuda.synchronize()
    other = torch.cuda.Stream()

    def record():
        plan_user.execute()
        for _ in range(3):  # cuBLAS: the third is captured (graph_replay.CAPTURE_AFTER)
            plan_other.execute(stream=other)

    user = capture_on_side_stream(record)
    other.synchronize()
    ref = a.double() @ b.double()
    assert rel_err(c_other, ref) < 1e-5
    assert _graph_uses(plan_other) >= 1, "the other stream's calls never went through a graph"
    c_user.fill_(float("nan"))
    user.replay()
    torch.cuda.synchronize()
    assert rel_err(c_user, ref) < 1e-5


def test_a_capture_on_a_stream_that_already_has_a_graph_records_the_kernels():
    """torch's usual pattern: warm up on the side stream (which instantiates its graph), then
    capture on that same stream; the capture must record the kernels, not a graph launch."""
    M, N, K = 384, 256, 320
    a, b = rand(M, K, seed=130), rand(K, N, seed=131)
    c = torch.empty(M, N, device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl="tma_ffma")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan.execute()
        plan.execute()
    side.synchronize()
    graph = _graph(plan)
    assert side.cuda_stream in graph._execs
    launches = graph.graph_launches
    user = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        with torch.cuda.graph(user, stream=side):
            plan.execute()
    torch.cuda.current_stream().wait_stream(side)
    assert graph.graph_launches == launches  # direct inside the capture
    a.copy_(rand(M, K, seed=132))
    c.fill_(float("nan"))
    user.replay()
    torch.cuda.synchronize()
    assert rel_err(c, a.double() @ b.double()) < 1e-5


@pytest.mark.parametrize("op", ["sgemm split-K", "reduce_sum"])
def test_a_workspace_executor_first_built_inside_a_users_capture_keeps_that_capture(op):
    """An executor that owns a workspace is kept per stream. Warmed on the default stream, the same
    call inside torch.cuda.graph (its own stream, global mode) builds another: its workspace's
    allocation and clearing, refused during a global capture, are made in relaxed mode (core.
    new_executor), so the capture survives and its replay computes on the data of the moment."""
    if op == "reduce_sum":
        x = torch.randint(-4, 5, (1 << 20,), device="cuda").float()  # integers: any order sums exactly

        def call():
            return gemmlab.reduce_sum(x)

        def check(out):
            assert float(out) == float(x.double().sum())
    else:
        M = N = K = 1024  # tma_ffma at 1024^3 runs split-K (test_split_k_launches_run_as_one_graph)
        a, b = rand(M, K, seed=140), rand(K, N, seed=141)
        c = torch.empty(M, N, device="cuda")

        def call():
            return gemmlab.sgemm(a, b, c, impl="tma_ffma")

        def check(out):
            assert rel_err(out, a.double() @ b.double()) < 1e-5
    check(call())  # the default stream's executor
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()
    for step in range(2):
        if op == "reduce_sum":
            x.copy_(torch.randint(-4, 5, x.shape, device="cuda").float())
        else:
            a.copy_(rand(M, K, seed=142 + step))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check(out)
