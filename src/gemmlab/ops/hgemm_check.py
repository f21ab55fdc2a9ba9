"""hgemm verification: fresh random inputs rounded to the input dtype, an fp64 reference of the
SAME rounded inputs, NaN-poisoned C when beta == 0.

Why these bounds. A product of two fp16 (11-bit significand) or bf16 (8-bit) values has at most
22 significant bits, so it is exact in fp32 (24 bits) - as long as it neither overflows nor
underflows, which inputs drawn from [-1, 1) and rounded never do (fp16 subnormals down to 2^-24
give products >= 2^-48, far above fp32's 2^-149). The only error left is the fp32 accumulation
of K exact products (and the alpha/beta epilogue). Tensor cores do not accumulate exactly as
IEEE fp32 FMA chains: inside one MMA the products are aligned to the largest exponent and
truncated, and the sum is then truncated into the accumulator (Fasi, Higham, Mikaitis and
Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021; the same on Ampere and
Hopper). Truncation (round toward zero) has relative error < 2^-23, twice round-to-nearest's
u = 2^-24, and it is biased, so errors add coherently instead of as a random walk.

1. Elementwise (deterministic, cannot fail a correct kernel):
     |C - ref| <= (K + 2) * 2^-22 * (|alpha| * (|A| @ |B|) + |beta| * |C0|) + tiny
   i.e. the classical gamma_{K+2} bound of any summation order, with the unit roundoff taken
   as 2^-22 = 2 x the truncation bound (the alignment inside an MMA loses up to one more
   truncation per product). It catches the single wrong or stale element a norm would hide.
2. Normwise: ||C - ref||_F / ||ref||_F <= max(2e-5, K * 2^-25).
   A K-term sum accumulated in steps of 16 (one MMA each) suffers K/16 truncations into the
   accumulator, each biased by at most 2^-23 of a partial sum; with random-sign data the
   partial sums are of the order of the result, so the coherent relative error is about
   (K/16) * 2^-23 = K * 2^-27; the bound allows 4x that (K * 2^-25: 1.2e-4 at K = 4096,
   3.1e-5 at K = 1024) with a floor of 2e-5 for small K, where round-to-nearest accumulation
   measures about 1e-6. What it fails: a dropped or repeated 16-wide K step (relative error
   ~ sqrt(16/K) >= 1.6% up to K = 65536), fp16 accumulation (~2^-11 per add: ~1e-3 and up),
   an output rounded to bf16 (~1e-3); a C rounded to fp16 (~2e-4) fails it up to K ~ 6500.
tf32 (rung 6: fp32 inputs, multiplied as tf32). The tensor cores read only the top 19 bits of
each fp32 input (1 sign, 8 exponent, 10 mantissa): a truncation with relative error < 2^-10, so
a product is off by < 2^-9 + 2^-20 before any accumulation - a LOWER precision than SGEMM's.
   elementwise: |C - ref| <= (2^-9 + 2^-20 + (K + 2) * 2^-22) * (|alpha| |A| @ |B| + |beta| |C0|)
   normwise:    ||C - ref||_F / ||ref||_F <= 2^-8
The reference is the fp64 product of the fp32 inputs (not of their tf32 truncations): that is
what a user of an fp32 GEMM asks for, so the bounds state the price of tf32. Truncation is
biased (every magnitude shrinks, by ~2^-11 on average), so the normwise error is coherent,
~1e-3; 2^-8 = 3.9e-3 leaves room and still fails a dropped 8-wide K step (sqrt(8/K) > 2^-8 up to
K ~ 500,000) or an output rounded to bf16.
3. Exact, past K = 2^16 with an fp32 C: the normwise bound grows like K while a dropped or repeated
   step of d terms errs by about sqrt(d / K), so from K ~ 6e5 it passed a result missing 512 K
   terms of every output (session 26's review). There a second run takes inputs of +-1 (exact in
   every input type) and C0 of +-1: every product is +-1 and every partial sum an integer of at
   most K <= 2^24 in magnitude, exact in fp32 however the tensor cores align and truncate. It runs
   with its own scalars, alpha = 1.5 and beta = -0.75 (0 when the problem's is 0, so C stays
   NaN-poisoned): alpha * acc + beta * C0 then lands on a multiple of 1/4 far below 2^22 for
   random signs, exact too (a caller's alpha = 0.1 would not be; tests 1 and 2 check the
   caller's scalars). So C must EQUAL the fp64 reference: any dropped, repeated or misplaced
   term moves it.
NaN or inf anywhere fails: with beta == 0 C starts as NaN, so an unwritten element, or a kernel
that reads C although beta == 0, leaves a NaN behind.
A 16-bit C (the input type, as torch.mm writes it; rung 5 with OUT16). The kernel computes
alpha * acc + beta * C0 in fp32 as before, then rounds once to nearest even, which adds a relative
error of at most u (2^-11 for fp16, 2^-8 for bf16) of the fp32 value. So, with f and t the
fp32-output factor and tolerance above and ref the fp64 result (|ref| <= the bound's sum):
   elementwise: |C - ref| <= (f (1 + u) + u) * (|alpha| |A| @ |B| + |beta| |C0|) + floor
   normwise:    ||C - ref||_F / ||ref||_F <= t (1 + u) + u + floor sqrt(M N) / ||ref||_F
floor = 2^-25 for fp16 (half the spacing of its subnormals, where the relative bound does not
hold, in either check: a 1x1x1 result below 2^-14 may be 1% off and correctly rounded) and nothing to speak of for bf16 (fp32's exponent range). C0 is itself 16-bit (random
values rounded, or NaN when beta == 0) and read exactly. These bounds state the price of the
16-bit result; what they no longer resolve (the rounding mode: truncation stays within 2u of an
element) the GPU tests check exactly, at K = 1, where the fp32 result is the exact product.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..problem import GemmProblem
from .gemm_family import Verdict, compare_gemm

U_TC = 2.0 ** -22  # the elementwise bound's unit roundoff (2 x truncation's 2^-23)
TF32_PRODUCT = 2.0 ** -9 + 2.0 ** -20  # relative error of a product of two tf32-truncated inputs
DTYPES = ("fp16", "bf16", "tf32")
OUT_U = {"fp32": 0.0, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}  # unit roundoff of C's own rounding
OUT_FLOOR = {"fp32": 1e-30, "fp16": 2.0 ** -25, "bf16": 1e-30}  # absolute slack: fp16's subnormal spacing / 2


def normwise_tolerance(K: int, dtype: str = "fp16", out: str = "fp32") -> float:
    t = 2.0 ** -8 if dtype == "tf32" else max(2e-5, K * 2.0 ** -25)
    return t * (1.0 + OUT_U[out]) + OUT_U[out]


def elementwise_factor(K: int, dtype: str = "fp16", out: str = "fp32") -> float:
    f = (K + 2) * U_TC + (TF32_PRODUCT if dtype == "tf32" else 0.0)
    return f * (1.0 + OUT_U[out]) + OUT_U[out]


# -- rounding to the input dtype (xp: numpy or cupy) ---------------------------------------

def round_to(x, dtype: str, xp=np):
    """fp32 values -> the storage of `dtype`, rounded to nearest even (tf32: fp32 itself).

    fp16: a float16 array. bf16: a uint16 array of bf16 bits (NumPy and CuPy have no bf16 type):
    the top half of the fp32 bits after adding 0x7FFF plus the lowest kept bit (ties to even);
    inputs here are finite, so no NaN handling is needed.
    """
    if dtype == "fp16":
        return x.astype(xp.float16)
    if dtype == "bf16":
        u = xp.ascontiguousarray(x, dtype=xp.float32).view(xp.uint32)
        return ((u + xp.uint32(0x7FFF) + ((u >> 16) & xp.uint32(1))) >> 16).astype(xp.uint16)
    if dtype == "tf32":  # stored as fp32; the kernel's truncation is part of what is measured
        return xp.ascontiguousarray(x, dtype=xp.float32)
    raise ValueError(f"dtype must be one of {DTYPES}, not {dtype!r}")


def decode(x16, dtype: str, xp=np):
    """The 16-bit storage of `dtype` -> float64 values (exact)."""
    if dtype == "fp16":
        return x16.astype(xp.float64)
    if dtype == "bf16":
        return (x16.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)
    if dtype in ("tf32", "fp32"):
        return x16.astype(xp.float64)
    raise ValueError(f"dtype must be one of {DTYPES}, not {dtype!r}")


def poison(shape, out: str, xp=np):
    """C's starting value when beta == 0: NaN in C's storage (bf16: the quiet-NaN bits 0x7FC0)."""
    if out == "bf16":
        return xp.full(shape, 0x7FC0, dtype=xp.uint16)
    return xp.full(shape, xp.nan, dtype=xp.float16 if out == "fp16" else xp.float32)


def make_inputs(problem: GemmProblem, seed: int, xp=None):
    """Fresh uniform [-1, 1) values rounded to problem.dtype: A16, B16 (16-bit storage; A is MxK,
    or KxM when the layout gives it transposed; B is KxN, or NxK likewise), C0 (in problem.out_dtype's storage: random values
    rounded to it when beta != 0, else NaN). On the GPU with CuPy unless xp=numpy is given."""
    if xp is None:
        import cupy as xp
    rng = xp.random.default_rng(seed)
    a_shape = (problem.K, problem.M) if problem.a_transposed else (problem.M, problem.K)
    A = round_to(rng.uniform(-1.0, 1.0, a_shape).astype(xp.float32), problem.dtype, xp)
    b_shape = (problem.N, problem.K) if problem.b_transposed else (problem.K, problem.N)
    B = round_to(rng.uniform(-1.0, 1.0, b_shape).astype(xp.float32), problem.dtype, xp)
    out = problem.out_dtype
    if problem.beta != 0.0:
        C0 = rng.uniform(-1.0, 1.0, (problem.M, problem.N)).astype(xp.float32)
        if out != "fp32":
            C0 = round_to(C0, out, xp)
    else:
        C0 = poison((problem.M, problem.N), out, xp)
    return A, B, C0


EXACT_K = 1 << 16  # past this K, an fp32-C problem also runs test 3 (exact, on +-1 inputs)
EXACT_ALPHA, EXACT_BETA = 1.5, -0.75  # test 3's scalars: short dyadic numbers keep its epilogue exact


def exact_pass(problem: GemmProblem) -> bool:
    return problem.K > EXACT_K and problem.out_dtype == "fp32"


def make_sign_inputs(problem: GemmProblem, seed: int, xp=None):
    """make_inputs' arrays for test 3: +-1 in every input and in C0 (NaN when beta == 0)."""
    if xp is None:
        import cupy as xp
    rng = xp.random.default_rng(seed)

    def signs(shape):
        return (rng.integers(0, 2, shape, dtype=xp.int32) * 2 - 1).astype(xp.float32)

    A = round_to(signs((problem.K, problem.M) if problem.a_transposed else (problem.M, problem.K)), problem.dtype, xp)
    B = round_to(signs((problem.N, problem.K) if problem.b_transposed else (problem.K, problem.N)), problem.dtype, xp)
    C0 = signs((problem.M, problem.N)) if problem.beta != 0.0 else poison((problem.M, problem.N), "fp32", xp)
    return A, B, C0


