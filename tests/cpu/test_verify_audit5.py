"""Tests that could not fail, fifth audit: the verifiers (gemm_family.compare_gemm, sgemm's and
bgemm's compare, hgemm_check, hgemm's check and verify, reduce_check) against mutants that the
earlier tests let through. Each test pins one stated rule at the place where a mutant moved it:
the bounds at their exact edges, |alpha| and |beta| in the elementwise bound, errors of either
sign, the failure messages and counts, the floors of tiny results, the inputs' distributions
and layouts, the sweeps, and reduce's messages, special cases and per-partial tolerance."""
import math

import numpy as np
import pytest

from gemmlab.ops import bgemm
from gemmlab.ops import hgemm as hgemm_op
from gemmlab.ops import hgemm_check as hv
from gemmlab.ops import reduce_check as rv
from gemmlab.ops.base import ShapeArgs
from gemmlab.ops.sgemm import compare, sweep_problems
from gemmlab.problem import GemmProblem

from .test_hgemm_out16 import _case as _case16, _kernel as _kernel16
from .test_hgemm_verify import _fp32_kernel, _tf32
from .test_verify import _case, _fp32_gemm

U = 2.0 ** -24


def _ref_and_bound(A, B, C0, alpha, beta):
    """The fp64 reference and the sum the elementwise bound scales (|alpha| |A||B| + |beta| |C0|)."""
    a, b = A.astype(np.float64), B.astype(np.float64)
    ref, terms = alpha * (a @ b), abs(alpha) * (np.abs(a) @ np.abs(b))
    if beta:
        ref, terms = ref + beta * C0.astype(np.float64), terms + abs(beta) * np.abs(C0.astype(np.float64))
    return ref, terms


# -- sgemm / compare_gemm: the bounds at their edges ---------------------------------------------

def test_sgemm_elementwise_bound_is_k_plus_2_u_inclusive():
    """M = N = 1, K = 2, one product 1 * 1: the bound is (K + 2) u = 2^-22 exactly. An error of
    exactly that passes (ratio 1.0, '<='), the next fp32 value up (3 * 2^-23) fails. K is A's
    column count, not its row count."""
    A, B = np.array([[1.0, 0.0]], np.float32), np.array([[1.0], [0.0]], np.float32)
    C0 = np.full((1, 1), np.nan, np.float32)
    at_bound = np.array([[1.0 + 2.0 ** -22]], np.float32)
    v = compare(at_bound, A, B, C0, 1.0, 0.0)
    assert v.passed, v.reason
    assert v.worst_elem_ratio == 1.0
    past = np.nextafter(at_bound, np.float32(2))
    assert float(past[0, 0]) - 1.0 == 3 * 2.0 ** -23
    v = compare(past, A, B, C0, 1.0, 0.0)
    assert not v.passed and v.worst_elem_ratio == 1.5
    assert v.reason == "C[0,0] = 1, reference 1: 1.5x over the elementwise bound"


def test_normwise_bound_is_inclusive():
    """K = 2^16: tol = 2 u sqrt(K) = 2^-15 exactly; a relative error of exactly 2^-15 passes."""
    K = 1 << 16
    A = np.zeros((1, K), np.float32)
    B = np.zeros((K, 1), np.float32)
    A[0, 0] = B[0, 0] = 1.0
    C0 = np.full((1, 1), np.nan, np.float32)
    v = compare(np.array([[1.0 + 2.0 ** -15]], np.float32), A, B, C0, 1.0, 0.0)
    assert v.passed, v.reason
    assert v.rel_err == v.tol == 2.0 ** -15
    v = compare(np.array([[1.0 + 2.0 ** -15 + 2.0 ** -23]], np.float32), A, B, C0, 1.0, 0.0)
    assert not v.passed and v.reason == f"relative error {v.rel_err:.3e} > 3.1e-05"


