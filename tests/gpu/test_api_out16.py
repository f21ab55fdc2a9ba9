"""A 16-bit C through the API (issue 14: the output in the input type, as torch.mm writes it for
fp16/bf16 inputs): plain calls with out_dtype or a 16-bit C, plans, transposed B views, CuPy fp16,
the torch custom op (eager and torch.compile), a CUDA graph of a plan, and torch's empty-dimension
rules. Each result is checked against the fp64 product of the same 16-bit inputs with the bounds
of a 16-bit result (ops/hgemm_check.py), C NaN-poisoned in its own storage when beta == 0 (it
must not be read) and random when beta != 0."""
import pytest

import gemmlab
from gemmlab.ops import hgemm_check as hv
from gemmlab.problem import GemmProblem

cp = pytest.importorskip("cupy")
torch = pytest.importorskip("torch")

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)  # no GPU: conftest skips
TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16}
# (impl, shape): the dispatch default, cuBLAS (cublasLtMatmul with a 16-bit C), the torch baseline
# (runner path) and, on Hopper, rung 5 with OUT16 through its prepared TMA launch (aligned rows)
# and through the padding runner (rows that TMA cannot describe).
CASES = [(None, (1024, 1024, 1024)), (None, (127, 127, 127)), ("cublas", (333, 191, 1031)),
         ("cublas", (1000, 3000, 2000)), ("torch", (97, 65, 33))]
if HOPPER:
    CASES += [("persistent", (1024, 2048, 512)), ("persistent", (1000, 3000, 2000)), ("persistent", (129, 257, 65)),
              ("persistent", (31, 520, 208))]
SCALARS = [(1.0, 0.0), (1.5, -0.75)]


def _torch(x, dtype):
    t = torch.from_dlpack(x)
    return t.view(torch.bfloat16) if dtype == "bf16" else t


def _bits(t, dtype):
    """A CuPy view of a 16-bit torch tensor's storage (bf16 as its uint16 bits), for hgemm_check."""
    return cp.from_dlpack(t.view(torch.int16) if dtype == "bf16" else t).view(cp.uint16 if dtype == "bf16" else cp.float16)


def _check(c, A16, B16, C0, alpha, beta, dtype, b_transposed=False):
    torch.cuda.synchronize()
    assert c.dtype == TORCH[dtype]
    B = B16.T if b_transposed else B16
    verdict = hv.compare(_bits(c, dtype), A16, B, C0, alpha, beta, dtype, dtype)
    assert verdict.passed, verdict.reason


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("impl,shape", CASES)
@pytest.mark.parametrize("alpha,beta", SCALARS)
def test_plain_call_writes_c_in_the_input_type(dtype, impl, shape, alpha, beta):
    problem = GemmProblem(*shape, alpha, beta, dtype, "nn", dtype)
    A16, B16, C0 = hv.make_inputs(problem, 21)
    a, b = _torch(A16, dtype), _torch(B16, dtype)
    c = _torch(C0.copy(), dtype)  # beta == 0: NaN in C's own storage, never read
    out = gemmlab.hgemm(a, b, c, alpha=alpha, beta=beta, impl=impl)
    assert out is c
    _check(c, A16, B16, C0, alpha, beta, dtype)
    if beta == 0.0:  # a new C of the named type
        new = gemmlab.hgemm(a, b, alpha=alpha, impl=impl, out_dtype=TORCH[dtype])
        _check(new, A16, B16, C0, alpha, beta, dtype)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("impl", ["cublas", None] + (["persistent"] if HOPPER else []))
def test_transposed_b_view_with_a_16bit_c(dtype, impl):
    """x @ W.T with a 16-bit result (torch.nn.functional.linear's layout and output type)."""
    problem = GemmProblem(256, 520, 136, 1.0, 0.0, dtype, "nt", dtype)
    A16, W16, C0 = hv.make_inputs(problem, 22)  # W is N x K
    x, w = _torch(A16, dtype), _torch(W16, dtype)
    out = gemmlab.hgemm(x, w.T, impl=impl, out_dtype=dtype)
    _check(out, A16, W16, C0, 1.0, 0.0, dtype, b_transposed=True)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("impl", ["cublas", None] + (["persistent"] if HOPPER else []))
