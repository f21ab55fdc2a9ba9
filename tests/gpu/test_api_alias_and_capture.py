"""What the API must survive beyond well-behaved operands (session 25's review):
- a C that shares memory with A or B: the plain calls compute on a copy of C and write it back
  (a kernel writing C in place would overwrite what other blocks still read); plans refuse it,
  and a refused rebind leaves the plan as it was;
- a user's captured graph outliving the executor that recorded it (the thread's caches dropped
  by use_tuning): what the capture used is pinned, so a replay neither reads nor writes memory
  that was handed out again;
- dimensions past 2^31 - 65536 refused in one line (the kernels take 32-bit M, N, K and round them up to tiles);
- the custom op's result row-major whatever C's layout (its fake says so), and beta != 0 without
  C refused as the plain call refuses it.
fp64 references, fresh random inputs, outputs NaN-poisoned where beta == 0."""
import numpy as np
import pytest

import gemmlab
from gemmlab.cuda import launch_graph
from gemmlab.errors import BadArgumentError

cp = pytest.importorskip("cupy")
torch = pytest.importorskip("torch")


def _ref(A, B, C0=None, alpha=1.0, beta=0.0):
    a, b = (cp.asnumpy(cp.asarray(x)).astype(np.float64) for x in (A, B))
    return alpha * a @ b + (beta * C0 if beta else 0.0)