def test_the_elementwise_bound_takes_abs_alpha():
    """A correct result at alpha = -1000 passes (the bound scales with |alpha|: without it, it is
    1000x too tight); one wrong element at a negative alpha fails (a signed alpha made the bound
    negative and every ratio below 1)."""
    A, B, C0 = _case()
    v = compare(_fp32_gemm(A, B, C0, -1000.0, 0.0), A, B, C0, -1000.0, 0.0)
    assert v.passed, v.reason
    C = _fp32_gemm(A, B, C0, -1.5, 0.0)
    ref, terms = _ref_and_bound(A, B, C0, -1.5, 0.0)
    C[5, 7] = ref[5, 7] + 2 * 131 * U * terms[5, 7]
    v = compare(C, A, B, C0, -1.5, 0.0)
    assert not v.passed and v.reason.startswith("C[5,7] = ")


def test_the_elementwise_bound_takes_abs_beta():
    """Small products on a C0 in [1, 2) at beta = -1: one element off by 2e-4 fails (a
    signed beta made those elements' bounds negative), the correct result passes."""
    rng = np.random.default_rng(3)
    A = rng.uniform(-1e-2, 1e-2, (64, 8)).astype(np.float32)
    B = rng.uniform(-1e-2, 1e-2, (8, 64)).astype(np.float32)
    C0 = rng.uniform(1, 2, (64, 64)).astype(np.float32)
    good = _fp32_gemm(A, B, C0, 1.0, -1.0)
    assert compare(good, A, B, C0, 1.0, -1.0).passed
    bad = good.copy()
    bad[9, 11] += np.float32(2e-4)  # 1e-6 in norm
    v = compare(bad, A, B, C0, 1.0, -1.0)
    assert not v.passed and v.reason.startswith("C[9,11] = ")


def test_an_element_below_its_reference_fails_too():
    """test_verify's one wrong element, low instead of high: the bound is on |C - ref|."""
    A, B, C0 = _case(M=300, N=300, K=64, beta=1.0)
    C = _fp32_gemm(A, B, C0, 1.0, 1.0)
    C[10, 20] -= 1e-3 * abs(C[10, 20]) + 1e-3
    v = compare(C, A, B, C0, 1.0, 1.0)
    assert not v.passed and v.reason.startswith("C[10,20] = ")


def test_the_elementwise_message_names_the_element_its_value_and_reference():
    """67x45 (not square): row and column of the worst element, C's value, then the reference."""
    A, B, C0 = _case(beta=-0.75)
    C = _fp32_gemm(A, B, C0, 1.5, -0.75)
    ref, _ = _ref_and_bound(A, B, C0, 1.5, -0.75)
    C[3, 40] += np.float32(0.002)
    v = compare(C, A, B, C0, 1.5, -0.75)
    assert not v.passed
    assert v.reason == (f"C[3,40] = {float(C[3, 40]):.6g}, reference {ref[3, 40]:.6g}: "
                        f"{v.worst_elem_ratio:.1f}x over the elementwise bound")
    assert f"{float(C[3, 40]):.6g}" != f"{ref[3, 40]:.6g}"


def test_nan_and_inf_are_counted_together():
    """One NaN, one +inf, one -inf: three non-finite outputs, counted and named as such."""
    A, B, C0 = _case()
    C = _fp32_gemm(A, B, C0, 1.0, 0.0)
    C[0, 0], C[1, 2], C[66, 44] = np.nan, np.inf, -np.inf
    v = compare(C, A, B, C0, 1.0, 0.0)
    assert not v.passed and v.nan_count == 3 and v.rel_err == math.inf
    assert v.reason == "3 of 3015 outputs are NaN/inf (unwritten, or C read with beta=0)"


