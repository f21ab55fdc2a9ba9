"""The Triton baseline with one operand past 2^31 elements, against fp64 on sampled rows (columns).

Its kernel multiplied int32 indices by the strides: past 2^31 elements in A (M*K), B (K*N) or C
(M*N) the products wrapped, and it read and wrote the wrong addresses; they are int64 now
(ops/sgemm_triton.py; tests/cpu/test_sgemm_triton_offsets.py reads the source). Each case puts
one operand past 2^31 elements (about 8.7 GB of fp32) and keeps the other two small, so the work
is modest (7e10 FLOPs); the result is compared with fp64 on the rows of C (its columns when B is
the large one) at the start, around the element 2^31 of the large operand, and at the end.
The long side (2^21 + 5) is a multiple of no tile (masked edges; K = 1040 and 16 are whole BK
= 16 steps in two configs), and beta != 0, so C is read as well as written. Each call autotunes
(a key of its own), so every config runs on the problem; the one that wins is checked.
Memory: the large operand, and a copy of C while autotuning (restore_value) when C is the large
one: about 18 GB at most; a case skips on a GPU with less free.
"""
import pytest

from gemmlab import ops, registry
from gemmlab.ops import ShapeArgs

ALPHA, BETA = 0.75, -1.25
LONG = (1 << 21) + 5  # the large operand's long side: LONG * 1040 = 2,181,043,280 elements > 2^31
CASES = {"A": (LONG, 16, 1040), "B": (16, LONG, 1040), "C": (LONG, 1040, 16)}  # the large operand: (M, N, K)
WINDOW = 64  # rows (columns) checked at each place
CHUNK = 1 << 26  # elements generated at a time (a one-shot uniform() of 2^31 needs several times that)
MARGIN = 1 << 30  # bytes beyond the operands: the autotuner's 256 MB L2 flush, the chunks, torch


@pytest.fixture(scope="module")
def stream():
    from gemmlab.cuda.device import device

    return device().create_stream()


def _release():
    """Free what a case leaves behind: torch_interop's views of the last buffers (they keep the
    buffers alive), then CuPy's and torch's cached blocks (torch's hold the autotuner's copy of C)."""
    import cupy as cp
    import torch

    from gemmlab.ops import torch_interop

    torch_interop._views_cache.clear()
    cp.get_default_memory_pool().free_all_blocks()
    torch.cuda.empty_cache()


@pytest.fixture
def runner():
    impl = registry.get("triton", "sgemm")
    reason = impl.unavailable_reason()
    if reason:
        pytest.skip(f"triton (sgemm): {reason}")
    _release()
    yield ops.get("sgemm").prepare(impl, None, "fp32")
    _release()


def _uniform(shape, seed):
    """[-1, 1) fp32 on the GPU, like sgemm's inputs, generated a slab of rows at a time."""
    import cupy as cp

    rows, cols = shape
    x = cp.empty(shape, dtype=cp.float32)
    rng = cp.random.default_rng(seed)
    step = max(1, CHUNK // cols)
    for r in range(0, rows, step):
        n = min(step, rows - r)
        x[r:r + n] = rng.uniform(-1.0, 1.0, (n, cols), dtype=cp.float32)
    return x


def _sample(length: int, boundary: int):
    """Indices along the long side: the first WINDOW, WINDOW around `boundary`, the last WINDOW."""
    import cupy as cp

    starts = (0, boundary - WINDOW // 2, length - WINDOW)
    idx = sorted({i for s in starts for i in range(max(s, 0), min(s + WINDOW, length))})
    return cp.asarray(idx, dtype=cp.int64)


@pytest.mark.parametrize("large", sorted(CASES))
def test_triton_past_2_31_elements(large, runner, stream):
    import cupy as cp

    from gemmlab.cuda.device import sync_or_raise
    from gemmlab.ops.base import device_inputs
    from gemmlab.ops.sgemm import compare

    op = ops.get("sgemm")
    M, N, K = CASES[large]
    elements = {"A": M * K, "B": K * N, "C": M * N}
    assert elements[large] > 2**31 and all(n < 2**26 for name, n in elements.items() if name != large)
    need = 4 * (sum(elements.values()) + elements["C"]) + MARGIN  # C twice: the autotuner's copy
    free = cp.cuda.runtime.memGetInfo()[0]
    if free < need:
        pytest.skip(f"{large} past 2^31 elements needs about {need / 2**30:.0f} GiB of free GPU memory, "
                    f"{free / 2**30:.0f} GiB free")
    problem = op.make_problem(M, N, K, ALPHA, BETA, "fp32", ShapeArgs())
    assert not op.refusal(runner.impl, problem), op.refusal(runner.impl, problem)
    A = device_inputs(_uniform, (M, K), 2100)
    B = device_inputs(_uniform, (K, N), 2101)
    C = device_inputs(_uniform, (M, N), 2102)  # C0: beta != 0 reads it
    # The rows of C (its columns when B is large) to check, around the element 2^31 of the large
    # operand: A's row 2^31 // K, C's row 2^31 // N; B's element 2^31 is in column 2^31 % N, and
    # every column has elements past it (rows k > 2^31 // N), all of them feed every row of C.
    by_rows = large != "B"
    idx = _sample(M, 2**31 // (K if large == "A" else N)) if by_rows else _sample(N, 2**31 % N)
    C0 = C[idx] if by_rows else C[:, idx]  # copies of C0 where it is checked
    cp.cuda.get_current_stream().synchronize()  # before the kernel's stream writes C

    runner.enqueue(problem, A, B, C, stream)
    sync_or_raise(stream)

    if by_rows:
        verdict = compare(C[idx], A[idx], B, C0, ALPHA, BETA)
    else:
        verdict = compare(C[:, idx], A, B[:, idx], C0, ALPHA, BETA)
    where = f"{'rows' if by_rows else 'columns'} {int(idx[0])}..{int(idx[-1])} ({idx.size} of them)"
    assert verdict.passed, f"triton {problem.shape}, {large} past 2^31 elements, {where}: {verdict.reason}"
