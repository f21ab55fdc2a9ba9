"""A __cuda_array_interface__ producer that names its own stream for B or C: the call (on A's
stream) must wait for B's producer, and C's producer's later work must wait for the call. Each
test makes the producer's work late on purpose (a kernel that spins ~60 ms before it writes), so
a call that ignored the stream B or C names would read B before it is written, or let C's
producer read C before the GEMM wrote it, and the check against the reference would fail. The
capture tests: under a capture nothing is ordered, and the graph replays right; a plan rebound to
operands that name another stream runs on that stream, so capturing it captures the plan."""
import time

import numpy as np
import pytest

import gemmlab

cp = pytest.importorskip("cupy")

M, N, K = 256, 192, 128
SPIN_CYCLES = 100_000_000  # about 50-80 ms at the SM clocks of an H100 / H200
LATE_FILL = r'''
extern "C" __global__ void late_fill(float* x, long long n, float value, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    for (long long i = threadIdx.x; i < n; i += blockDim.x) x[i] = value;
}'''


class OnStream:
    """A CuPy array exported with the stream its producer works on."""

    def __init__(self, x, stream):
        self.x, self.stream = x, stream

    @property
    def __cuda_array_interface__(self):
        return dict(self.x.__cuda_array_interface__, stream=self.stream.ptr)


def _late_fill(x, value, stream):
    kernel = cp.RawKernel(LATE_FILL, "late_fill")
    with stream:
        kernel((1,), (256,), (x, np.int64(x.size), np.float32(value), np.int64(SPIN_CYCLES)))


def _operands():
    rng = np.random.default_rng(33)
    A = cp.asarray(rng.standard_normal((M, K), dtype=np.float32))
    B = cp.zeros((K, N), dtype=cp.float32)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(3)]
    return A, B, streams


def _expected(A, value):
    return np.repeat(cp.asnumpy(A).astype(np.float64).sum(axis=1, keepdims=True) * value, N, axis=1)


def _ones_b_nan_c():
    """A, B all ones, an uninitialised C (the tests poison it after their warm-ups), three streams."""
    A, B, streams = _operands()
    B.fill(1.0)
    return A, B, cp.empty((M, N), dtype=cp.float32), streams


def _replayed(stream, run):
    """run() captured on `stream`, the graph then launched there and waited for."""
    stream.begin_capture()
    run()
    graph = stream.end_capture()
    graph.launch(stream=stream)
    stream.synchronize()


def test_a_call_waits_for_the_stream_b_names():
    A, B, (s1, s2, _) = _operands()
    gemmlab.sgemm(OnStream(A, s1), OnStream(B, s1))  # compiled and warm: the call below takes microseconds
    cp.cuda.Device().synchronize()
    _late_fill(B, 1.0, s2)  # B is all ones only after the spin
    C = gemmlab.sgemm(OnStream(A, s1), OnStream(B, s2))
    cp.cuda.Device().synchronize()
    np.testing.assert_allclose(cp.asnumpy(C), _expected(A, 1.0), rtol=1e-4, atol=1e-3)


def test_cs_producer_waits_for_the_call():
    # a GEMM long enough (1024 x 1024 x 16384, about a millisecond) that C's producer, reading C
    # on its own stream right after the call returns, would see it unwritten if it did not wait
    s1, s3 = (cp.cuda.Stream(non_blocking=True) for _ in range(2))
    A = cp.random.default_rng(33).random((1024, 16384), dtype=cp.float32)
    B = cp.full((16384, 1024), 2.0, dtype=cp.float32)
    C = cp.empty((1024, 1024), dtype=cp.float32)
    gemmlab.sgemm(OnStream(A, s1), OnStream(B, s1), OnStream(C, s1))  # compiled and warm
    C.fill(np.nan)  # what C's producer would see if it did not wait
    seen = cp.empty_like(C)  # made now: a first allocation on s3 below could synchronise the device
    cp.cuda.Device().synchronize()
    gemmlab.sgemm(OnStream(A, s1), OnStream(B, s1), OnStream(C, s3), alpha=0.5)
    with s3:
        cp.copyto(seen, C)  # C's producer reads C on its own stream
    cp.cuda.Device().synchronize()
    rows = cp.asnumpy(A.astype(cp.float64).sum(axis=1))  # alpha * (A @ B) with B all 2: A's row sums
    np.testing.assert_allclose(cp.asnumpy(seen), np.repeat(rows[:, None], 1024, axis=1), rtol=1e-4)


def test_a_plan_waits_for_the_stream_b_names_at_each_execute():
    A, B, (s1, s2, _) = _operands()
    plan = gemmlab.Matmul(OnStream(A, s1), OnStream(B, s2))
    plan.execute()
    cp.cuda.Device().synchronize()
    for value in (1.0, 3.0):
        _late_fill(B, value, s2)
        C = plan.execute()
        cp.cuda.Device().synchronize()
        np.testing.assert_allclose(cp.asnumpy(C), _expected(A, value), rtol=1e-4, atol=1e-3)