def test_the_worst_element_ratio_is_reported():
    """worst_elem_ratio = max |C - ref| / bound, on a pass and on a normwise failure alike."""
    A, B, C0 = _case(beta=-0.75)
    C = _fp32_gemm(A, B, C0, 1.5, -0.75)
    ref, terms = _ref_and_bound(A, B, C0, 1.5, -0.75)
    worst = float((np.abs(C - ref) / (131 * U * terms + 1e-30)).max())
    v = compare(C, A, B, C0, 1.5, -0.75)
    assert v.passed and 0 < worst < 1 and v.worst_elem_ratio == pytest.approx(worst, rel=1e-12)
    off = (C * np.float32(1.001)).astype(np.float32)
    worst = float((np.abs(off - ref) / (131 * U * terms + 1e-30)).max())
    v = compare(off, A, B, C0, 1.5, -0.75)
    assert not v.passed and v.reason.startswith("relative error")
    assert v.worst_elem_ratio == pytest.approx(worst, rel=1e-12) and worst > 1


def test_a_zero_reference_measures_the_error_absolutely():
    """A = 0: the reference and every term are 0, so the relative error is ||C||_F itself and the
    normwise test fails first (not the elementwise one, whose bound is only the 1e-30 floor)."""
    _, B, C0 = _case(M=4, N=5, K=6)
    A = np.zeros((4, 6), np.float32)
    assert compare(np.zeros((4, 5), np.float32), A, B, C0, 1.0, 0.0).passed
    C = np.zeros((4, 5), np.float32)
    C[1, 1] = 1e-3
    v = compare(C, A, B, C0, 1.0, 0.0)
    assert not v.passed and v.rel_err == pytest.approx(1e-3, rel=1e-6)
    assert v.reason == "relative error 1.000e-03 > 1.0e-05"


def test_a_cancelled_result_is_judged_against_its_terms_over_sqrt_k_plus_1():
    """1x1x1, fp16 C, 0.5 * 1 - 0.5 = 0: the norm of the terms (1) over sqrt(K + 1), not sqrt(K).
    A result of 2^-11 (one fp16 ulp of 1, where 0 is exact) then errs by 2^-11 sqrt(2) = 6.9e-4
    relative, over the 5.1e-4 tolerance; over sqrt(K) it read 4.9e-4 and passed."""
    A = hv.round_to(np.array([[0.5]], np.float32), "fp16")
    B = hv.round_to(np.array([[1.0]], np.float32), "fp16")
    C0 = hv.round_to(np.array([[-0.5]], np.float32), "fp16")
    assert hv.compare(np.zeros((1, 1), np.float16), A, B, C0, 1.0, 1.0, "fp16", "fp16").passed
    v = hv.compare(np.full((1, 1), 2.0 ** -11, np.float16), A, B, C0, 1.0, 1.0, "fp16", "fp16")
    assert v.rel_err == pytest.approx(2.0 ** -11 * math.sqrt(2), rel=1e-12)
    assert not v.passed and v.reason == "relative error 6.905e-04 > 5.1e-04"


def test_fp16_subnormal_results_get_the_floor_of_every_element_in_the_norm():
    """1x64x1 with products below 2^-14, rounded correctly to fp16 subnormals: the normwise slack
    is 2^-25 sqrt(M N) / ||ref||, sqrt(64) = 8 floors; one floor (sqrt(M) = 1) refused it."""
    rng = np.random.default_rng(11)
    A = hv.round_to(np.array([[2.0 ** -7]], np.float32), "fp16")
    B = hv.round_to(rng.uniform(2.0 ** -14, 2.0 ** -13, (1, 64)).astype(np.float32), "fp16")
    exact = hv.decode(A, "fp16") @ hv.decode(B, "fp16")
    C = exact.astype(np.float32).astype(np.float16)  # fp32 is exact here; then one rounding to fp16
    err, norm = np.linalg.norm(C.astype(np.float64) - exact), np.linalg.norm(exact)
    assert err / norm > hv.normwise_tolerance(1, "fp16", "fp16") + 2.0 ** -25 / norm, "the case needs the floors"
    v = hv.compare(C, A, B, hv.poison((1, 64), "fp16"), 1.0, 0.0, "fp16", "fp16")
    assert v.passed, v.reason


