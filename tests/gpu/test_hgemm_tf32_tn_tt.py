"""Rung 6 (tf32) with A given as its KxM transpose, read in place: A's M-major tile goes to wgmma
through registers (persistent.cuh "RSA"); B given as NxK (tt) is read K-major as TMA lands it,
B given as KxN (tn) is transposed in place inside the CTA by the consumer warpgroups while the
last stage's wgmmas run ("TRANSB"). Every tile width the layout allows and the cluster
shapes (A multicast along N, B along M), odd shapes whose tiles hang over M and N (M % 4 != 0: A^T
padded; N % 4 != 0: B and C padded), several tiles per CTA, alpha/beta both ways with C
NaN-poisoned when beta == 0, split-K and the tail split, against the fp64 product of the fp32
inputs (A taken as At.T) within the tf32 bound; and no copy of A or B made, in the harness or
through the API."""
import numpy as np
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops import hgemm_check as hv
from gemmlab.problem import GemmProblem

from .hgemm_sweeps import assert_all_pass, skip_unavailable

TF32 = registry.get("tf32_wgmma", "hgemm")
# tn's consumers hold the blocks of B they transpose, so its tiles are at most 128 wide (specs)
CONFIGS = {
    "tt": {
        "default": {},
        "bn128": {"BN": 128},
        "bn192 1x2": {"BN": 192, "CM": 1, "CN": 2, "STAGES": 3},  # A's four 32-row chunks two to each CTA
        "bn128 2x2": {"BN": 128, "CM": 2, "CN": 2, "STAGES": 5},
        "bn64 2x1": {"BN": 64, "CM": 2, "STAGES": 8},
    },
    "tn": {
        "default": {},
        "bn64": {"BN": 64, "STAGES": 6},
        "bn128 1x2": {"BN": 128, "CN": 2, "STAGES": 3},
        "bn128 2x2": {"BN": 128, "CM": 2, "CN": 2, "STAGES": 4},
        "bn64 2x1": {"BN": 64, "CM": 2, "STAGES": 6},
    },
}
# 260 columns: two whole 128-column tiles and one of 4; 1000x3000x200: many tiles per CTA; 129 and
# 130: rows padded (M or N % 4 != 0)
EDGE_SHAPES = ((300, 200, 130), (520, 260, 100), (1000, 3000, 200), (257, 129, 67), (4100, 130, 64), (130, 4100, 96))
CASES = [(layout, name) for layout, configs in CONFIGS.items() for name in configs]


@pytest.fixture(autouse=True)
def _hopper():
    skip_unavailable(TF32)


@pytest.mark.parametrize("layout,config", CASES, ids=lambda x: str(x))
def test_sweeps(layout, config):
    problems = hv.sweep_problems("tf32", hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES + EDGE_SHAPES, layout=layout)
    assert_all_pass(verify_sweep([TF32], problems, {"tf32_wgmma": CONFIGS[layout][config]}))


@pytest.mark.parametrize("layout", ("tn", "tt"))
@pytest.mark.parametrize("extra", [{"SPLITK": 4}, {"SPLITK": 0}, {"TAILK": 2}, {"BN": 64, "CM": 2, "CN": 2, "SPLITK": 3}],
                         ids=str)
def test_with_k_slices(extra, layout):
    problems = hv.sweep_problems("tf32", ((512, 512, 8192), (1409, 1665, 203), (3072, 3072, 1024)), layout=layout)
    assert_all_pass(verify_sweep([TF32], problems, {"tf32_wgmma": extra}))


def test_tn_refuses_tiles_it_cannot_stage():
    from gemmlab.errors import ConstraintError
    from gemmlab.ops.hgemm import HgemmRunner

    with pytest.raises(ConstraintError, match="BN <= 128"):
        HgemmRunner(TF32, {"BN": 192, "STAGES": 3}, dtype="tf32", layout="tn")
    tn = HgemmRunner(TF32, {}, dtype="tf32", layout="tn").params
    assert (tn["BN"], tn["STAGES"]) == (128, 6), "tn's own default"
    assert HgemmRunner(TF32, {}, dtype="tf32", layout="tt").params["BN"] == TF32.defaults["BN"]


@pytest.mark.parametrize("layout", ("tn", "tt"))
def test_the_harness_reads_both_operands_in_place(layout):
    """The runner's operand workspaces hold no copy of A or B."""
    import cupy as cp

    from gemmlab.cuda.device import device, sync_or_raise
    from gemmlab.ops.hgemm import HgemmRunner

    problem = GemmProblem(384, 520, 264, 1.25, 0.0, "tf32", layout)
    runner = HgemmRunner(TF32, {}, dtype="tf32", layout=layout)
    assert runner.params["A_MNMAJOR"] == 1 and runner.params["B_KMAJOR"] == int(layout == "tt")
    At, B, _ = hv.make_inputs(problem, 5)
    assert At.shape == (problem.K, problem.M)
    C = cp.full((problem.M, problem.N), cp.nan, cp.float32)
    stream = device().create_stream()
    runner.enqueue(problem, At, B, C, stream)
    sync_or_raise(stream)
    assert not runner._tma_operands._ws, f"copies made: {sorted(runner._tma_operands._ws)}"
    b = cp.asnumpy(B).astype(np.float64)
    ref = 1.25 * cp.asnumpy(At).astype(np.float64).T @ (b.T if layout == "tt" else b)
    err = np.linalg.norm(cp.asnumpy(C) - ref) / np.linalg.norm(ref)
    assert err < hv.normwise_tolerance(problem.K, "tf32"), err


@pytest.mark.parametrize("b_t", [False, True], ids=["tn", "tt"])
def test_the_api_runs_the_kernel_on_the_callers_views(b_t):
    torch = pytest.importorskip("torch")
    from gemmlab import Matmul, hgemm
    from gemmlab.api import core

    M, N, K = 264, 520, 136
    g = torch.Generator(device="cuda").manual_seed(11)
    at = torch.rand(K, M, device="cuda", generator=g) - 0.5  # A = at.T
    b = torch.rand(N, K, device="cuda", generator=g) - 0.5 if b_t else torch.rand(K, N, device="cuda", generator=g) - 0.5
    bb = b.t() if b_t else b
    ref = at.double().t() @ bb.double()
    out = hgemm(at.t(), bb, impl="tf32_wgmma")
    torch.cuda.synchronize()
    assert float((out.double() - ref).norm() / ref.norm()) < hv.normwise_tolerance(K, "tf32")
    ex = core.executor("hgemm", "tf32", (M, N, K), "tf32_wgmma", None, torch.cuda.current_stream().cuda_stream,
                       (True, b_t))
    assert ex.fast and ex.path == "kernel", "read in place, no copy"
    got = Matmul(at.t(), bb, impl="tf32_wgmma", op="hgemm").execute()
    torch.cuda.synchronize()
    assert float((got.double() - ref).norm() / ref.norm()) < hv.normwise_tolerance(K, "tf32")
