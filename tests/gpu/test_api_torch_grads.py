"""The torch custom ops' gradients (api/torch_grads.py) on the GPU: against an fp64 reference on
odd shapes, through the layout of torch.nn.functional.linear (x @ W.T), under
torch.library.opcheck (which checks the autograd registration) and in a training step compiled
with fullgraph. The formulas alone are tested without a GPU in tests/cpu/test_torch_op_grads.py."""
import pytest

import gemmlab

torch = pytest.importorskip("torch")

M, N, K = 97, 75, 131  # no tile divides them


@pytest.fixture(scope="module")
def ops():
    gemmlab.register_torch_ops()
    return torch.ops.gemmlab


def _rel(x, ref):
    return float(torch.linalg.norm(x.double() - ref) / torch.linalg.norm(ref))


def _leaf(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.rand(*shape, device="cuda", generator=g) - 0.5).to(dtype).requires_grad_()


def _grads(out, leaves, seed=9):
    """out's gradients for the leaves under a random incoming gradient, and that gradient."""
    g = torch.rand(out.shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed)) - 0.5
    g = g.to(out.dtype)
    return torch.autograd.grad(out, leaves, g), g


def test_sgemm_gradients_match_fp64(ops):
    A, B, C = _leaf(M, K, seed=1), _leaf(K, N, seed=2), _leaf(M, N, seed=3)
    (dA, dB, dC), g = _grads(ops.sgemm(A, B, C, 0.5, 2.0), (A, B, C))
    a, b, gd = A.detach().double(), B.detach().double(), g.double()
    assert _rel(dA, 0.5 * gd @ b.T) < 1e-5 and _rel(dB, 0.5 * a.T @ gd) < 1e-5
    assert torch.equal(dC, 2.0 * g)


def test_bgemm_gradients_match_fp64(ops):
    A, B, C = _leaf(3, M, K, seed=1), _leaf(3, K, N, seed=2), _leaf(3, M, N, seed=3)
    (dA, dB, dC), g = _grads(ops.bgemm(A, B, C, -1.5, 0.25), (A, B, C))
    a, b, gd = A.detach().double(), B.detach().double(), g.double()
    assert _rel(dA, -1.5 * gd @ b.transpose(1, 2)) < 1e-5 and _rel(dB, -1.5 * a.transpose(1, 2) @ gd) < 1e-5
    assert torch.equal(dC, 0.25 * g)


BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32


@pytest.mark.parametrize("dtype, out_dtype, tol", [
    (BF16, None, 1e-2), (BF16, BF16, 1e-2), (F16, F16, 2e-3), (F32, None, 5e-3),
])
def test_hgemm_gradients_match_fp64(ops, dtype, out_dtype, tol):
    # (the gradients' types are the products' own, checked on the CPU: autograd casts a .grad)
    A, B = _leaf(M, K, dtype=dtype, seed=1), _leaf(K, N, dtype=dtype, seed=2)
    C = _leaf(M, N, dtype=out_dtype or F32, seed=3)
    (dA, dB, dC), g = _grads(ops.hgemm(A, B, C, 0.5, 2.0, out_dtype), (A, B, C))
    gd = g.to(dtype).double()  # rounded to the inputs' type before its products (fp32: kept)
    a, b = A.detach().double(), B.detach().double()
    assert _rel(dA, 0.5 * gd @ b.T) < tol and _rel(dB, 0.5 * a.T @ gd) < tol
    assert _rel(dC, 2.0 * g.double()) < 1e-2


@pytest.mark.parametrize("g_scale, scale", [(1e5, 1e-3), (1e-6, 1e2)])
def test_fp16_inputs_with_an_fp32_result_keep_the_gradients_range(ops, g_scale, scale):
    # g past fp16's largest value (inf once rounded to fp16), or below its normal range (a
    # subnormal, a few per cent off), while the gradients themselves are normal fp16 values
    A, B = ((_leaf(*s, dtype=F16, seed=i).detach() * scale).requires_grad_() for i, s in ((1, (M, K)), (2, (K, N))))
    out = ops.hgemm(A, B)
    g = (torch.rand(out.shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(5)) + 0.5) * g_scale
    dA, dB = torch.autograd.grad(out, (A, B), g)
    a, b, gd = A.detach().double(), B.detach().double(), g.double()
    assert torch.isfinite(dA).all() and torch.isfinite(dB).all()
    assert _rel(dA, gd @ b.T) < 5e-3 and _rel(dB, a.T @ gd) < 5e-3  # tf32 products, one fp16 rounding


