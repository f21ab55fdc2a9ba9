"""Run one hgemm kernel a few times on one shape, for Nsight Compute to profile (the
`gemmlab profile` command covers sgemm and reduce; this is its hgemm stand-in).

    ncu --clock-control none -k regex:hgemm_ --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats \\
        python scripts/profile_hgemm.py persistent bf16 4096 CM=2
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from gemmlab import registry
    from gemmlab.cuda.device import device
    from gemmlab.ops.hgemm import OP
    from gemmlab.ops.hgemm import HgemmRunner
    from gemmlab.problem import GemmProblem

    name, dtype, size = argv[0], argv[1], int(argv[2])
    params = dict(kv.split("=") for kv in argv[3:])
    problem = GemmProblem(size, size, size, dtype=dtype)
    runner = HgemmRunner(registry.get(name, "hgemm"), {k: int(v) for k, v in params.items()}, dtype)
    A, B, C = OP.timing_inputs(problem, 1)
    stream = device().create_stream()
    for _ in range(4):
        runner.enqueue(problem, A, B, C, stream)
    stream.sync()
    print(f"ran {name} {dtype} {size}^3 {runner.params}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
