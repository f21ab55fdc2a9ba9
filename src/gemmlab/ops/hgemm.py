"""The hgemm op: C = alpha * A @ B + beta * C on tensor cores, A and B fp16 or bf16 (or fp32 read
as tf32), fp32 accumulation, C in fp32 or (--out-dtype) in the 16-bit input type.

Arrays: A and B are CuPy arrays (float16 for fp16, uint16 bits for bf16, float32 for tf32); C is
float32, or float16 / uint16 bits for a 16-bit C. B is KxN (layout "nn") or given as its
transpose, an NxK array (layout "nt": x @ W.T); A is MxK, or given as its transpose, a KxM array
(layouts "tn" and "tt"). The rungs tagged "layout_nt" read a transposed B in place (K-major TMA
boxes, wgmma without the transpose bit), those tagged "layout_tn" a transposed A (M-major boxes,
wgmma's A transpose bit; tf32 through registers), those tagged "out16" write a 16-bit C; the others refuse them. The kernel's input types (KernelSpec.dtypes), its layouts and C types, its
shape rule (problem_check) and the 16-byte alignment of every pointer are checked before a
launch, each refused as one BadArgumentError line. The TMA rungs (tag "tma") launch through
ops/hgemm_tma.py. Bounds and input rounding: ops/hgemm_check.py. Baselines: cuBLAS and torch.mm
(ops/hgemm_libraries.py).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from .. import registry
from ..cuda.prepared import PreparedImpl
from ..errors import BadArgumentError
from ..kernels.hgemm import specs as _kernels
from ..problem import LAYOUTS, GemmProblem  # LAYOUTS: op(A) op(B), "t" an operand given transposed
from . import hgemm_libraries as _libraries  # noqa: F401  (registers cuBLAS)
from .base import choices, device_inputs
from .gemm_family import GemmOp, run_and_compare
from .hgemm_check import (ALIGNED_SHAPES, DTYPES, EXACT_ALPHA, EXACT_BETA, SWEEP_SHAPES, compare, compare_exact,
                          exact_pass, make_inputs, make_sign_inputs)

DEFAULT_HGEMM = "mma_sync"  # rung 2: the fastest before Hopper (sm_80 and up)
FALLBACK_HGEMM = "wmma"  # takes any shape: impl=None uses it where rung 2 refuses the shape
HOPPER_HGEMM = "persistent"  # rung 5 on sm_90: any shape, the fastest measured (docs/tensor-cores.md)
TF32_HGEMM = "tf32_wgmma"  # fp32 inputs: rung 6 (sm_90 only)


def hgemm_bytes(p: GemmProblem) -> int:
    """A and B read once (2 bytes an element, 4 for tf32), C written once in fp32 or 16 bits (and
    read when beta != 0)."""
    item = 4 if p.dtype == "tf32" else 2
    c_item = 4 if p.out_dtype == "fp32" else 2
    return item * (p.M * p.K + p.K * p.N) + c_item * p.M * p.N * (2 if p.beta != 0.0 else 1)




class HgemmRunner(PreparedImpl):
    """An hgemm kernel compiled for the current device, one input dtype, one operand layout and
    one output dtype (or a baseline, which takes them all)."""

    def __init__(self, impl: Any, params: Mapping[str, int] | None = None, dtype: str = "fp16",
                 arch: str | None = None, layout: str = "nn", out_dtype: str = "fp32"):
        super().__init__(impl, OP.build_params(impl, params, dtype, layout, out_dtype), arch)
        self.dtype, self.layout, self.out_dtype = dtype, layout, out_dtype

    def check(self, problem: GemmProblem, A, B, C) -> None:
        """Refuse, as one line, what the kernel cannot take."""
        if problem.dtype != self.dtype:
            raise BadArgumentError(f"{self.name} was prepared for {self.dtype}, the problem is {problem.dtype}")
        if self.compiled is not None and problem.layout != self.layout:
            # a kernel built for one B layout reads the other as garbage: never run it so
            raise BadArgumentError(f"{self.name} was prepared for layout {self.layout}, the problem is "
                                   f"{problem.layout}")
        if self.compiled is not None and problem.out_dtype != self.out_dtype:
            raise BadArgumentError(f"{self.name} was prepared for C in {self.out_dtype}, the problem's C is "
                                   f"{problem.out_dtype}")
        reason = OP.refusal(self.impl, problem)
        if reason:
            raise BadArgumentError(reason)
        want_a = (problem.K, problem.M) if problem.a_transposed else (problem.M, problem.K)
        if tuple(A.shape) != want_a:
            raise BadArgumentError(f"A is {A.shape[0]}x{A.shape[1]}; layout {problem.layout} of "
                                   f"{problem.shape} needs {want_a[0]}x{want_a[1]}")
        want = (problem.N, problem.K) if problem.b_transposed else (problem.K, problem.N)
        if tuple(B.shape) != want:
            raise BadArgumentError(f"B is {B.shape[0]}x{B.shape[1]}; layout {problem.layout} of "
                                   f"{problem.shape} needs {want[0]}x{want[1]}")
        if self.compiled is not None:
            for what, x in (("A", A), ("B", B), ("C", C)):
                if x.data.ptr % 16:
                    raise BadArgumentError(f"{self.name} needs 16-byte aligned arrays; {what} is not")

    def enqueue(self, problem: GemmProblem, A, B, C, stream) -> None:
        """C = alpha*A@B + beta*C on `stream` (a cuda.core Stream); B is NxK for layout nt."""
        self.check(problem, A, B, C)
        if self.compiled is not None and "tma" in self.impl.tags:
            from .hgemm_tma import launch_tma

            launch_tma(self, problem, A, B, C, stream)
        elif self.compiled is not None:
            from ..cuda.launch import launch_gemm

            geometry = self.impl.launch(problem, self.params)
            launch_gemm(self.compiled, geometry, stream, problem.M, problem.N, problem.K, problem.alpha,
                        A.data.ptr, B.data.ptr, problem.beta, C.data.ptr)
        else:
            self.impl.enqueue(problem, A, B, C, int(stream.handle))


def refusal(impl: Any, problem: GemmProblem) -> str:
    """Why `impl` cannot run `problem` ("" when it can)."""
    return OP.refusal(impl, problem)


def choose_impl(impl: str | None, problem: GemmProblem, arch: str | None = None) -> str:
    """impl as named; None: rung 5 (16-bit) or 6 (tf32) on Hopper, else rung 2, or rung 1 where
    rung 2 refuses the shape."""
    if impl is not None:
        return impl
    if arch is None:
        from ..cuda.device import info

        arch = info().arch
    hopper = arch == "sm_90"
    if problem.dtype == "tf32":
        if not hopper:
            raise BadArgumentError(f"fp32 inputs run as tf32 on sm_90 (Hopper) only; this GPU is {arch}")
        return TF32_HGEMM
    if hopper:
        return HOPPER_HGEMM
    return FALLBACK_HGEMM if refusal(registry.get(DEFAULT_HGEMM, "hgemm"), problem) else DEFAULT_HGEMM


def _zeros_c(problem: GemmProblem, A, B):
    import cupy as cp

    storage = {"fp32": cp.float32, "fp16": cp.float16, "bf16": cp.uint16}[problem.out_dtype]  # bf16 as bits
    return A, B, cp.zeros((problem.M, problem.N), dtype=storage)


def _check(C, A, B, C0, p: GemmProblem):
    """The fp64 comparison, with A and B as the product uses them (MxK, KxN): a KxM A or an NxK B
    (layouts tn, nt, tt) enters as its transposed view (no copy, no device kernel: the sanitizer
    runs see only gemmlab's), so a kernel that ignored the layout is compared with the product it
    should have computed."""
    a = A.T if p.a_transposed else A
    b = B.T if p.b_transposed else B
    return compare(C, a, b, C0, p.alpha, p.beta, p.dtype, p.out_dtype)


def _takers(tag: str) -> str:
    return choices([s.name for s in registry.kernels("hgemm") if tag in s.tags] + ["the baselines"])


def variant_refusal(impl: Any, problem: GemmProblem) -> str:
    """Why `impl` cannot take `problem`'s operand layout or output type ("" when it can).
    Baselines take every layout and C in fp32 or the input type; kernels nn and an fp32 C, a
    transposed B / a transposed A / a 16-bit C where their spec carries the tag "layout_nt" /
    "layout_tn" / "out16"."""
    if problem.a_transposed and impl.kind == "kernel" and "layout_tn" not in impl.tags:
        return (f"{impl.name} reads A as a row-major MxK array only; layout {problem.layout} (A given as KxM) "
                f"runs on {_takers('layout_tn')}")
    if problem.b_transposed and impl.kind == "kernel" and "layout_nt" not in impl.tags:
        return (f"{impl.name} reads B as a row-major KxN array only; layout {problem.layout} (B given as NxK) "
                f"runs on {_takers('layout_nt')}")
    out = problem.out_dtype
    if out != "fp32" and out != problem.dtype:
        return f"{impl.name}: C is fp32 or the input type ({problem.dtype}), not {out}"
    if out != "fp32" and impl.kind == "kernel" and "out16" not in impl.tags:
        return f"{impl.name} writes an fp32 C only; a {out} C runs on {_takers('out16')}"
    return ""


class HgemmOp(GemmOp):
    sweep_shapes = SWEEP_SHAPES + ALIGNED_SHAPES
    make_inputs = staticmethod(lambda problem, seed, c_random=False: make_inputs(problem, seed))
    check = staticmethod(_check)

    def check_layout(self, layout: str | None) -> str:
        layout = layout or "nn"
        if layout not in LAYOUTS:
            raise BadArgumentError(f"--layout {layout!r}: choose nn (A is MxK, B is KxN), nt (B given as its NxK "
                                   "transpose), tn (A given as its KxM transpose) or tt (both)")
        return layout

    def check_out_dtype(self, out: str | None, dtype: str) -> str:
        out = out or "fp32"
        if dtype == "tf32" and out != "fp32":
            raise BadArgumentError(f"--out-dtype {out!r}: tf32 (fp32 inputs) writes an fp32 C only")
        if out not in ("fp32", dtype):
            raise BadArgumentError(f"--out-dtype {out!r}: C is fp32 or the input type ({dtype})")
        return out

    def make_problem(self, M: int, N: int, K: int, alpha: float, beta: float, dtype: str, args):
        return GemmProblem(M, N, K, alpha, beta, dtype, self.check_layout(args.layout),
                           self.check_out_dtype(args.out_dtype, dtype))

    def refusal(self, impl, problem) -> str:
        """The input types first, then the layout and the output type (a rung that cannot read B
        as NxK says so, not that the shape is odd), then the shape rule."""
        dtypes = getattr(impl, "dtypes", ()) or ()
        if dtypes and problem.dtype not in dtypes:
            return super().refusal(impl, problem)
        return variant_refusal(impl, problem) or super().refusal(impl, problem)

    def fixed_params(self, impl, dtype: str, layout: str = "nn", out_dtype: str = "fp32") -> dict[str, int]:
        # DTYPE, B_KMAJOR / A_MNMAJOR and OUT16 are the dtype's, the layout's and the output type's
        # template flags, not tuned parameters: set where a kernel has them
        names = {p.name for p in impl.params} if getattr(impl, "kind", None) == "kernel" else set()
        fixed = {"DTYPE": _kernels.dtype_flag(dtype)} if "DTYPE" in names else {}
        if "B_KMAJOR" in names:
            fixed["B_KMAJOR"] = int(layout[1] == "t")
        if "A_MNMAJOR" in names:
            fixed["A_MNMAJOR"] = int(layout[0] == "t")
        if "OUT16" in names:
            fixed["OUT16"] = int(out_dtype != "fp32")
        return fixed

    def layout_defaults(self, impl, dtype: str, layout: str = "nn") -> dict[str, int]:
        """Defaults a layout needs in place of the kernel's own, where those break a constraint in
        that layout (specs.layout_defaults); a user's or a table's parameters still win, and a
        variant whose own defaults fit keeps them."""
        if getattr(impl, "kind", None) != "kernel":
            return {}
        own = {**impl.defaults, **self.fixed_params(impl, dtype, layout)}
        if not impl.failed_constraints(own):
            return {}
        return {k: v for k, v in _kernels.layout_defaults(dtype, layout).items() if k in own}

    def build_params(self, impl, params, dtype: str, layout: str = "nn", out_dtype: str = "fp32") -> dict[str, int]:
        """A kernel's parameters for one input type, layout and C type: the layout's defaults
        where the kernel's own break a constraint there, then `params`, then the flags those set."""
        return {**self.layout_defaults(impl, dtype, layout), **(params or {}),
                **self.fixed_params(impl, dtype, layout, out_dtype)}

    def kernel_params(self, impl, params, problem) -> dict[str, int]:
        return self.build_params(impl, params, problem.dtype, problem.layout, problem.out_dtype)

    def prepare(self, impl, params, dtype):
        return HgemmRunner(impl, params, dtype)

    def prepare_for(self, impl, params, problem):
        return HgemmRunner(impl, params, problem.dtype, layout=problem.layout, out_dtype=problem.out_dtype)

    def runner_key(self, problem):
        return problem.dtype, problem.layout, problem.out_dtype

    def label(self, problem) -> str:
        """The shape, with the layout and C's type where they are not the defaults: '4096x4096x4096 nt C bf16'."""
        return " ".join([problem.shape] + ([problem.layout] if problem.layout != "nn" else [])
                        + ([f"C {problem.out_dtype}"] if problem.out_dtype != "fp32" else []))

    def row_fields(self, point) -> dict:
        p = point.problem
        return {**super().row_fields(point), "extra": {"layout": p.layout, "out_dtype": p.out_dtype}}

    def default_impl(self, problem) -> str:
        return choose_impl(None, problem)

    def bytes_moved(self, point) -> int:
        return hgemm_bytes(point.problem)

    def timing_inputs(self, problem, seed):
        return device_inputs(lambda: _zeros_c(problem, *make_inputs(problem, seed)[:2]))

    def verify(self, runner, problem, stream, seed, host_data=False, special=True):
        """hgemm_check's tests 1 and 2 on uniform inputs, then (past K = 2^16, fp32 C) test 3 on
        +-1 inputs; host_data: inputs made by NumPy and copied, so no CuPy kernel runs (sanitizer)."""
        def run(p, make, compare):
            if host_data:
                import cupy as cp
                import numpy as np

                inputs = device_inputs(lambda: tuple(cp.asarray(x) for x in make(p, seed, xp=np)))
            else:
                inputs = device_inputs(make, p, seed)
            return run_and_compare(runner, p, inputs, stream, compare)

        verdict = run(problem, make_inputs, lambda C, A, B, C0: self.check(C, A, B, C0, problem))
        if verdict.passed and exact_pass(problem):
            # its own scalars: the caller's (0.1, say) would not keep alpha * acc exact in fp32
            p = replace(problem, alpha=EXACT_ALPHA, beta=EXACT_BETA if problem.beta != 0.0 else 0.0)
            verdict = run(p, make_sign_inputs, lambda C, A, B, C0: compare_exact(C, A, B, C0, p.alpha, p.beta,
                                                                                  p.dtype))
        return verdict

    def header(self, dtype: str, out_dtype: str = "fp32", layout: str = "nn") -> tuple[str, ...]:
        b = "; B given as its NxK transpose (layout nt)" if layout == "nt" else ""
        if dtype == "tf32":
            return ("hgemm: fp32 inputs multiplied as tf32 (lower precision than SGEMM), fp32 accumulation, "
                    f"fp32 output{b}",)
        out = "fp32 output" if out_dtype == "fp32" else f"{out_dtype} output (rounded to nearest even)"
        return (f"hgemm: {dtype} inputs, fp32 accumulation, {out}{b}",)

    def header_for(self, args) -> tuple[str, ...]:
        dtype = self.check_dtype(args.dtype)
        return self.header(dtype, self.check_out_dtype(args.out_dtype, dtype), self.check_layout(args.layout))

    def batch_prefix(self, dtype: str) -> str:
        return f"bench_hgemm_{dtype}"


OP = HgemmOp("hgemm", "C = alpha*A@B + beta*C on tensor cores: fp16/bf16 (or tf32) inputs, fp32 accumulate, fp32 "
             "(or 16-bit) C",
             DTYPES, math="tensor")
