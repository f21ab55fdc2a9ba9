"""The small process that ncu launches: one implementation, warmed up, then launched once more.

    python -m gemmlab.profile.target --impl vectorize --M 4096 --N 4096 --K 4096 --warmup 3
    python -m gemmlab.profile.target --op reduce --impl shuffle --n 16777216 --warmup 3

Launch order, which `gemmlab profile` turns into ncu's --launch-skip/--launch-count.
SGEMM:
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
import random
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


def _sync(stream) -> None:
    from ..errors import LaunchError

    try:
        stream.sync()
    except Exception as exc:
        raise LaunchError(f"the GPU reported an error: {exc}") from None


def _seed() -> int:
    return random.SystemRandom().randrange(1 << 31)


def launches_per_gemm(impl, problem, params) -> int:
    if getattr(impl, "kind", "") != "kernel":
        return 1
    if impl.splitk_reduce is not None and impl.launch(problem, impl.resolve(params)).grid[2] > 1:
        return 2
    return 1


def launches_per_sum(impl, n: int, params) -> int:
    """Passes of a reduce kernel over n elements (one launch each)."""
    if getattr(impl, "kind", "") != "kernel":
        return 1
    from ..reduce.runner import plan

    return len(plan(impl, impl.resolve(params), n))


def _profiled(call) -> bool:
    nvtx = _nvtx()
    if nvtx:
        nvtx[0](RANGE)
    call()
    if nvtx:
        nvtx[1]()
    return nvtx is not None


def run(impl_name: str, M: int, N: int, K: int, alpha: float, beta: float, params: dict, warmup: int,
        check: bool = True) -> dict:
    from ..bench import verify_runner
    from ..cuda.device import device
    from ..problem import GemmProblem
    from ..registry import select
    from ..runner import GemmRunner
    from ..verify import make_inputs

    impl = select(impl_name, op="sgemm")[0]
    problem = GemmProblem(M, N, K, alpha, beta)
    stream = device().create_stream()
    runner = GemmRunner(impl, params)
    info: dict = {"op": "sgemm", "impl": impl.name, "shape": problem.shape, "params": runner.params,
                  "warmup": warmup, "launches_per_call": launches_per_gemm(impl, problem, runner.params)}
    done = 0
    if check and impl.kind == "kernel":
        verdict, _ = verify_runner(runner, problem, stream)
        info.update(verified=bool(verdict.passed), rel_err=float(verdict.rel_err), reason=verdict.reason)
        done = 1
    import cupy as cp

    A, B, C = make_inputs(problem, _seed())
    cp.cuda.get_current_stream().synchronize()
    for _ in range(max(warmup - done, 0)):
        runner.enqueue(problem, A, B, C, stream)
    _sync(stream)

    def profiled():
        runner.enqueue(problem, A, B, C, stream)
        _sync(stream)

    info["nvtx"] = _profiled(profiled)
    return info


def run_reduce(impl_name: str, n: int, params: dict, warmup: int, check: bool = True) -> dict:
    import cupy as cp

    from ..cuda.device import device
    from ..reduce.bench import verify_runner
    from ..reduce.runner import ReduceRunner
    from ..reduce.verify import make_input
    from ..registry import select

    impl = select(impl_name, op="reduce")[0]
    stream = device().create_stream()
    runner = ReduceRunner(impl, params)
    info: dict = {"op": "reduce", "impl": impl.name, "n": n, "params": runner.params, "warmup": warmup,
                  "launches_per_call": launches_per_sum(impl, n, runner.params)}
    x = make_input(n, _seed(), "uniform")
    runner.prepare(n)
    cp.cuda.get_current_stream().synchronize()
    for _ in range(warmup):
        runner.enqueue(x, stream)
    _sync(stream)

    def profiled():
        runner.enqueue(x, stream)
        _sync(stream)

    info["nvtx"] = _profiled(profiled)
    if check and impl.kind == "kernel":  # after the profiled launches: ncu counts no more of them
        verdict, _ = verify_runner(runner, n, stream)
        info.update(verified=bool(verdict.passed), rel_err=float(verdict.rel_err), reason=verdict.reason)
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True)
    ap.add_argument("--op", default="sgemm", choices=("sgemm", "reduce"))
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

    try:
        params = json.loads(args.params)
        if args.op == "reduce":
            if args.elements is None:
                ap.error("--op reduce needs --n")
            info = run_reduce(args.impl, args.elements, params, args.warmup, check=not args.no_check)
        else:
            if None in (args.M, args.N, args.K):
                ap.error("sgemm needs --M, --N and --K")
            info = run(args.impl, args.M, args.N, args.K, args.alpha, args.beta, params, args.warmup,
                       check=not args.no_check)
    except GemmlabError as exc:
        print(PREFIX + json.dumps({"error": str(exc)}), flush=True)
        return 2
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
