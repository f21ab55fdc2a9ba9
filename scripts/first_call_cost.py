"""Where a new shape's first call spends its host time: bf16 x (M x K) @ W (K x N) on torch tensors,
M new at every call, each piece of gemmlab's first call timed by wrapping it (the decision, its
refit, the executor, cuBLASLt's preparation, heuristic and first call, the output), and Python's
garbage collections timed through gc.callbacks; then the same shapes a second time, and torch.mm
at as many shapes of its own.

    PYTHONPATH=src python3 scripts/first_call_cost.py [--first-m 1800] [--shapes 300] [--N 4096] [--K 4096]

Totals are per call, over --shapes calls; a piece's time includes the pieces it calls, and not the
garbage collections that ran inside it, which are given apart. A full collection (generation 2)
takes about 100 ms with torch loaded and falls inside whichever piece allocated when it came: timed
with it, the decision read 500-700 us where it took 130-170 (session 40, which found one full
collection every 300 first calls, 280-390 us a call averaged over them). The host's speed drifts
between processes; compare two versions of the code in alternating processes.
"""
from __future__ import annotations

import argparse
import collections
import gc
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--first-m", type=int, default=1800, help="the first M (M = first-m, first-m + 1, ...)")
    ap.add_argument("--shapes", type=int, default=300)
    ap.add_argument("--N", type=int, default=4096)
    ap.add_argument("--K", type=int, default=4096)
    args = ap.parse_args()
    if min(args.first_m, args.shapes, args.N, args.K) < 1:
        ap.error("--first-m, --shapes, --N and --K must be at least 1")

    from gemmlab.cuda.device import gpu_available

    ok, why = gpu_available()
    if not ok:
        ap.error(f"needs a GPU: {why}")
    import torch

    import gemmlab
    from gemmlab.api import calls, core, dispatch
    from gemmlab.cuda import cublaslt

    dtype = torch.bfloat16
    last = args.first_m + 2 * args.shapes
    W = torch.randn(args.K, args.N, device="cuda", dtype=dtype)
    X = torch.randn(last, args.K, device="cuda", dtype=dtype)

    def ours(x):
        return gemmlab.hgemm(x, W, out_dtype="bf16")  # a bf16 C, as torch.mm gives

    for m in (1024, 7, 100):  # the libraries loaded and the table read: not what a new shape costs
        for _ in range(3):
            ours(X[:m])
    torch.cuda.synchronize()

    spent, count = collections.Counter(), collections.Counter()
    running: list[str] = []  # the wrapped pieces under way, outermost first

    def wrap(owner, name: str, label: str) -> None:
        fn = getattr(owner, name)

        def timed(*a, **k):
            running.append(label)
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[label] += time.perf_counter() - start
                count[label] += 1
                running.pop()

        setattr(owner, name, timed)

    wrap(calls, "_torch_first", "a first call (calls._torch_first)")
    wrap(core, "new_executor", "the executor (core.new_executor)")
    wrap(core, "decide", "the decision (core.decide)")
    wrap(dispatch, "refit", "its refit (dispatch.refit)")
    wrap(cublaslt.PreparedLtGemm, "__init__", "cuBLASLt's preparation (PreparedLtGemm)")
    wrap(cublaslt, "_heuristic", "cuBLASLt's heuristic")
    wrap(cublaslt.PreparedLtGemm, "__call__", "cublasLtMatmul, direct")
    wrap(calls, "new_torch_output", "the output (new_torch_output)")
    began = [0.0]

    def collected(phase: str, info: dict) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            took = time.perf_counter() - began[0]
            label = f"garbage collection, generation {info['generation']}"
            spent[label] += took
            count[label] += 1
            for piece in running:  # a piece is timed without the collections that fell inside it
                spent[piece] -= took

    gc.callbacks.append(collected)
    Ms = range(args.first_m, args.first_m + args.shapes)
    try:
        for name in ("first", "second"):
            spent.clear()
            count.clear()
            torch.cuda.synchronize()
            start = time.perf_counter()
            for m in Ms:
                ours(X[:m])
            host = time.perf_counter() - start
            torch.cuda.synchronize()
            print(f"gemmlab.hgemm, {name} call of {len(Ms)} shapes (M {Ms[0]}..{Ms[-1]}): {host / len(Ms) * 1e6:.1f} us a call (host)")
            for label, seconds in spent.most_common():
                print(f"    {label:48s} {seconds / len(Ms) * 1e6:8.1f} us a call ({count[label]} times)")
    finally:
        gc.callbacks.remove(collected)
    theirs = range(args.first_m + args.shapes, last)  # shapes torch.mm has not seen either
    start = time.perf_counter()
    for m in theirs:
        torch.mm(X[:m], W)
    print(f"torch.mm, first call of {len(theirs)} shapes (M {theirs[0]}..{theirs[-1]}): "
          f"{(time.perf_counter() - start) / len(theirs) * 1e6:.1f} us a call (host)")
    torch.cuda.synchronize()


if __name__ == "__main__":
    import sys

    from gemmlab.errors import run_script

    sys.exit(run_script(main))
