"""The API's fast paths, each checked against the fp64 reference of its op: prepared kernel launches
(split-K, TMA with tensor maps, batched), cuBLAS called directly, the runner fallback, the
dispatch default, torch's empty-dimension rules, for torch and CuPy inputs, with NaN-poisoned C
when beta == 0 (C must not be read) and random C otherwise."""
import numpy as np
import pytest

import gemmlab
from gemmlab.ops import bgemm as bgemm_op
from gemmlab.ops import hgemm_check, sgemm as sgemm_op
from gemmlab.problem import BatchedGemmProblem, GemmProblem

cp = pytest.importorskip("cupy")
torch = pytest.importorskip("torch")

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)  # no GPU: conftest skips
SCALARS = [(1.0, 0.0), (0.75, -1.25)]


def _torch(x, dtype):
    t = torch.from_dlpack(x)
    return t.view(torch.bfloat16) if dtype == "bf16" else t


def _sgemm_case(M, N, K, alpha, beta, seed, family):
    A, B, C0 = sgemm_op.make_inputs(GemmProblem(M, N, K, alpha, beta), seed)
    C = C0.copy()
    if family == "torch":
        return A, B, C0, _torch(A, "fp32"), _torch(B, "fp32"), _torch(C, "fp32")
    return A, B, C0, A, B, C


@pytest.mark.parametrize("family", ["torch", "cupy"])
@pytest.mark.parametrize("impl,shape", [
    ("async_pipeline", (257, 130, 300)), ("autotuned", (1024, 512, 256)), ("hopper_simt", (96, 160, 4096)),
    ("hopper_simt", (1000, 3000, 2000)), ("cublas", (67, 45, 33)), ("cublas", (1024, 1024, 1024)),
    ("torch", (65, 33, 129)), (None, (512, 512, 512)), (None, (33, 1, 7)),
])
@pytest.mark.parametrize("alpha,beta", SCALARS)
def test_sgemm_paths(family, impl, shape, alpha, beta):
    A, B, C0, a, b, c = _sgemm_case(*shape, alpha, beta, hash((impl, shape)) % 1000, family)
    out = gemmlab.sgemm(a, b, c, alpha=alpha, beta=beta, impl=impl)
    assert out is c
    torch.cuda.synchronize()
    verdict = sgemm_op.compare(cp.asarray(c) if family == "cupy" else cp.from_dlpack(c), A, B, C0, alpha, beta)
    assert verdict.passed, verdict.reason


def test_split_k_path_is_taken_and_correct():
    """hopper_simt at a tall-K, small-MN shape splits K: the reduction launch and its workspace."""
    from gemmlab.api import core

    A, B, C0, a, b, c = _sgemm_case(64, 64, 8192, 1.0, 0.5, 5, "torch")
    gemmlab.sgemm(a, b, c, beta=0.5, impl="hopper_simt", params={"SPLITK": 4})
    ex = core.executor("sgemm", "fp32", (64, 64, 8192), "hopper_simt", {"SPLITK": 4},
                       torch.cuda.current_stream().cuda_stream)
    assert ex.reduce is not None, "SPLITK=4 must launch the reduction"
    torch.cuda.synchronize()
    assert sgemm_op.compare(cp.from_dlpack(c), A, B, C0, 1.0, 0.5).passed


HGEMM_CASES = [("mma_sync", (129, 264, 72)), ("wmma", (97, 33, 65)), ("cublas", (333, 191, 1031)),
               ("cublas", (1000, 3000, 2000)), (None, (1024, 1024, 1024)), (None, (127, 127, 127))]
if HOPPER:
    HGEMM_CASES += [("persistent", (1024, 2048, 512)), ("persistent", (1000, 3000, 2000)),
                    ("warp_specialized", (256, 512, 1024)), ("persistent", (129, 257, 65)),  # padded: runner path
                    ("tma_wgmma", (512, 256, 128))]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("impl,shape", HGEMM_CASES)
@pytest.mark.parametrize("alpha,beta", SCALARS)
def test_hgemm_paths(dtype, impl, shape, alpha, beta):
    problem = GemmProblem(*shape, alpha, beta, dtype)
    A16, B16, C0 = hgemm_check.make_inputs(problem, 7)
    c = _torch(C0.copy(), "fp32")
    gemmlab.hgemm(_torch(A16, dtype), _torch(B16, dtype), c, alpha=alpha, beta=beta, impl=impl)
    torch.cuda.synchronize()
    verdict = hgemm_check.compare(cp.from_dlpack(c), A16, B16, C0, alpha, beta, dtype)
    assert verdict.passed, verdict.reason


