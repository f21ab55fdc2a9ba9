"""Measure the dispatch table of this GPU: every candidate implementation of every op on the
shape suite below, with gemmlab's bench harness (verified first, same run, cold L2, medians),
ranked fastest first per shape. Writes one GPU's table as JSON; --merge joins tables into the
package's src/gemmlab/api/dispatch.json.

    PYTHONPATH=src python3 scripts/build_dispatch.py --out $OUT/dispatch-h100.json
    PYTHONPATH=src python3 scripts/build_dispatch.py --ops sgemm --tuned tune.db --out $OUT/sgemm-h100.json
        (each kernel also measured with the parameters `gemmlab tune` recorded on this GPU)
    PYTHONPATH=src python3 scripts/build_dispatch.py --ops sgemm --table src/gemmlab/api/dispatch.json ...
        (and with every parameter set the current table lists for this GPU: earlier tuning kept)
    python3 scripts/build_dispatch.py --merge h100.json h200.json --out src/gemmlab/api/dispatch.json
    python3 scripts/build_dispatch.py --update src/gemmlab/api/dispatch.json --merge sgemm-h100.json \
        --out src/gemmlab/api/dispatch.json   (re-measured ops replace theirs in a GPU's table)
    PYTHONPATH=src python3 scripts/build_dispatch.py --ops hgemm --dtypes bf16 --shapes 4096,8192 \
        --table src/gemmlab/api/dispatch.json --out $OUT/part.json
        (only those shapes of the suite; --update then replaces only their entries)
    PYTHONPATH=src python3 scripts/build_dispatch.py --ops hgemm --dtypes bf16,fp16 --out-dtype c16 \
        --table src/gemmlab/api/dispatch.json --out $OUT/c16.json
        (hgemm entries measured with C in the input type, `"out_dtype"` set: calls writing a 16-bit C
        take them; --update merges them beside the fp32-C entries)

The suite (docs/api.md says why these): squares 64..8192, the rectangles users hit (a skinny M,
a large K-light product, 1000x3000x2000), one odd shape, and for sgemm issue 15's FP32 suite;
strided batches from many small to few
large; sums from 2^10 to 2^28 elements. Candidates: the ladder rungs that lead somewhere on some
shape, and the library.
"""
from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys

GEMM_SHAPES = [(64, 64, 64), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048),
               (4096, 4096, 4096), (8192, 8192, 8192), (1000, 3000, 2000), (128, 4096, 4096),
               (8192, 8192, 1024), (1023, 1025, 1027)]
# sgemm also covers issue 15's FP32 suite (the wave-quantisation shapes among them)
SGEMM_EXTRA_SHAPES = [(3072, 3072, 3072), (4097, 4097, 4097), (6144, 2048, 4096), (2000, 2000, 8000),
                      (8192, 8192, 256)]
# hgemm also covers issue 14's tensor-core suite (K-heavy, odd, tall and K-light shapes)
HGEMM_EXTRA_SHAPES = [(512, 512, 8192), (3072, 3072, 3072), (4097, 4097, 4097), (6144, 2048, 4096),
                      (2000, 2000, 8000), (8192, 8192, 256), (16384, 1024, 4096)]
