"""The small process that ncu launches: one implementation, warmed up, then launched once more.

    python -m gemmlab.profile.target --impl vectorize --M 4096 --N 4096 --K 4096 --warmup 3
    python -m gemmlab.profile.target --op reduce --impl shuffle --n 16777216 --warmup 3
    python -m gemmlab.profile.target --impl persistent --warmup 3 \
        --problem '{"op": "hgemm", "M": 4096, "N": 4096, "K": 4096, "dtype": "bf16", "layout": "nt"}'

--problem takes any op's problem (problem_to_dict's JSON: hgemm's dtype, layout and C type,
bgemm's batch); --M/--N/--K/--n are the short form for sgemm and reduce.

Launch order, which `gemmlab profile` turns into ncu's --launch-skip/--launch-count.
A GEMM (sgemm, hgemm, bgemm):
1. one GEMM on fresh random inputs, checked against fp64 (a wrong kernel is not profiled
   as if it were right; the result is reported on the last line);
2. warmup - 1 more GEMMs (the kernel's code and the inputs are resident, clocks up);
3. the profiled GEMM, inside an NVTX push/pop range named RANGE (how a library baseline,
   whose kernel names are not known beforehand, is picked out).
A GEMM is one launch, or two with split-K (the main kernel and its reduction).
Reduce: warmup sums, the profiled sum (in RANGE), then the reduce checks - after the profiled
launches, because they launch the kernel a number of times that depends on the kernel. A sum
is one launch per pass (the same kernel on its own partials until one value is left).
The last line on stdout is `GEMMLAB_TARGET {json}` with what was run.
"""
from __future__ import annotations

import argparse
import json
import sys

RANGE = "gemmlab_profile"
PREFIX = "GEMMLAB_TARGET "


def _nvtx():
    """(push, pop) for an NVTX range, or None when no NVTX binding is importable."""
    try:
        from cupy.cuda import nvtx

        if getattr(nvtx, "available", True):
            return nvtx.RangePush, nvtx.RangePop
    except Exception:
        pass
    try:
        import torch

        return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    except Exception:
        return None


def launches_per_gemm(impl, problem, params) -> int:
    """Launches of the kernel's own code per GEMM: 2 for an sgemm split-K (the partial planes,
    then their reduction), else 1 (the tensor-core rungs sum split-K inside the kernel; the
    memsets and copies around a launch are not kernels of the spec and ncu's filter skips them)."""
    if getattr(impl, "kind", "") != "kernel":
        return 1
    if getattr(impl, "splitk_reduce", None) is not None and impl.launch(problem, impl.resolve(params)).grid[2] > 1:
        return 2
    return 1


def launches_per_sum(impl, n: int, params) -> int:
    """Passes of a reduce kernel over n elements (one launch each)."""
    if getattr(impl, "kind", "") != "kernel":
        return 1
    from ..ops.reduce_passes import plan

    return len(plan(impl, impl.resolve(params), n))


def _profiled(call) -> bool:
    nvtx = _nvtx()
    if nvtx:
        nvtx[0](RANGE)
    call()
    if nvtx:
        nvtx[1]()
    return nvtx is not None


def run(impl_name: str, problem, params: dict, warmup: int, check: bool = True) -> dict:
    """Warm-up launches, the profiled launch in RANGE, and the check: GEMMs verify first (that
    run is the first warm-up), the sum after the profiled launches (its checks launch the kernel
    a number of times that depends on the kernel, which ncu would otherwise count)."""
    from .. import ops
    from ..cuda.device import device, sync_or_raise
    from ..harness.bench import new_seed, verify_runner
    from ..problem import problem_to_dict
    from ..registry import select

    op = ops.of(problem)
    op_name = op.name
    impl = select(impl_name, op=op_name)[0]
    stream = device().create_stream()
    runner = op.prepare_for(impl, params, problem)
    gemm = op_name != "reduce"
    launches = (launches_per_gemm(impl, problem, runner.params) if gemm
                else launches_per_sum(impl, problem.n, runner.params))
    info: dict = {"op": op_name, "impl": impl.name, "params": runner.params, "warmup": warmup,
                  "launches_per_call": launches}
    info.update({"shape": problem.shape} if gemm else {"n": problem.n})
    info["problem"] = problem_to_dict(problem)

    def checked() -> None:
        verdict, _ = verify_runner(runner, problem, stream)
        info.update(verified=bool(verdict.passed), rel_err=float(verdict.rel_err), reason=verdict.reason)

    done = 0
    if gemm and check and impl.kind == "kernel":
        checked()
        done = 1
    inputs = op.timing_inputs(problem, new_seed())
    op.before_timing(runner, problem)
    for _ in range(max(warmup - done, 0)):
        op.enqueue(runner, problem, inputs, stream)
    sync_or_raise(stream)

    def profiled():
        op.enqueue(runner, problem, inputs, stream)
        sync_or_raise(stream)

    info["nvtx"] = _profiled(profiled)
    if not gemm and check and impl.kind == "kernel":
        checked()
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True)
    ap.add_argument("--op", default="sgemm", choices=("sgemm", "reduce"), help="with --M/--N/--K or --n")
    ap.add_argument("--problem", help="any op's problem as JSON (problem_to_dict), in place of --op and the sizes")
    ap.add_argument("--M", type=int)
    ap.add_argument("--N", type=int)
    ap.add_argument("--K", type=int)
    ap.add_argument("--n", type=int, dest="elements", help="reduce: element count")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--beta", type=float, default=0.0)
    ap.add_argument("--params", default="{}", help="JSON object of template parameters")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args(argv)
    from ..errors import GemmlabError

    def failed(reason: str) -> int:
        print(PREFIX + json.dumps({"error": reason}), flush=True)
        return 2

    try:
        params = json.loads(args.params)
        given = json.loads(args.problem) if args.problem is not None else None
    except ValueError as exc:
        return failed(f"--params and --problem take JSON: {exc}")
    if not isinstance(params, dict) or not (given is None or isinstance(given, dict)):
        return failed("--params and --problem take a JSON object")
    try:
        from ..problem import GemmProblem, ReduceProblem, problem_from_dict

        if given is not None:
            problem = problem_from_dict(given)
        elif args.op == "reduce":
            if args.elements is None:
                ap.error("--op reduce needs --n")
            problem = ReduceProblem(args.elements)
        else:
            if None in (args.M, args.N, args.K):
                ap.error("sgemm needs --M, --N and --K")
            problem = GemmProblem(args.M, args.N, args.K, args.alpha, args.beta)
        info = run(args.impl, problem, params, args.warmup, check=not args.no_check)
    except GemmlabError as exc:
        return failed(str(exc))
    print(PREFIX + json.dumps(info), flush=True)
    return 0


def parse_target_line(output: str) -> dict | None:
    """The target's last GEMMLAB_TARGET line in (ncu's) output."""
    found = None
    for line in output.splitlines():
        if line.startswith(PREFIX):
            try:
                found = json.loads(line[len(PREFIX):])
            except ValueError:
                continue
    return found


if __name__ == "__main__":
    sys.exit(main())
