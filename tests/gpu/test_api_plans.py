"""Plans (gemmlab.Matmul, gemmlab.Sum), CUDA graph capture (torch.cuda.graph and CuPy stream
capture), torch custom ops under torch.compile, and first use from 16 threads at once."""
import os

import numpy as np
import pytest

import gemmlab
from gemmlab.errors import BadArgumentError
from gemmlab.ops import hgemm_check
from gemmlab.problem import GemmProblem

from .fresh_threads import run_fresh, threads_script

cp = pytest.importorskip("cupy")
torch = pytest.importorskip("torch")


def _rel(c, ref):
    return float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))


@pytest.mark.parametrize("impl", [None, "async_pipeline", "cublas"])
def test_matmul_plan_executes_and_rebinds(impl):
    a, b = torch.rand(300, 200, device="cuda") - 0.5, torch.rand(200, 100, device="cuda") - 0.5
    c = torch.full((300, 100), float("nan"), device="cuda")
    plan = gemmlab.Matmul(a, b, c, impl=impl)
    assert plan.execute() is c
    assert _rel(c, a.double() @ b.double()) < 1e-5
    a2 = torch.rand(300, 200, device="cuda") - 0.5
    plan.execute(A=a2, alpha=2.0)
    assert _rel(c, 2.0 * (a2.double() @ b.double())) < 1e-5
    c0 = c.clone()
    plan.execute(beta=0.5, alpha=1.0)
    assert _rel(c, a2.double() @ b.double() + 0.5 * c0.double()) < 1e-5
    assert "runs:" in plan.explain()


def test_plan_owns_its_output_and_refuses_other_shapes():
    a = cp.random.default_rng(1).uniform(-1, 1, (64, 48), dtype=cp.float32)
    b = cp.random.default_rng(2).uniform(-1, 1, (48, 80), dtype=cp.float32)
    plan = gemmlab.Matmul(a, b)
    out = plan.execute()
    assert out is plan.execute() and isinstance(out, cp.ndarray)
    assert float(cp.abs(out - a @ b).max()) < 1e-4
    with pytest.raises(BadArgumentError, match="made for"):
        plan.execute(A=cp.zeros((64, 49), dtype=cp.float32))
    with pytest.raises(BadArgumentError, match="contiguous"):
        gemmlab.Matmul(a[:, ::2], b[::2])  # strided, not a transposed view: a plan never copies


@pytest.mark.parametrize("family", ["torch", "cupy"])
def test_plan_reads_transposed_views_in_place(family):
    """Matmul(x, W.T) and Matmul(A.T, B): cuBLAS's transpose flags, no copy; rebinding keeps the layout."""
    rng = cp.random.default_rng(4)
    x, w, w2 = (rng.uniform(-1, 1, s, dtype=cp.float32) for s in ((96, 200), (72, 200), (72, 200)))
    at = rng.uniform(-1, 1, (200, 96), dtype=cp.float32)  # A given as at.T
    if family == "torch":
        x, w, w2, at = (torch.from_dlpack(v) for v in (x, w, w2, at))
    plan = gemmlab.Matmul(x, w.T)
    assert plan.layout == (False, True) and plan.path == "library" and "layout nt" in plan.explain()
    ref = (lambda u, v: cp.asarray(u, dtype=cp.float64) @ cp.asarray(v, dtype=cp.float64)) if family == "cupy" else \
        (lambda u, v: cp.from_dlpack(u.double() @ v.double()))
    got = plan.execute()
    torch.cuda.synchronize()
    assert float(cp.abs(cp.asarray(got) - ref(x, w.T)).max()) < 1e-4
    got = plan.execute(B=w2.T)
    torch.cuda.synchronize()
    assert float(cp.abs(cp.asarray(got) - ref(x, w2.T)).max()) < 1e-4
    with pytest.raises(BadArgumentError, match="transposed view"):
        plan.execute(B=(w2.T.copy() if family == "cupy" else w2.T.contiguous()))
    tn = gemmlab.Matmul(at.T, w.T)
    assert tn.layout == (True, True)
    got = tn.execute()
    torch.cuda.synchronize()
    assert float(cp.abs(cp.asarray(got) - ref(at.T, w.T)).max()) < 1e-4
    with pytest.raises(BadArgumentError, match="a plan never copies"):
        gemmlab.Matmul(x, w.T, impl="vectorize")


