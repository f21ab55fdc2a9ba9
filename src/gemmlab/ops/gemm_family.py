"""What the GEMM ops (sgemm, hgemm, bgemm) share: the comparison against fp64, the odd-shape
sweep, the GFLOP/s tables and the shape options. Each op brings its own bounds.

The comparison makes two tests, both must hold:
1. Normwise: ||C - ref||_F / max(||ref||_F, || |alpha| |A||B| + |beta| |C0| ||_F / sqrt(K + 1)) <= tol
   (the op's tolerance for its K and dtype). The second term only matters where the result
   cancels (tiny problems): random data keeps about sqrt(K) of its K terms. A kernel that drops
   or repeats one K-tile of one output tile exceeds it by orders of magnitude.
2. Elementwise: |C - ref| <= factor * (|alpha| * (|A| @ |B|) + |beta| * |C0|) + tiny, the
   deterministic worst-case bound of any summation order (factor: the op's, from K and dtype).
   It cannot fail a correct kernel, and it catches the single wrong or stale element that a
   norm would hide.
NaN anywhere fails: with beta == 0 the output starts as NaN, so an unwritten element, or a
kernel that reads C although beta == 0, leaves a NaN behind.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..problem import GemmProblem, comma_items, parse_shape
from ..errors import BadArgumentError
from .. import registry
from .base import Metric, Op, Share, ShapeArgs, device_inputs

HOST_REFERENCE_LIMIT = 1 << 27  # M*N*K up to this: reference on the host with NumPy


@dataclass(frozen=True)
class Verdict:
    passed: bool
    rel_err: float
    tol: float
    worst_elem_ratio: float  # max |err| / elementwise bound (<= 1 passes)
    nan_count: int
    reason: str = ""


def compare_gemm(C, A, B, C0, alpha: float, beta: float, *, to_f64, elementwise_factor: float,
                 tol: float, c_to_f64=None, floor: float = 1e-30) -> Verdict:
    """The comparison every GEMM op shares, given how to read its inputs as fp64
    (`to_f64(x, xp)`; C and C0 through `c_to_f64`, else as plain numbers) and its two bounds: the
    elementwise factor times |alpha| |A| @ |B| + |beta| |C0| (plus `floor`, an absolute term for
    an output type with a coarse underflow, e.g. fp16's subnormals), and the normwise tolerance."""
    M, K = A.shape
    N = B.shape[1]
    all_host = all(isinstance(x, np.ndarray) for x in (A, B, C))
    if all_host or M * N * K <= HOST_REFERENCE_LIMIT:
        xp = np
        get = (lambda x: x) if all_host else _to_host
    else:  # large: the fp64 products on the GPU (cuBLAS DGEMM through CuPy)
        import cupy as xp

        get = lambda x: x  # noqa: E731
    c_f64 = c_to_f64 or (lambda x, xp_: xp_.asarray(x, dtype=xp_.float64))
    a = to_f64(get(A), xp)
    b = to_f64(get(B), xp)
    c = c_f64(get(C), xp)
    ref = alpha * (a @ b)
    bound = abs(alpha) * (xp.abs(a) @ xp.abs(b))
    if beta != 0.0:
        c0 = c_f64(get(C0), xp)
        ref += beta * c0
        bound += abs(beta) * xp.abs(c0)
    # The size a sum of K random-sign terms keeps: where the result cancels to nearly nothing
    # (a 1x1x1 problem with alpha*a*b ~ -beta*c0), the error is judged against it, not against
    # the cancelled result. For random data ||ref|| exceeds it (sqrt(K)/3 against sqrt(K)/4 per
    # element), so the test is unchanged there and a dropped K-tile still fails it.
    scale = float(xp.linalg.norm(bound)) / math.sqrt(K + 1)
    bound = elementwise_factor * bound + floor

    nan_count = int(xp.count_nonzero(~xp.isfinite(c)))
    if nan_count:
        return Verdict(False, math.inf, tol, math.inf, nan_count,
                       f"{nan_count} of {M * N} outputs are NaN/inf (unwritten, or C read with beta=0)")
    err = c - ref
    ref_norm = max(float(xp.linalg.norm(ref)), scale)
    rel = float(xp.linalg.norm(err)) / ref_norm if ref_norm > 0 else float(xp.linalg.norm(err))
    # The absolute floor holds for the norm too: a result that lands among fp16's subnormals is
    # rounded to within `floor` of itself, not to within a relative u (a 1x1x1 problem whose one
    # product is below 2^-14 measured 5.6e-4 against a 5.1e-4 tolerance). sqrt(M N) floors add
    # about 1e-8 to the tolerance of a random problem of any size, so nothing else moves.
    if ref_norm > 0:
        tol = tol + floor * math.sqrt(M * N) / ref_norm
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


def _to_host(x):
    if isinstance(x, np.ndarray):
        return x
    import cupy as cp

    return cp.asnumpy(x)


# The odd-shape sweep: K = 1, M = 1, N = 1, primes, and non-multiples of every tile size
# (8, 16, 32, 64, 128, 256), next to one aligned shape. Each runs with beta = 0 (C poisoned
# with NaN) and with non-trivial alpha and beta (C read).
SWEEP_SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (1, 129, 67), (97, 1, 33), (64, 64, 1), (127, 127, 127), (129, 257, 65),
    (31, 517, 203), (256, 256, 256), (333, 191, 1031), (513, 1025, 77),
)
SWEEP_SCALARS: tuple[tuple[float, float], ...] = ((1.0, 0.0), (1.5, -0.75))



