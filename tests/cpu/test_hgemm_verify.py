"""The hgemm verification rules without a GPU: rounding to fp16/bf16, the stated bounds, and
simulated kernels - a correct fp32 accumulation passes; a dropped K step, fp16 accumulation,
a bf16-rounded output, one wrong element, and an unwritten (NaN) output all fail."""
import numpy as np
import pytest

from gemmlab.ops import hgemm_check as hv
from gemmlab.kernels.hgemm.specs import aligned_rows, dtype_flag
from gemmlab.problem import GemmProblem


def test_bounds_are_stated():
    assert hv.normwise_tolerance(1) == 2e-5
    assert hv.normwise_tolerance(4096) == 4096 * 2.0 ** -25
    assert hv.normwise_tolerance(1 << 16) < 3e-3
    assert hv.elementwise_factor(1022) == 1024 * 2.0 ** -22


def test_bf16_rounding_is_to_nearest_even():
    x = np.array([1.0, -2.5, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -9, 1.0 + 2.0 ** -8 + 2.0 ** -20],
                 dtype=np.float32)
    bits = hv.round_to(x, "bf16")
    assert bits.dtype == np.uint16
    assert bits[0] == 0x3F80 and bits[1] == 0xC020
    back = hv.decode(bits, "bf16")
    # ties go to the even neighbour: 1 + 2^-8 -> 1, 1 + 3*2^-8 -> 1 + 4*2^-8; above a tie rounds up
    assert list(back) == [1.0, -2.5, 1.0, 1.0 + 2.0 ** -6, 1.0, 1.0 + 2.0 ** -7]


def test_fp16_rounding_and_decode_are_exact():
    x = np.random.default_rng(0).uniform(-1, 1, 1000).astype(np.float32)
    h = hv.round_to(x, "fp16")
    assert h.dtype == np.float16
    assert np.array_equal(hv.decode(h, "fp16"), h.astype(np.float64))
    with pytest.raises(ValueError):
        hv.round_to(x, "fp8")


@pytest.mark.parametrize("dtype", hv.DTYPES)
def test_inputs_are_rounded_and_c_poisoned(dtype):
    A, B, C0 = hv.make_inputs(GemmProblem(7, 5, 3, dtype=dtype), seed=1, xp=np)
    assert A.shape == (7, 3) and B.shape == (3, 5) and A.dtype.itemsize == (4 if dtype == "tf32" else 2)
    assert np.isnan(C0).all()
    _, _, C1 = hv.make_inputs(GemmProblem(7, 5, 3, beta=1.0, dtype=dtype), seed=1, xp=np)
    assert np.isfinite(C1).all()
    a = hv.decode(A, dtype)
    assert np.all(np.abs(a) <= 1.0)


def _case(dtype, M=64, N=48, K=1024, alpha=1.5, beta=-0.75, seed=3):
    A, B, C0 = hv.make_inputs(GemmProblem(M, N, K, alpha, beta, dtype), seed, xp=np)
    return A, B, C0, hv.decode(A, dtype), hv.decode(B, dtype)


def _fp32_kernel(a, b, c0, alpha, beta, step=16, acc_dtype=np.float32):
    """A model of a tensor-core kernel: exact products, summed K step by K step into an
    accumulator of acc_dtype, then the fp32 epilogue."""
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=acc_dtype)
    for k in range(0, a.shape[1], step):
        part = a[:, k:k + step] @ b[k:k + step, :]  # exact enough (fp64) inside one MMA
        acc = (acc.astype(np.float64) + part).astype(acc_dtype)
    out = np.float32(alpha) * acc.astype(np.float32)
    if beta != 0.0:
        out = out + np.float32(beta) * c0
    return out.astype(np.float32)


