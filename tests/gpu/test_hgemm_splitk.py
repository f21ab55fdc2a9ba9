"""Split-K in the persistent tensor-core rungs (issue 14: few-tile and K-heavy shapes) on the GPU.

Every result is checked against the fp64 product of the same rounded inputs (C NaN-poisoned when
beta == 0, so an epilogue that read C, or a half-tile whose partials were never summed, fails).
Shapes: the odd-shape and aligned sweeps with several slice counts (including more slices than
K tiles, clamped), the four layouts and both C types, clusters of one and two, K-heavy shapes,
the automatic choice; then what split-K must keep: bit-identical results from run to run (the
partials are summed in slice order whoever arrives last), the flags left zero for the next
launch, and through the API plain calls, plans, two streams and a CUDA graph replayed.
"""
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops import hgemm_check as hv
from gemmlab.ops.base import device_inputs
from gemmlab.problem import GemmProblem

from .hgemm_sweeps import assert_all_pass, skip_unavailable

PERSISTENT = registry.get("persistent", "hgemm")
TF32 = registry.get("tf32_wgmma", "hgemm")
HALF = ("fp16", "bf16")
K_HEAVY = ((512, 512, 8192), (256, 384, 4096), (200, 136, 3000), (1000, 3000, 2000), (1024, 1024, 1024))


@pytest.fixture(autouse=True)
def _hopper():
    skip_unavailable(PERSISTENT)


# 5 and 16 too: the spec admits 1-16, and the slices of an odd count are uneven
@pytest.mark.parametrize("params", [{"SPLITK": 2}, {"SPLITK": 3, "CM": 1, "BN": 128}, {"SPLITK": 5, "BN": 128},
                                    {"SPLITK": 8, "GROUP_M": 1}, {"SPLITK": 16, "CM": 1}], ids=str)
@pytest.mark.parametrize("dtype", HALF)
def test_sweeps_with_k_slices(dtype, params):
    problems = hv.sweep_problems(dtype, hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES)
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": params}))


@pytest.mark.parametrize("layout", ("nn", "nt", "tn", "tt"))
@pytest.mark.parametrize("out", ("fp32", "c16"))
def test_every_layout_and_c_type(layout, out):
    problems = [p for d in HALF for p in hv.sweep_problems(d, ((136, 264, 1000), (129, 257, 650), (64, 520, 4096)),
                                                           layout=layout, out=d if out == "c16" else "fp32")]
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": {"SPLITK": 4, "CM": 2}}))


@pytest.mark.parametrize("params", [{"SPLITK": 4}, {"SPLITK": 8, "BN": 128, "CM": 1}, {"SPLITK": 0, "BN": 128}],
                         ids=str)
def test_k_heavy_shapes(params):
    problems = [p for d in HALF for p in hv.sweep_problems(d, K_HEAVY)]
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": params}))


@pytest.mark.parametrize("impl", ["persistent", "tf32_wgmma", "cublas"])
def test_a_very_long_k_is_checked_exactly(impl):
    """Past K = 2^16 an fp32-C problem is also verified on +-1 inputs, where the result must be
    exact (hgemm_check's test 3): split-K, odd K, alpha/beta both ways, and cuBLAS to show the
    test holds for a library's summation too."""
    spec = registry.get(impl, "hgemm")
    skip_unavailable(spec)
    dtypes = ("tf32",) if impl == "tf32_wgmma" else ("bf16", "fp16") if impl == "persistent" else ("bf16", "tf32")
    problems = [p for d in dtypes for p in hv.sweep_problems(d, ((64, 136, (1 << 17) + 8), (8, 200, 200_000)))]
    assert all(hv.exact_pass(p) for p in problems)
    assert_all_pass(verify_sweep([spec], problems))


def test_tf32_with_k_slices():
    skip_unavailable(TF32)
    problems = hv.sweep_problems("tf32", hv.SWEEP_SHAPES + ((512, 512, 4096), (129, 257, 1001)))
    assert_all_pass(verify_sweep([TF32], problems, {"tf32_wgmma": {"SPLITK": 4}}))


