"""Time rung 5 (persistent; rung 6 for --dtype tf32) under several tile / cluster / split-K choices beside cuBLAS, one
table row per shape, each figure a share of cuBLAS in the same run (gemmlab's bench harness:
verified first, cold L2, median of 10). What docs/tensor-cores.md's split-K re-measurement and
the choice of dispatch candidates rest on.

    PYTHONPATH=src python3 scripts/hgemm_variants.py --dtype bf16 \\
        --sizes 512x512x8192,1024,1000x3000x2000 --bn 64,128,256 --cm 1,2 --cn 1,2 --splitk 1,0 --tailk 1,0
    PYTHONPATH=src python3 scripts/hgemm_variants.py --dtype bf16 --sizes 1024x1024x1024,1024x1024x4096 \\
        --bn 64,128 --cm 1 --splitk 1 --stages 8 --rows 128x2,128x1,64x1 --times

    PYTHONPATH=src python3 scripts/hgemm_variants.py --dtype bf16 --sizes 4096,8192,3072 --from-dispatch \\
        --balance 0,1 --out-dtype c16

--rows picks the tile rows and consumer warpgroups of rung 5 (BMxCONSUMERS: 128x2, the default, two
consumers of 64 rows; 128x1 one consumer for both 64-row blocks; 64x1 64-row tiles; 128x2p and 64x2p
the two consumers in ping-pong, alternate tiles each). --times prints each median in microseconds
instead of the share of cuBLAS (fixed cost against cost per K tile, from a K sweep).
--from-dispatch starts each shape from the parameters this GPU's dispatch table measured best for
the nearest shape (src/gemmlab/api/dispatch.json), and only the options given change them.
--balance 0,1 compares a launch on every cluster slot with one balanced over its rounds
(specs.persistent_clusters). --out-dtype c16 writes C in the input type.

Combinations the spec refuses (e.g. STAGES that overflow shared memory) are left out.
"""
from __future__ import annotations

