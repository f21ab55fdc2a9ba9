"""The reduce verification rules (no GPU): exact integers, the stated bound, NaN/inf as in
NumPy, per-block partials, input generation, size parsing - and a model of the grid-stride
index math of rungs 8-9 that must cover every element exactly once."""
import math

import numpy as np
import pytest

from gemmlab.errors import BadArgumentError
from gemmlab.ops import reduce_check as rv
from gemmlab.ops.reduce import EDGE_SIZES, parse_size, parse_sizes, size_label


def test_tolerance_is_stated_and_grows_like_sqrt_n():
    assert rv.tolerance(1) == 65 * 2.0 ** -24
    assert rv.tolerance(1 << 20) == (1024 + 64) * 2.0 ** -24
    assert rv.tolerance((1 << 20) + 1) == (1025 + 64) * 2.0 ** -24
    assert rv.tolerance(1 << 28) < 1e-3


def test_exact_check():
    assert rv.check_sum(12.0, 12.0, 40.0, 10, exact=True).passed
    v = rv.check_sum(11.0, 12.0, 40.0, 10, exact=True)
    assert not v.passed and "off by -1" in v.reason


def test_bound_check():
    n, s = 1 << 20, 5.0e5
    tol = rv.tolerance(n)
    assert rv.check_sum(1.0 + 0.9 * tol * s, 1.0, s, n, exact=False).passed
    v = rv.check_sum(1.0 + 1.1 * tol * s, 1.0, s, n, exact=False)
    assert not v.passed and "relative error" in v.reason


@pytest.mark.parametrize("value,ref,ok", [
    (math.nan, math.nan, True), (1.0, math.nan, False), (math.inf, math.nan, False),
    (math.inf, math.inf, True), (-math.inf, math.inf, False), (math.nan, math.inf, False),
    (-math.inf, -math.inf, True), (math.nan, 3.0, False), (math.inf, 3.0, False),
])
def test_nan_and_inf_follow_numpy(value, ref, ok):
    assert rv.check_sum(value, ref, 10.0, 100, exact=False).passed is ok


def test_numpy_semantics_of_the_special_cases():
    """What SPECIAL_CASES expects is what NumPy's float32 sum gives."""
    expected = {"nan": math.nan, "+inf": math.inf, "-inf": -math.inf}
    for case, want in rv.SPECIAL_CASES:
        x = np.ones(100, dtype=np.float32)
        rv.plant_special(x, case, seed=3)
        with np.errstate(invalid="ignore"):
            got = float(x.sum())
        assert (math.isnan(got) and math.isnan(expected[want])) or got == expected[want], case


def test_integer_inputs_are_nonzero_small_integers_and_sum_exactly():
    x = rv.make_input(100_000, 1, "integers", xp=np)
    assert x.dtype == np.float32
    assert set(np.unique(x).tolist()) == {-4.0, -3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 4.0}
    ref, abs_sum = rv.reference(x)
    assert ref == float(x.astype(np.int64).sum())
    # any fp32 order gives the same integer: a sequential fp32 sum and numpy's pairwise one
    assert float(np.cumsum(x, dtype=np.float32)[-1]) == ref == float(x.sum(dtype=np.float32))


def test_uniform_inputs_have_both_signs_and_fresh_seeds_differ():
    a = rv.make_input(10_000, 1, "uniform", xp=np)
    b = rv.make_input(10_000, 2, "uniform", xp=np)
    assert a.dtype == np.float32 and a.min() < -0.9 and a.max() > 0.9
    assert not np.array_equal(a, b)


def test_fp32_sums_pass_the_bound_on_uniform_data():
    """A sequential fp32 sum (the longest chain: n) of 2^16 elements still meets the bound."""
    x = rv.make_input(1 << 16, 5, "uniform", xp=np)
    ref, abs_sum = rv.reference(x)
    assert rv.check_sum(float(x.sum(dtype=np.float32)), ref, abs_sum, x.size, exact=False).passed
    assert rv.check_sum(float(np.cumsum(x, dtype=np.float32)[-1]), ref, abs_sum, x.size, exact=False).passed


def test_a_dropped_element_fails_the_exact_test():
    x = rv.make_input(5000, 9, "integers", xp=np)
    ref, abs_sum = rv.reference(x)
    assert not rv.check_sum(float(x[1:].sum()), ref, abs_sum, x.size, exact=True).passed


def test_check_partials():
    x = rv.make_input(1000, 4, "integers", xp=np)
    section = 256
    blocks = -(-1000 // section)
    good = np.array([x[b * section:(b + 1) * section].sum() for b in range(blocks)], dtype=np.float32)
    assert rv.check_partials(good, x, section, exact=True) is None
    bad = good.copy()
    bad[2] += 1
    v = rv.check_partials(bad, x, section, exact=True)
    assert v is not None and "partial[2]" in v.reason
    nan = good.copy()
    nan[3] = np.nan
    assert rv.check_partials(nan, x, section, exact=False) is not None


@pytest.mark.parametrize("text,n", [("1024", 1024), ("2^20", 1 << 20), ("2**20", 1 << 20), ("2^20+7", (1 << 20) + 7),
                                    ("2^10-1", 1023), ("1<<28", 1 << 28), (" 33 ", 33)])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["0", "-3", "abc", "2^", "1e6", "", "1_024", "\uff11\uff10\uff12\uff14", "2^1_0", "1<<", "<<3"])
def test_parse_size_refuses(text):
    with pytest.raises(BadArgumentError):
        parse_size(text)


