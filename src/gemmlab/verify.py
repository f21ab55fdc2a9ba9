"""Verification against an fp64 reference: fresh random inputs, NaN-poisoned outputs.

Two tests, both must hold:
1. Normwise: ||C - ref||_F / ||ref||_F <= tol, tol = max(1e-5, 2 * u * sqrt(K)) with
   u = 2^-24 (fp32 unit roundoff). Rounding errors of a K-term fp32 dot product with
   random signs grow like u * sqrt(K) (a random walk; about 4e-6 at K = 8192 in practice),
   so 1e-5 holds with margin up to K ~ 16k and the bound widens only past that. A kernel
   that drops or repeats one K-tile of one output tile exceeds it by orders of magnitude.
2. Elementwise: |C - ref| <= (K + 2) * u * (|alpha| * (|A| @ |B|) + |beta| * |C0|) + tiny,
   the deterministic worst-case bound for any summation order with FMA. It cannot fail a
   correct kernel, and it catches the single wrong or stale element that a norm would hide.
NaN anywhere fails: with beta == 0 the output starts as NaN, so an unwritten element, or a
kernel that reads C although beta == 0, leaves a NaN behind.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .problem import GemmProblem

U32 = 2.0 ** -24  # fp32 unit roundoff
HOST_REFERENCE_LIMIT = 1 << 27  # M*N*K up to this: reference on the host with NumPy


def normwise_tolerance(K: int) -> float:
    return max(1e-5, 2.0 * U32 * math.sqrt(K))


@dataclass(frozen=True)
class Verdict:
    passed: bool
    rel_err: float
    tol: float
    worst_elem_ratio: float  # max |err| / elementwise bound (<= 1 passes)
    nan_count: int
    reason: str = ""


def make_inputs(problem: GemmProblem, seed: int):
    """Fresh uniform [-1, 1) fp32 inputs on the GPU; C0 random when beta != 0, else NaN."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    A = rng.uniform(-1.0, 1.0, (problem.M, problem.K), dtype=cp.float32)
    B = rng.uniform(-1.0, 1.0, (problem.K, problem.N), dtype=cp.float32)
    if problem.beta != 0.0:
        C0 = rng.uniform(-1.0, 1.0, (problem.M, problem.N), dtype=cp.float32)
    else:
        C0 = cp.full((problem.M, problem.N), cp.nan, dtype=cp.float32)
    return A, B, C0


def _to_host(x):
    if isinstance(x, np.ndarray):
        return x
    import cupy as cp

    return cp.asnumpy(x)


def compare(C, A, B, C0, alpha: float, beta: float) -> Verdict:
    """Check C (fp32, device or host) against the fp64 reference computed from A, B, C0."""
    K = A.shape[1]
    return compare_gemm(C, A, B, C0, alpha, beta, to_f64=lambda x, xp: xp.asarray(x, dtype=xp.float64),
                        elementwise_factor=(K + 2) * U32, tol=normwise_tolerance(K))


def compare_gemm(C, A, B, C0, alpha: float, beta: float, *, to_f64, elementwise_factor: float,
                 tol: float) -> Verdict:
    """The comparison every GEMM op shares, given how to read its inputs as fp64
    (`to_f64(x, xp)`) and its two bounds: the elementwise factor times
    |alpha| |A| @ |B| + |beta| |C0|, and the normwise tolerance."""
    M, K = A.shape
    N = B.shape[1]
    all_host = all(isinstance(x, np.ndarray) for x in (A, B, C))
    if all_host or M * N * K <= HOST_REFERENCE_LIMIT:
        xp = np
        get = (lambda x: x) if all_host else _to_host
    else:  # large: the fp64 products on the GPU (cuBLAS DGEMM through CuPy)
        import cupy as xp

        get = lambda x: x  # noqa: E731
    a = to_f64(get(A), xp)
    b = to_f64(get(B), xp)
    c = xp.asarray(get(C), dtype=xp.float64)
    ref = alpha * (a @ b)
    bound = abs(alpha) * (xp.abs(a) @ xp.abs(b))
    if beta != 0.0:
        c0 = xp.asarray(get(C0), dtype=xp.float64)
        ref += beta * c0
        bound += abs(beta) * xp.abs(c0)
    bound = elementwise_factor * bound + 1e-30

    nan_count = int(xp.count_nonzero(~xp.isfinite(c)))
    if nan_count:
        return Verdict(False, math.inf, tol, math.inf, nan_count,
                       f"{nan_count} of {M * N} outputs are NaN/inf (unwritten, or C read with beta=0)")
    err = c - ref
    ref_norm = float(xp.linalg.norm(ref))
    rel = float(xp.linalg.norm(err)) / ref_norm if ref_norm > 0 else float(xp.linalg.norm(err))
    ratio_arr = xp.abs(err) / bound
    worst = float(ratio_arr.max())
    if rel > tol:
        return Verdict(False, rel, tol, worst, 0, f"relative error {rel:.3e} > {tol:.1e}")
    if worst > 1.0:
        flat = int(ratio_arr.argmax())
        i, j = divmod(flat, N)
        return Verdict(False, rel, tol, worst, 0,
                       f"C[{i},{j}] = {float(c[i, j]):.6g}, reference {float(ref[i, j]):.6g}: "
                       f"{worst:.1f}x over the elementwise bound")
    return Verdict(True, rel, tol, worst, 0)


# The odd-shape sweep: K = 1, M = 1, N = 1, primes, and non-multiples of every tile size
# (8, 16, 32, 64, 128, 256), next to one aligned shape. Each runs with beta = 0 (C poisoned
# with NaN) and with non-trivial alpha and beta (C read).
SWEEP_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (1, 129, 67), (97, 1, 33), (64, 64, 1), (127, 127, 127), (129, 257, 65),
    (31, 517, 203), (256, 256, 256), (333, 191, 1031), (513, 1025, 77),
)
SWEEP_SCALARS: tuple[tuple[float, float], ...] = ((1.0, 0.0), (1.5, -0.75))


def sweep_problems(shapes=SWEEP_SHAPES, scalars=SWEEP_SCALARS) -> list[GemmProblem]:
    return [GemmProblem(M, N, K, alpha, beta) for (M, N, K) in shapes for (alpha, beta) in scalars]