def compare_exact(C, A16, B16, C0, alpha: float, beta: float, dtype: str) -> Verdict:
    """Test 3: C equal to the fp64 reference, element by element."""
    v = compare_gemm(C, A16, B16, C0, alpha, beta, to_f64=lambda x, xp: decode(x, dtype, xp),
                     elementwise_factor=0.0, tol=0.0)
    if v.passed or v.nan_count:
        return v
    # tol = 0 fails the normwise check first on any error, so v.reason never names an element
    return replace(v, reason=f"not exact on +-1 inputs (test 3, K > 2^16): relative error {v.rel_err:.3e}")


def compare(C, A16, B16, C0, alpha: float, beta: float, dtype: str, out: str = "fp32") -> Verdict:
    """Check C (fp32, or `out`'s 16-bit storage; device or host) against the fp64 product of the
    same 16-bit inputs."""
    K = A16.shape[1]
    return compare_gemm(C, A16, B16, C0, alpha, beta, to_f64=lambda x, xp: decode(x, dtype, xp),
                        elementwise_factor=elementwise_factor(K, dtype, out), tol=normwise_tolerance(K, dtype, out),
                        c_to_f64=lambda x, xp: decode(x, out, xp), floor=OUT_FLOOR[out])


# The odd-shape sweep (verify.py's, for the rungs that take any shape) and the aligned sweep
# (K % 8 == 0 and N % 8 == 0, for rung 2): M = 1, K = 8, primes in M, non-multiples of every
# tile size in M, N, K (by 8s), next to one aligned shape.
SWEEP_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (1, 129, 67), (97, 1, 33), (64, 64, 1), (127, 127, 127), (129, 257, 65),
    (31, 517, 203), (256, 256, 256), (333, 191, 1031), (513, 1025, 77),
)
ALIGNED_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 8, 8), (97, 8, 40), (64, 64, 8), (127, 136, 200), (129, 264, 72), (31, 520, 208),
    (256, 256, 256), (333, 192, 1032), (513, 1024, 80), (200, 72, 4104),
)
SWEEP_SCALARS: tuple[tuple[float, float], ...] = ((1.0, 0.0), (1.5, -0.75))


def sweep_problems(dtype: str, shapes=SWEEP_SHAPES, scalars=SWEEP_SCALARS, layout: str = "nn",
                   out: str = "fp32") -> list[GemmProblem]:
    return [GemmProblem(M, N, K, alpha, beta, dtype, layout, out) for (M, N, K) in shapes
            for (alpha, beta) in scalars]