def test_parse_sizes_and_labels():
    assert parse_sizes(None, "1024,65536") == [1024, 65536]
    assert parse_sizes(None, EDGE_SIZES) == list(EDGE_SIZES)
    assert parse_sizes("1024,2^10,5", EDGE_SIZES) == [1024, 5], "a size named twice is measured once"
    assert parse_sizes("1,2^20+7", "") == [1, (1 << 20) + 7]
    with pytest.raises(BadArgumentError):
        parse_sizes(",", "")
    assert size_label(1 << 28) == "2^28" and size_label((1 << 20) + 7) == "2^20+7" and size_label(1000) == "1000"
    assert size_label(33) == "33"


# -- a model of reduce_common.cuh's grid_stride_sum ----------------------------------------------

def grid_stride_elements(addr: int, n: int, blocks: int, threads: int, unroll: int) -> np.ndarray:
    """How many times each element is read by the grid, following the kernel's index math."""
    count = np.zeros(n, dtype=np.int64)
    head = min(((16 - (addr & 15)) & 15) >> 2, n)
    n4 = (n - head) >> 2
    tail = (n - head) & 3
    stride = blocks * threads
    for g in range(blocks * threads):
        if g < head:
            count[g] += 1
        if g < tail:
            count[head + 4 * n4 + g] += 1
        i = g
        while i < n4:
            for u in range(unroll):
                j = i + u * stride
                if j < n4:
                    count[head + 4 * j: head + 4 * j + 4] += 1
            i += unroll * stride
    return count


# The kernel lines the model follows, verbatim: an edit to any of them fails
# test_the_model_follows_the_kernel until the model above is checked against it again.
MODELLED_LINES = (
    "long long head = (long long)(((16ull - (addr & 15ull)) & 15ull) >> 2);  // 0..3 floats",
    "if (head > n) head = n;",
    "return Split{head, (n - head) >> 2, (n - head) & 3};",
    "if (g < s.head) v = x[g];",
    "if (g < s.tail) v += x[s.head + 4 * s.n4 + g];",
    "const long long g = (long long)blockIdx.x * THREADS + threadIdx.x;",
    "const long long stride = (long long)gridDim.x * THREADS;",
    "const float4* __restrict__ v = reinterpret_cast<const float4*>(x + sp.head);",
    "for (long long i = g; i < n4; i += UNROLL * stride) {",
    "const long long j = i + u * stride;",
    "r[u] = j < n4 ? load_stream(v + j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);",
)


def test_the_model_follows_the_kernel():
    from gemmlab.registry import KERNEL_DIR

    source = {line.strip() for line in (KERNEL_DIR / "reduce" / "reduce_common.cuh").read_text().splitlines()}
    missing = [line for line in MODELLED_LINES if line not in source]
    assert not missing, f"reduce_common.cuh changed where grid_stride_elements models it: {missing}"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 31, 33, 1000, 1025, 4097, 20011])
@pytest.mark.parametrize("misalign", [0, 4, 8, 12])
def test_grid_stride_model_reads_every_element_once(n, misalign):
    from gemmlab.kernels.reduce.specs import grid_stride_blocks

    for threads, unroll, bps, sms in ((32, 2, 1, 3), (64, 4, 2, 2), (128, 1, 1, 1)):
        blocks = grid_stride_blocks(n, {"THREADS": threads, "BLOCKS_PER_SM": bps}, sms)
        count = grid_stride_elements(0x7F0000000000 + misalign, n, blocks, threads, unroll)
        assert (count == 1).all(), (n, misalign, threads, unroll, blocks, np.flatnonzero(count != 1)[:5])


def _pairwise(x):
    """NumPy's float32 sum: blocked pairwise, a chain of about log2(n) + 8 additions."""
    return float(x.sum(dtype=np.float32))


@pytest.mark.parametrize("n", [1 << 16, (1 << 20) + 7, 1 << 22])
def test_the_spread_rule_passes_fp32_sums_and_catches_precision_lost(n):
    """Rule 2 alone passed a sum of x read at bf16 precision from n ~ 2^16 and a result near 0 from
    ~2^25 (session 26's review). Rule 3 passes fp32 sums and fails both."""
    x = rv.make_input(n, 21, "uniform", xp=np)
    ref, abs_sum = rv.reference(x)
    l2 = rv.norm2(x)

    def verdict(value):
        return rv.check_spread(rv.check_sum(value, ref, abs_sum, n, exact=False), l2, n)

    missed_by_rule_2 = []

    assert verdict(_pairwise(x)).passed
    blocked = x.reshape(-1, 1) if n % 4096 else x.reshape(-1, 4096)  # chains of 4096 = 64 * 64, then a sum of those
    assert verdict(float(blocked.sum(axis=-1, dtype=np.float32).sum(dtype=np.float32))).passed
    as_bf16 = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)  # read at bf16 precision (truncated)
    as_fp16 = x.astype(np.float16).astype(np.float32)
    for lost in (as_bf16, as_fp16):
        v = verdict(_pairwise(lost))
        assert not v.passed
        if rv.check_sum(_pairwise(lost), ref, abs_sum, n, exact=False).passed:
            assert "x read below fp32?" in v.reason, "rule 2 missed it: rule 3's catch"
            missed_by_rule_2.append(n)
    assert not verdict(0.0).passed
    assert missed_by_rule_2 or n < 1 << 20, "from 2^20 on, rule 2 alone passes x read at fp16 precision"


def test_the_spread_rule_leaves_other_verdicts_alone():
    failed = rv.check_sum(5.0, 1.0, 10.0, 100, exact=False)
    assert rv.check_spread(failed, 1.0, 100) is failed
    exact = rv.check_sum(3.0, 3.0, 10.0, 100, exact=True)
    assert rv.check_spread(exact, 1e-30, 100) is exact
