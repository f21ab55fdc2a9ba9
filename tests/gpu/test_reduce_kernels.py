"""Every reduce rung and baseline against fp64: the issue's sizes, a large N, exact integer
data and uniform data with negative values, NaN/inf, other template parameters, misaligned
views, the single pass's counter, and occupancy of the grid-stride rungs."""
import numpy as np
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep

IMPLS = [i for i in registry.all_impls("reduce") if not getattr(i, "ceiling", False)]
KERNELS = registry.kernels("reduce")
SIZES = (1, 31, 32, 33, 1000, 1023, 1024, 1025, (1 << 20) + 7)
LARGE = (1 << 27) + 3


def _assert_all_pass(results):
    bad = [f"n={r.problem.n}: {r.status} {r.reason}" for r in results if r.status != "PASS"]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_issue_sizes(impl):
    if impl.kind == "baseline" and impl.unavailable_reason():
        pytest.skip(impl.unavailable_reason())
    _assert_all_pass(verify_sweep([impl], SIZES, special=True))


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_large_n(impl):
    if impl.kind == "baseline" and impl.unavailable_reason():
        pytest.skip(impl.unavailable_reason())
    _assert_all_pass(verify_sweep([impl], (LARGE,), special=False))


HUGE = (1 << 31) + 5  # past 2^31 elements: 64-bit counts and indices (the kernels take n as long long)


@pytest.fixture(scope="module")
def huge_input():
    """8.6 GB of integers {-4..-1, 1..4}, made once: every partial sum stays far below 2^24, so
    each rung's fp32 sum must equal the fp64 one exactly."""
    import cupy as cp

    from gemmlab.ops.reduce_check import make_input

    if cp.cuda.runtime.memGetInfo()[0] < 3 * HUGE * 4:
        pytest.skip(f"{HUGE} elements need about {3 * HUGE * 4 / 2**30:.0f} GiB of free GPU memory")
    x = make_input(HUGE, seed=11, kind="integers")
    return x, float(x.sum(dtype=cp.float64))


@pytest.mark.parametrize("impl", KERNELS, ids=lambda i: i.name)
def test_past_2_31_elements(impl, huge_input):
    import cupy as cp

    from gemmlab.cuda.device import device
    from gemmlab.ops.reduce_passes import ReduceRunner

    x, ref = huge_input
    runner, stream = ReduceRunner(impl), device().create_stream()
    cp.cuda.Device().synchronize()
    out = runner.enqueue(x, stream)
    stream.sync()
    assert float(out.get()) == ref, (impl.name, float(out.get()), ref)


@pytest.mark.parametrize("name,params", [
    ("interleaved", {"THREADS": 32, "ELEMS": 3}), ("no_divergence", {"THREADS": 1024, "ELEMS": 2}),
    ("sequential", {"THREADS": 64, "ELEMS": 4}), ("add_during_load", {"THREADS": 32, "ELEMS": 16}),
    ("unroll_last_warp", {"THREADS": 64, "ELEMS": 1}), ("unroll_last_warp", {"THREADS": 1024, "ELEMS": 3}),
    ("shuffle", {"THREADS": 32, "ELEMS": 5}), ("shuffle", {"THREADS": 1024, "ELEMS": 1}),
    ("complete_unroll", {"THREADS": 32, "ELEMS": 3}), ("complete_unroll", {"THREADS": 1024, "ELEMS": 32}),
    ("grid_stride_vec4", {"THREADS": 32, "UNROLL": 1, "BLOCKS_PER_SM": 1}),
    ("grid_stride_vec4", {"THREADS": 1024, "UNROLL": 8, "BLOCKS_PER_SM": 2}),
    ("single_pass", {"THREADS": 32, "UNROLL": 3, "BLOCKS_PER_SM": 1}),
    ("single_pass", {"THREADS": 512, "UNROLL": 8, "BLOCKS_PER_SM": 4}),
    ("tile_queue", {"THREADS": 32, "UNROLL": 1, "BLOCKS_PER_SM": 1}),
    ("tile_queue", {"THREADS": 128, "UNROLL": 3, "BLOCKS_PER_SM": 2}),
    ("tile_queue", {"THREADS": 1024, "UNROLL": 4, "BLOCKS_PER_SM": 2}),
])
def test_other_parameters(name, params):
    _assert_all_pass(verify_sweep([registry.get(name, "reduce")], (1, 33, 1025, 4099, 100_003, (1 << 20) + 7),
                                  params={name: params}, special=False))


@pytest.mark.parametrize("name", ["grid_stride_vec4", "single_pass", "tile_queue", "complete_unroll"])
@pytest.mark.parametrize("skip", [1, 2, 3])
def test_misaligned_views(name, skip):
    """Views starting 4, 8, 12 bytes past a 16-byte boundary take the head/tail paths. The runner
    is called directly: api.reduce_sum copies a misaligned view into an aligned buffer first, so
    through it the kernels never saw one (the review of session 26)."""
    import cupy as cp

    from gemmlab.cuda.device import device
    from gemmlab.ops.reduce_passes import ReduceRunner

    runner, stream = ReduceRunner(registry.get(name, "reduce")), device().create_stream()
    rng = np.random.default_rng(skip)
    for n in (1, 2, 3, 4, 5, 1000, (1 << 20) + 7):
        host = rng.integers(-4, 5, size=n + skip).astype(np.float32)
        x = cp.asarray(host)[skip:]
        assert x.data.ptr % 16
        cp.cuda.Device().synchronize()
        out = runner.enqueue(x, stream)
        stream.sync()
        assert float(out.get()) == float(host[skip:].astype(np.float64).sum()), (name, n, skip)


@pytest.mark.parametrize("name", ["single_pass", "tile_queue"])
def test_single_pass_counters_reset_and_result_is_deterministic(name):
    """The counters are 0 after every launch and every launch is right. Integer data makes
    the sum exact, so this holds for the tile queue too, whose tile-to-block map (and so its
    rounding on general data) varies from launch to launch; rung 9's is fixed."""
    import cupy as cp

    from gemmlab.cuda.device import device
    from gemmlab.ops.reduce_passes import ReduceRunner

    stream = device().create_stream()
    runner = ReduceRunner(registry.get(name, "reduce"))
    host = np.random.default_rng(0).integers(-4, 5, size=(1 << 24) + 5).astype(np.float32)
    x = cp.asarray(host)
    cp.cuda.Device().synchronize()
    values = []
    for _ in range(5):
        out = runner.enqueue(x, stream)
        stream.sync()
        values.append(float(out.get()))
        assert runner.counter_value() == 0
    assert values == [float(host.astype(np.float64).sum())] * 5
    assert runner.grids(x.size)[0] > 1


@pytest.mark.parametrize("name", ["grid_stride_vec4", "single_pass", "tile_queue"])
def test_grid_is_one_resident_wave(name):
    from gemmlab.cuda.device import info
    from gemmlab.ops.reduce_passes import ReduceRunner

    runner = ReduceRunner(registry.get(name, "reduce"))
    v = runner.params
    kernel = runner.compiled.kernel()
    resident = kernel.occupancy.max_active_blocks_per_multiprocessor(v["THREADS"], 0)
    assert resident >= v["BLOCKS_PER_SM"], f"{resident} blocks fit an SM, the grid assumes {v['BLOCKS_PER_SM']}"
    assert runner.grids(1 << 28)[0] == v["BLOCKS_PER_SM"] * info().sm_count
