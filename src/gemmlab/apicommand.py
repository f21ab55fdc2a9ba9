"""The body of `gemmlab bench --api`: parse the selection, run apibench, print and write the tables."""
from __future__ import annotations

from pathlib import Path

from .errors import BadArgumentError, GemmlabError
from .outputs import output_file

KINDS = {"sgemm": ("sgemm torch", "sgemm cupy"),
         "hgemm": ("hgemm torch bf16", "hgemm torch bf16 out", "hgemm cupy fp16"),
         "reduce": ("reduce torch", "reduce cupy")}


def bench_api(selection: str, sizes: str | None, n: str | None, markdown: Path | None) -> None:
    from . import apibench
    from .apitargets import summary
    from .harness.session import command_line
    from .harness.ui import console
    from .ops.reduce import parse_sizes
    from .problem import comma_items, parse_shape

    markdown = output_file(markdown, "--markdown")
    names = list(KINDS) if selection.strip() == "all" else comma_items(selection, "--api")
    unknown = [s for s in names if s not in KINDS]
    if unknown:
        raise BadArgumentError(f"--api {selection!r}: choose all, or some of {', '.join(KINDS)}")
    kinds = tuple(k for name in names for k in KINDS[name])
    for option, given, takes in (("--sizes", sizes, ("sgemm", "hgemm")), ("--n", n, ("reduce",))):
        if given is not None and not set(takes) & set(names):  # else silently unused
            raise BadArgumentError(f"{option} sizes the {' or '.join(takes)} calls, and --api {selection!r} times none")
    gemm_sizes = apibench.DEFAULT_GEMM_SIZES
    if sizes is not None:
        gemm_sizes = tuple(parse_shape(s) for s in comma_items(sizes, "--sizes"))
    sum_sizes = tuple(parse_sizes(n, apibench.DEFAULT_SUM_SIZES)) if n is not None else apibench.DEFAULT_SUM_SIZES
    try:  # the references it times against
        import torch  # noqa: F401
    except ImportError:
        raise GemmlabError("gemmlab bench --api needs torch (it times torch.mm, torch.sum and CuPy beside "
                           "gemmlab's calls): pip install torch") from None
    from .cuda.device import device

    device()  # no GPU: one line, before anything runs

    rows = apibench.run(kinds, gemm_sizes, sum_sizes, on_row=lambda row: console.print(apibench.live_line(row)))
    targets = "\n".join(summary(rows)).rstrip("\n")
    console.print(targets, markup=False, highlight=False)
    text = apibench.to_markdown(rows, command_line()) + "\n" + targets
    if markdown is not None:  # its folder made again: another command, refused, may have removed it while empty
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(text + "\n")
        console.print(f"wrote {markdown}")
