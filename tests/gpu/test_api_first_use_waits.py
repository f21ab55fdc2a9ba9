"""A call's first use of a shape builds its executor; one that owns a workspace (a single-pass
sum's counters, the persistent rung's split-K flags) clears it on the call's own stream, ahead of
the first kernel, so the host does not wait for the work queued there. Until session 36 the
clearing was finished on the host: every first call of a shape (for reduce_sum, of each length)
waited for everything queued on CuPy's current stream. Each test queues a kernel that spins
~60 ms on the call's stream, then times the first call of a new shape on the host.

Likewise an executor dropped: cuBLASLt's workspace was a cuMemAlloc of its own until session 37,
and its cuMemFree waited for the whole device whenever such an executor went (a thread's cache
emptied, a plan dropped). It now comes from CuPy's pool on the executor's stream."""
import gc
import time
import weakref

import numpy as np
import pytest

import gemmlab

cp = pytest.importorskip("cupy")

SPIN_CYCLES = 100_000_000  # about 50-80 ms at the SM clocks of an H100 / H200
SPIN = r'''
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}'''
LIMIT_S = 0.02


def _spin(stream):
    kernel = cp.RawKernel(SPIN, "spin")
    with stream:
        kernel((1,), (1,), (np.int64(SPIN_CYCLES),))


def _first_call_after_a_spin(stream, warm, call):
    """warm() on `stream` and waited for (compiled, its kernel loaded), then a spin queued there and
    call() timed on the host; returns (call's result, seconds)."""
    with stream:
        warm()
        _spin(stream)  # compiled now, so that the spin below is the only queued work
        stream.synchronize()
        _spin(stream)
        start = time.perf_counter()
        result = call()
        took = time.perf_counter() - start
        stream.synchronize()
    return result, took


@pytest.mark.parametrize("impl", ["single_pass", "tile_queue"])
def test_a_first_sum_of_a_new_length_does_not_wait_for_the_streams_queued_work(impl):
    stream = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(1 << 20, dtype=cp.float32)
    n = (1 << 20) - 4096 * (1 + (impl == "tile_queue"))  # a length no earlier test of this process used
    got, took = _first_call_after_a_spin(stream, lambda: gemmlab.reduce_sum(x[:1000], impl=impl),
                                         lambda: gemmlab.reduce_sum(x[:n], impl=impl))
    assert float(got) == n
    assert took < LIMIT_S, f"the first sum of {n} took {took * 1e3:.1f} ms: it waited for the stream's queued work"


def test_a_first_split_k_call_of_a_new_shape_does_not_wait_for_the_streams_queued_work():
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the persistent rung is sm_90 (Hopper)")
    stream = cp.cuda.Stream(non_blocking=True)
    rng = np.random.default_rng(36)
    A = cp.asarray(rng.standard_normal((256, 8192)).astype(np.float16))
    B = cp.asarray(rng.standard_normal((8192, 256)).astype(np.float16))
    split = {"SPLITK": 4}  # K slices: the executor owns a zeroed workspace of flags and partials
    got, took = _first_call_after_a_spin(
        stream, lambda: gemmlab.hgemm(A[:, :4096], B[:4096], impl="persistent", params=split),
        lambda: gemmlab.hgemm(A, B, impl="persistent", params=split))
    ref = cp.asnumpy(A).astype(np.float64) @ cp.asnumpy(B).astype(np.float64)
    np.testing.assert_allclose(cp.asnumpy(got), ref, rtol=2e-3, atol=0.5)
    assert took < LIMIT_S, f"the first split-K call took {took * 1e3:.1f} ms: it waited for the stream's queued work"


# Lt picks split-K with a workspace for a thin, deep GEMM; the first of these that gets one is used
LT_WORKSPACE_SHAPES = [(64, 64, 65536), (128, 128, 32768), (256, 256, 16384), (512, 512, 8192)]


def test_dropping_a_cublaslt_executor_with_a_workspace_does_not_wait_for_the_device():
    from gemmlab.api import core
    from gemmlab.api.launches import launching_on

    core.setup()  # what a first call does: this test may run alone
    stream, busy = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    for M, N, K in LT_WORKSPACE_SHAPES:
        with launching_on(stream.ptr):  # as a call's executor is built (core.executor)
            ex = core.new_executor("hgemm", "fp16", (M, N, K), "cublas", None)
        if ex.owns_workspace and ex.lt_refusal is None:
            break
    else:
        pytest.skip(f"cuBLASLt chose no algorithm with a workspace for any of {LT_WORKSPACE_SHAPES}")
    rng = np.random.default_rng(37)
    A = cp.asarray(rng.standard_normal((M, K)).astype(np.float16))
    B = cp.asarray(rng.standard_normal((K, N)).astype(np.float16))
    C = cp.full((M, N), np.nan, dtype=cp.float32)
    ex.run(A.data.ptr, B.data.ptr, C.data.ptr, 1.0, 0.0, stream.ptr)  # the workspace in use
    stream.synchronize()
    ref = cp.asnumpy(A).astype(np.float64) @ cp.asnumpy(B).astype(np.float64)
    np.testing.assert_allclose(cp.asnumpy(C), ref, rtol=1e-3, atol=0.05)
    prepared = weakref.ref(ex.call.call)  # the PreparedLtGemm under the graph replay
    _spin(busy)
    busy.synchronize()  # compiled and loaded: the spin below is the only queued work
    _spin(busy)
    start = time.perf_counter()
    del ex
    if prepared() is not None:  # held in a cycle: collected now (a full collection takes its own time)
        gc.collect()
    took = time.perf_counter() - start
    busy.synchronize()
    assert prepared() is None, "the executor's cuBLASLt GEMM outlived it"
    assert took < LIMIT_S, (f"dropping a {M}x{N}x{K} cuBLASLt executor took {took * 1e3:.1f} ms: "
                            "freeing its workspace waited for another stream's work")
