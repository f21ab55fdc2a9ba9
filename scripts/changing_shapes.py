"""What a program whose shapes change pays per call: x @ W.T with W stored N x K (an LLM's projection)
and M, the token count, changing at every call. Host time (the loop's own, no sync per call)
and wall time per call, for M never seen, seen once, and cycled past the thread's 512-entry
caches, gemmlab beside torch.mm in the same process; then the memory CuPy's pool holds for
gemmlab's executors (cuBLASLt's workspaces).

    PYTHONPATH=src python3 scripts/changing_shapes.py [bf16|fp32] [--K 4096] [--N 4096] [--layout nt|nn]

--layout nn multiplies by W stored K x N (x @ W): row-major operands, which the dispatch table
decides for at each new shape; nt (the default, x @ W.T) goes to cuBLAS without a decision.

Session 37 (docs/api.md, "Programs whose shapes change") ran it on an H200 with the tree before
and after that session's changes."""
from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dtype", nargs="?", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--K", type=int, default=4096)
    ap.add_argument("--N", type=int, default=4096)
    ap.add_argument("--layout", default="nt", choices=["nt", "nn"])
    args = ap.parse_args()
    if args.K < 1 or args.N < 1:
        ap.error(f"--K and --N must be at least 1, not {args.K} and {args.N}")
    import cupy  # after the arguments: --help needs no GPU stack
    import torch

    import gemmlab
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    stored = torch.randn(args.N, args.K, device="cuda", dtype=dtype)
    W = stored.T if args.layout == "nt" else stored.reshape(args.K, args.N)  # the operand: K x N either way
    X = torch.randn(2048, args.K, device="cuda", dtype=dtype)
    if dtype == torch.float32:
        def ours(x):
            return gemmlab.sgemm(x, W)
    else:
        def ours(x):
            return gemmlab.hgemm(x, W, out_dtype=dtype)  # bf16 out, as torch.mm gives

    def theirs(x):
        return torch.mm(x, W)

    for f in (ours, theirs):  # imports, handles, the dispatched kernels compiled
        for m in (1024, 7, 100):
            f(X[:m])
    torch.cuda.synchronize()

    def row(name, f, Ms):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for m in Ms:
            f(X[:m])
        host = time.perf_counter() - start
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
        n = len(Ms)
        print(f"{name:46s} host {host / n * 1e6:8.1f} us/call  wall {wall / n * 1e6:8.1f} us/call  ({n} calls)",
              flush=True)

    what = "W.T" if args.layout == "nt" else "W"
    print(f"{args.dtype}, layout {args.layout}: x (M x {args.K}) @ {what} ({args.K} x {args.N}), M changing at every call")
    small, large = list(range(8, 408)), list(range(408, 1208))
    row("torch.mm, M 8..407 first time", theirs, small)
    row("torch.mm, M 8..407 again", theirs, small)
    row("gemmlab, M 8..407 first time", ours, small)
    row("gemmlab, M 8..407 again", ours, small)
    row("torch.mm, M 408..1207 first time", theirs, large)
    row("gemmlab, M 408..1207 first time", ours, large)
    row("gemmlab, M 408..1207 again (past 512 shapes)", ours, large)
    row("torch.mm, M 408..1207 again", theirs, large)
    row("torch.mm, M 256 400 times", theirs, [256] * 400)
    row("gemmlab, M 256 400 times", ours, [256] * 400)
    print(f"CuPy's pool in use: {cupy.get_default_memory_pool().used_bytes() / 2**20:.0f} MiB (gemmlab's "
          f"executors' workspaces); torch's allocator: {torch.cuda.memory_allocated() / 2**20:.0f} MiB")


if __name__ == "__main__":
    import sys

    from gemmlab.errors import run_script

    sys.exit(run_script(main))