BATCHES = [(256, 128), (64, 256), (16, 512), (4, 1024), (2, 2048)]  # batch, cube size
SUM_SIZES = [1 << k for k in (10, 14, 18, 20, 22, 24, 26, 28)]
CANDIDATES = {
    ("sgemm", "fp32"): ["autotuned", "async_pipeline", "hopper_simt", "bigtile", "tma_ffma", "cublas"],
    ("hgemm", "fp16"): ["persistent", "warp_specialized", "mma_sync", "cublas"],
    ("hgemm", "bf16"): ["persistent", "warp_specialized", "mma_sync", "cublas"],
    ("hgemm", "tf32"): ["tf32_wgmma", "cublas"],
    ("bgemm", "fp32"): ["batched_pipeline", "cublas"],
    ("reduce", "fp32"): ["single_pass", "tile_queue", "grid_stride_vec4", "cub"],
}
# --out-dtype c16: the (op, dtype) pairs that write C in the input type
C16_PAIRS = {("hgemm", "fp16"), ("hgemm", "bf16")}
# Parameter sets measured beside a kernel's defaults at every shape of its op: the tile widths and
# pipelines that lead where the defaults lose (issue 14, docs/tensor-cores.md): 128x64 tiles with
# 8 stages for few-tile and K-heavy shapes (1024^3, 512x512x8192), 128x192 for shapes whose last
# wave of 128x256 tiles is partial (3072^3) and, in 2x1 clusters, for one wave of 256x192 cluster
# tiles (1000x3000x2000: 64 of them on 66 slots), single-CTA 128x128 and 128x256 for the mid sizes.
VARIANTS = {
    ("hgemm", "persistent"): [{"BN": 64, "CM": 1, "STAGES": 8}, {"BN": 128, "CM": 1}, {"BN": 192, "CM": 1},
                              {"BN": 192, "CM": 2}, {"BN": 256, "CM": 1},
                              # one consumer warpgroup: 128x64 and 64-row tiles (session 11)
                              {"BM": 128, "CONSUMERS": 1, "BN": 64, "CM": 1, "STAGES": 8},
                              {"BM": 64, "CONSUMERS": 1, "BN": 128, "CM": 1, "STAGES": 8},
                              {"BM": 64, "CONSUMERS": 1, "BN": 256, "CM": 1, "STAGES": 5}],
    ("hgemm", "tf32_wgmma"): [{"BN": 64, "CM": 1, "STAGES": 8}, {"BN": 128, "CM": 1}, {"BN": 192, "CM": 1},
                              {"BN": 192, "CM": 2}, {"BN": 256, "CM": 2}],
}


def problems(op: str, dtype: str, c16: bool = False):
    """The suite's problems of `op` in `dtype`; `c16`: hgemm writing C in the input type."""
    from gemmlab.problem import BatchedGemmProblem, GemmProblem, ReduceProblem

    if op == "reduce":
        return [ReduceProblem(n) for n in SUM_SIZES]
    if op == "bgemm":
        return [BatchedGemmProblem(n, n, n, 1.0, 0.0, batch=b) for b, n in BATCHES]
    shapes = GEMM_SHAPES + {"sgemm": SGEMM_EXTRA_SHAPES, "hgemm": HGEMM_EXTRA_SHAPES}.get(op, [])
    out = dtype if c16 else "fp32"
    return [GemmProblem(m, n, k, 1.0, 0.0, dtype, "nn", out) for m, n, k in shapes]


def out_of(problem) -> str:
    """The C type a problem writes, as an entry's `out_dtype` names it (fp32: the key is left out)."""
    return getattr(problem, "out_dtype", "fp32")


def row_kind(dtype: str, out: str = "fp32") -> str:
    """An entry's dtype word in the builder's messages and merge keys: the dtype, with the C type
    after a slash where it is not fp32 ("bf16/C bf16" would be two words: "bf16/bf16")."""
    return dtype if out == "fp32" else f"{dtype}/{out}"


def entry_kind(entry: dict) -> tuple[str, str]:
    """(op, dtype word) of a table entry: what --update replaces together (a 16-bit C's entries
    are a kind of their own)."""
    from gemmlab.api.dispatch import entry_out

    return entry["op"], row_kind(entry["dtype"], entry_out(entry))


def tuned_candidates(impls: list, problem, tuned: str | None, gpu: str) -> list:
    """Each kernel of `impls` again under the parameters `gemmlab tune` found fastest on this GPU
    at the tuned shape nearest to `problem` (--tuned DB), where those differ from its defaults:
    a variant of the spec, so the bench verifies and times it beside the rest."""
    if not tuned:
        return []
    from gemmlab.harness.tuned import usable_best
    from gemmlab.store import ResultStore

    out = []
    with ResultStore(tuned, write=False) as store:  # it only reads: a read-only tune database serves
        for impl in impls:
            if impl.kind != "kernel":
                continue
            best = usable_best(store, gpu, impl, problem)
            if best and impl.resolve(best) != impl.resolve({}):
                out.append(impl.variant(impl.name, impl.title, impl.idea, **impl.resolve(best)))
    return out