def test_the_sgemm_sweep_keeps_its_edge_shapes_at_both_scalar_pairs():
    pairs = {(p.M, p.N, p.K, p.alpha, p.beta) for p in sweep_problems()}
    assert len(sweep_problems()) == 20 == len(pairs)
    for shape in ((1, 1, 1), (1, 129, 67), (97, 1, 33), (64, 64, 1), (127, 127, 127), (513, 1025, 77)):
        assert {shape + (1.0, 0.0), shape + (1.5, -0.75)} <= pairs, shape


# -- bgemm's compare: every matrix of the batch ---------------------------------------------------

def _batch(b=3, M=17, N=13, K=33, seed=2):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (b, M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (b, K, N)).astype(np.float32)
    C0 = rng.uniform(-1, 1, (b, M, N)).astype(np.float32)
    C = np.stack([_fp32_gemm(A[i], B[i], C0[i], 1.5, -0.75) for i in range(b)])
    return A, B, C0, C


def test_bgemm_checks_every_matrix_against_its_own_c0():
    A, B, C0, C = _batch()
    assert bgemm.compare(C, A, B, C0, 1.5, -0.75).passed
    bad = C.copy()
    bad[2, 16, 12] += np.float32(2e-4)  # the last element of the last matrix
    v = bgemm.compare(bad, A, B, C0, 1.5, -0.75)
    assert not v.passed and v.reason.startswith("batch 2: C[16,12] = ")


def test_bgemm_reports_the_worst_matrix():
    A, B, C0, C = _batch()
    C[1] = (C[1] * np.float32(1 + 2e-6)).astype(np.float32)  # inside the bounds, but the worst
    each = [compare(C[i], A[i], B[i], C0[i], 1.5, -0.75) for i in range(3)]
    v = bgemm.compare(C, A, B, C0, 1.5, -0.75)
    assert all(e.passed for e in each) and max(e.rel_err for e in each) == each[1].rel_err > each[0].rel_err
    assert v.passed and v.rel_err == each[1].rel_err


# -- hgemm: the op's check and verify --------------------------------------------------------------

@pytest.mark.parametrize("out", ("fp16", "bf16"))
def test_the_op_check_judges_a_16bit_c_as_16bit(out):
    """OP.check hands the problem's C type on: a correct 16-bit C passes (judged as fp32 it failed)."""
    p, A, B, C0, a, b, c0 = _case16(out)
    v = hgemm_op.OP.check(_kernel16(a, b, c0, 1.5, -0.75, out), A, B, C0, p)
    assert v.passed, v.reason


def test_verify_returns_the_first_failure_even_where_the_exact_test_follows(monkeypatch):
    """Past K = 2^16 (fp32 C) test 3 follows tests 1 and 2 only if they passed: a result that
    failed them is the verdict, though the same kernel is exact on +-1 inputs."""
    calls = []

    def fake_run(runner, p, inputs, stream, compare):
        A, B, C0 = inputs
        a, b = hv.decode(A, p.dtype), hv.decode(B, p.dtype)
        C = (np.float32(p.alpha) * (a @ b).astype(np.float32)
             + np.float32(p.beta) * np.asarray(C0, np.float32)).astype(np.float32)
        if not calls:
            C[1, 2] += np.float32(1.0)  # tests 1 and 2: one wrong element
        calls.append(p.alpha)
        return compare(C, A, B, C0)

    monkeypatch.setattr(hgemm_op, "device_inputs", lambda make, *args: make(*args, xp=np))
    monkeypatch.setattr(hgemm_op, "run_and_compare", fake_run)
    p = GemmProblem(4, 8, (1 << 16) + 8, 1.0, -0.5, "bf16")
    assert hv.exact_pass(p)
    v = hgemm_op.OP.verify(None, p, None, seed=4)
    assert not v.passed and v.reason.startswith("relative error") and calls == [1.0]


# -- hgemm_check: floors, decode, inputs, exact test, tf32, sweeps --------------------------------

