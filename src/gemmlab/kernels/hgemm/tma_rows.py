"""TMA's row rule, written once: a tensor map describes a 2-D array by its row pitch, which must be
a multiple of 16 bytes (cuTensorMapEncodeTiled's global strides). The specs' in-place rules for a
transposed A or B, the launch's padded copies (ops/hgemm_tma.py) and the API's choice between the
caller's arrays and copies (api/tma_executors.py) all ask here.
"""
from __future__ import annotations

from ...problem import GemmProblem

ROW_ALIGN = 16  # bytes


def tma_row(elements: int, itemsize: int) -> bool:
    """Whether TMA can describe a row of `elements` items of `itemsize` bytes as it lies."""
    return (elements * itemsize) % ROW_ALIGN == 0


def padded_row(elements: int, itemsize: int) -> int:
    """The width of a padded copy of such a row: `elements` rounded up to a 16-byte multiple."""
    per = ROW_ALIGN // itemsize
    return -(-elements // per) * per


def row_rule(p: GemmProblem, dim: str, itemsize: int) -> str:
    """"" when rows of p's `dim` ("M", "N" or "K") elements of `itemsize` bytes suit TMA, else the
    rule and how p breaks it: 'K % 8 == 0 (TMA: its row pitch, 2 * K bytes, must be a multiple of
    16); 64x64x4097 has K = 4097'."""
    elements = getattr(p, dim)
    if tma_row(elements, itemsize):
        return ""
    return (f"{dim} % {ROW_ALIGN // itemsize} == 0 (TMA: its row pitch, {itemsize} * {dim} bytes, must be a "
            f"multiple of {ROW_ALIGN}); {p.shape} has {dim} = {elements}")