def _tf32(x):
    """fp32 values truncated to tf32 (the top 19 bits), as the tensor cores read them."""
    return (np.asarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def test_tf32_bounds_are_stated():
    assert hv.normwise_tolerance(4096, "tf32") == 2.0 ** -8
    assert hv.elementwise_factor(1022, "tf32") == 1024 * 2.0 ** -22 + 2.0 ** -9 + 2.0 ** -20


def test_a_tf32_kernel_passes_and_a_dropped_step_fails():
    """A model of the tf32 rung (inputs truncated, fp32 accumulation 8 at a time) passes against
    the fp64 product of the fp32 inputs; the same kernel missing one 8-wide K step fails."""
    A, B, C0, a, b = _case("tf32", K=4096)
    ta, tb = _tf32(A).astype(np.float64), _tf32(B).astype(np.float64)
    v = hv.compare(_fp32_kernel(ta, tb, C0, 1.5, -0.75, step=8), A, B, C0, 1.5, -0.75, "tf32")
    assert v.passed, v.reason
    assert 1e-4 < v.rel_err < v.tol, "the tf32 truncation shows (~1e-3), inside 2^-8"
    keep = np.ones(a.shape[1], dtype=bool)
    keep[1024:1032] = False
    bad = _fp32_kernel(ta[:, keep], tb[keep, :], C0, 1.5, -0.75, step=8)
    assert not hv.compare(bad, A, B, C0, 1.5, -0.75, "tf32").passed


@pytest.mark.parametrize("dtype", hv.DTYPES)
def test_a_correct_kernel_passes(dtype):
    A, B, C0, a, b = _case(dtype)
    v = hv.compare(_fp32_kernel(a, b, C0, 1.5, -0.75), A, B, C0, 1.5, -0.75, dtype)
    assert v.passed, v.reason
    assert v.rel_err < v.tol / 10 and v.worst_elem_ratio < 1.0


def test_a_truncating_accumulator_passes():
    """Round-toward-zero accumulation (what the tensor cores do) stays inside the bounds."""
    A, B, C0, a, b = _case("bf16", K=4096, beta=0.0)
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float64)
    for k in range(0, a.shape[1], 16):
        exact = acc + a[:, k:k + 16] @ b[k:k + 16, :]
        rounded = exact.astype(np.float32).astype(np.float64)
        toward_zero = np.where(np.abs(rounded) > np.abs(exact), np.nextafter(rounded.astype(np.float32),
                               np.float32(0)).astype(np.float64), rounded)
        acc = toward_zero
    out = (np.float32(1.5) * acc.astype(np.float32)).astype(np.float32)
    v = hv.compare(out, A, B, C0, 1.5, 0.0, "bf16")
    assert v.passed, v.reason


@pytest.mark.parametrize("dtype", ("fp16", "bf16"))
def test_a_dropped_k_step_fails(dtype):
    A, B, C0, a, b = _case(dtype, K=4096)
    keep = np.ones(a.shape[1], dtype=bool)
    keep[2048:2064] = False  # one 16-wide K step of every output
    bad = _fp32_kernel(a[:, keep], b[keep, :], C0, 1.5, -0.75)
    v = hv.compare(bad, A, B, C0, 1.5, -0.75, dtype)
    assert not v.passed and "relative error" in v.reason


def test_fp16_accumulation_fails():
    A, B, C0, a, b = _case("fp16", K=1024, beta=0.0)
    bad = _fp32_kernel(a, b, C0, 1.5, 0.0, acc_dtype=np.float16)
    v = hv.compare(bad, A, B, C0, 1.5, 0.0, "fp16")
    assert not v.passed


def test_a_bf16_rounded_output_fails():
    A, B, C0, a, b = _case("bf16", K=256, beta=0.0)
    good = _fp32_kernel(a, b, C0, 1.5, 0.0)
    bad = hv.decode(hv.round_to(good, "bf16"), "bf16").astype(np.float32)
    assert not hv.compare(bad, A, B, C0, 1.5, 0.0, "bf16").passed


def test_one_wrong_element_fails_the_elementwise_bound():
    A, B, C0, a, b = _case("fp16", M=512, N=512, K=512)
    out = _fp32_kernel(a, b, C0, 1.5, -0.75)
    ref = 1.5 * (a @ b) - 0.75 * C0
    bound = hv.elementwise_factor(512) * (1.5 * (np.abs(a) @ np.abs(b)) + 0.75 * np.abs(C0))
    out[17, 33] = ref[17, 33] + 2 * bound[17, 33]  # small in norm, wrong in one place
    v = hv.compare(out, A, B, C0, 1.5, -0.75, "fp16")
    assert not v.passed and "C[17,33]" in v.reason and "elementwise" in v.reason


def test_nan_fails():
    A, B, C0, a, b = _case("bf16", beta=0.0)
    out = _fp32_kernel(a, b, C0, 1.5, 0.0)
    out[3, 4] = np.nan  # an element never written over the poison
    v = hv.compare(out, A, B, C0, 1.5, 0.0, "bf16")
    assert not v.passed and v.nan_count == 1 and "NaN" in v.reason


def test_the_reference_uses_the_rounded_inputs():
    """Products of unrounded fp32 values are a different problem: visibly off at bf16."""
    p = GemmProblem(64, 64, 512, dtype="bf16")
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (p.M, p.K)).astype(np.float32)
    y = rng.uniform(-1, 1, (p.K, p.N)).astype(np.float32)
    A, B = hv.round_to(x, "bf16"), hv.round_to(y, "bf16")
    unrounded = (x.astype(np.float64) @ y.astype(np.float64)).astype(np.float32)
    assert not hv.compare(unrounded, A, B, None, 1.0, 0.0, "bf16").passed


