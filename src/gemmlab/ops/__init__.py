"""The ops, each described as data for the harness (see ops/base.py), in one module each:
sgemm.py, hgemm.py, bgemm.py, reduce.py (with their checks, libraries and launch helpers beside
them). Importing this package registers every op's kernels and baselines."""
from __future__ import annotations

from ..errors import BadArgumentError
from . import bgemm, hgemm, reduce, sgemm
from .base import Op, ShapeArgs, choices

OPS: dict[str, Op] = {m.OP.name: m.OP for m in (sgemm, hgemm, bgemm, reduce)}


def get(name: str) -> Op:
    """The op called `name`; an unknown name is a BadArgumentError naming the known ones."""
    if name not in OPS:
        raise BadArgumentError(f"--op {name!r}: choose {choices(OPS)}")
    return OPS[name]


# Options that only some ops take, and the ops that take them (for a one-line refusal).
OP_OPTIONS = {"dtype": ("hgemm",), "layout": ("hgemm",), "out_dtype": ("hgemm",), "n": ("reduce",),
              "batch": ("bgemm",)}
SHAPE_OPTIONS = ("M", "N", "K", "sizes")
FP32_MAX = 3.4028234663852886e38  # the largest finite float32: alpha and beta reach the kernels as fp32


def shape_args(op_name: str, scalars: tuple[float, float] = (1.0, 0.0), **given) -> ShapeArgs:
    """The problem options a command was given (None: not given), each refused in one line where
    the op does not take it (--dtype for sgemm, --n for a GEMM, --M or --alpha for reduce, ...).
    `scalars`: alpha and beta where not given (verify's sweep defaults differ from bench's)."""
    get(op_name)
    for name, default in zip(("alpha", "beta"), scalars):
        if given.get(name) is None:
            given[name] = default
        elif op_name == "reduce":  # else silently unused
            raise BadArgumentError(f"--{name} is for the GEMM ops: a sum has no alpha or beta")
        elif not abs(given[name]) <= FP32_MAX:  # inf, NaN, or past fp32 (1e39 becomes inf in the kernels)
            raise BadArgumentError(f"--{name} {given[name]!r}: must be a finite fp32 value (|x| <= 3.4e38); "
                                   "every result would be NaN or inf, and no check could pass")
    for option, owners in OP_OPTIONS.items():
        if given.get(option) is not None and op_name not in owners:
            hint = "; the GEMM ops take --M/--N/--K" if option == "n" else ""
            raise BadArgumentError(f"--{option.replace('_', '-')} is for --op {' or '.join(owners)}{hint}")
    for option in ("sizes", "n"):  # given but empty: refused, not read as "the default sweep"
        if given.get(option) is not None and not given[option].replace(",", "").strip():
            raise BadArgumentError(f"--{option} is empty")
    for option in ("layout", "out_dtype"):  # given but empty: refused, not read as the default (--dtype is)
        if given.get(option) is not None and not given[option].strip():
            raise BadArgumentError(f"--{option.replace('_', '-')} is empty")
    if op_name == "reduce" and any(given.get(o) is not None for o in SHAPE_OPTIONS):
        raise BadArgumentError("--M/--N/--K and --sizes are for the GEMM ops; use --n for --op reduce")
    return ShapeArgs(**given)


def names() -> list[str]:
    return list(OPS)


def of(problem) -> Op:
    """The op a problem belongs to."""
    return get(problem.op)


__all__ = ["Op", "ShapeArgs", "get", "names", "of", "shape_args"]
