"""What a program whose shapes change pays per call: x @ W.T with W stored N x K (an LLM's projection)
and M, the token count, changing at every call. Host time (the loop's own, no sync per call)
and wall time per call, for M never seen, seen once, and seen again, gemmlab beside torch.mm in
the same process; then the memory CuPy's pool holds for gemmlab's executors (cuBLASLt's and the
kernels' workspaces).

    PYTHONPATH=src python3 scripts/changing_shapes.py [bf16|fp32] [--K 4096] [--N 4096] [--layout nt|nn]
        [--cycle SHAPES [--passes 5]] [--executors N] [--graphs N]

--layout nn multiplies by W stored K x N (x @ W): row-major operands, which the dispatch table
decides for at each new shape; nt (the default, x @ W.T) goes to cuBLAS without a decision.

--cycle SHAPES instead calls SHAPES values of M (8, 9, ...) in turn, --passes times, and reports
each pass (the first builds the executors, the third captures the cuBLAS replays), then what the
run added: host memory (RSS), device memory, CuPy's pool, the live captured graphs and the
executors kept, by path. --executors and --graphs set the bounds for the run
(core.MAX_EXECUTORS per thread, graph_replay.GRAPHS_LIMIT per process) to compare others.

Session 37 (docs/api.md, "Programs whose shapes change") ran it on an H200 with the tree before
and after that session's changes; session 39 sized the bounds with --cycle 2000."""
from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dtype", nargs="?", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--K", type=int, default=4096)
    ap.add_argument("--N", type=int, default=4096)
    ap.add_argument("--layout", default="nt", choices=["nt", "nn"])
    ap.add_argument("--cycle", type=int, default=0, metavar="SHAPES")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--executors", type=int, default=0, metavar="N")
    ap.add_argument("--graphs", type=int, default=0, metavar="N")
    args = ap.parse_args()
    if args.K < 1 or args.N < 1:
        ap.error(f"--K and --N must be at least 1, not {args.K} and {args.N}")
    if min(args.cycle, args.executors, args.graphs) < 0 or args.passes < 1:
        ap.error("--cycle, --executors and --graphs must be at least 0, --passes at least 1")
    import cupy  # after the arguments: --help needs no GPU stack
    import torch

    import gemmlab
    from gemmlab.api import core
    from gemmlab.cuda import graph_replay

    if args.executors:
        core.MAX_EXECUTORS = args.executors
    if args.graphs:
        graph_replay.GRAPHS_LIMIT = args.graphs
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    stored = torch.randn(args.N, args.K, device="cuda", dtype=dtype)
    W = stored.T if args.layout == "nt" else stored.reshape(args.K, args.N)  # the operand: K x N either way
    X = torch.randn(max(2048, 8 + args.cycle), args.K, device="cuda", dtype=dtype)
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
    print(f"{args.dtype}, layout {args.layout}: x (M x {args.K}) @ {what} ({args.K} x {args.N}), M changing at every call;"
          f" bounds: {core.MAX_EXECUTORS} executors a thread, {graph_replay.GRAPHS_LIMIT} captured graphs")
    if args.cycle:
        return cycle(args, ours, theirs, row)
    small, large = list(range(8, 408)), list(range(408, 1208))
    seen = len(set(small) | set(large)) + 3  # and the warm-up's
    bound = ("past" if seen > core.MAX_EXECUTORS else "within") + f" the {core.MAX_EXECUTORS}-executor bound"
    row("torch.mm, M 8..407 first time", theirs, small)
    row("torch.mm, M 8..407 again", theirs, small)
    row("gemmlab, M 8..407 first time", ours, small)
    row("gemmlab, M 8..407 again", ours, small)
    row("torch.mm, M 408..1207 first time", theirs, large)
    row("gemmlab, M 408..1207 first time", ours, large)
    row(f"gemmlab, M 408..1207 again ({bound})", ours, large)
    row("torch.mm, M 408..1207 again", theirs, large)
    row("torch.mm, M 256 400 times", theirs, [256] * 400)
    row("gemmlab, M 256 400 times", ours, [256] * 400)
    print(f"CuPy's pool in use: {cupy.get_default_memory_pool().used_bytes() / 2**20:.0f} MiB (gemmlab's "
          f"executors' workspaces); torch's allocator: {torch.cuda.memory_allocated() / 2**20:.0f} MiB")


def cycle(args, ours, theirs, row) -> None:
    """--cycle: args.cycle values of M called in turn, args.passes times; what the run added."""
    from collections import Counter

    import cupy
    import torch

    from gemmlab.api import core
    from gemmlab.cuda import graph_replay

    def rss_mib() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20

    Ms = list(range(8, 8 + args.cycle))
    torch.cuda.synchronize()
    free0, rss0 = torch.cuda.mem_get_info()[0], rss_mib()
    for n in range(1, args.passes + 1):
        row(f"gemmlab, {args.cycle} shapes, pass {n}", ours, Ms)
    torch.cuda.synchronize()
    free1, rss1 = torch.cuda.mem_get_info()[0], rss_mib()
    kept = core._thread.executors
    each = max(1, len(kept))
    paths = Counter(f"{getattr(ex, 'path', '?')}/{getattr(ex, 'name', '?')}" for ex in kept.values())
    print(f"added by the passes: host {rss1 - rss0:.0f} MiB ({(rss1 - rss0) / each * 1024:.0f} KiB an executor), "
          f"device {(free0 - free1) / 2**20:.0f} MiB; CuPy's pool {cupy.get_default_memory_pool().total_bytes() / 2**20:.0f} MiB; "
          f"{graph_replay.live_graphs()} captured graphs live; {len(kept)} executors kept: {dict(paths)}")
    for n in (1, 2):
        row(f"torch.mm, {args.cycle} shapes, pass {n}", theirs, Ms)


if __name__ == "__main__":
    import sys

    from gemmlab.errors import run_script

    sys.exit(run_script(main))
