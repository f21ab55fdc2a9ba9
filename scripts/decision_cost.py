"""What the dispatch's decision costs at a shape's first call: `core.decide` for GEMMs whose M is
new at every call (x @ W, an LLM's projection with a changing token count), against a shipped
dispatch table, on any machine (no GPU needed: the table and the GPU are named).

    PYTHONPATH=src python3 scripts/decision_cost.py [--op hgemm] [--dtype bf16] [--out-dtype bf16]
        [--gpu "NVIDIA H100 80GB HBM3"] [--arch sm_90] [--N 4096] [--K 4096] [--shapes 400] [--repeat 7]
        [--first-m 8] [--instructions]

--instructions counts instead of timing: the process runs twice under valgrind's callgrind, deciding
no shape and then --shapes of them after the same warm-up, with address randomisation off and
PYTHONHASHSEED=0, and the difference is given per decision. A host whose clock drifts by 40% between
runs repeated this within about 6% (session 40), but not always: in session 41 three runs of one
tree at --shapes 100 read 0.96, 1.02 and 1.25 million, and at --shapes 300 within 6% again. Give
300 shapes and alternate the two versions' runs; a difference under about 10% needs several pairs.

Each repeat decides --shapes values of M not decided before in the process (repeat r takes
M = 8 + r * shapes, ...), so every decision refits its candidates at a new shape, as a program's
first call of that shape does; the best repeat is reported, as the host's speed varies. On a
machine without a GPU the kernels' models would ask the driver for the SM count at every
candidate and fail; the count is taken as 132 instead, the H100's and H200's, as a GPU machine
has it (specs.sm_count keeps the GPU's count once read). Session 39 measured 336 us a shape for
bf16 this way; session 40, after its changes to the refit, 176-195 us on an H200 machine
(docs/api.md, "The decision")."""
from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="hgemm", choices=["sgemm", "hgemm"])
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "tf32", "fp16", "bf16"])
    ap.add_argument("--out-dtype", default=None, help="C's type (default: fp32 for sgemm, the input type for hgemm)")
    ap.add_argument("--gpu", default="NVIDIA H100 80GB HBM3")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--N", type=int, default=4096)
    ap.add_argument("--K", type=int, default=4096)
    ap.add_argument("--shapes", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--first-m", type=int, default=8, help="the first M decided (M = first-m, first-m + 1, ...)")
    ap.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead of timing")
    ap.add_argument("--decide-only", type=int, default=None, help=argparse.SUPPRESS)  # --instructions' own runs
    args = ap.parse_args()
    if min(args.N, args.K, args.shapes, args.repeat, args.first_m) < 1:
        ap.error("--N, --K, --shapes, --repeat and --first-m must be at least 1")
    if (args.op == "sgemm") != (args.dtype == "fp32"):
        ap.error(f"--op {args.op} takes {'fp32' if args.op == 'sgemm' else 'tf32, fp16 or bf16'}, not {args.dtype}")
    out = args.out_dtype or ("fp32" if args.op == "sgemm" else args.dtype)
    if args.instructions:
        print(count_instructions(ap, args, out))
        return

    from gemmlab.api import core
    from gemmlab.cuda.device import gpu_available
    from gemmlab.kernels.hgemm import specs as hgemm_specs
    from gemmlab.kernels.sgemm import specs as sgemm_specs

    if not gpu_available()[0]:  # as a GPU machine has it, cached (the docstring)
        sgemm_specs.sm_count = hgemm_specs.sm_count = lambda: 132

    def decide(m: int):
        problem = core.make_problem(args.op, args.dtype, (m, args.N, args.K), (False, False), out)
        return core.decide(args.op, problem, (m, args.N, args.K), None, None, args.gpu, args.arch)[0]

    source = decide(7).source or "no table: the fallback"  # the table read, the entries remembered
    decide(args.first_m + (args.repeat + 1) * args.shapes)  # the entry the range ends near read too
    if args.decide_only is not None:
        for m in range(args.first_m, args.first_m + args.decide_only):
            decide(m)
        return
    best = float("inf")
    for r in range(args.repeat):
        Ms = range(args.first_m + r * args.shapes, args.first_m + (r + 1) * args.shapes)
        start = time.perf_counter()
        for m in Ms:
            decide(m)
        best = min(best, (time.perf_counter() - start) / args.shapes)
    print(f"{args.op} {args.dtype}, C {out}, x (M x {args.K}) @ W ({args.K} x {args.N}), {args.gpu} ({source}): "
          f"{best * 1e6:.0f} us a decision at a new M (best of {args.repeat} x {args.shapes})")


def count_instructions(ap, args, out: str) -> str:
    """Instructions a decision: callgrind's count for --shapes decisions less its count for none."""
    import os
    import platform
    import re
    import shutil
    import subprocess
    import sys

    if shutil.which("valgrind") is None:
        ap.error("--instructions needs valgrind (callgrind) on the PATH")
    fixed = ["setarch", platform.machine(), "-R"] if shutil.which("setarch") else []
    own = [a for a in sys.argv[1:] if a != "--instructions"]
    env = dict(os.environ, PYTHONHASHSEED="0")

    def collected(decisions: int) -> int:
        cmd = fixed + ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                       os.path.abspath(__file__), *own, "--decide-only", str(decisions)]
        run = subprocess.run(cmd, capture_output=True, text=True, env=env)
        found = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or found is None:
            tail = (run.stderr.strip().splitlines() or ["no output"])[-1]
            ap.error(f"the run under valgrind failed (exit {run.returncode}): {tail}")
        return int(found.group(1))

    per = (collected(args.shapes) - collected(0)) / args.shapes
    return (f"{args.op} {args.dtype}, C {out}, x (M x {args.K}) @ W ({args.K} x {args.N}), {args.gpu}: "
            f"{per / 1e6:.2f} million instructions a decision at a new M ({args.shapes} from M = {args.first_m}, callgrind)")


if __name__ == "__main__":
    import sys

    from gemmlab.errors import run_script

    sys.exit(run_script(main))
