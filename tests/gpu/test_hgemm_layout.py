"""Layout nt on the GPU: B given as its transpose, an NxK row-major array (x @ W.T, the layout of
torch.nn.functional.linear), read in place by the rungs that take it (persistent with B_KMAJOR = 1,
tf32_wgmma) and by the baselines (cuBLAS with CUBLAS_OP_T on B, torch.mm(a, bt.t())).

Every result is checked against the fp64 product A @ Bt.T of the same rounded inputs, with C
NaN-poisoned when beta == 0: a kernel or a host path that ignored the layout - read the NxK array
as if it were KxN, or kept the wgmma transpose bit - computes another product and fails (on the
square shapes too: Bt is random, not symmetric). Shapes: the odd-shape sweep (1x1x1, primes,
K % 8 != 0, where B^T is copied into padded rows) and the aligned one (read in place), larger
shapes, the 2-CTA multicast cluster and BN = 128; then the API with torch's transposed views.
"""
import pytest

from gemmlab import registry
from gemmlab.errors import BadArgumentError
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops import hgemm_check as hv
from gemmlab.ops.hgemm import HgemmRunner, refusal
from gemmlab.problem import GemmProblem

from .hgemm_sweeps import assert_all_pass, hopper, skip_unavailable

NT = [i for i in registry.all_impls("hgemm") if i.kind == "baseline" or "layout_nt" in i.tags]
CASES = [(i, d) for i in NT for d in hv.DTYPES if d in (getattr(i, "dtypes", ()) or hv.DTYPES)]
LARGE = ((1024, 1024, 1024), (2048, 1032, 4096), (1000, 3000, 2000), (1031, 517, 1027))
OTHER_PARAMS = [
    {"CM": 1},
    {"CM": 2},  # B multicast: each CTA loads B_PART rows of the NxK array for both
    {"BN": 128, "STAGES": 6, "CM": 2, "GROUP_M": 1},  # B_PART = 64 rows a CTA
    {"BN": 128, "CM": 1, "GROUP_M": 16},
]


def test_the_layout_nt_implementations():
    assert {i.name for i in NT} == {"persistent", "tf32_wgmma", "cublas", "torch"}


@pytest.mark.parametrize("impl,dtype", CASES, ids=lambda x: getattr(x, "name", x))
def test_sweep_nt(impl, dtype):
    skip_unavailable(impl)
    problems = hv.sweep_problems(dtype, hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES, layout="nt")
    assert not [p for p in problems if refusal(impl, p)], "layout nt takes any shape"
    assert_all_pass(verify_sweep([impl], problems))


@pytest.mark.parametrize("impl,dtype", CASES, ids=lambda x: getattr(x, "name", x))
def test_large_nt(impl, dtype):
    skip_unavailable(impl)
    assert_all_pass(verify_sweep([impl], hv.sweep_problems(dtype, LARGE, layout="nt")))


@pytest.mark.parametrize("params", OTHER_PARAMS, ids=str)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_persistent_nt_other_parameters(params, dtype):
    impl = registry.get("persistent", "hgemm")
    skip_unavailable(impl)
    shapes = hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES + ((1000, 1000, 1000), (2000, 520, 1000))
    assert_all_pass(verify_sweep([impl], hv.sweep_problems(dtype, shapes, layout="nt"), {"persistent": params}))


def test_one_sweep_mixes_layouts_with_a_runner_each():
    """verify_sweep keeps one runner per (dtype, layout): nn and nt interleaved both pass."""
    impl = registry.get("persistent", "hgemm")
    skip_unavailable(impl)
    problems = [GemmProblem(129, 264, 72, 1.5, -0.75, "bf16", layout) for layout in ("nn", "nt", "nn", "nt")]
    results = verify_sweep([impl], problems)
    assert_all_pass(results)
    assert [r.params["B_KMAJOR"] for r in results] == [0, 1, 0, 1]


def test_a_runner_built_for_one_layout_refuses_the_other():
    from gemmlab.cuda.device import device

    impl = registry.get("persistent", "hgemm")
    skip_unavailable(impl)
    runner = HgemmRunner(impl, {"B_KMAJOR": 1}, dtype="bf16", layout="nn")
    assert runner.params["B_KMAJOR"] == 0, "the layout sets the flag, not --params"
    p = GemmProblem(64, 64, 64, dtype="bf16", layout="nt")
    A, B, C = hv.make_inputs(p, 1)
    with pytest.raises(BadArgumentError, match="prepared for layout nn, the problem is nt"):
        runner.enqueue(p, A, B, C, device().create_stream())
    wmma = HgemmRunner(registry.get("wmma", "hgemm"), dtype="bf16", layout="nt")
    with pytest.raises(BadArgumentError, match="wmma reads B as a row-major KxN array only"):
        wmma.enqueue(p, A, B, C, device().create_stream())


