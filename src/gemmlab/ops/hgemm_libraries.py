"""hgemm baselines, timed by the same timer in the same run as the kernels.

- cublas: cublasGemmEx called directly (cuda/cublas.py): fp16/bf16 A and B, fp32 accumulation
  (CUBLAS_COMPUTE_32F) and fp32 C, alpha and beta in the one call; fp32 inputs as tf32
  (CUBLAS_COMPUTE_32F_FAST_TF32). The call the API's library path makes.
- torch: cuBLAS through torch.mm(a, b, out_dtype=torch.float32, out=c) - fp16/bf16 inputs,
  fp32 accumulation AND fp32 output in one cuBLAS call (cublasGemmEx / cublasLt with an fp32 C),
  exactly the contract of the kernels. torch.mm gained `out_dtype` in PyTorch 2.8 (pytorch
  PR 150812: "Aten GEMM overload for FP32 output from FP16/BF16 inputs", mm/bmm/addmm/baddbmm);
  the image has torch 2.11. torch.matmul on fp16 would write fp16 (half the output bytes and a
  different contract), so it is not the comparison; CuPy 14 has no bf16 dtype, so its cublas
  wrappers cannot express the bf16 case. With beta == 0 and alpha == 1 (the bench default)
  the baseline is that single call; otherwise the scaling is extra element-wise kernels, so
  compare timings at alpha = 1, beta = 0.
For tf32 (fp32 inputs) the same call runs on fp32 tensors with PyTorch's TF32 switch on for
the call only (cuBLAS TF32 tensor-core GEMM, CUBLAS_COMPUTE_32F_FAST_TF32), then switched back.
Layout nt (B given as its NxK transpose): both read that array in place, as the kernels do -
cuBLAS with its transpose flag on B (CUBLAS_OP_T), torch as torch.mm(a, bt.t()) (a transposed
view, which torch hands to cuBLAS with the same flag) - so every row times the same product of
the same memory. Layouts tn and tt (A given as its KxM transpose) likewise, with the flag on A.
C in the input type (--out-dtype fp16|bf16): cuBLAS with that C type (fp32 compute and scaling,
one rounding), torch as plain torch.mm(a, b, out=c) - torch's default for 16-bit inputs - or, with
alpha != 1 or beta != 0, c.addmm_(a, b, beta=, alpha=): one cuBLAS call that scales in fp32 and
rounds once, as the kernel does (mm followed by a scaling would round twice). Both with
reduced-precision reductions disallowed (torch's allow_fp16/bf16_reduced_precision_reduction off
for the call, cuBLAS's handle in CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION): otherwise
cuBLAS may add split-K partials in 16 bits, a different contract from fp32 accumulation, and the
same bounds would not hold.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..baseline import Baseline
from ..registry import register
from .torch_interop import torch_reason, torch_stream, torch_views

def _reason() -> str:
    if torch_reason():
        return torch_reason()
    import torch

    if "out_dtype" not in (torch.mm.__doc__ or ""):
        return f"torch {torch.__version__} has no torch.mm(..., out_dtype=) (PyTorch >= 2.8 needed)"
    return ""


@contextmanager
def _matmul_switches(**settings):
    """PyTorch's cuBLAS matmul switches (torch.backends.cuda.matmul) at `settings` for the `with`
    block only: each one this torch has and that is not so already is set, and put back
    afterwards. A switch already so is not written: a setter may reset more than its getter
    shows (since torch 2.10 a bool for a 16-bit reduction switch also turns its split-K part on)."""
    import torch

    matmul = torch.backends.cuda.matmul
    saved = {}
    for name, value in settings.items():
        now = getattr(matmul, name, None)
        if now is not None and now != value:
            saved[name] = now
            setattr(matmul, name, value)
    try:
        yield
    finally:
        for name, now in saved.items():
            setattr(matmul, name, now)


def _tf32(on: bool) -> dict:
    """The switch that runs PyTorch's fp32 matmuls in TF32 (none when `on` is off): the newer
    fp32_precision where it exists, else allow_tf32."""
    if not on:
        return {}
    import torch

    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        return {"fp32_precision": "tf32"}
    return {"allow_tf32": True}


# fp16/bf16 matmuls with fp32 reductions only (no 16-bit split-K sums)
FULL_REDUCTION = {"allow_fp16_reduced_precision_reduction": False, "allow_bf16_reduced_precision_reduction": False}


_out_ok = [True]  # torch.mm(..., out_dtype=, out=) works; else a copy after the call


def _enqueue(problem, A, B, C, handle: int) -> None:
    import torch

    with torch.cuda.stream(torch_stream(handle)), _matmul_switches(**_tf32(problem.dtype == "tf32")):
        a, b, c = torch_views(A, B, C, bf16=problem.dtype == "bf16")
        if problem.b_transposed:  # B holds the NxK transpose: a view, no copy
            b = b.t()
        if problem.a_transposed:  # A holds the KxM transpose: likewise
            a = a.t()
        if problem.out_dtype != "fp32":  # C in the input type, as torch.mm writes it
            if problem.out_dtype == "bf16":
                c = c.view(torch.bfloat16)  # bf16 bits held as uint16
            with _matmul_switches(**FULL_REDUCTION):
                if problem.beta == 0.0 and problem.alpha == 1.0:
                    torch.mm(a, b, out=c)
                else:  # beta == 0: C ignored (torch's rule), its NaN poison cannot leak in
                    c.addmm_(a, b, beta=problem.beta, alpha=problem.alpha)
            return
        if problem.dtype == "tf32":  # fp32 tensors: the output is fp32 already
            if problem.beta == 0.0:
                torch.mm(a, b, out=c)
                if problem.alpha != 1.0:
                    c.mul_(problem.alpha)
            else:
                c.mul_(problem.beta).add_(torch.mm(a, b), alpha=problem.alpha)
            return
        if problem.beta == 0.0:  # C is not read: the NaN poison cannot leak in
            if _out_ok[0]:
                try:
                    torch.mm(a, b, out_dtype=torch.float32, out=c)
                except (TypeError, RuntimeError):  # a torch that takes out_dtype but not out=
                    _out_ok[0] = False
            if not _out_ok[0]:
                c.copy_(torch.mm(a, b, out_dtype=torch.float32))
            if problem.alpha != 1.0:
                c.mul_(problem.alpha)
        else:
            product = torch.mm(a, b, out_dtype=torch.float32)
            c.mul_(problem.beta).add_(product, alpha=problem.alpha)


def _cublas_enqueue(problem, A, B, C, handle: int) -> None:
    from ..cuda import cublas

    cublas.gemm_ex(problem.dtype, problem.M, problem.N, problem.K, problem.alpha, A.data.ptr, B.data.ptr,
                   problem.beta, C.data.ptr, handle, trans_b=problem.b_transposed, out_dtype=problem.out_dtype,
                   trans_a=problem.a_transposed)


CUBLAS = Baseline("cublas", "hgemm", "cuBLAS GemmEx (fp32 C, or the input type)",
                  "the vendor library: fp16/bf16 inputs, fp32 accumulate, fp32 (or fp16/bf16) output, one call",
                  lambda: "", _cublas_enqueue)
TORCH = Baseline("torch", "hgemm", "torch.mm (out_dtype=float32, or the input type)",
                 "PyTorch's matmul with an fp32 (or fp16/bf16) output (cuBLAS)", _reason, _enqueue)

register(CUBLAS, TORCH)
