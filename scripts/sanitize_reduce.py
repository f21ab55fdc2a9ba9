"""Run every reduce kernel on awkward sizes and alignments, for compute-sanitizer to watch.

    compute-sanitizer --tool memcheck --error-exitcode 1 python scripts/sanitize_reduce.py [names]
    compute-sanitizer --tool racecheck --racecheck-report all python scripts/sanitize_reduce.py

The data is made by NumPy on the host and copied over, and the references are computed on
the host, so almost every kernel the sanitizer sees is a gemmlab kernel (plus CuPy's fills
that poison the outputs). Sizes cover one element, a warp +- 1, a block +- 1, tails of 1-3
elements after the float4 body, and multi-pass plans; the grid-stride rungs also run on views
that start 4, 8 and 12 bytes past a 16-byte boundary (head and tail paths). Exits 1 if any
result is wrong, so an out-of-bounds read that corrupts a sum also fails.
"""
from __future__ import annotations

import argparse
import sys

SIZES = (1, 3, 33, 1000, 1025, 4097, 65537)
MISALIGNED_SIZES = (1, 2, 5, 4099)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="?", default="all", help="kernels, comma-separated (default all)")
    args = ap.parse_args(argv)
    import cupy as cp
    import numpy as np

    from gemmlab import registry
    from gemmlab.cuda.device import device
    from gemmlab.kernels.reduce.specs import CONTIGUOUS
    from gemmlab.harness.bench import verify_sweep
    from gemmlab.ops.reduce_passes import ReduceRunner, value_of
    from gemmlab.ops.reduce_check import check_sum, make_input, reference

    impls = registry.select(args.names, op="reduce", with_baselines=False)
    failed = 0
    for r in verify_sweep(impls, SIZES, host_data=True, special=False):
        print(f"{r.impl:18s} n={r.problem.n:<8d} {r.status} {r.reason}", flush=True)
        failed += r.status != "PASS"
    stream = device().create_stream()
    for impl in impls:
        if CONTIGUOUS in impl.tags:  # scalar loads only: alignment cannot matter
            continue
        runner = ReduceRunner(impl)
        for n in MISALIGNED_SIZES:
            for skip in (1, 2, 3):
                host = make_input(n + skip, n + skip, "integers", xp=np)
                buf = cp.asarray(host)
                x = buf[skip:]
                cp.cuda.get_current_stream().synchronize()  # the copy ran on CuPy's stream
                runner.prepare(n)
                runner.poison()
                result = runner.enqueue(x, stream)
                stream.sync()  # the kernel ran on ours: wait before reading the result
                value = value_of(result)
                ref, abs_sum = reference(host[skip:])
                v = check_sum(value, ref, abs_sum, n, exact=True)
                print(f"{impl.name:18s} n={n:<8d} +{4 * skip}B {'PASS' if v.passed else 'FAIL'} {v.reason}", flush=True)
                failed += not v.passed
    return 1 if failed else 0


if __name__ == "__main__":
    from gemmlab.errors import run_script

    sys.exit(run_script(main, sys.argv[1:]))