def test_cli_verify_and_bench_nt(tmp_path, capsys):
    import sqlite3

    from gemmlab.cli import main

    if not hopper():
        pytest.skip("persistent needs sm_90a (Hopper)")
    assert main(["verify", "--op", "hgemm", "--impl", "persistent", "--dtype", "bf16", "--layout", "nt",
                 "--M", "129", "--N", "257", "--K", "72"]) == 0
    db = tmp_path / "r.db"
    code = main(["bench", "--op", "hgemm", "--dtype", "fp16", "--layout", "nt", "--impl", "persistent,cublas,torch",
                 "--sizes", "256,130x70x33", "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "256x256x256 nt" in out and "130x70x33 nt" in out
    rows = sqlite3.connect(db).execute("SELECT impl, status, extra FROM results").fetchall()
    assert len(rows) == 6 and all(r[1] == "PASS" and '"layout": "nt"' in r[2] for r in rows)


# -- the API: torch's transposed views (x @ W.T) --------------------------------------------------

def _linear_operands(torch, dt, M, N, K, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.rand(M, K, device="cuda", generator=g) - 0.5).to(dt)
    w = (torch.rand(N, K, device="cuda", generator=g) - 0.5).to(dt)
    return x, w


def _rel(out, ref) -> float:
    return float((out.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "tf32"])
def test_api_reads_a_transposed_weight_in_place(dtype):
    torch = pytest.importorskip("torch")
    import gemmlab
    from gemmlab.api import core
    from gemmlab.api.executors import NoInPlaceLayout
    from gemmlab.api.tma_executors import TmaGemm

    if not hopper():
        pytest.skip("the layout nt kernels need sm_90a (Hopper)")
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[dtype]
    impl = "tf32_wgmma" if dtype == "tf32" else "persistent"
    # in place: rows of A, W and C are 16-byte multiples; copied: N % 4 (C's fp32 rows), K = 58 (rows of
    # W not 16-byte multiples in fp16, bf16 or fp32)
    cases = (((256, 264, 1032), True), ((300, 136, 72), True), ((100, 37, 56), False), ((64, 64, 58), False))
    for (M, N, K), in_place in cases:
        x, w = _linear_operands(torch, dt, M, N, K, seed=M + N + K)
        ref = x.double() @ w.double().t()
        tol = hv.normwise_tolerance(K, dtype)
        out = gemmlab.hgemm(x, w.t(), impl=impl)
        assert out.dtype == torch.float32 and out.shape == (M, N)
        assert _rel(out, ref) < tol, (M, N, K)
        c0 = torch.rand(M, N, device="cuda")
        got = gemmlab.hgemm(x, w.t(), c0.clone(), alpha=2.0, beta=-0.5, impl=impl)
        assert _rel(got, 2.0 * ref - 0.5 * c0.double()) < tol, (M, N, K)
        torch.cuda.synchronize()
        mine = [ex for key, ex in core._thread.executors.items()
                if key[5:6] == ((False, True),) and key[2] == (M, N, K) and key[3] == impl]  # (op, dtype, dims, impl, params, layout, C type[, stream])
        assert mine, "the hot path looked up a layout-nt executor"
        if in_place:
            assert all(isinstance(ex, TmaGemm) and ex.b_nk and ex.fast for ex in mine), (M, N, K)
        else:
            assert all(isinstance(ex, NoInPlaceLayout) for ex in mine), (M, N, K)
        text = gemmlab.explain(x, w.t(), op="hgemm", impl=impl)
        assert ("read in place as NxK" in text) == in_place, text


def test_api_default_still_goes_to_cublas_for_a_transposed_weight():
    torch = pytest.importorskip("torch")
    import gemmlab

    x, w = _linear_operands(torch, torch.bfloat16, 200, 136, 264, seed=4)
    text = gemmlab.explain(x, w.t())
    assert "runs:    cublas" in text and "transposed operand" in text
    out = gemmlab.hgemm(x, w.t())
    assert _rel(out, x.double() @ w.double().t()) < hv.normwise_tolerance(264)
