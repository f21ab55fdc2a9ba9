"""Every kernel and baseline against fp64 over the odd-shape sweep, alpha/beta both ways."""
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.problem import GemmProblem
from gemmlab.ops.sgemm import sweep_problems

IMPLS = registry.all_impls("sgemm")


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_odd_shape_sweep(impl):
    if impl.kind == "baseline" and impl.unavailable_reason():
        pytest.skip(impl.unavailable_reason())
    results = verify_sweep([impl], sweep_problems())
    bad = [f"{r.problem.shape} a={r.problem.alpha} b={r.problem.beta}: {r.status} {r.reason}"
           for r in results if r.status != "PASS"]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("impl", [k for k in IMPLS if k.kind == "kernel" and k.rung and k.rung >= 4],
                         ids=lambda i: i.name)
def test_large_aligned_and_unaligned(impl):
    """A big tile-aligned shape (float4 paths) and its off-by-one neighbour (scalar edges)."""
    problems = [GemmProblem(1024, 1024, 1024, 1.0, 0.0), GemmProblem(1025, 1023, 1021, -0.5, 2.0)]
    results = verify_sweep([impl], problems)
    assert all(r.status == "PASS" for r in results), [(r.problem.shape, r.reason) for r in results]


def test_misaligned_pointers_take_the_scalar_path():
    """Views that start one float into a buffer are not 16-byte aligned: float4 must not be used."""
    import cupy as cp

    import gemmlab
    from gemmlab.ops.sgemm import compare

    M, N, K = 130, 132, 68  # multiples of 4, so only the pointer alignment is off
    rng = cp.random.default_rng(7)
    a_buf = rng.uniform(-1, 1, M * K + 1, dtype=cp.float32)
    b_buf = rng.uniform(-1, 1, K * N + 1, dtype=cp.float32)
    A = a_buf[1:].reshape(M, K)
    B = b_buf[1:].reshape(K, N)
    for name in ("vectorize", "bank_linearize", "bank_padding", "autotuned", "double_buffering", "warptiling",
                 "async_pipeline", "hopper_simt", "bigtile", "s4_float4", "s4_outer_product", "s4_smem_transpose", "tiled"):
        c_buf = cp.full(M * N + 1, cp.nan, dtype=cp.float32)
        C = c_buf[1:].reshape(M, N)
        gemmlab.sgemm(A, B, C, impl=name)
        cp.cuda.Device().synchronize()
        v = compare(C, A, B, C, 1.0, 0.0)
        assert v.passed, f"{name}: {v.reason}"


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