@pytest.mark.parametrize("impl", ["cublas"] + (["tf32_wgmma", None] if HOPPER else []))
def test_hgemm_tf32_paths(impl):
    problem = GemmProblem(200, 136, 264, 1.0, 0.5, "tf32")
    A, B, C0 = hgemm_check.make_inputs(problem, 9)
    c = C0.copy()
    gemmlab.hgemm(A, B, c, beta=0.5, impl=impl)
    verdict = hgemm_check.compare(c, A, B, C0, 1.0, 0.5, "tf32")
    assert verdict.passed, verdict.reason


@pytest.mark.parametrize("impl", ["batched_pipeline", "cublas", "torch", None])
@pytest.mark.parametrize("alpha,beta", SCALARS)
def test_bgemm_paths(impl, alpha, beta):
    problem = BatchedGemmProblem(33, 65, 47, alpha, beta, batch=5)
    A, B, C0 = bgemm_op.make_inputs(problem, 11)
    c = C0.copy()
    gemmlab.bgemm(_torch(A, "fp32"), _torch(B, "fp32"), _torch(c, "fp32"), alpha=alpha, beta=beta, impl=impl)
    torch.cuda.synchronize()
    verdict = bgemm_op.compare(c, A, B, C0, alpha, beta)
    assert verdict.passed, verdict.reason


@pytest.mark.parametrize("impl", ["single_pass", "tile_queue", "shuffle", "grid_stride_vec4", "cub", None])
@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 7])
def test_reduce_paths(impl, n):
    from gemmlab.ops.reduce_check import check_sum, reference

    host = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
    ref, abs_sum = reference(host)
    for x in (cp.asarray(host), torch.from_numpy(host).cuda()):
        out = gemmlab.reduce_sum(x, impl=impl)
        verdict = check_sum(float(out.item()), ref, abs_sum, n, exact=False)
        assert verdict.passed, f"{impl} n={n}: {verdict.reason}"


def test_reduce_plan_rebinds_and_counts_many_sizes_per_thread():
    xs = [cp.full(n, 1.0, dtype=cp.float32) for n in (5, 4096, 1 << 22)]
    for x in xs:
        assert float(gemmlab.Sum(x).execute().get()) == x.size
        assert float(gemmlab.reduce_sum(x).get()) == x.size


def test_empty_dimensions_follow_torch():
    a = torch.rand(0, 5, device="cuda")
    b = torch.rand(5, 3, device="cuda")
    assert gemmlab.sgemm(a, b).shape == (0, 3)
    a, b = torch.rand(4, 0, device="cuda"), torch.rand(0, 3, device="cuda")
    assert torch.equal(gemmlab.sgemm(a, b), torch.zeros(4, 3, device="cuda"))
    c = torch.full((4, 3), 2.0, device="cuda")
    gemmlab.sgemm(a, b, c, beta=0.5)
    assert torch.equal(c, torch.addmm(torch.full((4, 3), 2.0, device="cuda"), a, b, beta=0.5))
    c = torch.full((4, 3), float("nan"), device="cuda")
    gemmlab.sgemm(a, b, c, beta=0.0)
    assert torch.equal(c, torch.zeros(4, 3, device="cuda")), "beta == 0 must not read C (NaN stays out)"
    h = gemmlab.hgemm(torch.rand(3, 0, device="cuda").half(), torch.rand(0, 2, device="cuda").half())
    assert h.dtype == torch.float32 and torch.equal(h, torch.zeros(3, 2, device="cuda"))
    assert gemmlab.bgemm(torch.rand(0, 2, 3, device="cuda"), torch.rand(0, 3, 4, device="cuda")).shape == (0, 2, 4)


def test_strided_inputs_and_output_are_handled():
    base = torch.rand(64, 96, device="cuda") - 0.5
    a = base.t()  # 96 x 64, a transposed view
    b = (torch.rand(64, 80, device="cuda") - 0.5)[:, ::2]  # 64 x 40, strided
    big = torch.zeros(96, 80, device="cuda")
    c = big[:, ::2]
    gemmlab.sgemm(a, b, c)
    ref = a.double() @ b.double()
    assert float((c.double() - ref).abs().max()) < 1e-4
    assert float(big[:, 1::2].abs().max()) == 0.0, "only C's own elements may change"


def test_default_choice_is_what_explain_names(capsys):
    a = torch.rand(512, 512, device="cuda")
    text = gemmlab.explain(a, a)
    assert "runs:" in text and "why:" in text
    from gemmlab.api import core

    ex = core.executor("sgemm", "fp32", (512, 512, 512), None, None, torch.cuda.current_stream().cuda_stream)
    assert f"runs:    {ex.choice.impl}" in text