@pytest.mark.parametrize("out", ("fp32", "bf16"))
def test_tiny_results_of_an_fp32_range_c_get_no_absolute_slack(out):
    """bf16 inputs near 2^-14 give results near 2^-26: with fp32's (and bf16's) exponent range
    they are relative errors like any other, so 10% off fails; only fp16's subnormals get 2^-25."""
    rng = np.random.default_rng(5)
    scale = np.float32(2.0 ** -14)
    A = hv.round_to(rng.uniform(-1, 1, (8, 16)).astype(np.float32) * scale, "bf16")
    B = hv.round_to(rng.uniform(-1, 1, (16, 8)).astype(np.float32) * scale, "bf16")
    C0 = hv.poison((8, 8), out)
    exact = hv.decode(A, "bf16") @ hv.decode(B, "bf16")
    assert np.abs(exact).max() < 2.0 ** -25

    def stored(x):
        x = x.astype(np.float32)
        return x if out == "fp32" else hv.round_to(x, "bf16")

    assert hv.compare(stored(exact), A, B, C0, 1.0, 0.0, "bf16", out).passed
    v = hv.compare(stored(1.1 * exact), A, B, C0, 1.0, 0.0, "bf16", out)
    assert not v.passed and v.reason.startswith("relative error")


def test_decode_gives_float64_and_refuses_an_unknown_type():
    x = np.random.default_rng(1).uniform(-1, 1, 16).astype(np.float32)
    for dtype in ("fp16", "bf16", "tf32"):
        assert hv.decode(hv.round_to(x, dtype), dtype).dtype == np.float64, dtype
    assert hv.decode(x, "fp32").dtype == np.float64
    with pytest.raises(ValueError, match=r"dtype must be one of \('fp16', 'bf16', 'tf32'\), not 'fp8'"):
        hv.decode(x, "fp8")


@pytest.mark.parametrize("dtype", hv.DTYPES)
def test_inputs_take_both_signs_over_minus_1_to_1(dtype):
    """make_inputs' A, B and C0 are uniform on [-1, 1): both signs (the bounds' random-sign
    reasoning, and a sign lost in a kernel shows), reaching near both ends."""
    A, B, C0 = hv.make_inputs(GemmProblem(64, 64, 64, 1.0, 0.5, dtype), seed=2, xp=np)
    for x in (hv.decode(A, dtype), hv.decode(B, dtype), C0.astype(np.float64)):
        assert x.min() < -0.95 and x.max() > 0.95 and np.all(np.abs(x) <= 1.0)


@pytest.mark.parametrize("layout", ("nn", "nt", "tn", "tt"))
def test_sign_inputs_follow_the_layout_and_poison_c_at_beta_0(layout):
    """Test 3's inputs: A is KxM for tn/tt, B is NxK for nt/tt (as make_inputs), and C0 is NaN
    when beta == 0, so an unwritten element or a read C is caught there too."""
    M, N, K = 3, 5, 7
    A, B, C0 = hv.make_sign_inputs(GemmProblem(M, N, K, 1.5, 0.0, "fp16", layout), 1, xp=np)
    assert A.shape == ((K, M) if layout[0] == "t" else (M, K))
    assert B.shape == ((N, K) if layout[1] == "t" else (K, N))
    assert C0.shape == (M, N) and C0.dtype == np.float32 and np.isnan(C0).all()
    _, _, C1 = hv.make_sign_inputs(GemmProblem(M, N, K, 1.5, -0.75, "fp16", layout), 1, xp=np)
    assert set(np.unique(C1).tolist()) == {-1.0, 1.0}


def test_the_exact_test_reports_nan_as_nan():
    p = GemmProblem(4, 8, 16, 1.5, 0.0, "bf16")
    A, B, C0 = hv.make_sign_inputs(p, 1, xp=np)
    a, b = hv.decode(A, "bf16"), hv.decode(B, "bf16")
    C = (1.5 * (a @ b)).astype(np.float32)
    assert hv.compare_exact(C, A, B, C0, 1.5, 0.0, "bf16").passed
    C[2, 3] = np.nan  # never written over the poison
    v = hv.compare_exact(C, A, B, C0, 1.5, 0.0, "bf16")
    assert not v.passed and v.nan_count == 1
    assert v.reason == "1 of 32 outputs are NaN/inf (unwritten, or C read with beta=0)"


