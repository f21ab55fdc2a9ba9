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


def names() -> list[str]:
    return list(OPS)


def of(problem) -> Op:
    """The op a problem belongs to."""
    return get(problem.op)


__all__ = ["Op", "ShapeArgs", "get", "names", "of"]
