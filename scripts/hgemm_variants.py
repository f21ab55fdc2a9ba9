"""Time rung 5 (persistent; rung 6 for --dtype tf32) under several tile / cluster / split-K choices beside cuBLAS, one
table row per shape, each figure a share of cuBLAS in the same run (gemmlab's bench harness:
verified first, cold L2, median of 10). What docs/tensor-cores.md's split-K re-measurement and
the choice of dispatch candidates rest on.

    PYTHONPATH=src python3 scripts/hgemm_variants.py --dtype bf16 \\
        --sizes 512x512x8192,1024,1000x3000x2000 --bn 64,128,256 --cm 1,2 --cn 1,2 --splitk 1,0 --tailk 1,0
    PYTHONPATH=src python3 scripts/hgemm_variants.py --dtype bf16 --sizes 1024x1024x1024,1024x1024x4096 \
        --bn 64,128 --cm 1 --splitk 1 --stages 8 --rows 128x2,128x1,64x1 --times

--rows picks the tile rows and consumer warpgroups of rung 5 (BMxCONSUMERS: 128x2, the default, two
consumers of 64 rows; 128x1 one consumer for both 64-row blocks; 64x1 64-row tiles). --times prints
each median in microseconds instead of the share of cuBLAS (fixed cost against cost per K tile,
from a K sweep).

Combinations the spec refuses (e.g. STAGES that overflow shared memory) are left out.
"""
from __future__ import annotations

import argparse
import itertools


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--sizes", default="512x512x8192,1024,1000x3000x2000,3072,128x4096x4096,2048,4097")
    ap.add_argument("--bn", default="128,256")
    ap.add_argument("--cm", default="1,2")
    ap.add_argument("--cn", default="1", help="CTAs per cluster along N (2: A multicast)")
    ap.add_argument("--splitk", default="1,0")
    ap.add_argument("--tailk", default="0", help="K slices of a partial last wave's tiles (0 automatic, 1 whole)")
    ap.add_argument("--stages", default="4")
    ap.add_argument("--layout", default="nn", help="nn, nt, tn or tt (tf32: nn or nt)")
    ap.add_argument("--rows", default="128x2", help="BMxCONSUMERS of rung 5: 128x2, 128x1, 64x1")
    ap.add_argument("--times", action="store_true", help="median microseconds, not shares of cuBLAS")
    args = ap.parse_args()

    from gemmlab import registry
    import gemmlab.ops.hgemm  # noqa: F401  (registers the hgemm ladder and cuBLAS)
    from gemmlab.harness.bench import BenchOptions, run_bench
    from gemmlab.problem import GemmProblem, parse_shape

    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    rows = [tuple(int(x) for x in r.split("x")) for r in args.rows.split(",")]
    grid = itertools.product(rows, ints(args.bn), ints(args.cm), ints(args.cn), ints(args.splitk), ints(args.tailk),
                             ints(args.stages))
    base = registry.get("tf32_wgmma" if args.dtype == "tf32" else "persistent", "hgemm")
    variants = []
    for (bm, wg), bn, cm, cn, sk, tk, st in grid:
        values = dict(BN=bn, CM=cm, CN=cn, SPLITK=sk, TAILK=tk, STAGES=st)
        if (bm, wg) != (128, 2):  # rung 5's other tile rows / consumers (rung 6 has only these)
            values.update(BM=bm, CONSUMERS=wg)
        if any(k not in base.defaults for k in values) or base.failed_constraints({**base.defaults, **values}):
            continue
        variants.append(base.variant((f"m{bm}w{wg}" if (bm, wg) != (128, 2) else "") + f"bn{bn}c{cm}"
                                     + (f"x{cn}" if cn != 1 else "") + f"s{sk}t{tk}"
                                     + (f"p{st}" if st != 4 else ""), "variant", "variant",
                                     **values))
    impls = variants + [registry.get("cublas", "hgemm")]
    options = BenchOptions(warmup=3, repeat=10, min_time_ms=20.0)
    print(f"| shape | cuBLAS {'us' if args.times else 'TFLOP/s'} | " + " | ".join(v.name for v in variants) + " |")
    print("|---|---:|" + "---:|" * len(variants))
    for size in args.sizes.split(","):
        M, N, K = parse_shape(size)
        points = {p.impl: p for p in run_bench(impls, [GemmProblem(M, N, K, 1.0, 0.0, args.dtype, args.layout)], options)}
        ref = points["cublas"].gflops if points["cublas"].status == "PASS" else None
        cells = []
        for v in variants:
            p = points[v.name]
            ok = p.status == "PASS" and p.gflops and ref
            if args.times:
                cells.append(f"{p.stats.median * 1e3:.2f}" if p.status == "PASS" and p.stats else p.status)
            else:
                cells.append(f"{100 * p.gflops / ref:.1f}%" if ok else p.status)
        first = (f"{points['cublas'].stats.median * 1e3:.2f}" if args.times and ref else
                 f"{ref / 1000 if ref else 0:.1f}")
        print(f"| {size} | {first} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
