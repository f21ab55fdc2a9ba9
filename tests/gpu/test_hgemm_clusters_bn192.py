"""Rungs 5 and 6 in clusters along N (CN = 2: two CTAs side by side, each loading one 64-row half
of A and multicasting it to both), in 2x2 clusters (A shared along the cluster's rows, B along
its columns: four CTAs, each stage filled by three of them), and with 128x192 tiles (BN = 192:
wgmma N = 192, three 64-column B chunks, six fp32 C chunks or three 16-bit ones), alone or in
2x1 clusters that share B's chunks unevenly (as do 128x64 tiles in 2x1 clusters). Every result against the fp64 product
of the same rounded inputs, C NaN-poisoned when beta == 0: odd shapes whose last cluster tile
hangs over N (or wholly past it, for one CTA of the pair) and aligned ones, the four layouts and
both C types, split-K and the tail split on top, tf32."""
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops import hgemm_check as hv

from .fresh_threads import run_fresh, threads_script
from .hgemm_sweeps import (assert_all_pass, check_k_slices, check_layout_and_c_type, check_sweeps,
                           skip_unavailable)

PERSISTENT = registry.get("persistent", "hgemm")
TF32 = registry.get("tf32_wgmma", "hgemm")
HALF = ("fp16", "bf16")
CLUSTERS = {
    "1x2 bn64": {"BN": 64, "CM": 1, "CN": 2, "STAGES": 8},
    "1x2 bn256": {"BN": 256, "CM": 1, "CN": 2},
    "2x2 bn128": {"BN": 128, "CM": 2, "CN": 2},
    "1x1 bn192": {"BN": 192, "CM": 1, "CN": 1},
    "1x2 bn192": {"BN": 192, "CM": 1, "CN": 2},
    # B's 64-column chunks shared unevenly over a 2x1 cluster (3 of 192, 1 of 64)
    "2x1 bn192": {"BN": 192, "CM": 2},
    "2x1 bn64": {"BN": 64, "CM": 2, "STAGES": 8},
}
# N = 70 and 200: 1x2 clusters of 64-column tiles whose second CTA hangs over N; 1000x3000x200:
# the last such cluster's second CTA lies wholly past N (3008..3071), 128x192 tiles cover 97.6%
# of M and of N, and each CTA runs several short tiles back to back (odd numbers of 16-bit C
# chunks at BN = 64 and 192: the staging buffers alternate across tiles)
EDGE_SHAPES = ((136, 70, 264), (300, 200, 130), (1024, 1024, 1024), (1000, 3000, 200))


@pytest.fixture(autouse=True)
def _hopper():
    skip_unavailable(PERSISTENT)


@pytest.mark.parametrize("cluster", CLUSTERS, ids=str)
@pytest.mark.parametrize("dtype", HALF)
def test_sweeps(dtype, cluster):
    check_sweeps(PERSISTENT, dtype, CLUSTERS[cluster], EDGE_SHAPES)


@pytest.mark.parametrize("cluster", CLUSTERS, ids=str)
@pytest.mark.parametrize("layout", ("nt", "tn", "tt"))
@pytest.mark.parametrize("out", ("fp32", "c16"))
def test_every_layout_and_c_type(layout, out, cluster):
    check_layout_and_c_type(PERSISTENT, layout, out, CLUSTERS[cluster], EDGE_SHAPES)


@pytest.mark.parametrize("cluster", CLUSTERS, ids=str)
@pytest.mark.parametrize("extra", [{"SPLITK": 4}, {"SPLITK": 0}, {"TAILK": 2}], ids=str)
def test_with_k_slices(extra, cluster):
    check_k_slices(PERSISTENT, {**CLUSTERS[cluster], **extra})


@pytest.mark.parametrize("cluster", CLUSTERS, ids=str)
def test_tf32(cluster):
    skip_unavailable(TF32)
    problems = hv.sweep_problems("tf32", hv.SWEEP_SHAPES + EDGE_SHAPES)
    assert_all_pass(verify_sweep([TF32], problems, {"tf32_wgmma": CLUSTERS[cluster]}))


@pytest.mark.parametrize("dtype", HALF)
def test_2x2_clusters_are_scheduled_on_the_clusters_the_driver_runs(dtype):
    """Clusters of four run 30 at a time on an H100, not 132 / 4 = 33 (a cluster's CTAs share a GPC;
    session 31). Once a launch has asked the driver, the schedule plans on its count: 4096x4096x1024
    in 2x2 clusters of 128x256 tiles is 128 cluster tiles, on 30 slots 4 rounds and 8 tiles over,
    which the automatic tail split cuts into K slices (none on 33). Verified there and where the
    last cluster tiles hang over M and N."""
    from gemmlab.cuda.device import info
    from gemmlab.kernels.hgemm import specs
    from gemmlab.ops.hgemm import HgemmRunner
    from gemmlab.ops.hgemm_tma import max_active_clusters
    from gemmlab.problem import GemmProblem

    params = {"CM": 2, "CN": 2}
    runner = HgemmRunner(PERSISTENT, params, dtype)
    problem = GemmProblem(4096, 4096, 1024, dtype=dtype)
    driver = max_active_clusters(runner.compiled, runner.impl.launch(problem, runner.params))
    assert specs.cluster_slots(4) == min(driver, info().sm_count // 4)
    slots, rem = specs.cluster_slots(4), 128 % specs.cluster_slots(4)
    assert (specs.persistent_schedule(problem, runner.params)[1] > 1) == (rem != 0 and 2 * rem <= slots)
    if driver == 30:  # the H100 and H200 (session 31): 4 rounds of whole tiles, then 8 tiles in 2
        assert specs.persistent_schedule(problem, runner.params) == (120, 2)  # slices of 8 of the 16 K tiles
    problems = hv.sweep_problems(dtype, ((4096, 4096, 1024), (4000, 4001, 1000)))
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": params}))


FIRST_USE_2X2 = threads_script(8, r"""
            a = (torch.rand(4096, 1024, device="cuda", generator=g) - 0.5).to(torch.bfloat16)
            b = (torch.rand(1024, 4096, device="cuda", generator=g) - 0.5).to(torch.bfloat16)
            barrier.wait(timeout=120)
            c = gemmlab.hgemm(a, b, impl="persistent", params={"CM": 2, "CN": 2})
        s.synchronize()
        ref = a.double() @ b.double()
        err = float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))
        if not err <= 1e-5:  # NaN fails too
            errors.append(f"thread {i}: relative error {err:.2e}")
""")


def test_2x2_clusters_first_used_from_8_threads_in_a_fresh_process():
    """The driver's count of 2x2 clusters is learnt by the first launch (note_cluster_slots) while
    other threads build their executors (one per stream: each owns a split-K workspace, sized and
    scheduled on that count). Eight threads at once in a new interpreter, twice, every result
    checked: a workspace sized on one count and a schedule planned on another would fault or
    leave C wrong."""
    pytest.importorskip("torch")
    run_fresh(FIRST_USE_2X2, 2)