def _run_twice(params, problem):
    """Two launches of one runner on the same inputs: both C's, and the workspace's flags after."""
    import cupy as cp

    from gemmlab.cuda.device import device, sync_or_raise
    from gemmlab.kernels.hgemm.specs import persistent_flag_floats
    from gemmlab.ops.hgemm import HgemmRunner

    runner = HgemmRunner(PERSISTENT, params, dtype=problem.dtype)
    A, B, _ = device_inputs(hv.make_inputs, problem, 31)  # finished before the other stream reads them
    stream = device().create_stream()
    outs = []
    for _ in range(2):
        C = device_inputs(cp.full, (problem.M, problem.N), cp.nan, cp.float32)
        runner.enqueue(problem, A, B, C, stream)
        sync_or_raise(stream)
        outs.append(C)
    flags = persistent_flag_floats(problem, runner.params)
    return outs, runner._tma_operands._splitk[:flags].view(cp.int32)


def test_results_are_bit_identical_from_run_to_run_and_flags_return_to_zero():
    import cupy as cp

    problem = GemmProblem(512, 512, 8192, 1.0, 0.0, "bf16")
    (c1, c2), flags = _run_twice({"SPLITK": 8, "BN": 128, "CM": 1}, problem)
    assert not bool(cp.isnan(c1).any())
    assert bool((c1.view(cp.uint32) == c2.view(cp.uint32)).all()), "split-K must be deterministic"
    assert int(cp.count_nonzero(flags)) == 0, "the last arriver clears each flag"


# -- the tail split: whole tiles for the full waves, K slices for a partial last wave's tiles ----
# 1409x1665 is 12 x 14 = 168 tiles of 128x128 on 132 SMs (36 in the last wave); 1500x1500 is 144
# (12); with CM = 2 they are 84 and 72 cluster tiles on 66 slots. The GPU's own SM count decides
# (cluster_slots), so each test first checks that its shape really has a sliced tail.
TAIL_SHAPES = ((1409, 1665, 203), (1500, 1500, 520))


def _assert_tail(impl, problem, params):
    from gemmlab.kernels.hgemm.specs import cluster_tiles, persistent_schedule

    v = impl.resolve(params)
    whole, splits = persistent_schedule(problem, v)
    assert 0 < whole < cluster_tiles(problem, v) and splits > 1, f"{problem.shape} {params}: no tail split"


@pytest.mark.parametrize("params", [{"BN": 128, "CM": 1, "TAILK": 3}, {"BN": 128, "CM": 1, "SPLITK": 1, "TAILK": 2},
                                    {"BN": 128, "CM": 2, "TAILK": 4, "GROUP_M": 1}], ids=str)
@pytest.mark.parametrize("dtype", HALF)
def test_tail_split_sweeps(dtype, params):
    problems = hv.sweep_problems(dtype, TAIL_SHAPES)
    for p in problems:
        _assert_tail(PERSISTENT, p, params)
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": params}))


@pytest.mark.parametrize("layout,out", [("nt", "c16"), ("tt", "fp32"), ("tn", "c16")])
def test_tail_split_in_other_layouts_and_c_types(layout, out):
    params = {"BN": 128, "CM": 2, "TAILK": 3}
    problems = [p for d in HALF for p in hv.sweep_problems(d, TAIL_SHAPES[:1], layout=layout,
                                                           out=d if out == "c16" else "fp32")]
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": params}))


def test_tail_split_automatic_at_3072_cubed():
    problems = hv.sweep_problems("bf16", ((3072, 3072, 3072),), scalars=((1.0, 0.0), (1.5, -0.75)))
    _assert_tail(PERSISTENT, problems[0], {})
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": {}}))


def test_tf32_tail_split():
    skip_unavailable(TF32)
    params = {"BN": 128, "CM": 1, "TAILK": 2}
    problems = hv.sweep_problems("tf32", TAIL_SHAPES[:1])
    _assert_tail(TF32, problems[0], params)
    assert_all_pass(verify_sweep([TF32], problems, {"tf32_wgmma": params}))