def listed_variants(impls: list, op: str) -> list:
    """Each kernel of `impls` again under every parameter set VARIANTS lists for it (those its
    spec refuses, or that equal its defaults, left out)."""
    out = []
    for impl in impls:
        for values in VARIANTS.get((op, impl.name), []) if impl.kind == "kernel" else []:
            if impl.failed_constraints({**impl.defaults, **values}) or impl.resolve(values) == impl.resolve({}):
                continue
            out.append(impl.variant(impl.name, impl.title, impl.idea, **impl.resolve(values)))
    return out


def table_candidates(impls: list, problem, table: str | None, gpu: str) -> list:
    """Each kernel of `impls` again under every other parameter set that the dispatch table
    `table` (--table) lists for this GPU, op, dtype and shape (the entries of either C type: a
    16-bit C's measurement starts from the fp32-C ranking too): tuned variants measured earlier
    stay candidates when the table is measured again without their tuning database."""
    if not table:
        return []
    from gemmlab import ops

    entries = [e for t in json.load(open(table))["gpus"] if t["gpu"] == gpu for e in t["entries"]
               if e["op"] == problem.op and e["dtype"] == getattr(problem, "dtype", "fp32")
               and e["shape"] == dims(problem)]
    op = ops.get(problem.op)
    by_name = {i.name: i for i in impls if i.kind == "kernel"}
    out = []
    for c in [c for e in entries for c in e["candidates"]]:
        impl = by_name.get(c["impl"])
        if impl is None:
            continue
        # the flags this problem sets (an entry of the other C type stored its own OUT16)
        values = op.kernel_params(impl, c["params"], problem)
        if not impl.failed_constraints({**impl.defaults, **values}):
            out.append(impl.variant(impl.name, impl.title, impl.idea, **impl.resolve(values)))
    return new_builds(impls, out, problem)  # one parameter set once, whichever entry listed it; no defaults


def built_as(impl, problem) -> tuple[str, str]:
    """What `impl` is compiled as for `problem`: its name and every parameter, the problem's own
    flags set (a listed variant says OUT16 = 0; a 16-bit C builds it with OUT16 = 1)."""
    from gemmlab import ops

    return impl.name, json.dumps(impl.resolve(ops.get(problem.op).kernel_params(impl, {}, problem)), sort_keys=True)


def new_builds(impls: list, candidates: list, problem) -> list:
    """The candidates that build a kernel none of `impls` (at their defaults) nor an earlier
    candidate builds for `problem`, in order: each kernel measured once, so a table's entry lists
    each parameter set once."""
    seen = {built_as(i, problem) for i in impls if i.kind == "kernel"}
    out = []
    for c in candidates:
        key = built_as(c, problem)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def dims(problem) -> list[int]:
    """The problem's dimensions as a table entry stores them (a JSON list): the API's own reading."""
    from gemmlab.apichoice import dims as api_dims

    return list(api_dims(problem))