def test_tf32_at_small_k_is_judged_with_the_product_term():
    """K = 8: the tf32 truncation of the inputs (up to 2^-9 of a product) dominates the bound,
    so the elementwise factor must carry its 2^-9 + 2^-20 even where (K + 2) 2^-22 is tiny."""
    A, B, C0 = hv.make_inputs(GemmProblem(64, 64, 8, 1.5, -0.75, "tf32"), 3, xp=np)
    out = _fp32_kernel(_tf32(A).astype(np.float64), _tf32(B).astype(np.float64), C0, 1.5, -0.75, step=8)
    v = hv.compare(out, A, B, C0, 1.5, -0.75, "tf32")
    assert v.passed, v.reason
    ref, terms = _ref_and_bound(A, B, C0, 1.5, -0.75)
    assert (np.abs(out - ref) / terms).max() > 100 * 10 * 2.0 ** -22, "the truncation, far above (K + 2) 2^-22"


def test_sweep_problems_carry_layout_and_c_type():
    ps = hv.sweep_problems("fp16", hv.ALIGNED_SHAPES, layout="nt", out="fp16")
    assert len(ps) == 2 * len(hv.ALIGNED_SHAPES)
    assert {(p.dtype, p.layout, p.out_dtype) for p in ps} == {("fp16", "nt", "fp16")}


def test_the_hgemm_sweeps_keep_their_edge_shapes():
    """Both sweeps reach 1 in every dimension they allow: M = N = K = 1 in the odd-shape sweep,
    M = 1 and the smallest aligned N = K = 8 in the aligned one; the op sweeps both."""
    shapes = hv.SWEEP_SHAPES
    assert (1, 1, 1) in shapes and (97, 1, 33) in shapes and (64, 64, 1) in shapes and (1, 129, 67) in shapes
    assert (1, 8, 8) in hv.ALIGNED_SHAPES
    swept = {(p.M, p.N, p.K) for p in hgemm_op.OP.sweep(ShapeArgs(dtype="fp16"))}
    assert {(1, 1, 1), (97, 1, 33), (64, 64, 1), (1, 8, 8)} <= swept


# -- reduce_check ----------------------------------------------------------------------------------

def test_the_spread_bound_is_8_u_sqrt_h_times_the_norm():
    assert rv.chain(257) == 81
    assert rv.spread_bound(257, 2.0) == 8 * 9 * 2 * U
    assert rv.spread_bound(1, 1.0) == 8 * U * math.sqrt(65)


def test_the_bounds_are_inclusive():
    """Rule 2: |result - s| = tol(1) * S exactly passes; rule 3 likewise at 8 u sqrt(81) ||x||."""
    tol = rv.tolerance(1)
    v = rv.check_sum(1.0 + tol, 1.0, 1.0, 1, exact=False)
    assert v.passed and v.rel_err == v.tol == tol
    assert not rv.check_sum(1.0 + tol + 2.0 ** -52, 1.0, 1.0, 1, exact=False).passed
    v = rv.check_sum(1.0 + 72 * U, 1.0, 1e6, 257, exact=False)
    assert v.passed and rv.check_spread(v, 1.0, 257) is v
    v = rv.check_sum(1.0 + 73 * U, 1.0, 1e6, 257, exact=False)
    assert v.passed and not rv.check_spread(v, 1.0, 257).passed


def test_an_exact_verdict_states_a_zero_tolerance():
    assert rv.check_sum(12.0, 12.0, 40.0, 10, exact=True).tol == 0.0
    assert rv.check_sum(11.0, 12.0, 40.0, 10, exact=True).tol == 0.0
    assert rv.check_sum(12.0, 12.0, 40.0, 10, exact=False).tol == rv.tolerance(10)


def test_the_exact_test_takes_no_fraction_either():
    v = rv.check_sum(12.5, 12.0, 40.0, 10, exact=True)
    assert not v.passed and v.reason == "sum = 12.5, exact integer sum 12 (off by +0.5)"


