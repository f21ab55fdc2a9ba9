"""Every kernel and baseline against fp64 over the odd-shape sweep, alpha/beta both ways."""
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.problem import GemmProblem
from gemmlab.ops.sgemm import sweep_problems

IMPLS = registry.all_impls("sgemm")


def _skip_other_gpus(impl):
    """Rung 15 is built for sm_90a (setmaxnreg): Hopper only."""
    from gemmlab.cuda.device import info

    if getattr(impl, "arch", None) == "sm_90a" and info().arch != "sm_90":
        pytest.skip(f"{impl.name} needs sm_90a (Hopper)")


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_odd_shape_sweep(impl):
    if impl.kind == "baseline" and impl.unavailable_reason():
        pytest.skip(impl.unavailable_reason())
    _skip_other_gpus(impl)
    results = verify_sweep([impl], sweep_problems())
    bad = [f"{r.problem.shape} a={r.problem.alpha} b={r.problem.beta}: {r.status} {r.reason}"
           for r in results if r.status != "PASS"]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("impl", [k for k in IMPLS if k.kind == "kernel" and k.rung and k.rung >= 4],
                         ids=lambda i: i.name)
def test_large_aligned_and_unaligned(impl):
    """A big tile-aligned shape (float4 paths) and its off-by-one neighbour (scalar edges)."""
    _skip_other_gpus(impl)
    problems = [GemmProblem(1024, 1024, 1024, 1.0, 0.0), GemmProblem(1025, 1023, 1021, -0.5, 2.0)]
    results = verify_sweep([impl], problems)
    assert all(r.status == "PASS" for r in results), [(r.problem.shape, r.reason) for r in results]


MISALIGNED_NAMES = ("vectorize", "bank_linearize", "bank_padding", "autotuned", "double_buffering", "warptiling",
                    "async_pipeline", "hopper_simt", "bigtile", "tma_ffma", "s4_float4", "s4_outer_product",
                    "s4_smem_transpose", "tiled")


@pytest.mark.parametrize("name", MISALIGNED_NAMES)
def test_misaligned_pointers_take_the_scalar_path(name):
    """Views that start one float into a buffer are not 16-byte aligned: float4 must not be used
    (rung 15: no tensor maps). The runner is called directly, as the harness calls it - the API's
    calls copy such views into aligned buffers first, so through them the kernels never saw one
    (the review of session 26). alpha/beta both ways: a misaligned C is read too."""
    import cupy as cp

    from gemmlab.cuda.device import device
    from gemmlab.ops.sgemm import GemmRunner, compare

    impl = registry.get(name, "sgemm")
    _skip_other_gpus(impl)
    M, N, K = 130, 132, 68  # multiples of 4, so only the pointer alignment is off
    rng = cp.random.default_rng(7)
    A = rng.uniform(-1, 1, M * K + 1, dtype=cp.float32)[1:].reshape(M, K)
    B = rng.uniform(-1, 1, K * N + 1, dtype=cp.float32)[1:].reshape(K, N)
    C0 = rng.uniform(-1, 1, (M, N), dtype=cp.float32)
    assert A.data.ptr % 16 and B.data.ptr % 16
    runner, stream = GemmRunner(impl), device().create_stream()
    for alpha, beta in ((1.0, 0.0), (-0.75, 1.5)):
        C = cp.full(M * N + 1, cp.nan, dtype=cp.float32)[1:].reshape(M, N)
        if beta:
            C[...] = C0
        cp.cuda.Device().synchronize()
        runner.enqueue(GemmProblem(M, N, K, alpha, beta), A, B, C, stream)
        stream.sync()
        v = compare(C, A, B, C0, alpha, beta)
        assert v.passed, f"{name} alpha={alpha} beta={beta}: {v.reason}"


