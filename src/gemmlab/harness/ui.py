"""What every command shows and parses the same way: the console, the progress bar,
NAME=VALUE parameter lists and the help of the hgemm problem options."""
from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import BadArgumentError
from ..problem import is_integer_text

# Logs and pipes get wide tables instead of 80-column ones with truncated cells.
# (stdout may be None: a program started with it closed)
console = Console(width=None if sys.stdout is not None and sys.stdout.isatty() else 200)


# The hgemm problem options, as every command that takes them explains them.
DTYPE_HELP = "hgemm: input type fp16 | bf16 | tf32 (default fp16)"
# --layout: op(A) op(B) in BLAS's letters for row-major arrays (n: as the product uses it, t: given
# transposed), the names cuBLAS's own GEMM kernels and transa/transb carry; nt is x @ W.T.
LAYOUT_HELP = ("hgemm: operand layout op(A) op(B): nn (A MxK, B KxN), nt (B given as its NxK transpose: "
               "x @ W.T, F.linear's layout; read in place by persistent and tf32_wgmma), tn (A given as its KxM "
               "transpose; read in place by persistent and tf32_wgmma) or tt (both); default nn")
OUT_HELP = ("hgemm: the type of C: fp32 (default) or the input type (fp16 | bf16: fp32 accumulation and "
            "epilogue, rounded to nearest even, as torch.mm writes it; persistent and the baselines)")


def fmt_params(values: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items()) or "-"


def parse_params(text: str | None) -> dict[str, int]:
    """'BM=64,BN=128' -> {'BM': 64, 'BN': 128}; None (not given) -> {}."""
    if text is None:
        return {}
    if not text.strip():  # given, but empty: a shell variable that was not set?
        raise BadArgumentError("--params is empty: give NAME=VALUE items, or leave the option out")
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadArgumentError(f"--params item {item!r} is not NAME=VALUE")
        if key.strip() in out:  # the last would win silently
            raise BadArgumentError(f"--params names {key.strip()} twice")
        if not is_integer_text(value):
            raise BadArgumentError(f"--params {key.strip()}={value!r} is not an integer")
        out[key.strip()] = int(value)
    return out


def params_for(impls: list, params: str | None, op: Any = None) -> dict[str, dict[str, int]]:
    """--params for the one kernel in --impl, checked against its constraints before any GPU work.
    With `op`, the flags its problem sets (hgemm's DTYPE, layout and C-type flags) are refused:
    the problem's value would win over the one given, without a word."""
    values = parse_params(params)
    if not values:
        return {}
    kernels = [i for i in impls if i.kind == "kernel"]
    if len(kernels) != 1:
        raise BadArgumentError("--params needs exactly one kernel in --impl")
    flags = sorted(set(values) & op.problem_flags(kernels[0])) if op is not None else []
    if flags:
        raise BadArgumentError(f"--params {', '.join(flags)}: set by --dtype, --layout and --out-dtype, not by --params")
    kernels[0].resolve(values)  # refuse a broken configuration before any GPU work
    return {kernels[0].name: values}


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)