def test_a_zero_abs_sum_takes_only_a_zero_error():
    """sum|x| = 0 (all zeros): any error is infinitely relative; none passes."""
    assert rv.check_sum(0.0, 0.0, 0.0, 10, exact=False).passed
    v = rv.check_sum(1e-30, 0.0, 0.0, 10, exact=False)
    assert not v.passed and v.rel_err == math.inf


@pytest.mark.parametrize("value,ref,reason", [
    (math.inf, 3.0, "sum = inf, expected 3 (unwritten partial or NaN read?)"),
    (math.nan, 3.0, "sum = nan, expected 3 (unwritten partial or NaN read?)"),
    (1.0, math.nan, "sum = 1, expected NaN (NaN/inf propagation as in NumPy)"),
    (-math.inf, math.inf, "sum = -inf, expected inf (inf propagation)"),
])
def test_the_special_value_messages(value, ref, reason):
    v = rv.check_sum(value, ref, 10.0, 100, exact=False)
    assert not v.passed and v.rel_err == math.inf and v.reason == reason


def test_the_spread_rule_leaves_a_nan_or_inf_verdict_alone():
    for value in (math.nan, math.inf):
        v = rv.check_sum(value, value, 0.0, 100, exact=False)
        assert v.passed and rv.check_spread(v, 1.0, 100) is v


def test_make_input_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="unknown input kind 'gaussian'"):
        rv.make_input(10, 1, "gaussian", xp=np)


def test_the_reference_is_the_fp64_sum_and_abs_sum():
    assert rv.reference(np.array([1.0, -2.0, 3.5, -0.25], np.float32)) == (2.25, 6.75)


def _uniform_partials(n=1000, section=256):
    x = rv.make_input(n, 4, "uniform", xp=np)
    sums, abs_sums = rv.section_references(x, section, -(-n // section))
    return x, section, sums, abs_sums


def test_partials_are_judged_at_their_section_s_tolerance():
    """tol(256) = 80 u per partial (not tol of the block count, 4: 66 u); inclusive of 0.9x,
    exclusive of 1.1x."""
    x, section, sums, abs_sums = _uniform_partials()
    t = rv.tolerance(section)
    assert t == 80 * U
    assert rv.check_partials(sums + 0.9 * t * abs_sums, x, section, exact=False) is None
    off = sums.copy()
    off[2] += 1.1 * t * abs_sums[2]
    v = rv.check_partials(off, x, section, exact=False)
    assert v is not None and v.reason.startswith("partial[2]: relative error")


def test_the_first_wrong_partial_is_named_and_the_others_counted():
    x = rv.make_input(1000, 4, "integers", xp=np)
    section = 256
    sums, abs_sums = rv.section_references(x, section, 4)
    bad = sums.copy()
    bad[1] += 1
    bad[3] -= 2
    v = rv.check_partials(bad, x, section, exact=True)
    assert not v.passed and v.exact and v.value == bad[1] and v.reference == sums[1]
    assert v.reason == f"partial[1] = {bad[1]:.9g}, exact integer sum {sums[1]:.9g} (off by +1) (1 more partials wrong)"


def test_the_special_cases_are_numpy_s_four():
    assert rv.SPECIAL_CASES == (("nan", "nan"), ("+inf", "+inf"), ("-inf", "-inf"), ("+inf,-inf", "nan"))


def test_plant_special_puts_each_value_at_its_own_position_anywhere():
    """'+inf,-inf' plants both, at two positions (at one, NumPy's sum is -inf, not the NaN
    expected); over seeds a single value lands on every position, the last included."""
    for seed in range(50):
        x = np.zeros(2, np.float32)
        rv.plant_special(x, "+inf,-inf", seed)
        assert sorted(x.tolist()) == [-math.inf, math.inf], seed
    hit = set()
    for seed in range(100):
        x = np.zeros(5, np.float32)
        rv.plant_special(x, "nan", seed)
        hit |= set(np.flatnonzero(np.isnan(x)).tolist())
    assert hit == {0, 1, 2, 3, 4}