def test_plain_cupy_call_reads_a_transposed_view_in_place():
    from gemmlab.api import core

    rng = cp.random.default_rng(5)
    x = rng.uniform(-1, 1, (130, 64), dtype=cp.float32)
    w = rng.uniform(-1, 1, (90, 64), dtype=cp.float32)
    out = gemmlab.sgemm(x, w.T)
    assert float(cp.abs(out - x.astype(cp.float64) @ w.T.astype(cp.float64)).max()) < 1e-4
    ex = core.executor("sgemm", "fp32", (130, 90, 64), None, None, cp.cuda.get_current_stream().ptr, (False, True))
    assert ex.path == "library" and ex.layout == (False, True)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                    reason="rung 5 (persistent) needs sm_90a (Hopper)")
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_plan_with_a_transposed_weight_on_the_tma_rung(dtype):
    problem = GemmProblem(256, 520, 136, 1.5, 0.0, dtype, "nt")
    A16, W16, C0 = hgemm_check.make_inputs(problem, 6)  # W is N x K
    tt = (lambda x: torch.from_dlpack(x).view(torch.bfloat16)) if dtype == "bf16" else torch.from_dlpack
    plan = gemmlab.Matmul(tt(A16), tt(W16).T, alpha=1.5, impl="persistent")
    assert plan.path == "kernel" and plan.layout == (False, True)
    out = plan.execute()
    torch.cuda.synchronize()
    assert hgemm_check.compare(cp.from_dlpack(out), A16, W16.T, C0, 1.5, 0.0, dtype).passed


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_hgemm_plan(dtype):
    problem = GemmProblem(512, 384, 256, 1.0, 0.0, dtype)
    A16, B16, C0 = hgemm_check.make_inputs(problem, 3)
    tt = (lambda x: torch.from_dlpack(x).view(torch.bfloat16)) if dtype == "bf16" else torch.from_dlpack
    plan = gemmlab.Matmul(tt(A16), tt(B16))
    assert plan.op == "hgemm"
    out = plan.execute()
    torch.cuda.synchronize()
    assert hgemm_check.compare(cp.from_dlpack(out), A16, B16, C0, 1.0, 0.0, dtype).passed


def test_a_plan_without_c_refuses_beta_until_given_one():
    """A plan made without C writes its own, uninitialised until the first execute: beta != 0 would
    read it, so execute(beta=...) is refused in one line (as the plain calls refuse beta without C)
    and nothing changes; with C given (its own result included) beta applies."""
    a, b = torch.rand(96, 64, device="cuda"), torch.rand(64, 80, device="cuda")
    plan = gemmlab.Matmul(a, b)
    with pytest.raises(ValueError, match=r"^gemmlab.Matmul \(sgemm\): beta != 0 reads C, and this plan was made without one"):
        plan.execute(beta=1.0)
    assert (plan.alpha, plan.beta) == (1.0, 0.0)
    with pytest.raises(ValueError, match="alpha must be a real number, not str"):
        plan.execute(alpha="2")
    first = plan.execute().clone()
    out = plan.execute(C=plan.result, alpha=2, beta=np.float32(0.5))
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert float(torch.linalg.norm(out.double() - (2 * ref + 0.5 * first.double())) / torch.linalg.norm(ref)) < 1e-5
    with pytest.raises(ValueError, match="beta must be a real number, not complex"):
        gemmlab.Matmul(a, b, out, beta=1j)


def test_torch_cuda_graph_captures_a_plan_and_a_plain_call():
    a, b = torch.rand(256, 128, device="cuda"), torch.rand(128, 192, device="cuda")
    c = torch.empty(256, 192, device="cuda")
    plan = gemmlab.Matmul(a, b, c)
    x = torch.rand(1 << 16, device="cuda")
    s_plan = gemmlab.Sum(x)
    gemmlab.sgemm(a, b)  # warm the plain call's executor outside the capture
    plan.execute(), s_plan.execute()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.execute()
        d = gemmlab.sgemm(a, b)
        total = s_plan.execute()
    for _ in range(2):  # new data in the same buffers, replayed; every output poisoned first
        a.copy_(torch.rand_like(a))
        # integers: any summation order is exact, so the replayed sum must equal the fp64 one
        x.copy_(torch.randint(-4, 5, x.shape, device="cuda").float())
        c.fill_(float("nan"))
        d.fill_(float("nan"))
        total.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        assert _rel(c, ref) < 1e-5 and _rel(d, ref) < 1e-5
        assert float(total) == float(x.double().sum())


