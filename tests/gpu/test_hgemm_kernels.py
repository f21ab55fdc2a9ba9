"""Every hgemm rung and the cuBLAS baseline against fp64, for each input type it takes (fp16,
bf16; tf32 for rung 6), alpha/beta both ways (beta = 0 with C poisoned by NaN, and 1.5/-0.75):
the shapes each rung's rule allows, larger shapes (the GPU-side reference), other template
parameters (the 2-CTA multicast cluster among them), the refusal of shapes mma_sync and the
TMA rungs 3-4 cannot take, and gemmlab.hgemm on torch tensors. The Hopper rungs skip on other
GPUs."""
import pytest

from gemmlab import registry
from gemmlab.errors import BadArgumentError
from gemmlab.ops import hgemm_check as hv
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops.hgemm import HgemmRunner, refusal
from gemmlab.problem import GemmProblem

DTYPES = ("fp16", "bf16")
IMPLS = registry.all_impls("hgemm")
# every (implementation, dtype) it takes: kernels by their dtypes, baselines all three
CASES = [(i, d) for i in IMPLS for d in hv.DTYPES if d in (getattr(i, "dtypes", ()) or hv.DTYPES)]
LARGE = ((1024, 1024, 1024), (2048, 1032, 4096), (4096, 4096, 512))


def _assert_all_pass(results):
    bad = [f"{r.impl} {r.problem.shape} a={r.problem.alpha} b={r.problem.beta}: {r.status} {r.reason}"
           for r in results if r.status != "PASS"]
    assert not bad, "\n".join(bad)


def _supported(impl, problems):
    return [p for p in problems if not refusal(impl, p)]


def _skip_unavailable(impl):
    if impl.kind == "baseline" and impl.unavailable_reason():
        pytest.skip(impl.unavailable_reason())
    if getattr(impl, "arch", None) == "sm_90a":
        from gemmlab.cuda.device import info

        if info().arch != "sm_90":
            pytest.skip(f"{impl.name} needs sm_90a (Hopper); this GPU is {info().arch}")


@pytest.mark.parametrize("impl,dtype", CASES, ids=lambda x: getattr(x, "name", x))
def test_sweep(impl, dtype):
    _skip_unavailable(impl)
    problems = _supported(impl, hv.sweep_problems(dtype, hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES))
    assert len(problems) >= 2 * len(hv.ALIGNED_SHAPES)
    _assert_all_pass(verify_sweep([impl], problems))


@pytest.mark.parametrize("impl,dtype", CASES, ids=lambda x: getattr(x, "name", x))
def test_large(impl, dtype):
    _skip_unavailable(impl)
    _assert_all_pass(verify_sweep([impl], hv.sweep_problems(dtype, LARGE)))


# Other points of each space (tests/cpu/test_hgemm_compile.py checks they satisfy the constraints).
OTHER_PARAMS = [
    ("wmma", {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32}),
    ("wmma", {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "WN": 64}),
    ("mma_sync", {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "STAGES": 2}),
    ("mma_sync", {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "WN": 64, "STAGES": 3}),
    ("mma_sync", {"BM": 256, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 5}),
    ("tma_wgmma", {"BN": 64, "STAGES": 2}),
    ("tma_wgmma", {"BN": 128, "STAGES": 6}),
    ("warp_specialized", {"BN": 128, "STAGES": 6}),
    ("persistent", {"CM": 2}),  # the 2-CTA cluster, B multicast to both
    ("persistent", {"BN": 128, "STAGES": 6, "CM": 2, "GROUP_M": 1}),
    ("tf32_wgmma", {"CM": 2}),
    ("tf32_wgmma", {"BN": 128, "STAGES": 3, "GROUP_M": 16}),
]


@pytest.mark.parametrize("name,params", OTHER_PARAMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_other_parameters(name, params, dtype):
    impl = registry.get(name, "hgemm")
    _skip_unavailable(impl)
    if impl.dtypes == ("tf32",):
        if dtype == "bf16":
            pytest.skip("the tf32 rung runs once, with fp32 inputs")
        dtype = "tf32"
    any_shape = name in ("wmma", "persistent", "tf32_wgmma")
    shapes = hv.ALIGNED_SHAPES + ((1000, 1000, 1000), (2000, 520, 1000)) + (hv.SWEEP_SHAPES if any_shape else ())
    problems = _supported(impl, hv.sweep_problems(dtype, shapes))
    _assert_all_pass(verify_sweep([impl], problems, {name: params}))


@pytest.mark.parametrize("shape", [(127, 127, 127), (64, 64, 12), (64, 12, 64)])
def test_mma_sync_refuses_unaligned_shapes(shape):
    from gemmlab.cuda.device import device

    impl = registry.get("mma_sync", "hgemm")
    p = GemmProblem(*shape, dtype="fp16")
    runner = HgemmRunner(impl, dtype="fp16")
    A, B, C = hv.make_inputs(p, 1)
    with pytest.raises(BadArgumentError, match=r"^mma_sync needs K % 8 == 0 and N % 8 == 0 \(16-byte rows"):
        runner.enqueue(p, A, B, C, device().create_stream())
    (r,) = verify_sweep([impl], [p])
    assert r.status == "ERROR" and r.reason.startswith("mma_sync needs K % 8 == 0")


def test_api_on_torch_tensors():
    torch = pytest.importorskip("torch")
    from gemmlab.api import hgemm

    for dt in (torch.float16, torch.bfloat16):
        for (M, N, K) in ((256, 264, 1032), (100, 37, 51)):  # the second: any-shape rung (5, or 1 pre-Hopper)
            a = torch.rand(M, K, device="cuda").sub_(0.5).to(dt)
            b = torch.rand(K, N, device="cuda").sub_(0.5).to(dt)
            ref = a.double() @ b.double()
            c = hgemm(a, b)
            assert c.dtype == torch.float32 and c.shape == (M, N)
            assert float((c.double() - ref).norm() / ref.norm()) < hv.normwise_tolerance(K)
            c0 = torch.rand(M, N, device="cuda")
            want = 2.0 * ref - 0.5 * c0.double()
            out = hgemm(a, b, c0.clone(), alpha=2.0, beta=-0.5, impl="wmma")
            assert float((out.double() - want).norm() / want.norm()) < hv.normwise_tolerance(K)
    # fp32 tensors: tf32 on Hopper (lower precision: the tf32 bound)
    from gemmlab.cuda.device import info

    if info().arch == "sm_90":
        a = torch.rand(300, 130, device="cuda").sub_(0.5)
        b = torch.rand(130, 77, device="cuda").sub_(0.5)
        ref = a.double() @ b.double()
        c = hgemm(a, b)
        err = float((c.double() - ref).norm() / ref.norm())
        assert c.dtype == torch.float32 and 1e-5 < err < hv.normwise_tolerance(130, "tf32")
    a = torch.rand(64, 12, device="cuda").to(torch.float16)
    b = torch.rand(12, 64, device="cuda").to(torch.float16)
    with pytest.raises(BadArgumentError, match="tma_wgmma needs K % 8"):
        hgemm(a, b, impl="tma_wgmma")
    with pytest.raises(BadArgumentError, match="mma_sync needs K % 8"):
        hgemm(a, b, impl="mma_sync")
    with pytest.raises(BadArgumentError, match="one dtype"):
        hgemm(a, b.to(torch.bfloat16))
