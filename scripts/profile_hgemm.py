"""Run one hgemm kernel a few times on one shape, for an ncu command line of your own.

`gemmlab profile --op hgemm` runs its own target, verifies the kernel first and stores its
metrics; this is for ad-hoc sections and metrics, as below.

    ncu --clock-control none -k regex:hgemm_ --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats \\
        python scripts/profile_hgemm.py persistent bf16 4096 CM=2
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="an hgemm kernel (persistent, tf32_wgmma, ...)")
    ap.add_argument("dtype", choices=("fp16", "bf16", "tf32"))
    ap.add_argument("size", type=int, help="M = N = K")
    ap.add_argument("params", nargs="*", metavar="NAME=VALUE", help="template parameters")
    args = ap.parse_args(argv)
    try:
        params = {k: int(v) for k, v in (kv.split("=") for kv in args.params)}
    except ValueError:  # no "=", two of them, or a value int() refuses
        ap.error("parameters are NAME=INTEGER")
    from gemmlab import registry
    from gemmlab.cuda.device import device
    from gemmlab.ops.hgemm import OP
    from gemmlab.ops.hgemm import HgemmRunner
    from gemmlab.problem import GemmProblem

    name, dtype, size = args.name, args.dtype, args.size
    problem = GemmProblem(size, size, size, dtype=dtype)
    runner = HgemmRunner(registry.get(name, "hgemm"), params, dtype)
    A, B, C = OP.timing_inputs(problem, 1)
    stream = device().create_stream()
    for _ in range(4):
        runner.enqueue(problem, A, B, C, stream)
    stream.sync()
    print(f"ran {name} {dtype} {size}^3 {runner.params}")
    return 0


if __name__ == "__main__":
    from gemmlab.errors import run_script

    sys.exit(run_script(main, sys.argv[1:]))