def test_a_capture_of_the_calls_stream_is_not_broken_by_the_streams_producers_name():
    # ordering with another stream under a capture would wait on an event from outside it, or
    # fork a producer's stream into it that never joins (end_capture fails): nothing is ordered
    A, B, C, (s1, s2, s3) = _ones_b_nan_c()
    plan = gemmlab.Matmul(OnStream(A, s1), OnStream(B, s2), OnStream(C, s3))
    plan.execute()
    gemmlab.sgemm(OnStream(A, s1), OnStream(B, s2), OnStream(C, s3))  # both warm: nothing built under the capture
    C.fill(np.nan)
    cp.cuda.Device().synchronize()
    for run in (plan.execute, lambda: gemmlab.sgemm(OnStream(A, s1), OnStream(B, s2), OnStream(C, s3), alpha=2.0)):
        _replayed(s1, run)
    np.testing.assert_allclose(cp.asnumpy(C), _expected(A, 2.0), rtol=1e-4, atol=1e-3)


def test_a_plan_rebound_to_operands_naming_another_stream_runs_on_it_and_is_captured_there():
    # the plan kept the stream of the A it was made with: the launch went to s1, forked from the
    # capture of s2 by an event, and the capture ended with that work unjoined
    A, B, C, (s1, s2, _) = _ones_b_nan_c()
    plan = gemmlab.Matmul(OnStream(A, s1), OnStream(B, s1), OnStream(C, s1))
    plan.execute()
    C.fill(np.nan)
    cp.cuda.Device().synchronize()
    _replayed(s2, lambda: plan.execute(A=OnStream(A, s2), B=OnStream(B, s2), C=OnStream(C, s2), alpha=2.0))
    np.testing.assert_allclose(cp.asnumpy(C), _expected(A, 2.0), rtol=1e-4, atol=1e-3)


def test_xs_producer_waits_for_a_sum_plan():
    # the sum runs on s1 behind a late kernel; x's producer overwrites x on its own stream right
    # after the call returns: without the wait it would write NaN before the sum read x
    s1, s2 = (cp.cuda.Stream(non_blocking=True) for _ in range(2))
    x = cp.full(1 << 20, 0.5, dtype=cp.float32)
    plan = gemmlab.Sum(OnStream(x, s2))
    plan.execute(stream=s1)  # compiled and warm
    plan.result.fill(np.nan)  # a sum that did not run would not pass for one that did
    scratch = cp.empty(1, dtype=cp.float32)  # made now (and kept): no allocation below to synchronise the device
    with s2:  # the producer's fill kernel compiled now: compiled below, it took 155 ms (H100, session
        cp.empty_like(x).fill(np.nan)  # 35), outlasting the late kernel, and the test passed unordered
    cp.cuda.Device().synchronize()
    _late_fill(scratch, 0.0, s1)  # the sum starts ~60 ms from now
    total = plan.execute(stream=s1)
    with s2:
        x.fill(np.nan)  # x's producer writes x next (a kernel, as the sum's own reads)
    cp.cuda.Device().synchronize()
    assert float(total) == 0.5 * (1 << 20)


def test_a_producers_stream_under_capture_is_refused_and_the_capture_ends():
    # waiting on it would pull the call's stream into that capture and leave it unjoined there
    A, B, (s1, s2, _) = _operands()
    gemmlab.sgemm(OnStream(A, s1), OnStream(B, s1))  # warm
    cp.cuda.Device().synchronize()
    s2.begin_capture()
    with pytest.raises(ValueError, match="which is being captured, but the call runs on stream"):
        gemmlab.sgemm(OnStream(A, s1), OnStream(B, s2))
    s2.end_capture()  # raised cudaErrorStreamCaptureUnjoined when s1 had been forked into it
    cp.cuda.Device().synchronize()


def test_strided_operands_naming_their_streams_are_copied_without_waiting_on_the_host():
    # B and C are every other column of a wider array, written late on their own streams. The copies
    # the call makes of them wait for those streams on the GPU; made through cupy.asarray they also
    # waited on the host (CuPy synchronises a stream a dict names), so the call took the ~60 ms spin
    A, _, (s1, s2, s3) = _operands()
    wide_b, wide_c = cp.zeros((K, 2 * N), dtype=cp.float32), cp.zeros((M, 2 * N), dtype=cp.float32)
    B, C = wide_b[:, ::2], wide_c[:, ::2]

    def call():
        return gemmlab.sgemm(OnStream(A, s1), OnStream(B, s2), OnStream(C, s3), beta=1.0)

    call()  # compiled and warm, CuPy's copy kernels too
    cp.cuda.Device().synchronize()
    _late_fill(wide_b, 1.0, s2)
    _late_fill(wide_c, 2.0, s3)
    start = time.perf_counter()
    returned = call()
    took = time.perf_counter() - start
    cp.cuda.Device().synchronize()
    assert returned.x is C  # the caller's C, written in place
    np.testing.assert_allclose(cp.asnumpy(C), _expected(A, 1.0) + 2.0, rtol=1e-4, atol=1e-3)
    assert took < 0.02, f"the call took {took * 1e3:.1f} ms: it waited on the host for a producer's stream"