@pytest.mark.parametrize("name", ["hopper_simt", "bigtile"])
@pytest.mark.parametrize("splitk,shape", [(2, (67, 45, 17)), (3, (8, 300, 100)), (4, (130, 129, 1000)),
                                          (0, (8192 // 8, 128, 4096))])
def test_split_k(name, splitk, shape):
    """Uneven K slices, slices with a single tile, automatic slicing of a skinny shape; alpha/beta both ways."""
    spec = registry.get(name)
    problems = [GemmProblem(*shape, 1.0, 0.0), GemmProblem(*shape, -1.25, 0.5)]
    results = verify_sweep([spec], problems, params={name: {"SPLITK": splitk}})
    assert all(r.status == "PASS" for r in results), [(r.problem.shape, r.reason) for r in results]
    if splitk == 0:
        assert spec.launch(problems[0], spec.resolve({})).grid[2] > 1, "the skinny shape should be split"


# Rung 14's other tile shapes, stage counts and K depths: each must be right on the odd shapes
# (edge tiles, ragged last K-tile, the scalar paths) and on a shape whose interior blocks take
# the unpredicated path for all but the last K-tile.
BIGTILE_CONFIGS = [
    {},
    {"BK": 16},
    {"STAGES": 2}, {"STAGES": 4, "PADA": 12},
    {"BM": 128, "BN": 256, "WM": 64, "WN": 64},
    {"BM": 128, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8},
    {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "NT": 128, "MINB": 2, "ORDER": 3},
    {"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "NT": 128, "GROUP": 1},
    {"BM": 128, "BN": 64, "WM": 64, "WN": 32, "TM": 16, "TN": 4, "NT": 128, "BK": 16},
    {"STREAMK": 1}, {"STREAMK": 2},
    {"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "NT": 128, "MINB": 2, "STREAMK": 1},
    {"BM": 128, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "STREAMK": 2, "BK": 16},
]


@pytest.mark.parametrize("params", BIGTILE_CONFIGS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
def test_bigtile_configurations(params):
    spec = registry.get("bigtile")
    problems = [p for p in sweep_problems()] + [GemmProblem(517, 389, 1030, 0.75, -1.5),
                                                GemmProblem(512, 256, 1028, 1.0, 0.0)]
    results = verify_sweep([spec], problems, params={"bigtile": params})
    bad = [f"{r.problem.shape} a={r.problem.alpha} b={r.problem.beta}: {r.status} {r.reason}"
           for r in results if r.status != "PASS"]
    assert not bad, "\n".join(bad)


# Stream-K's fix-up: one tile dealt out to every block of the wave (132 contributors on an H100),
# a tile cut in two, a problem with fewer K-iterations than SMs, the odd shapes' element-wise
# path, and shapes of 288 and 576 tiles, whose hybrid runs whole data-parallel waves first.
STREAM_K_SHAPES = [(128, 256, 4096), (200, 300, 2056), (5, 7, 9), (1024, 1024, 1024), (1100, 2300, 520),
                   (517, 389, 1030), (2304, 4096, 72), (2301, 4093, 37), (3072, 3072, 40)]
# The default tile, and the 4-warp, two-blocks-an-SM tile `gemmlab tune` chose at 3072^3.
STREAM_K_TILES = [{}, {"BM": 128, "BN": 128, "WM": 64, "WN": 64, "TM": 8, "TN": 16, "NT": 128, "MINB": 2}]


@pytest.mark.parametrize("tile", STREAM_K_TILES, ids=["128x256", "128x128x4warps"])
@pytest.mark.parametrize("mode", [1, 2])
def test_stream_k_fixup(mode, tile):
    spec = registry.get("bigtile")
    problems = [GemmProblem(*shape, a, b) for shape in STREAM_K_SHAPES for a, b in ((1.0, 0.0), (-0.75, 1.5))]
    results = verify_sweep([spec], problems, params={"bigtile": {**tile, "STREAMK": mode}})
    bad = [f"{r.problem.shape} a={r.problem.alpha} b={r.problem.beta}: {r.status} {r.reason}"
           for r in results if r.status != "PASS"]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("mode", [1, 2])
def test_stream_k_is_deterministic_and_reusable(mode):
    """Launched again and again through one plan, the flags the kernel clears must let every
    launch be right, and the fixed summation order must give the same bits each time."""
    import cupy as cp

    import gemmlab
    from gemmlab.ops.sgemm import compare

    rng = cp.random.default_rng(7)
    M, N, K = 1000, 1500, 3000
    A = rng.uniform(-1, 1, (M, K), dtype=cp.float32)
    B = rng.uniform(-1, 1, (K, N), dtype=cp.float32)
    plan = gemmlab.Matmul(A, B, cp.empty((M, N), cp.float32), impl="bigtile", params={"STREAMK": mode})
    outs = []
    for _ in range(4):
        C = cp.full((M, N), cp.nan, dtype=cp.float32)
        plan.execute(C=C)
        cp.cuda.Device().synchronize()
        v = compare(C, A, B, C, 1.0, 0.0)
        assert v.passed, v.reason
        outs.append(C)
    assert all(bool((o == outs[0]).all()) for o in outs[1:]), "stream-K results differ between launches"