def _rel(C, ref) -> float:
    got = cp.asnumpy(cp.asarray(C)).astype(np.float64)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def _torch_rand(*shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.rand(shape, device="cuda", generator=g) - 0.5


@pytest.mark.parametrize("impl", [None, "cublas", "vectorize"])
@pytest.mark.parametrize("alias", ["C is A", "C is B", "C overlaps A"])
@pytest.mark.parametrize("family", ["torch", "cupy"])
def test_a_c_sharing_memory_with_a_or_b_gets_the_right_product(impl, alias, family):
    n = 256
    for call in range(2):  # the first call (deciding) and a repeat (the hot path's cache)
        X = _torch_rand(2 * n, n, seed=7 + call)  # A is X's first n rows
        if family == "cupy":
            X = cp.from_dlpack(X)
        A, B = X[:n], X[n:]
        C = {"C is A": A, "C is B": B, "C overlaps A": X[n // 2: n // 2 + n]}[alias]
        a0, b0, c0 = (cp.asnumpy(cp.asarray(x)).astype(np.float64) for x in (A, B, C))
        out = gemmlab.sgemm(A, B, C, alpha=0.5, beta=-1.5, impl=impl)
        assert out is C
        assert _rel(C, 0.5 * a0 @ b0 - 1.5 * c0) < 1e-5, f"call {call}"


@pytest.mark.parametrize("family", ["torch", "cupy"])
def test_a_c_that_is_a_with_beta_zero_and_a_16bit_c(family):
    n = 192
    A = _torch_rand(n, n, seed=3).half()
    B = _torch_rand(n, n, seed=4).half()
    if family == "cupy":
        A, B = cp.from_dlpack(A), cp.from_dlpack(B)
    ref = _ref(A, B)
    gemmlab.hgemm(A, B, A)  # C = A @ B into A itself, A's old values read throughout
    assert _rel(A, ref) < 2e-3


def test_a_plan_refuses_a_c_sharing_memory_and_a_refused_rebind_changes_nothing():
    n = 128
    A, B = _torch_rand(n, n, seed=5), _torch_rand(n, n, seed=6)
    with pytest.raises(BadArgumentError, match="C overlaps A") as info:
        gemmlab.Matmul(A, B, A)
    assert "\n" not in str(info.value)
    p = gemmlab.Matmul(A, B)
    p.execute()
    B2 = _torch_rand(n, n, seed=8)
    with pytest.raises(BadArgumentError, match=r"C \(the plan's own result\) overlaps A.*pass a copy of it as A"):
        p.execute(A=p.result, B=B2)  # refused whole: neither A nor B is rebound
    with pytest.raises(BadArgumentError, match=r"C \(the plan's own result\) overlaps B"):
        p.execute(B=p.result)  # the plan's own C as its B
    p.result.fill_(float("nan"))
    assert _rel(p.execute(), _ref(A, B)) < 1e-5


def test_a_captured_sum_outlives_the_executor_that_recorded_it():
    """The executor is dropped with every thread's caches (use_tuning); the blocks its partials
    and counter used go back to CuPy's pool and are handed out again here, NaN-filled. The
    user's graph still replays into them unless they were pinned: then the sums go wrong or the
    NaN arrays change."""
    n = 1 << 22
    x = _torch_rand(n, seed=9)
    ref = float(x.double().sum())
    pinned = launch_graph.captured_count()
    gemmlab.reduce_sum(x)  # warm: the executor exists before the capture
    torch.cuda.synchronize()
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph, stream=side):
            out = gemmlab.reduce_sum(x)
    torch.cuda.current_stream().wait_stream(side)
    assert launch_graph.captured_count() > pinned
    gemmlab.use_tuning(None)  # every thread's executors dropped
    import gc

    gc.collect()
    # blocks of every size a sum's partials may take (CuPy's pool hands a freed block of the same
    # size class out again), and of its two-word counter
    floats = [cp.full(1 << i, cp.nan, dtype=cp.float32) for i in range(1, 15) for _ in range(4)]
    words = [cp.full(2, 0xFFFFFFFF, dtype=cp.uint32) for _ in range(16)]
    cp.cuda.Device().synchronize()
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert abs(float(out) - ref) <= 1e-4 * float(x.abs().double().sum())
    assert all(bool(cp.isnan(d).all()) for d in floats), "a replay wrote into memory handed out again"
    assert all(bool((d == 0xFFFFFFFF).all()) for d in words), "a replay wrote into memory handed out again"


@pytest.mark.parametrize("big", [2 ** 31, 2 ** 31 - 2 ** 16 + 1], ids=["2^31", "just past the bound"])
@pytest.mark.parametrize("family", ["torch", "cupy"])
def test_dimensions_past_32_bits_are_refused_in_one_line(family, big):
    A = torch.zeros(1, 1, device="cuda").expand(1, big)  # no memory: a stride-0 view
    B = torch.zeros(1, 1, device="cuda").expand(big, 1)
    if family == "cupy":
        one = cp.zeros((1, 1), cp.float32)
        A, B = cp.broadcast_to(one, (1, big)), cp.broadcast_to(one, (big, 1))
    with pytest.raises(BadArgumentError, match=r"dimensions up to 2\^31 - 65536") as info:
        gemmlab.sgemm(A, B)
    assert "\n" not in str(info.value)


def test_the_custom_op_returns_a_row_major_result_whatever_cs_layout():
    gemmlab.register_torch_ops()
    a, b = _torch_rand(96, 64, seed=10), _torch_rand(64, 80, seed=11)
    c = _torch_rand(80, 96, seed=12).t()  # column-major 96 x 80
    out = torch.ops.gemmlab.sgemm(a, b, c, 0.5, 2.0)
    assert out.is_contiguous() and out.shape == (96, 80)
    ref = 0.5 * a.double() @ b.double() + 2.0 * c.double()
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5
    torch.library.opcheck(torch.ops.gemmlab.sgemm.default, (a, b, c, 0.5, 2.0))
    with pytest.raises(BadArgumentError, match="beta != 0 needs C"):
        torch.ops.gemmlab.sgemm(a, b, None, 1.0, 1.0)
    with pytest.raises(Exception, match="beta != 0 needs C"):  # refused while tracing (dynamo may wrap it)
        torch.compile(lambda x, y: torch.ops.gemmlab.sgemm(x, y, None, 1.0, 1.0), fullgraph=True)(a, b)
    with pytest.raises(BadArgumentError, match="C is 80x96, expected 96x80"):
        torch.ops.gemmlab.sgemm(a, b, c.t(), 1.0, 0.0)
