"""Layouts tn and tt on the GPU: A given as its transpose, a KxM row-major array (A.T views), with B
as KxN (tn) or given as NxK (tt). Read in place by rung 5 built with A_MNMAJOR = 1 (M-major TMA
boxes, wgmma's A transpose bit; rung 6's tf32 in test_hgemm_tf32_tn_tt.py) and by the baselines (cuBLAS with CUBLAS_OP_T on A, torch.mm of
transposed views).

Every result is checked against the fp64 product of the same rounded inputs, A taken as At.T,
with C NaN-poisoned when beta == 0: a kernel that read the KxM array as if it were MxK, or
dropped the transpose bit, computes another product and fails (on square shapes too, At being
random). Shapes: the odd-shape sweep (M % 8 != 0: A^T copied into padded rows) and the aligned
one (read in place), larger shapes, the 2-CTA cluster and BN = 128, a 16-bit C; then the API with
torch's transposed views, plain calls and plans.
"""
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops import hgemm_check as hv
from gemmlab.ops.hgemm import refusal
from gemmlab.problem import GemmProblem

from .hgemm_sweeps import assert_all_pass, hopper, skip_unavailable

TN = [i for i in registry.all_impls("hgemm") if i.kind == "baseline" or "layout_tn" in i.tags]
HALF = ("fp16", "bf16")
TN_HALF = [i for i in TN if not i.dtypes or set(HALF) <= set(i.dtypes)]  # tf32_wgmma: test_hgemm_tf32_tn_tt.py
LAYOUTS = ("tn", "tt")
LARGE = ((1024, 1024, 1024), (1032, 2048, 4096), (1000, 3000, 2000), (1031, 517, 1027))
OTHER_PARAMS = [{"CM": 1}, {"BN": 128, "STAGES": 6, "CM": 2, "GROUP_M": 1}, {"BN": 128, "CM": 1, "GROUP_M": 16}]


def test_the_layout_tn_implementations():
    assert {i.name for i in TN} == {"persistent", "tf32_wgmma", "cublas", "torch"}
    assert {i.name for i in TN_HALF} == {"persistent", "cublas", "torch"}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("impl", TN_HALF, ids=lambda i: i.name)
def test_sweep_tn(impl, dtype, layout):
    skip_unavailable(impl)
    problems = hv.sweep_problems(dtype, hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES, layout=layout)
    assert not [p for p in problems if refusal(impl, p)], "layouts tn and tt take any shape"
    assert_all_pass(verify_sweep([impl], problems))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("impl", TN_HALF, ids=lambda i: i.name)
def test_large_tn_with_both_c_types(impl, dtype, layout):
    skip_unavailable(impl)
    problems = [p for out in ("fp32", dtype) for p in hv.sweep_problems(dtype, LARGE, layout=layout, out=out)]
    assert_all_pass(verify_sweep([impl], problems))


@pytest.mark.parametrize("params", OTHER_PARAMS, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_persistent_tn_other_parameters(params, layout):
    impl = registry.get("persistent", "hgemm")
    skip_unavailable(impl)
    shapes = hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES + ((1000, 1000, 1000), (520, 2000, 1000))
    problems = [p for d in HALF for p in hv.sweep_problems(d, shapes, layout=layout)]
    assert_all_pass(verify_sweep([impl], problems, {"persistent": params}))


def test_one_sweep_mixes_all_four_layouts():
    impl = registry.get("persistent", "hgemm")
    skip_unavailable(impl)
    problems = [GemmProblem(136, 264, 72, 1.5, -0.75, "bf16", layout) for layout in ("nn", "tn", "nt", "tt", "nn")]
    results = verify_sweep([impl], problems)
    assert_all_pass(results)
    assert [(r.params["A_MNMAJOR"], r.params["B_KMAJOR"]) for r in results] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 0)]


# -- the API: A given as a transposed view --------------------------------------------------------

@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("b_t", [False, True], ids=["tn", "tt"])
@pytest.mark.parametrize("impl", ["persistent", "cublas", None])
def test_api_reads_a_transposed_a_in_place(dtype, b_t, impl):
    torch = pytest.importorskip("torch")
    if impl == "persistent" and not hopper():
        pytest.skip("persistent needs sm_90a (Hopper)")
    from gemmlab import Matmul, hgemm
    from gemmlab.api import core

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    M, N, K = 264, 520, 136
    g = torch.Generator(device="cuda").manual_seed(3)
    at = (torch.rand(K, M, device="cuda", generator=g) - 0.5).to(dt)  # A = at.T
    b = (torch.rand(N, K, device="cuda", generator=g) - 0.5).to(dt) if b_t else \
        (torch.rand(K, N, device="cuda", generator=g) - 0.5).to(dt)
    bb = b.t() if b_t else b
    ref = at.double().t() @ bb.double()
    out = hgemm(at.t(), bb, impl=impl)
    torch.cuda.synchronize()
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5
    ex = core.executor("hgemm", dtype, (M, N, K), impl, None, torch.cuda.current_stream().cuda_stream, (True, b_t))
    assert ex.fast and ex.path == ("kernel" if impl == "persistent" else "library"), "read in place, no copy"
    plan = Matmul(at.t(), bb, impl=impl, out_dtype=dtype)
    assert plan.layout == (True, b_t)
    got = plan.execute()
    torch.cuda.synchronize()
    assert got.dtype == dt
    # the 16-bit C against its own bounds (rounded once, to nearest even), as test_api_out16 checks
    # layout nn: a normwise 1e-2 would pass an fp16 C rounded only to bf16's precision
    cp = pytest.importorskip("cupy")

    def bits(t):  # the storage of a 16-bit tensor as hgemm_check reads it (bf16 as uint16 bits)
        return cp.from_dlpack(t.contiguous().view(torch.int16)).view(cp.uint16 if dtype == "bf16" else cp.float16)

    verdict = hv.compare(bits(got), bits(at.t()), bits(bb), None, 1.0, 0.0, dtype, dtype)
    assert verdict.passed, verdict.reason