def test_tail_split_is_bit_identical_and_leaves_its_flags_zero():
    import cupy as cp

    problem = GemmProblem(1409, 1665, 2003, 1.0, 0.0, "bf16")
    params = {"BN": 128, "CM": 1, "TAILK": 4}
    _assert_tail(PERSISTENT, problem, params)
    (c1, c2), flags = _run_twice(params, problem)
    assert not bool(cp.isnan(c1).any())
    assert bool((c1.view(cp.uint32) == c2.view(cp.uint32)).all()), "the tail's sums must be deterministic"
    assert int(cp.count_nonzero(flags)) == 0, "the last arriver clears each flag"


def test_a_tail_split_plan_reruns_exactly():
    from gemmlab import Matmul

    torch, a, b = _torch_inputs(1409, 1665, 2003, 46)
    params = {"BN": 128, "CM": 1, "TAILK": 4}
    c = torch.full((1409, 1665), float("nan"), device="cuda")
    plan = Matmul(a, b, c, impl="persistent", params=params)
    assert plan._executor.owns_workspace
    for seed in (47, 48):
        _, a2, _ = _torch_inputs(1409, 1665, 2003, seed)
        a.copy_(a2)
        c.fill_(float("nan"))
        plan.execute()
        torch.cuda.synchronize()
        _close(torch, c, a, b)


# -- through the API ----------------------------------------------------------------------------

def _torch_inputs(M, N, K, seed):
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = (torch.rand(M, K, device="cuda", generator=g) - 0.5).to(torch.bfloat16)
    b = (torch.rand(K, N, device="cuda", generator=g) - 0.5).to(torch.bfloat16)
    return torch, a, b


def _close(torch, out, a, b, alpha=1.0, beta=0.0, c0=None):
    ref = alpha * (a.double() @ b.double()) + (beta * c0.double() if beta else 0.0)
    err = (out.double() - ref).norm() / ref.norm()
    assert float(err) < 1e-5, f"relative error {float(err):.2e}"


def test_plain_calls_and_plans_with_k_slices():
    from gemmlab import Matmul, hgemm

    torch, a, b = _torch_inputs(512, 512, 8192, 41)
    params = {"SPLITK": 8, "BN": 128, "CM": 1}
    out = hgemm(a, b, impl="persistent", params=params)
    torch.cuda.synchronize()
    _close(torch, out, a, b)
    c0 = torch.rand(512, 512, device="cuda")
    c = c0.clone()
    plan = Matmul(a, b, c, alpha=0.5, beta=2.0, impl="persistent", params=params)
    assert plan.path == "kernel" and plan._executor.owns_workspace
    for _ in range(3):  # C accumulates: each execute reads the last one's result
        c0 = c.clone()
        plan.execute()
        torch.cuda.synchronize()
        _close(torch, c, a, b, 0.5, 2.0, c0)


def test_two_streams_get_their_own_workspaces():
    from gemmlab import hgemm

    torch, a, b = _torch_inputs(256, 384, 4096, 42)
    params = {"SPLITK": 4, "BN": 128, "CM": 1}
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    # both streams held (~10 ms) while their launches queue, then released together: their split-K
    # launches overlap, which a workspace shared between the streams would not survive
    for s in (s1, s2):
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)
    outs = []
    for _ in range(4):
        for s in (s1, s2):
            with torch.cuda.stream(s):
                outs.append(hgemm(a, b, impl="persistent", params=params))
    torch.cuda.synchronize()
    for out in outs:
        _close(torch, out, a, b)


def test_a_split_k_plan_in_a_cuda_graph():
    from gemmlab import Matmul

    torch, a, b = _torch_inputs(512, 512, 8192, 43)
    plan = Matmul(a, b, impl="persistent", params={"SPLITK": 8, "BN": 128, "CM": 1})
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        plan.execute()  # warm on the capture stream
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        out = plan.execute()
    for seed in (44, 45):
        _, a2, b2 = _torch_inputs(512, 512, 8192, seed)
        a.copy_(a2)
        b.copy_(b2)
        graph.replay()
        torch.cuda.synchronize()
        _close(torch, out, a, b)
