"""Run every SGEMM (or bgemm) kernel once on odd shapes, for compute-sanitizer to watch.

    compute-sanitizer --tool memcheck --error-exitcode 1 python scripts/sanitize_kernels.py [names]
    compute-sanitizer --tool memcheck --error-exitcode 1 python scripts/sanitize_kernels.py --op bgemm

Shapes are small and deliberately awkward (primes, K = 1, not multiples of any tile) so
the edge predicates and the scalar fallbacks run; beta = 0 and beta != 0 both run.
Exits 1 if a result is wrong, so a silent out-of-bounds read that corrupts output also fails.
"""
from __future__ import annotations

import argparse
import sys

from gemmlab import registry
from gemmlab.errors import run_script
from gemmlab.harness.bench import verify_sweep
from gemmlab.problem import BatchedGemmProblem, GemmProblem

SHAPES = ((67, 131, 37, 1.0, 0.0), (33, 65, 1, 1.5, -0.5), (129, 127, 70, 0.5, 2.0))
# Modes a kernel's defaults do not run, on the shapes above plus aligned ones (float4 paths):
# stream-K's partial tiles, flags and fix-up sums; rung 15's tensor copies (aligned rows only: the
# shapes above take its element-wise path) and its split-K planes.
EXTRA_MODES = {"bigtile": ({"STREAMK": 1}, {"STREAMK": 2}), "tma_ffma": ({}, {"SPLITK": 3})}
# (2304x4096: 288 tiles, so the hybrid runs a data-parallel wave before its stream-K part.)
EXTRA_SHAPES = ((256, 512, 1032, 1.0, 0.0), (300, 260, 2000, -1.0, 0.5), (2304, 4096, 24, 1.0, 0.0))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="?", default="all", help="kernels, comma-separated (default all)")
    ap.add_argument("--op", default="sgemm", choices=("sgemm", "bgemm"))
    args = ap.parse_args(argv)
    op = args.op
    impls = registry.select(args.names, op=op, with_baselines=False)
    if op == "bgemm":  # three batches: the batch offsets break 16-byte alignment where K, N are odd
        problems = [BatchedGemmProblem(M, N, K, a, b, batch=3) for M, N, K, a, b in SHAPES]
    else:
        problems = [GemmProblem(M, N, K, a, b) for M, N, K, a, b in SHAPES]
    results = verify_sweep(impls, problems)
    for impl in impls:
        for params in EXTRA_MODES.get(impl.name, ()) if op == "sgemm" else ():
            extra = problems + [GemmProblem(M, N, K, a, b) for M, N, K, a, b in EXTRA_SHAPES]
            results += verify_sweep([impl], extra, params={impl.name: params})
    failed = 0
    for r in results:
        shown = ",".join(f"{k}={v}" for k, v in r.params.items() if k.startswith("STREAM") or k == "SPLITK" and v)
        print(f"{r.impl:20s} {r.problem.shape:14s} {shown:10s} {r.status} {r.reason}", flush=True)
        failed += r.status != "PASS"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_script(main, sys.argv[1:]))
