"""The ops, each described as data for the harness (see ops/base.py), in one module each:
sgemm.py, hgemm.py, bgemm.py, reduce.py (with their checks, libraries and launch helpers beside
them). Importing this package registers every op's kernels and baselines."""
from __future__ import annotations

from . import bgemm, hgemm, reduce, sgemm
from .base import Op, Registry, ShapeArgs

OPS = Registry()
for _module in (sgemm, hgemm, bgemm, reduce):
    OPS.add(_module.OP)


def get(name: str) -> Op:
    """The op called `name`; an unknown name is a BadArgumentError naming the known ones."""
    return OPS.get(name)


def names() -> list[str]:
    return list(OPS.ops)


def of(problem) -> Op:
    """The op a problem belongs to."""
    return OPS.get(problem.op)


__all__ = ["Op", "ShapeArgs", "get", "names", "of"]