def test_sweeps_and_the_shape_rule():
    assert all(K % 8 == 0 and N % 8 == 0 for (M, N, K) in hv.ALIGNED_SHAPES)
    assert any(K % 8 or N % 8 for (M, N, K) in hv.SWEEP_SHAPES)
    ps = hv.sweep_problems("bf16")
    assert len(ps) == 2 * len(hv.SWEEP_SHAPES) and {p.dtype for p in ps} == {"bf16"}
    assert {p.beta for p in ps} == {0.0, -0.75}
    assert aligned_rows(GemmProblem(3, 8, 16)) == ""
    assert aligned_rows(GemmProblem(3, 8, 7)) == ("needs K % 8 == 0 and N % 8 == 0 (16-byte rows for cp.async); "
                                                 "3x8x7 has K = 7 - use wmma for this shape")
    assert "K = 12 and N = 9" in aligned_rows(GemmProblem(3, 9, 12))
    assert dtype_flag("fp16") == 0 and dtype_flag("bf16") == 1 and dtype_flag("tf32") == 2


def test_past_k_2_16_an_fp32_c_is_also_checked_exactly_on_sign_inputs():
    """Test 3 (session 26's review): at K = 2^20 the normwise bound (3.1%) passed a result missing
    512 K terms of every output (2.2% off); on +-1 inputs the result must be exact, so it fails."""
    from dataclasses import replace

    p = GemmProblem(8, 8, 1 << 20, 1.5, -0.75, "bf16")
    assert hv.exact_pass(p) and not hv.exact_pass(replace(p, K=1 << 16))
    assert not hv.exact_pass(replace(p, out_dtype="bf16")), "a 16-bit C rounds: no exact test"
    A, B, C0 = hv.make_inputs(p, 3, xp=np)
    a, b = hv.decode(A, "bf16"), hv.decode(B, "bf16")
    missing = (1.5 * (a[:, 512:] @ b[512:]) - 0.75 * C0).astype(np.float32)
    assert hv.compare(missing, A, B, C0, 1.5, -0.75, "bf16").passed, "tests 1 and 2 alone miss it"
    A, B, C0 = hv.make_sign_inputs(p, 3, xp=np)
    a, b = hv.decode(A, "bf16"), hv.decode(B, "bf16")
    assert set(np.unique(a).tolist()) == {-1.0, 1.0} == set(np.unique(C0).tolist())
    exact = (1.5 * (a.astype(np.float32) @ b.astype(np.float32)) - 0.75 * C0).astype(np.float32)
    assert hv.compare_exact(exact, A, B, C0, 1.5, -0.75, "bf16").passed
    for wrong in ((1.5 * (a[:, 16:] @ b[16:]) - 0.75 * C0), exact + np.float32(0.25) * (np.arange(64) == 9).reshape(8, 8)):
        assert not hv.compare_exact(wrong.astype(np.float32), A, B, C0, 1.5, -0.75, "bf16").passed


def test_the_exact_test_runs_with_its_own_scalars(monkeypatch):
    """A caller's alpha = 0.1 cannot keep alpha * acc exact in fp32, so test 3 runs at 1.5 and
    -0.75 (0 when the caller's beta is 0): a correctly rounded result passes whatever the caller's
    scalars (the review of session 26's own diff found 0.1, 0.3 failing every kernel)."""
    from gemmlab.ops import hgemm as hgemm_op

    seen = []

    def fake_run(runner, p, inputs, stream, compare):
        A, B, C0 = inputs
        a, b = hv.decode(A, p.dtype), hv.decode(B, p.dtype)
        c0 = np.nan_to_num(np.asarray(C0, dtype=np.float64)) if p.beta else 0.0
        C = (np.float32(p.alpha) * (a @ b).astype(np.float32) + np.float32(p.beta) * c0).astype(np.float32)
        seen.append((p.alpha, p.beta))
        return compare(C, A, B, C0)

    monkeypatch.setattr(hgemm_op, "device_inputs", lambda make, *args: make(*args, xp=np))
    monkeypatch.setattr(hgemm_op, "run_and_compare", fake_run)
    for alpha, beta in ((0.1, 0.3), (0.1, 0.0)):
        p = GemmProblem(4, 8, (1 << 16) + 8, alpha, beta, "bf16")
        v = hgemm_op.OP.verify(None, p, None, seed=4)
        assert v.passed, v.reason
        assert seen[-2:] == [(alpha, beta), (1.5, -0.75 if beta else 0.0)]


def test_a_non_exact_result_says_so():
    p = GemmProblem(4, 8, 16, 1.5, -0.75, "bf16")
    A, B, C0 = hv.make_sign_inputs(p, 1, xp=np)
    a, b = hv.decode(A, "bf16"), hv.decode(B, "bf16")
    C = (1.5 * (a @ b) - 0.75 * C0).astype(np.float32)
    C[1, 2] += 0.25
    v = hv.compare_exact(C, A, B, C0, 1.5, -0.75, "bf16")
    assert not v.passed and v.reason == f"not exact on +-1 inputs (test 3, K > 2^16): relative error {v.rel_err:.3e}"
    assert v.rel_err > 0
