"""gemmlab.explain: which implementation a call would run, and why, for arrays or for a problem
described by op=, shape= and dtype= (with gpu= and arch=, on a machine with no GPU). Every
argument is checked as the call would check it, and one that does not apply is refused rather
than dropped: an answer for another problem than the one asked about is worse than none."""
from __future__ import annotations

import operator
import re
import sys
from dataclasses import replace
from typing import Any, Mapping

from . import checks, core, dispatch, tuning

# op -> (the shape explain takes, its length, the dtypes); GEMM dimensions are 32-bit (checks.MAX_DIM)
EXPLAIN_SHAPES = {"sgemm": ("(M, N, K)", 3, ("fp32",)), "hgemm": ("(M, N, K)", 3, ("bf16", "fp16", "tf32")),
                  "bgemm": ("(M, N, K, batch)", 4, ("fp32",)), "reduce": ("(n,)", 1, ("fp32",))}
ARCH_FORM = re.compile(r"sm_[1-9][0-9]*[af]?")


def explain(A: Any = None, B: Any = None, C: Any = None, *, op: str | None = None, shape: tuple | None = None,
            dtype: str | None = None, impl: str | None = None, params: Mapping[str, int] | None = None,
            gpu: str | None = None, arch: str | None = None, out_dtype: Any = None, file=None) -> str:
    """Print (to `file`, default stdout) and return which implementation a call would run, and why.

    gemmlab.explain(A, B) for a GEMM on those arrays, gemmlab.explain(x) for reduce_sum(x), or
    without arrays: explain(op="sgemm", shape=(M, N, K), dtype="fp32"); explain(op="reduce",
    shape=(n,)); explain(op="bgemm", shape=(M, N, K, batch)). Plans have plan.explain().
    With gpu= (e.g. gpu="NVIDIA H200") it answers for that GPU, with no GPU needed; arch= (e.g.
    "sm_90") is needed for a GPU the shipped tables do not name. out_dtype (or C's type) names a
    16-bit C for hgemm, which only some implementations write.
    """
    from .. import ops, registry

    _check_arguments(A, op, shape, dtype, gpu, arch, file)
    if impl is not None or params is not None:
        checks.check_choice(impl, params, "gemmlab.explain")
    if gpu is None or A is not None:
        state = core.setup()
        if gpu is None or gpu == state["gpu"]:  # another GPU named beside arrays: its own architecture, below
            gpu, arch = state["gpu"], arch or state["arch"]
    else:
        registry.all_impls()
        ops.names()
    arch = arch or dispatch.arch_of(gpu)
    if arch is None:
        raise core.BadArgumentError(f"explain(gpu={gpu!r}) needs arch= (e.g. arch='sm_80'): no shipped table "
                                    "names that GPU, so its architecture is unknown")
    if A is not None and op == "reduce" and B is not None:
        raise core.BadArgumentError("explain(op='reduce') takes one array, x")
    if A is not None and B is None and op in (None, "reduce"):
        op, dims, dtype = "reduce", (checks.sum_operand(A, "gemmlab.explain").size(),), "fp32"
    elif A is not None:
        if op is None:
            op = checks.gemm_op_of(A, "gemmlab.explain")
        a, b, dims, dtype = checks.gemm_operands(op, f"gemmlab.{op}", A, B)
    else:
        if op is None or shape is None:
            raise core.BadArgumentError("explain needs arrays, or op= and shape=")
        dims, dtype = _explained_shape(op, shape, dtype)
    # what the call reads in place (transposed views, as calls.gemm) and C's type
    layout = checks.layout_of(op, a, b) if A is not None and op != "reduce" else (False, False)
    out = _c_type(op, dtype, dims, C, out_dtype)
    problem = core.make_problem(op, dtype, dims, layout, out)
    choice, spec, _ = core.decide(op, problem, dims, impl, params, gpu, arch)
    if any(layout) and impl is not None:  # what a named implementation does with transposed views
        choice = replace(choice, reason=f"{choice.reason}; {core.layout_note(spec, problem, layout)}")
    text = dispatch.describe(choice, f"gemmlab.{'reduce_sum' if op == 'reduce' else op}",
                             f"{'x'.join(map(str, dims))} {dtype}" + (f", C {out}" if out != "fp32" else ""),
                             gpu, arch, tuning.describe())
    print(text, file=file or sys.stdout)
    return text


def _check_arguments(A, op, shape, dtype, gpu, arch, file) -> None:
    """One line for an argument of the wrong kind, or one the arrays' own values would override."""
    if op is not None and (not isinstance(op, str) or op not in EXPLAIN_SHAPES):
        raise core.BadArgumentError(f"op must be sgemm, hgemm, bgemm or reduce, not {op!r}")
    if A is not None and (shape is not None or dtype is not None):
        raise core.BadArgumentError("explain takes arrays or shape= and dtype=, not both (the arrays give them)")
    if gpu is not None and not isinstance(gpu, str):
        raise core.BadArgumentError(f"gpu must be a GPU's name (e.g. 'NVIDIA H200'), not {gpu!r}")
    if arch is not None and not (isinstance(arch, str) and ARCH_FORM.fullmatch(arch)):
        raise core.BadArgumentError(f"arch must look like 'sm_90', not {arch!r}")
    if file is not None and not callable(getattr(file, "write", None)):
        raise core.BadArgumentError(f"file must be a writable text stream (e.g. sys.stderr), not {file!r}")


def _c_type(op: str, dtype: str, dims: tuple, C, out_dtype) -> str:
    """C's type for the answer, C's shape checked as the call checks it; a sum takes neither."""
    if op == "reduce":
        if C is not None or out_dtype is not None:
            raise core.BadArgumentError("reduce_sum takes no C and no out_dtype (its result is a 0-d fp32 array)")
        return "fp32"
    named = checks.out_name(out_dtype)
    if C is not None:
        c = checks.read(C, "C", "gemmlab.explain")
        checks.check_given_c(c.dtype, c.shape, checks.c_shape(op, dims), named)
        named = c.dtype
    return checks.c_type(op, dtype, named, f"gemmlab.{op}")


def _explained_shape(op: str, shape, dtype: str | None) -> tuple[tuple, str]:
    """explain's op=, shape= and dtype= checked as a call would check its arrays: (dims, dtype)."""
    form, length, dtypes = EXPLAIN_SHAPES[op]
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:  # not a sequence, or not of integers
        dims = ()
    top = 2**63 - 1 if op == "reduce" else checks.MAX_DIM
    if len(dims) != length or not all(0 <= d <= top for d in dims):
        raise core.BadArgumentError(f"explain(op={op!r}) takes shape={form}, integers from 0 to "
                                    f"{'2^63 - 1' if op == 'reduce' else checks.MAX_DIM_TEXT}, not {shape!r}")
    dtype = dtype or dtypes[0]
    if op == "hgemm" and dtype == "fp32":  # fp32 arrays given to hgemm run as tf32
        dtype = "tf32"
    if dtype not in dtypes:
        raise core.BadArgumentError(f"explain(op={op!r}) takes dtype " + ", ".join(dtypes) + f", not {dtype!r}")
    return dims, dtype