import argparse
import itertools


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bf16", choices=("fp16", "bf16", "tf32"))
    ap.add_argument("--sizes", default="512x512x8192,1024,1000x3000x2000,3072,128x4096x4096,2048,4097")
    ap.add_argument("--bn", help="block tile columns (default 128,256)")
    ap.add_argument("--cm", help="CTAs per cluster along M (default 1,2)")
    ap.add_argument("--cn", help="CTAs per cluster along N (2: A multicast; default 1)")
    ap.add_argument("--splitk", help="default 1,0")
    ap.add_argument("--tailk", help="K slices of a partial last wave's tiles (0 automatic, 1 whole; default 0)")
    ap.add_argument("--stages", help="default 4")
    ap.add_argument("--group-m", help="cluster-tile rows per group of the tile order (default 8)")
    ap.add_argument("--balance", help="1: clusters balanced over their rounds, 0: one per slot (default 1)")
    ap.add_argument("--layout", default="nn", help="nn, nt, tn or tt (tf32: nn or nt)")
    ap.add_argument("--out-dtype", default="fp32", choices=("fp32", "c16"),
                    help="fp32, or c16: C in the 16-bit input type")
    ap.add_argument("--rows", help="BMxCONSUMERS of rung 5: 128x2 (default), 128x1, 64x1, 128x2p, 64x2p (ping-pong)")
    ap.add_argument("--from-dispatch", action="store_true",
                    help="start each shape from this GPU's dispatch-table pick; only given options change it")
    ap.add_argument("--times", action="store_true", help="median microseconds, not shares of cuBLAS")
    args = ap.parse_args()
    if args.out_dtype == "c16" and args.dtype == "tf32":
        ap.error("--out-dtype c16 is for 16-bit inputs: tf32 writes an fp32 C")

    from gemmlab import registry
    import gemmlab.ops.hgemm  # noqa: F401  (registers the hgemm ladder and cuBLAS)
    from gemmlab.harness.bench import BenchOptions, run_bench
    from gemmlab.problem import GemmProblem, parse_shape

    base = registry.get("tf32_wgmma" if args.dtype == "tf32" else "persistent", "hgemm")
    defaults = {"bn": "128,256", "cm": "1,2", "cn": "1", "splitk": "1,0", "tailk": "0", "stages": "4",
                "group_m": "8", "balance": "1", "rows": "128x2"}
    keys = {"bn": "BN", "cm": "CM", "cn": "CN", "splitk": "SPLITK", "tailk": "TAILK", "stages": "STAGES",
            "group_m": "GROUP_M", "balance": "BALANCE"}

    cooperative = {"BM": 128, "CONSUMERS": 2, "PINGPONG": 0}  # rung 5's default, rung 6's only arrangement

    def rows(text):  # BMxCONSUMERS[p] -> the rung-5 parameters it sets
        bm, wg = text.rstrip("p").split("x")
        values = {"BM": int(bm), "CONSUMERS": int(wg), "PINGPONG": int(text.endswith("p"))}
        # rung 6 has no such parameters: the default arrangement is all it can take
        return {} if values == cooperative and "BM" not in base.defaults else values

    # each option: the values to try, or (with --from-dispatch and the option not given) the pick's
    given = {name: getattr(args, name) for name in list(keys) + ["rows"]}
    choices = {name: (text or ("" if args.from_dispatch else defaults[name])) for name, text in given.items()}
    try:
        axes = [[{}] if not text else
                [rows(r) for r in text.split(",")] if name == "rows" else
                [{keys[name]: int(x)} for x in text.split(",")]
                for name, text in choices.items()]
    except ValueError:
        ap.error("--bn, --cm, --cn, --splitk, --tailk, --stages, --group-m and --balance take comma-separated "
                 "integers, --rows BMxCONSUMERS (e.g. 128x2, 64x2p)")
    out = args.out_dtype if args.out_dtype != "c16" else args.dtype
    impls_cublas = registry.get("cublas", "hgemm")
    options = BenchOptions(warmup=3, repeat=10, min_time_ms=20.0)
    header = None
    for size in args.sizes.split(","):
        M, N, K = parse_shape(size)
        start = dispatch_pick(base, args.dtype, (M, N, K), out) if args.from_dispatch else {}
        variants = {}
        for combo in itertools.product(*axes):
            values = dict(start)
            for part in combo:
                values.update(part)
            if any(k not in base.defaults for k in values) or base.failed_constraints({**base.defaults, **values}):
                continue  # a parameter this rung lacks, or a combination its spec refuses
            name = variant_name(values, base.defaults)
            variants.setdefault(name, base.variant(name, "variant", "variant", **values))
        variants = list(variants.values())
        names = [v.name for v in variants]
        if names != header:
            header = names
            print(f"| shape | cuBLAS {'us' if args.times else 'TFLOP/s'} | " + " | ".join(names) + " |")
            print("|---|---:|" + "---:|" * len(names))
        problem = GemmProblem(M, N, K, 1.0, 0.0, args.dtype, args.layout, out)
        points = {p.impl: p for p in run_bench(variants + [impls_cublas], [problem], options)}
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


def dispatch_pick(base, dtype: str, shape, out: str = "fp32") -> dict:
    """The parameters of `base` this GPU's dispatch table ranks best at the measured shape nearest to
    `shape` (for a C of type `out`: its own entries where the table has them), without the flags the problem sets (apichoice.table_params, as `gemmlab profile
    --from-table` takes them); {} where the table has none."""
    from gemmlab.apichoice import table_params
    from gemmlab.cuda.device import info
    from gemmlab.problem import GemmProblem

    gpu = info()
    return table_params(GemmProblem(*shape, dtype=dtype, out_dtype=out), base.name, gpu.name, gpu.arch)[0]


def variant_name(values: dict, defaults: dict) -> str:
    """A short column name: the parameters that differ from the kernel's defaults."""
    short = {"BN": "bn", "CM": "c", "CN": "x", "SPLITK": "s", "TAILK": "t", "STAGES": "p", "GROUP_M": "g",
             "BALANCE": "bal", "BM": "m", "CONSUMERS": "w", "PINGPONG": "pp"}
    parts = [f"{short.get(k, k)}{v}" for k, v in sorted(values.items()) if defaults.get(k) != v]
    return "-".join(parts) or "defaults"


if __name__ == "__main__":
    import sys

    from gemmlab.errors import run_script

    sys.exit(run_script(main))
