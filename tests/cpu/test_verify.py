"""The verifier itself must be able to fail: each defect a kernel can have is caught."""
import numpy as np
import pytest

from gemmlab.ops.sgemm import compare, normwise_tolerance, sweep_problems


def _case(M=67, N=45, K=129, beta=0.0, seed=1):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    C0 = rng.uniform(-1, 1, (M, N)).astype(np.float32) if beta else np.full((M, N), np.nan, np.float32)
    return A, B, C0


def _fp32_gemm(A, B, C0, alpha, beta):
    acc = (A @ B).astype(np.float32)  # fp32 arithmetic, like a kernel
    return (alpha * acc + (beta * C0 if beta else 0)).astype(np.float32)


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.5, -0.75)])
def test_correct_result_passes(alpha, beta):
    A, B, C0 = _case(beta=beta)
    v = compare(_fp32_gemm(A, B, C0, alpha, beta), A, B, C0, alpha, beta)
    assert v.passed, v.reason
    assert v.rel_err < 1e-6


def test_unwritten_element_fails():
    A, B, C0 = _case()
    C = _fp32_gemm(A, B, C0, 1.0, 0.0)
    C[3, 7] = C0[3, 7]  # still the NaN poison
    v = compare(C, A, B, C0, 1.0, 0.0)
    assert not v.passed and v.nan_count == 1


def test_one_wrong_element_fails_even_when_the_norm_is_fine():
    A, B, C0 = _case(M=300, N=300, K=64, beta=1.0)
    C = _fp32_gemm(A, B, C0, 1.0, 1.0)
    C[10, 20] += 1e-3 * abs(C[10, 20]) + 1e-3
    v = compare(C, A, B, C0, 1.0, 1.0)
    assert not v.passed and "C[10,20]" in v.reason


def test_missing_k_slice_fails():
    A, B, C0 = _case(K=256)
    C = _fp32_gemm(A[:, 8:], B[8:, :], C0, 1.0, 0.0)  # as if one K-tile of 8 were skipped
    assert not compare(C, A, B, C0, 1.0, 0.0).passed


def test_ignoring_beta_fails():
    A, B, C0 = _case(beta=-0.75)
    assert not compare(_fp32_gemm(A, B, C0, 1.5, 0.0), A, B, C0, 1.5, -0.75).passed


def test_tolerance_is_1e5_until_k_is_large():
    assert normwise_tolerance(1) == 1e-5
    assert normwise_tolerance(8192) == pytest.approx(1.08e-5, rel=0.01)


def test_sweep_has_odd_shapes_and_both_beta_cases():
    problems = sweep_problems()
    assert any(p.K == 1 for p in problems) and any(p.M == 1 for p in problems) and any(p.N == 1 for p in problems)
    assert any(p.beta == 0.0 for p in problems) and any(p.beta != 0.0 and p.alpha != 1.0 for p in problems)
    assert any(all(d % 2 for d in (p.M, p.N, p.K)) for p in problems)


def test_a_result_that_cancels_is_judged_against_the_terms_it_cancels():
    """alpha*A@B + beta*C0 = 1e4 - 1e4 = 0: an fp32 kernel may leave 1e-3 there (u of the terms),
    and the normwise test must measure that against the terms' size, not against the zero result
    (gemm_family's `scale`), or every such problem would fail."""
    A, B = np.array([[1e4]], np.float32), np.array([[1.0]], np.float32)
    C0 = np.array([[-1e4]], np.float32)
    v = compare(np.array([[1e-3]], np.float32), A, B, C0, 1.0, 1.0)
    assert v.passed, v.reason
    assert not compare(np.array([[1.0]], np.float32), A, B, C0, 1.0, 1.0).passed, "but not an error of 1e-4 of them"


def test_the_elementwise_bound_counts_beta_c0():
    """A small product on a large C0: the correctly rounded fp32 result is off by up to u/2 of C0,
    which only the bound's |beta| |C0| term admits."""
    rng = np.random.default_rng(3)
    A = rng.uniform(-1e-4, 1e-4, (64, 1)).astype(np.float32)
    B = rng.uniform(-1e-4, 1e-4, (1, 64)).astype(np.float32)
    C0 = rng.uniform(1, 2, (64, 64)).astype(np.float32)
    exact = A.astype(np.float64) @ B.astype(np.float64) + C0.astype(np.float64)
    C = exact.astype(np.float32)  # the fp64 result rounded once to fp32
    assert np.any(C.astype(np.float64) != exact), "the test needs rounding errors to judge"
    v = compare(C, A, B, C0, 1.0, 1.0)
    assert v.passed, v.reason
