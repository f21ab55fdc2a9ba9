"""The body of `gemmlab bench --api`: parse the selection, run apibench, print and write the tables."""
from __future__ import annotations

from pathlib import Path

from .errors import BadArgumentError

KINDS = {"sgemm": ("sgemm torch", "sgemm cupy"),
         "hgemm": ("hgemm torch bf16", "hgemm torch bf16 out", "hgemm cupy fp16"),
         "reduce": ("reduce torch", "reduce cupy")}


def bench_api(selection: str, sizes: str | None, n: str | None, markdown: Path | None) -> None:
    from . import apibench
    from .harness.session import command_line
    from .harness.ui import console
    from .ops.reduce import parse_sizes
    from .problem import parse_shape

    names = list(KINDS) if selection.strip() == "all" else [s.strip() for s in selection.split(",") if s.strip()]
    unknown = [s for s in names if s not in KINDS]
    if unknown or not names:
        raise BadArgumentError(f"--api {selection!r}: choose all, or some of {', '.join(KINDS)}")
    kinds = tuple(k for name in names for k in KINDS[name])
    gemm_sizes = apibench.DEFAULT_GEMM_SIZES
    if sizes:
        gemm_sizes = tuple(parse_shape(s.strip()) for s in sizes.split(",") if s.strip())
    sum_sizes = tuple(parse_sizes(n, apibench.DEFAULT_SUM_SIZES)) if n else apibench.DEFAULT_SUM_SIZES

    def show(row):
        bench = f"  bench {row.bench_figure:,.1f}" if row.bench_figure else ""
        console.print(f"{row.case:20} {row.shape:>15}  {row.call:36} {row.impl:>16}  {row.host_us:8.1f} us/call  "
                      f"{row.figure:10,.1f} {row.unit}{bench}  {row.clocks} MHz")

    rows = apibench.run(kinds, gemm_sizes, sum_sizes, on_row=show)
    text = apibench.to_markdown(rows, command_line())
    if markdown is not None:
        markdown.write_text(text + "\n")
        console.print(f"wrote {markdown}")