def test_plan_with_a_16bit_c_rebinds_and_keeps_its_type(dtype, impl):
    problem = GemmProblem(512, 264, 200, 0.5, 0.25, dtype, "nn", dtype)
    A16, B16, C0 = hv.make_inputs(problem, 23)
    a, b, c = _torch(A16, dtype), _torch(B16, dtype), _torch(C0.copy(), dtype)
    plan = gemmlab.Matmul(a, b, c, alpha=0.5, beta=0.25, impl=impl)
    assert plan.execute() is c
    _check(c, A16, B16, C0, 0.5, 0.25, dtype)
    c2 = _torch(C0.copy(), dtype)
    assert plan.execute(C=c2) is c2
    _check(c2, A16, B16, C0, 0.5, 0.25, dtype)
    own = gemmlab.Matmul(a, b, out_dtype=dtype, impl=impl)
    result = own.execute()
    assert result is own.execute() and "C " + dtype in own.explain()
    _check(result, A16, B16, hv.poison(C0.shape, dtype, cp), 1.0, 0.0, dtype)
    with pytest.raises(ValueError, match="this plan was made for"):
        plan.execute(C=torch.empty(512, 264, device="cuda"))  # an fp32 C for a 16-bit plan


def test_cupy_fp16_c():
    problem = GemmProblem(300, 136, 264, 1.0, -0.5, "fp16", "nn", "fp16")
    A16, B16, C0 = hv.make_inputs(problem, 24)
    c = C0.copy()
    assert gemmlab.hgemm(A16, B16, c, beta=-0.5) is c
    assert hv.compare(c, A16, B16, C0, 1.0, -0.5, "fp16", "fp16").passed
    new = gemmlab.hgemm(A16, B16, out_dtype="float16")
    assert isinstance(new, cp.ndarray) and new.dtype == cp.float16
    assert hv.compare(new, A16, B16, hv.poison(C0.shape, "fp16", cp), 1.0, 0.0, "fp16", "fp16").passed


def test_refusals_are_one_line():
    a = torch.rand(64, 32, device="cuda").to(torch.bfloat16)
    b = torch.rand(32, 48, device="cuda").to(torch.bfloat16)
    with pytest.raises(ValueError, match="writes C in float32 or bfloat16"):
        gemmlab.hgemm(a, b, out_dtype="fp16")
    with pytest.raises(ValueError, match="C is bfloat16 but out_dtype is float32"):
        gemmlab.hgemm(a, b, torch.empty(64, 48, device="cuda", dtype=torch.bfloat16), out_dtype="fp32")
    with pytest.raises(ValueError, match="has dtype float16"):
        gemmlab.hgemm(a, b, torch.empty(64, 48, device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match="needs float32"):
        gemmlab.sgemm(a.float(), b.float(), torch.empty(64, 48, device="cuda", dtype=torch.bfloat16))
    x = cp.ones((64, 32), dtype=cp.float16)
    with pytest.raises(ValueError, match="writes C in float32 or float16"):
        gemmlab.hgemm(x, x.T.copy(), out_dtype="bf16")


def test_empty_dimensions_keep_the_c_type():
    a = torch.rand(5, 0, device="cuda").to(torch.bfloat16)
    b = torch.rand(0, 7, device="cuda").to(torch.bfloat16)
    zeros = gemmlab.hgemm(a, b, out_dtype="bf16")
    assert zeros.dtype == torch.bfloat16 and zeros.shape == (5, 7) and not zeros.any()
    c = torch.full((5, 7), 2.0, device="cuda", dtype=torch.bfloat16)
    assert gemmlab.hgemm(a, b, c, beta=0.5) is c and torch.equal(c, torch.ones_like(c))


def test_custom_op_16bit_c_eager_compiled_and_graphed():
    gemmlab.register_torch_ops()
    problem = GemmProblem(256, 264, 136, 1.0, 0.0, "bf16", "nn", "bf16")
    A16, B16, C0 = hv.make_inputs(problem, 25)
    a, b = _torch(A16, "bf16"), _torch(B16, "bf16")

    def f(x, y):
        return torch.ops.gemmlab.hgemm(x, y, out_dtype=torch.bfloat16)

    _check(f(a, b), A16, B16, C0, 1.0, 0.0, "bf16")
    _check(torch.compile(f, fullgraph=True)(a, b), A16, B16, C0, 1.0, 0.0, "bf16")
    plan = gemmlab.Matmul(a, b, out_dtype="bf16")
    plan.execute()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.execute()
    plan.result.fill_(float("nan"))
    graph.replay()
    _check(plan.result, A16, B16, C0, 1.0, 0.0, "bf16")
