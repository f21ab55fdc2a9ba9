"""Run every hgemm kernel on awkward shapes, fp16 and bf16 (tf32 for rung 6), for compute-sanitizer to watch.

    compute-sanitizer --tool memcheck --error-exitcode 1 python scripts/sanitize_hgemm.py [names]
    compute-sanitizer --tool racecheck --racecheck-report all python scripts/sanitize_hgemm.py

Inputs are made by NumPy on the host and copied over and the references are computed on the
host, so the kernels the sanitizer sees are gemmlab's (plus CuPy's NaN fill of C). Shapes cover
1x1x1, single rows and columns, primes and non-multiples of every tile size - for mma_sync the
ones its rule allows (K % 8 == 0, N % 8 == 0) - each with beta = 0 (C poisoned, not to be read)
and with alpha = 1.5, beta = -0.75, in layout nn and, for the kernels that take them, nt (B given
as its NxK transpose, read in place), tn and tt (A given as its KxM transpose), with an fp32 C and, where a kernel writes one, a C in the
input type. The persistent rungs run a second, smaller sweep with split-K (SPLITK = 3: partial
slots, flags and the in-order sum of the last arriver under memcheck) and a third with the tail
split (TAILK = 3 at 1409x1665x203, 168 tiles of 128x128: the full wave whole, the last wave's 36
tiles in slices), a fourth with 128x64 tiles (BN = 64) split in two, and a fifth in clusters along
N (A multicast: 1x2 clusters of 128x64 tiles, 2x2 clusters, and 1x2 clusters of 128x192 tiles) or
sharing B unevenly (2x1 clusters of 128x192 and of 128x64 tiles); rung 5 a sixth with one consumer
warpgroup (128x64 tiles in 2x2 clusters with split-K, 64x128 tiles with split-K, 64x64 tiles in
1x2 clusters with the tail split) and a seventh in ping-pong (two consumer warpgroups on alternate
tiles: 128x128 in 2x1 clusters, with split-K, and 64x256 with the tail split, at shapes that give
a CTA several tiles), and an eighth with 256-row tiles (two consumer warpgroups of two 64-row
blocks each: 256x128 in cuBLAS's 1x2 clusters with the tail split, layouts nn and tt, and in 2x1
clusters with split-K); rung 6 in layout tn (B transposed inside the CTA) a sixth and a seventh, with
split-K and in 2x2 clusters.
--part rows256 runs the eighth alone and --part main the rest (tests/gpu/test_sanitizer.py runs
them as separate parts). Exits 1 if any result is wrong.
"""
from __future__ import annotations

import argparse
import sys

ANY_SHAPES = ((1, 1, 1), (1, 129, 67), (97, 1, 33), (127, 127, 127), (129, 257, 65), (31, 517, 203))
ALIGNED_SHAPES = ((1, 8, 8), (97, 8, 40), (127, 136, 200), (129, 264, 72), (31, 520, 208))
SPLITK_SHAPES = ((127, 127, 127), (129, 257, 65), (31, 517, 203), (64, 136, 1000), (129, 264, 72))
TAIL_SHAPES = ((1409, 1665, 203),)
TAIL_PARAMS = {"BN": 128, "CM": 1, "TAILK": 3}
BN64_PARAMS = {"BN": 64, "CM": 1, "SPLITK": 2}  # 128x64 tiles, split in two
CLUSTER_PARAMS = ({"BN": 64, "CM": 1, "CN": 2}, {"BN": 128, "CM": 2, "CN": 2, "SPLITK": 2},
                    {"BN": 192, "CM": 1, "CN": 2, "TAILK": 2}, {"BN": 192, "CM": 2}, {"BN": 64, "CM": 2, "SPLITK": 2})
TN_CLUSTER_PARAMS = {"BN": 64, "CM": 2, "CN": 2, "STAGES": 6, "SPLITK": 2}  # tf32 tn, both multicasts
# rung 5 with one consumer warpgroup (both 64-row blocks of 128-row tiles, or 64-row tiles), with
# the layouts each takes (an M-major A shared along N needs 128-row tiles)
ONE_CONSUMER_PARAMS = (({"BM": 128, "CONSUMERS": 1, "BN": 64, "CM": 2, "CN": 2, "SPLITK": 2}, ("nn", "tt")),
                       ({"BM": 64, "CONSUMERS": 1, "BN": 128, "CM": 1, "SPLITK": 2}, ("nn", "tt")),
                       ({"BM": 64, "CONSUMERS": 1, "BN": 64, "CM": 1, "CN": 2, "TAILK": 2}, ("nn", "nt")))

# rung 5 in ping-pong; 1000x3000x200 gives most CTAs two tiles (one per warpgroup), 1409x1665x203 a
# tail to slice
PINGPONG_SHAPES = ((1000, 3000, 200), (1409, 1665, 203))
PINGPONG_PARAMS = (({"PINGPONG": 1, "BN": 128, "CM": 2, "STAGES": 6}, ("nn", "tt")),
                   ({"PINGPONG": 1, "BN": 128, "CM": 1, "STAGES": 6, "SPLITK": 3}, ("nn",)),
                   ({"PINGPONG": 1, "BM": 64, "BN": 256, "CM": 2, "TAILK": 2}, ("nn", "nt")))

