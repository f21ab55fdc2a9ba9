"""Rung 6 (tf32) with a row-major KxN B read in place: the transposed product C^T = B^T A^T, B's
N-major tile fed to wgmma through registers, tiles of BN rows x 128 columns, C staged transposed
back (persistent.cuh, "RS"). Every tile width and cluster shape, odd shapes whose tiles hang over
M and N (N % 4 != 0: B and C padded), several tiles per CTA, alpha/beta both ways with C
NaN-poisoned when beta == 0, split-K and the tail split, against the fp64 product of the fp32
inputs within the tf32 bound; the nt layout (B given as NxK, read K-major) beside it; and no copy
of B made, in the harness or through the API."""
import numpy as np
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops import hgemm_check as hv
from gemmlab.problem import GemmProblem

from .hgemm_sweeps import assert_all_pass, skip_unavailable

TF32 = registry.get("tf32_wgmma", "hgemm")
CONFIGS = {
    "bn256": {"BN": 256, "CM": 1},
    "bn256 2x1": {"BN": 256, "CM": 2},  # B's four 32-column chunks dealt two to each CTA of the pair
    "bn192 1x2": {"BN": 192, "CM": 1, "CN": 2},  # A's 192 rows shared as two 96-row halves
    "bn128 2x2": {"BN": 128, "CM": 2, "CN": 2, "STAGES": 5},
    "bn64": {"BN": 64, "CM": 1, "STAGES": 8},
    "bn64 2x1": {"BN": 64, "CM": 2, "STAGES": 8},
}
# 260 columns: two whole 128-column tiles and one of 4; 1000x3000x200: many tiles per CTA; 129 and
# 130 columns: B and C padded (fp32 rows of N % 4 != 0)
EDGE_SHAPES = ((300, 200, 130), (520, 260, 100), (1000, 3000, 200), (257, 129, 67), (4100, 130, 64))


@pytest.fixture(autouse=True)
def _hopper():
    skip_unavailable(TF32)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("layout", ("nn", "nt"))
def test_sweeps(layout, config):
    problems = hv.sweep_problems("tf32", hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES + EDGE_SHAPES, layout=layout)
    assert_all_pass(verify_sweep([TF32], problems, {"tf32_wgmma": CONFIGS[config]}))


@pytest.mark.parametrize("config", ("bn256", "bn192 1x2", "bn128 2x2", "bn64 2x1"))
@pytest.mark.parametrize("extra", [{"SPLITK": 4}, {"SPLITK": 0}, {"TAILK": 2}], ids=str)
def test_with_k_slices(extra, config):
    problems = hv.sweep_problems("tf32", ((512, 512, 8192), (1409, 1665, 203), (3072, 3072, 1024)))
    assert_all_pass(verify_sweep([TF32], problems, {"tf32_wgmma": {**CONFIGS[config], **extra}}))


def test_the_harness_reads_a_kxn_b_in_place():
    """The runner's operand workspaces hold no copy of B (a transposed one was made before)."""
    import cupy as cp

    from gemmlab.cuda.device import device, sync_or_raise
    from gemmlab.ops.hgemm import HgemmRunner

    problem = GemmProblem(384, 520, 264, 1.0, 0.0, "tf32")
    runner = HgemmRunner(TF32, {}, dtype="tf32")
    assert runner.params["B_KMAJOR"] == 0
    A, B, _ = hv.make_inputs(problem, 5)
    C = cp.full((problem.M, problem.N), cp.nan, cp.float32)
    stream = device().create_stream()
    runner.enqueue(problem, A, B, C, stream)
    sync_or_raise(stream)
    assert not runner._tma_operands._ws, f"copies made: {sorted(runner._tma_operands._ws)}"
    ref = cp.asnumpy(A).astype(np.float64) @ cp.asnumpy(B).astype(np.float64)
    err = np.linalg.norm(cp.asnumpy(C) - ref) / np.linalg.norm(ref)
    assert err < hv.normwise_tolerance(problem.K, "tf32"), err


def test_the_api_runs_the_kernel_on_the_callers_arrays():
    torch = pytest.importorskip("torch")
    from gemmlab import Matmul, hgemm
    from gemmlab.api import core

    M, N, K = 264, 520, 136
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.rand(M, K, device="cuda", generator=g) - 0.5
    b = torch.rand(K, N, device="cuda", generator=g) - 0.5
    ref = a.double() @ b.double()
    out = hgemm(a, b, impl="tf32_wgmma")
    torch.cuda.synchronize()
    assert float((out.double() - ref).norm() / ref.norm()) < hv.normwise_tolerance(K, "tf32")
    ex = core.executor("hgemm", "tf32", (M, N, K), "tf32_wgmma", None, torch.cuda.current_stream().cuda_stream,
                       (False, False))
    assert ex.fast and ex.path == "kernel", "read in place, no copy"
    got = Matmul(a, b, impl="tf32_wgmma", op="hgemm").execute()
    torch.cuda.synchronize()
    assert float((got.double() - ref).norm() / ref.norm()) < hv.normwise_tolerance(K, "tf32")