def measure(only: set[str] | None, tuned: str | None = None, table: str | None = None,
            dtypes: set[str] | None = None, save=None, shapes: list[list[int]] | None = None,
            c16: bool = False) -> dict:
    """The table of this GPU over CANDIDATES (only the ops in `only`, the dtypes in `dtypes` and
    the suite's shapes in `shapes`, where given: a part whose "shapes" key says so; `c16`: hgemm's
    16-bit types with C in the input type, entries marked with their `out_dtype`).
    `save(table)`, if given, is called after each (op, dtype) with the table so far, so a run cut
    short by a time limit keeps what it measured."""
    from gemmlab import registry
    from gemmlab.cuda.device import info
    from gemmlab.harness.bench import BenchOptions, run_bench

    options = BenchOptions(warmup=3, repeat=10, min_time_ms=20.0)
    entries, failed = [], []
    for (op, dtype), names in CANDIDATES.items():
        if (only and op not in only) or (dtypes and dtype not in dtypes):
            continue
        if c16 and (op, dtype) not in C16_PAIRS:
            continue
        impls = []
        for name in names:
            impl = registry.get(name, op)
            reason = impl.unavailable_reason() if impl.kind != "kernel" else ""
            if reason:
                failed.append(f"{op} {name}: {reason}")
            else:
                impls.append(impl)
        if c16:  # a kernel that writes an fp32 C only is refused by design, not a failure to record
            impls = [i for i in impls if i.kind != "kernel" or "out16" in i.tags]
        variants = listed_variants(impls, op)
        for problem in problems(op, dtype, c16):
            if shapes is not None and dims(problem) not in shapes:
                continue
            out = out_of(problem)
            points = run_bench(impls, [problem], options)
            extra = new_builds(impls, variants + tuned_candidates(impls, problem, tuned, info().name)
                               + table_candidates(impls, problem, table, info().name), problem)
            points += run_bench(extra, [problem], options) if extra else []
            ranked = []
            for p in points:
                figure = p.gbps if op == "reduce" else (p.gflops / 1000 if p.gflops else None)
                if p.status == "PASS" and figure:
                    ranked.append({"impl": p.impl, "params": p.params if p.impl_kind == "kernel" else {},
                                   "figure": round(figure, 2)})
                else:
                    failed.append(f"{op} {row_kind(dtype, out)} "
                                  f"{problem.shape if op != 'reduce' else problem.n} {p.impl}: {p.status} {p.reason}")
            ranked.sort(key=lambda c: -c["figure"])
            if ranked:
                marked = {"out_dtype": out} if out != "fp32" else {}  # fp32: the key is left out
                entries.append({"op": op, "dtype": dtype, **marked, "shape": dims(problem), "candidates": ranked})
                best = ranked[0]
                print(f"{op:6} {row_kind(dtype, out):9} {'x'.join(map(str, dims(problem))):>22}  "
                      f"{best['impl']:>16} "
                      f"{best['figure']:9.1f}  " + "  ".join(f"{c['impl']} {c['figure']:.1f}" for c in ranked[1:]),
                      flush=True)
        if save:
            save(_table(entries, failed, shapes))
    return _table(entries, failed, shapes)


def _table(entries: list, failed: list, shapes: list[list[int]] | None = None) -> dict:
    from gemmlab.cuda.device import info

    gpu = info()
    table = {"gpu": gpu.name, "arch": gpu.arch, "measured": datetime.date.today().isoformat(),
             "command": "python3 scripts/build_dispatch.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
             "units": {"gemm": "TFLOP/s (2MNK / median time)", "reduce": "GB/s (4n bytes / median time)"},
             "entries": list(entries), "not_measured": list(failed)}
    if shapes is not None:
        table["shapes"] = [list(s) for s in shapes]
    return table


def suite_shapes(text: str) -> list[list[int]]:
    """--shapes: MxNxK or N (a cube), comma-separated, as table entries store GEMM shapes."""
    from gemmlab.problem import parse_shape

    return [list(parse_shape(s)) for s in text.split(",")]