# rung 5 with 256-row tiles; 1000x3000x200 leaves the last tile row 232 rows of 256, 1409x1665x203
# a tail to slice. Layouts nn and tt (tt: an M-major A multicast along N): under racecheck the
# four layouts took 234 s per input type on an H100 (session 27; memcheck passed all four), which
# would carry a type's part of the sweep past a 10-minute device call.
BM256_SHAPES = ((264, 200, 264), (300, 520, 130), (1000, 3000, 200), (1409, 1665, 203))
BM256_PARAMS = (({"BM": 256, "CONSUMERS": 2, "BN": 128, "CM": 1, "CN": 2, "TAILK": 2}, ("nn", "tt")),
                ({"BM": 256, "CONSUMERS": 2, "BN": 128, "CM": 2, "SPLITK": 2}, ("nn",)))


DTYPES = ("fp16", "bf16", "tf32")


PARTS = ("all", "main", "rows256")


def plan(names: str = "all", dtypes=DTYPES, part: str = "all") -> list[tuple]:
    """The sweep as data, no GPU needed: (kernel, dtype, problems, params or None) per run, in the
    order they run. `part`: "rows256" the 256-row runs alone, "main" the rest, "all" both (under
    racecheck the 256-row runs of one type add about 200 s on an H100, session 27, and a type's
    part of the sweep with them no longer fits a 10-minute device call)."""
    from gemmlab import registry
    from gemmlab.ops.hgemm import refusal
    from gemmlab.ops.hgemm_check import sweep_problems

    impls = registry.select(names, op="hgemm", with_baselines=False)
    out = []
    for dtype in dtypes:
        for impl in impls:
            if dtype not in (impl.dtypes or ("fp16", "bf16")):
                continue
            outs = ("fp32",) if dtype == "tf32" else ("fp32", dtype)

            def sweep(shapes, layouts=("nn",)):  # every layout x C type of `shapes` this kernel takes
                return [p for layout in layouts for out in outs
                        for p in sweep_problems(dtype, shapes, layout=layout, out=out) if not refusal(impl, p)]

            runs = [(sweep(ANY_SHAPES + ALIGNED_SHAPES, ("nn", "nt", "tn", "tt")), None)]
            if "persistent" in impl.tags:
                runs += [(sweep(SPLITK_SHAPES, ("nn", "tt")), {impl.name: {"SPLITK": 3}}),
                         (sweep(TAIL_SHAPES), {impl.name: TAIL_PARAMS}),
                         (sweep(ANY_SHAPES + SPLITK_SHAPES, ("nn", "tt")), {impl.name: BN64_PARAMS})]
                runs += [(sweep(ANY_SHAPES + SPLITK_SHAPES, ("nn", "tt")), {impl.name: params}) for params in CLUSTER_PARAMS]
            if impl.name == "tf32_wgmma":  # layout tn: B transposed inside the CTA, with K slices and clusters
                runs += [(sweep(SPLITK_SHAPES, ("tn",)), {impl.name: {"SPLITK": 3}}),
                         (sweep(ANY_SHAPES + SPLITK_SHAPES, ("tn",)), {impl.name: TN_CLUSTER_PARAMS})]
            if impl.name == "persistent":
                runs += [(sweep(SPLITK_SHAPES, layouts), {impl.name: params}) for params, layouts in ONE_CONSUMER_PARAMS]
                runs += [(sweep(ANY_SHAPES + PINGPONG_SHAPES, layouts), {impl.name: params})
                         for params, layouts in PINGPONG_PARAMS]
                runs += [(sweep(ANY_SHAPES + BM256_SHAPES, layouts), {impl.name: params})
                         for params, layouts in BM256_PARAMS]
            out += [(impl, dtype, problems, params) for problems, params in runs
                    if part == "all" or (part == "rows256") == _rows256(impl, params)]
    return out


def _rows256(impl, params) -> bool:
    return bool(params) and params[impl.name].get("BM") == 256


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="?", default="all", help="kernels, comma-separated (default all)")
    ap.add_argument("--dtypes", default=",".join(DTYPES),
                    help="input types, comma-separated (default all; one sanitizer run per type fits a device call)")
    ap.add_argument("--part", default="all", choices=PARTS,
                    help="rows256: rung 5's 256-row runs alone; main: the rest (default all)")
    ap.add_argument("--count", action="store_true", help="print how many runs each kernel and type makes (no GPU)")
    args = ap.parse_args(argv)
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    bad = [d for d in dtypes if d not in DTYPES]
    if bad or not dtypes:
        ap.error(f"--dtypes takes {', '.join(DTYPES)}")
    runs = plan(args.names, dtypes, args.part)
    if not any(problems for _, _, problems, _ in runs):  # a clean sanitizer run of nothing proves nothing
        ap.error(f"{args.names} takes none of {', '.join(dtypes)}"
                 f"{'' if args.part == 'all' else ' in part ' + args.part}: nothing to run")
    if args.count:
        counts: dict = {}
        for impl, dtype, problems, _ in runs:
            counts[(impl.name, dtype)] = counts.get((impl.name, dtype), 0) + len(problems)
        for (name, dtype), n in counts.items():
            print(f"{name:18s} {dtype:5s} {n}")
        print(f"total {sum(counts.values())}")
        return 0
    from gemmlab.harness.bench import verify_sweep

    failed = 0
    for impl, dtype, problems, params in runs:
        for r in verify_sweep([impl], problems, params, host_data=True):
            p = r.problem
            print(f"{r.impl:10s} {dtype} {p.layout} C {p.out_dtype} {p.shape:14s} a={p.alpha:g} b={p.beta:g}"
                  f"{' ' + str(params[impl.name]) if params else ''} {r.status} {r.reason}", flush=True)
            failed += r.status != "PASS"
    return 1 if failed else 0


if __name__ == "__main__":
    from gemmlab.errors import run_script

    sys.exit(run_script(main, sys.argv[1:]))