def test_cupy_stream_capture_records_a_plan():
    a = cp.random.default_rng(1).uniform(-1, 1, (128, 64), dtype=cp.float32)
    b = cp.random.default_rng(2).uniform(-1, 1, (64, 96), dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        plan = gemmlab.Matmul(a, b, impl="async_pipeline")
        plan.execute()
        stream.synchronize()
        stream.begin_capture()
        plan.execute()
        graph = stream.end_capture()
        plan.result.fill(cp.nan)
        a[...] = 2 * a
        graph.launch(stream)
        stream.synchronize()
    assert float(cp.abs(plan.result - a @ b).max()) < 1e-4


def test_custom_ops_eager_and_compiled():
    gemmlab.register_torch_ops()
    a, b = torch.rand(96, 64, device="cuda") - 0.5, torch.rand(64, 80, device="cuda") - 0.5
    c = torch.rand(96, 80, device="cuda")
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * c.double()
    out = torch.ops.gemmlab.sgemm(a, b, c, 0.5, 2.0)
    assert out is not c and _rel(out, ref) < 1e-5
    torch.library.opcheck(torch.ops.gemmlab.sgemm.default, (a, b, c, 0.5, 2.0))

    def f(a, b, c, x):
        h = torch.ops.gemmlab.hgemm(a.half(), b.half())
        return torch.relu(torch.ops.gemmlab.sgemm(a, b, c, 1.0, 1.0)) + h, torch.ops.gemmlab.reduce_sum(x)

    x = torch.rand(4096, device="cuda")
    compiled = torch.compile(f, fullgraph=True)
    y, s = compiled(a, b, c, x)
    y_ref = torch.relu(a.double() @ b.double() + c.double()) + (a.half().double() @ b.half().double())
    assert _rel(y, y_ref) < 1e-5  # the reference multiplies the same half-rounded inputs
    assert abs(float(s) - float(x.double().sum())) < 1e-3
    graphed = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    for i in range(3):  # warm-up, record, replay: new data in the same tensors each time
        g = torch.Generator(device="cuda").manual_seed(100 + i)
        a.copy_(torch.rand(a.shape, device="cuda", generator=g) - 0.5)
        b.copy_(torch.rand(b.shape, device="cuda", generator=g) - 0.5)
        c.copy_(torch.rand(c.shape, device="cuda", generator=g))
        x.copy_(torch.randint(0, 9, x.shape, device="cuda", generator=g).float())  # an exact sum
        y, s = graphed(a, b, c, x)
        y_ref = torch.relu(a.double() @ b.double() + c.double()) + (a.half().double() @ b.half().double())
        assert _rel(y, y_ref) < 1e-5, i
        assert float(s) == float(x.double().sum()), i


THREAD_SCRIPT = threads_script(16, r"""
            m, n, k = 64 + 8 * i, 96 + 8 * i, 40 + 8 * i
            a = torch.rand(m, k, device="cuda", generator=g) - 0.5
            b = torch.rand(k, n, device="cuda", generator=g) - 0.5
            x = torch.rand(1000 + i, device="cuda", generator=g)
            barrier.wait(timeout=120)  # a thread that failed before it breaks the barrier, not hangs it
            c = gemmlab.sgemm(a, b, impl=None if i % 2 else "async_pipeline")
            h = gemmlab.hgemm(a.half(), b.half())
            t = gemmlab.reduce_sum(x)
            p = gemmlab.Matmul(a, b).execute()
        s.synchronize()
        # CuPy was first imported by gemmlab's set-up above (under its lock), not by this script.
        # The same operands as CuPy arrays, on a CuPy stream; then the 16 threads call at once.
        import cupy
        cs = cupy.cuda.Stream(non_blocking=True)
        with cs:
            ca, cb, cx = (cupy.asarray(v.cpu().numpy()) for v in (a, b, x))
        cs.synchronize()
        barrier.wait(timeout=120)
        with cs:  # CuPy's hot path (its lazy set-up may have run already where a torch call went the general way)
            cc = gemmlab.sgemm(ca, cb, impl="async_pipeline" if i % 2 else None)
            ch = gemmlab.hgemm(ca.astype(cupy.float16), cb.astype(cupy.float16))
            ct = gemmlab.reduce_sum(cx)
        s.synchronize()
        cs.synchronize()
        ref = a.double() @ b.double()
        if not abs(float(ct) - float(x.double().sum())) <= 1e-3:
            errors.append(f"thread {i} reduce_sum (CuPy): {float(ct)} vs {float(x.double().sum())}")
        cc, ch = (torch.as_tensor(cupy.asnumpy(v), device="cuda") for v in (cc, ch))
        for name, got, tol in (("sgemm", c, 1e-5), ("plan", p, 1e-5), ("hgemm", h, 2e-3),
                               ("sgemm (CuPy)", cc, 1e-5), ("hgemm (CuPy)", ch, 2e-3)):
            err = float(torch.linalg.norm(got.double() - ref) / torch.linalg.norm(ref))
            if not err <= tol:  # a NaN (a race's unwritten output) fails too: NaN > tol is False
                errors.append(f"thread {i} {name}: relative error {err:.2e}")
        if not abs(float(t) - float(x.double().sum())) <= 1e-3:
            errors.append(f"thread {i} reduce_sum: {float(t)} vs {float(x.double().sum())}")
""")


def test_first_use_from_16_threads_in_fresh_processes():
    """Each repetition is a new interpreter, so the first use (imports, registry, device, context,
    compiled kernels, cuBLAS handles, the torch and CuPy hot paths) really happens in 16 threads
    at once."""
    run_fresh(THREAD_SCRIPT, int(os.environ.get("GEMMLAB_THREAD_REPEATS", "3")))