def updated(tables: list[dict], parts: list[dict]) -> list[dict]:
    """`tables` with each part's ops re-measured: a part (one GPU, some ops and dtypes) replaces
    that GPU's entries of those (op, dtype) pairs and adds its command; the GPU's other entries
    stay as they were (so hgemm's 16-bit types and tf32 may be measured in separate parts). A part
    measured on some shapes only (its "shapes" key, from --shapes) replaces only those entries."""
    all_dtypes = {dtype for _, dtype in CANDIDATES}
    out = [dict(t) for t in tables]
    for part in parts:
        only = ["x".join(map(str, s)) for s in part["shapes"]] if "shapes" in part else None
        part = {k: v for k, v in part.items() if k != "shapes"}
        target = next((t for t in out if t["gpu"] == part["gpu"]), None)
        if target is None:
            out.append(part)
            continue
        pairs = {entry_kind(e) for e in part["entries"]}
        ops = {op for op, _ in pairs}

        def stale(message: str) -> bool:  # "op dtype shape impl: why", or "op impl: why" for a whole op
            words = message.split()
            if only is not None:  # a part of some shapes: only its own shapes' messages are stale
                return len(words) > 2 and (words[0], words[1]) in pairs and words[2] in only
            whole_op = words[1] not in all_dtypes and "/" not in words[1]  # "op impl: why" ("dtype/C" is a dtype word)
            return len(words) > 1 and ((words[0], words[1]) in pairs or (words[0] in ops and whole_op))

        def replaced(e) -> bool:
            return entry_kind(e) in pairs and (only is None or "x".join(map(str, e["shape"])) in only)

        def key(e) -> tuple:
            return entry_kind(e) + (tuple(e["shape"]),)

        if only is not None:  # re-measured entries keep their places (a small diff); new shapes go last
            fresh = {key(e): e for e in part["entries"]}
            target["entries"] = [fresh.pop(key(e)) if key(e) in fresh else e for e in target["entries"]
                                 if not replaced(e) or key(e) in fresh] + list(fresh.values())
        else:
            target["entries"] = [e for e in target["entries"] if not replaced(e)] + part["entries"]
        target["command"] = f'{target["command"]} ; {part["command"]}'
        target["measured"] = part["measured"]
        fresh_messages = part.get("not_measured", [])
        target["not_measured"] = [m for m in target.get("not_measured", [])
                                  if not stale(m) and m not in fresh_messages] + fresh_messages
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--merge", nargs="+", help="per-GPU tables to join (no GPU needed)")
    parser.add_argument("--ops", help="comma-separated subset of sgemm,hgemm,bgemm,reduce")
    parser.add_argument("--dtypes", help="comma-separated subset of the dtypes (e.g. bf16,fp16 or tf32)")
    parser.add_argument("--update", help="with --merge: a full table whose GPUs take the merged parts' ops")
    parser.add_argument("--tuned", help="a `gemmlab tune` database: each kernel is also measured with the "
                                        "parameters tuned on this GPU at the nearest tuned shape")
    parser.add_argument("--shapes", help="measure only these shapes of the suite (MxNxK or N, comma-separated)")
    parser.add_argument("--table", help="a dispatch table (e.g. src/gemmlab/api/dispatch.json): each kernel is also "
                                        "measured with every parameter set it lists for this GPU and shape")
    parser.add_argument("--out-dtype", choices=("fp32", "c16"), default="fp32",
                        help="hgemm: c16 measures C in the input type (fp16, bf16), entries marked so")
    args = parser.parse_args()
    if args.shapes and (not args.ops or set(args.ops.split(",")) - {"sgemm", "hgemm"}):
        parser.error("--shapes picks GEMM shapes: give it with --ops sgemm and/or hgemm")
    if args.out_dtype == "c16" and (args.ops != "hgemm" or (args.dtypes and set(args.dtypes.split(",")) - {"fp16", "bf16"})):
        parser.error("--out-dtype c16 is hgemm's 16-bit C: give it with --ops hgemm (and --dtypes fp16 and/or bf16)")
    if args.merge:
        from gemmlab.api.dispatch import validate_tables

        def read(path):
            try:
                with open(path) as f:
                    return json.load(f)
            except (OSError, ValueError) as exc:
                parser.error(f"{path}: {exc}")

        gpus = [read(path) for path in args.merge]
        if not args.update and any("shapes" in g for g in gpus):
            parser.error("a table of some shapes (--shapes) goes in with --update, not as a GPU's whole table")
        if not args.update and any(e.get("out_dtype") for g in gpus for e in g.get("entries", [])):
            parser.error("16-bit-C entries (--out-dtype c16) go in with --update, beside a GPU's fp32-C table")
        if args.update:
            full = read(args.update)
            if not isinstance(full, dict) or "gpus" not in full:
                parser.error(f"{args.update}: not a dispatch table (no 'gpus')")
            gpus = updated(full["gpus"], gpus)
        data = {"version": 1, "suite": "scripts/build_dispatch.py (GEMM_SHAPES, BATCHES, SUM_SIZES)", "gpus": gpus}
        problems_found = validate_tables(data)
        if problems_found:
            print("\n".join(problems_found), file=sys.stderr)
            return 2
        with open(args.out, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        return 0
    def save(table: dict) -> None:
        with open(args.out, "w") as f:
            json.dump(table, f, indent=1)

    save(measure(set(args.ops.split(",")) if args.ops else None, args.tuned, args.table,
                 set(args.dtypes.split(",")) if args.dtypes else None, save,
                 suite_shapes(args.shapes) if args.shapes else None, args.out_dtype == "c16"))
    return 0


if __name__ == "__main__":
    from gemmlab.errors import run_script

    sys.exit(run_script(main))