def test_beta_zero_gives_c_a_zero_gradient(ops):
    A, B = _leaf(M, K, seed=1), _leaf(K, N, seed=2)
    C = torch.full((M, N), float("nan"), device="cuda", requires_grad=True)  # not read, NaN or not
    out = ops.sgemm(A, B, C, 1.0, 0.0)
    assert torch.isfinite(out).all()
    (dC,) = torch.autograd.grad(out, (C,), torch.ones_like(out))
    assert torch.equal(dC, torch.zeros_like(C))


@pytest.mark.parametrize("op, dtype", [("sgemm", torch.float32), ("hgemm", torch.bfloat16)])
def test_the_linear_layout_gives_the_weight_its_gradient(ops, op, dtype):
    # y = x @ W.T, as torch.nn.functional.linear: W's gradient comes back through the view
    x, W = _leaf(M, K, dtype=dtype, seed=4), _leaf(N, K, dtype=dtype, seed=5)
    x_ref, W_ref = (t.detach().double().requires_grad_() for t in (x, W))
    (dx, dW), g = _grads(getattr(ops, op)(x, W.T), (x, W))
    (rx, rW) = torch.autograd.grad(x_ref @ W_ref.T, (x_ref, W_ref), g.double().to(dtype).double())
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert _rel(dx, rx) < tol and _rel(dW, rW) < tol


def test_reduce_sum_gradient(ops):
    x = _leaf(1000, 3)
    (dx,) = torch.autograd.grad(ops.reduce_sum(x), (x,), torch.tensor(2.5, device="cuda"))
    assert torch.equal(dx, torch.full_like(x, 2.5))


def test_opcheck_passes_with_gradients(ops):
    # opcheck's autograd-registration and AOT-dispatch checks need inputs that require grad
    A, B, C = _leaf(M, K, seed=1), _leaf(K, N, seed=2), _leaf(M, N, seed=3)
    a16, b16 = (t.detach().bfloat16().requires_grad_() for t in (A, B))
    torch.library.opcheck(ops.sgemm.default, (A, B, C, 0.5, 2.0))
    torch.library.opcheck(ops.hgemm.default, (a16, b16, None, 1.0, 0.0, BF16))
    torch.library.opcheck(ops.hgemm.default, (a16, b16, C, 1.0, 3.0, None))  # fp32 g rounded, dC
    torch.library.opcheck(ops.bgemm.default, (_leaf(2, M, K), _leaf(2, K, N), _leaf(2, M, N), -1.0, 0.5))
    torch.library.opcheck(ops.reduce_sum.default, (_leaf(4096),))


def test_a_compiled_training_step_matches_eager(ops):
    x, W, v = _leaf(M, K, seed=6), _leaf(N, K, seed=7), _leaf(N, 16, seed=8)

    def loss(x, W, v):
        h = torch.relu(ops.sgemm(x, W.T))
        return ops.reduce_sum(ops.sgemm(h, v) ** 2)

    eager = torch.autograd.grad(loss(x, W, v), (x, W, v))
    compiled = torch.autograd.grad(torch.compile(loss, fullgraph=True)(x, W, v), (x, W, v))
    xr, Wr, vr = (t.detach().double().requires_grad_() for t in (x, W, v))
    ref = torch.autograd.grad(((torch.relu(xr @ Wr.T) @ vr) ** 2).sum(), (xr, Wr, vr))
    for e, c, r in zip(eager, compiled, ref):
        assert _rel(e, r) < 1e-4 and _rel(c, r) < 1e-4
