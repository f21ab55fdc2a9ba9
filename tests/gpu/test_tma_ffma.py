"""Rung 15 (tma_ffma: two TMA tensor copies a stage from one producer thread, setmaxnreg math
warpgroups) on the GPU.

Each configuration runs the odd-shape sweep (rows that tensor maps cannot describe - K or N not a
multiple of 4 - take the producer warpgroup's element-wise path into the same swizzled stages)
and aligned shapes whose tiles the tensor maps bring (edge tiles: TMA's zeros past M, N and the
K tail), alpha/beta both ways, C NaN-poisoned when beta == 0; then split-K, a case where the
stages wrap around the ring many times (K = 4096 with 2 stages), and the API's prepared launch
(maps encoded once, again for new pointers, the element-wise path for a misaligned view)."""
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops.sgemm import sweep_problems
from gemmlab.problem import GemmProblem

SPEC = registry.get("tma_ffma")
ALIGNED = [GemmProblem(256, 128, 16, 1.0, 0.0), GemmProblem(512, 256, 1028, 1.0, 0.0),
           GemmProblem(300, 260, 2000, -1.0, 0.5), GemmProblem(1024, 1024, 1024, 0.75, -1.5),
           GemmProblem(4, 132, 36, 1.0, 0.0), GemmProblem(257, 132, 4, 2.0, 1.0)]
CONFIGS = [{}, {"BM": 128, "BN": 256}, {"BK": 8, "STAGES": 6}, {"BK": 32, "STAGES": 3}, {"STAGES": 2, "GROUP": 1},
           {"ORDER": 0}, {"ORDER": 1}]


@pytest.fixture(autouse=True)
def _hopper():
    from gemmlab.cuda.device import info

    if info().arch != "sm_90":
        pytest.skip("tma_ffma needs sm_90a (Hopper)")


def _assert_pass(results):
    bad = [f"{r.problem.shape} a={r.problem.alpha} b={r.problem.beta}: {r.status} {r.reason}"
           for r in results if r.status != "PASS"]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("params", CONFIGS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
def test_configurations(params):
    _assert_pass(verify_sweep([SPEC], list(sweep_problems()) + ALIGNED, params={"tma_ffma": params}))


@pytest.mark.parametrize("splitk,shape", [(2, (67, 45, 17)), (3, (8, 300, 100)), (4, (130, 128, 1000)),
                                          (0, (1024, 128, 4096))])
def test_split_k(splitk, shape):
    problems = [GemmProblem(*shape, 1.0, 0.0), GemmProblem(*shape, -1.25, 0.5)]
    _assert_pass(verify_sweep([SPEC], problems, params={"tma_ffma": {"SPLITK": splitk}}))
    if splitk == 0:
        assert SPEC.launch(problems[0], SPEC.resolve({})).grid[2] > 1, "the skinny shape should be split"


def test_the_ring_wraps_many_times():
    _assert_pass(verify_sweep([SPEC], [GemmProblem(256, 256, 4096, 1.0, 0.0), GemmProblem(260, 256, 4100, 1.0, 0.5)],
                              params={"tma_ffma": {"STAGES": 2}}))


def test_api_prepared_launch_encodes_maps_per_pointer():
    """gemmlab.sgemm(impl="tma_ffma") runs a prepared launch whose tensor maps follow the
    operands: new arrays of the same shape are described anew; a shape whose rows no tensor map
    can describe (K = 1001) takes the element-wise path. All verified against fp64."""
    import cupy as cp

    import gemmlab
    from gemmlab.api import core
    from gemmlab.ops import sgemm as sgemm_op

    def call(M, N, K, beta, seed):
        A, B, C0 = sgemm_op.make_inputs(GemmProblem(M, N, K, 1.0, beta), seed)
        C = C0.copy()
        gemmlab.sgemm(A, B, C, beta=beta, impl="tma_ffma")
        verdict = sgemm_op.compare(C, A, B, C0, 1.0, beta)
        assert verdict.passed, f"{(M, N, K)}: {verdict.reason}"
        ex = core.executor("sgemm", "fp32", (M, N, K), "tma_ffma", None, cp.cuda.get_current_stream().ptr)
        return ex, A, B

    for seed, beta in ((1, 0.0), (2, 0.5)):  # two sets of arrays: the maps are encoded for each
        ex, A, B = call(520, 264, 1000, beta, seed)
        assert ex.maps and ex._flag.value == 1 and ex._mapped == [A.data.ptr, B.data.ptr]
    ex, _, _ = call(131, 66, 1001, 0.0, 3)
    assert ex.maps and ex._flag.value == 0, "rows of 1001 floats: no tensor map, the element-wise path"
