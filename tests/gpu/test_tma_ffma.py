"""Rung 15 (tma_ffma: bulk copies from a producer warpgroup, setmaxnreg math warpgroups) on the GPU.

Each configuration runs the odd-shape sweep (the producer's element-wise path: K or N not a
multiple of 4) and aligned shapes whose rows the copy engine brings (with edge tiles: zeros
written past M, N and the K tail while copies fill the rest), alpha/beta both ways, C
NaN-poisoned when beta == 0; then split-K, and a case where several stages wrap around the
ring many times (K = 4096 with 2 stages)."""
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