def run_and_compare(runner, problem, inputs, stream, compare_fn) -> Verdict:
    """Run once into a copy of C0 (NaN when beta == 0) and compare with fp64."""
    from ..cuda.device import sync_or_raise

    A, B, C0 = inputs
    C = device_inputs(C0.copy)
    runner.enqueue(problem, A, B, C, stream)
    sync_or_raise(stream)
    return compare_fn(C, A, B, C0)


DEFAULT_SIZES = "256,512,1024,2048,4096"


def gemm_shapes(args: ShapeArgs, default_sizes: str | None) -> list[tuple[int, int, int]]:
    """--M/--N/--K (all three) or --sizes (N or MxNxK, comma-separated), else the defaults."""
    given = [d for d in (args.M, args.N, args.K) if d is not None]
    if given and args.sizes:
        raise BadArgumentError("give either --M/--N/--K or --sizes, not both")
    if given:
        if len(given) != 3:
            raise BadArgumentError("give all three of --M, --N and --K (or use --sizes)")
        return [(args.M, args.N, args.K)]
    text = args.sizes or default_sizes
    if not text:
        return []
    return list(dict.fromkeys(parse_shape(s) for s in comma_items(text, "--sizes")))  # 64,64: once


def gflops(point) -> float | None:
    return point.gflops


class GemmOp(Op):
    """A GEMM op: GFLOP/s tables with the share of cuBLAS, problems from --M/--N/--K or --sizes,
    the odd-shape sweep for verify. Subclasses bring data, runners and bounds."""

    sweep_shapes: tuple[tuple[int, int, int], ...] = SWEEP_SHAPES
    sweep_scalars: tuple[tuple[float, float], ...] = SWEEP_SCALARS
    reference = "cublas"

    def __init__(self, name: str, title: str, dtypes: tuple[str, ...] = ("fp32",), **kw: Any):
        super().__init__(name, title, dtypes,
                         metrics=(Metric("GFLOP/s (median, 2MNK / time)", gflops),),
                         shares=(Share(f"share of {self.reference} (same run)", self.reference, gflops),),
                         speedup_title="speedup over the previous rung (of the same ladder: main, seed 002, "
                                       "seed 004)", **kw)

    def make_problem(self, M: int, N: int, K: int, alpha: float, beta: float, dtype: str, args: ShapeArgs):
        return GemmProblem(M, N, K, alpha, beta, dtype)

    def problems(self, args: ShapeArgs) -> list:
        dtype = self.check_dtype(args.dtype)
        return [self.make_problem(m, n, k, args.alpha, args.beta, dtype, args)
                for m, n, k in gemm_shapes(args, DEFAULT_SIZES)]

    def sweep(self, args: ShapeArgs) -> list:
        """One shape given: with beta = 0 (C poisoned) and with the given scalars; else the sweep."""
        dtype = self.check_dtype(args.dtype)
        if args.one_gemm:
            (m, n, k), = gemm_shapes(args, None)
            return [self.make_problem(m, n, k, a, b, dtype, args) for a, b in ((1.0, 0.0), (args.alpha, args.beta))]
        return [self.make_problem(m, n, k, a, b, dtype, args)
                for (m, n, k) in self.sweep_shapes for (a, b) in self.sweep_scalars]

    # The data and runner of a plain GEMM op; an op names its functions and runner class.
    runner_class: Any = None
    make_inputs: Callable = None  # (problem, seed, c_random=False) -> (A, B, C0) on the GPU, C0 NaN if beta == 0
    check: Callable = None  # (C, A, B, C0, problem) -> Verdict

    def prepare(self, impl, params, dtype):
        return self.runner_class(impl, params)

    def timing_inputs(self, problem, seed):
        return device_inputs(self.make_inputs, problem, seed, True)

    def enqueue(self, runner, problem, inputs, stream) -> None:
        runner.enqueue(problem, *inputs, stream)

    def verify(self, runner, problem, stream, seed, host_data=False, special=True) -> Verdict:
        inputs = device_inputs(self.make_inputs, problem, seed)
        return run_and_compare(runner, problem, inputs, stream, lambda C, A, B, C0: self.check(C, A, B, C0, problem))

    def family(self, impl_name: str) -> str:
        return registry.family(registry.get(impl_name, self.name))

    def row_order(self, names) -> list[str]:
        return list(names)
