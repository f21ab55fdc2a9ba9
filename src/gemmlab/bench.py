"""Benchmark points: verify first, then time, then store. One point = (implementation, problem).

A point that fails verification is recorded FAIL and gets no time. Every row is written
to the results database as soon as it exists, so an interrupted run keeps what it did.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .errors import GemmlabError, LaunchError, OutOfMemoryError, VerificationError
from .problem import GemmProblem
from .runner import GemmRunner
from .timing import Stats, Timer
from .verify import Verdict, compare, make_inputs


@dataclass
class BenchOptions:
    warmup: int = 3
    repeat: int = 10
    flush: bool = True
    check: bool = True
    min_time_ms: float = 50.0
    params: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # per implementation
    tuned: Mapping[tuple[str, str], Mapping[str, int]] = field(default_factory=dict)  # (impl, shape) -> params


@dataclass
class PointResult:
    impl: str
    impl_kind: str
    problem: GemmProblem
    status: str  # PASS | FAIL | ERROR | UNCHECKED
    params: dict = field(default_factory=dict)
    reason: str = ""
    verdict: Verdict | None = None
    stats: Stats | None = None
    seed: int | None = None
    clocks: dict = field(default_factory=dict)
    resources: Any = None

    @property
    def timed(self) -> bool:
        return self.stats is not None

    @property
    def gflops(self) -> float | None:
        return self.problem.flops / (self.stats.median * 1e6) if self.stats else None

    @property
    def gbps(self) -> float | None:
        return self.problem.min_bytes / (self.stats.median * 1e6) if self.stats else None

    def row(self) -> dict:
        """Fields for ResultStore.add_result."""
        p = self.problem
        row = dict(op="sgemm", impl=self.impl, impl_kind=self.impl_kind, params=self.params, M=p.M, N=p.N, K=p.K,
                   alpha=p.alpha, beta=p.beta, dtype=p.dtype, status=self.status, reason=self.reason,
                   seed=self.seed, gflops=self.gflops, gbps=self.gbps)
        return {**row, **measured_fields(self.verdict, self.stats, self.clocks, self.resources)}


def measured_fields(verdict, stats, clocks: dict, resources) -> dict:
    """The row fields every op records the same way: verdict, timing, clocks, resources."""
    row: dict = {}
    if verdict is not None:
        row.update(rel_err=verdict.rel_err, tol=verdict.tol)
    if stats is not None:
        row.update(stats.as_fields())
    row.update(clocks)
    if resources is not None:
        row.update(registers=resources.registers, spill_stores=resources.spill_stores,
                   smem_static=resources.smem_static)
    return row


def sync_or_raise(stream) -> None:
    try:
        stream.sync()
    except Exception as exc:  # an illegal address or a failed launch surfaces here
        raise LaunchError(f"the GPU reported an error: {exc}") from None


def new_seed() -> int:
    return random.SystemRandom().randrange(1 << 31)


def verify_runner(runner: GemmRunner, problem: GemmProblem, stream, seed: int | None = None) -> tuple[Verdict, int]:
    """Run once on fresh random inputs (NaN-poisoned C when beta == 0) and compare with fp64."""
    seed = new_seed() if seed is None else seed
    import cupy as cp

    try:
        A, B, C0 = make_inputs(problem, seed)
        C = C0.copy()
        cp.cuda.get_current_stream().synchronize()  # CuPy filled them on its own stream
    except cp.cuda.memory.OutOfMemoryError:
        raise OutOfMemoryError(f"out of GPU memory for {problem.shape}") from None
    runner.enqueue(problem, A, B, C, stream)
    sync_or_raise(stream)
    return compare(C, A, B, C0, problem.alpha, problem.beta), seed


def _allocate(problem: GemmProblem, seed: int):
    import cupy as cp

    try:
        rng = cp.random.default_rng(seed)
        A = rng.uniform(-1.0, 1.0, (problem.M, problem.K), dtype=cp.float32)
        B = rng.uniform(-1.0, 1.0, (problem.K, problem.N), dtype=cp.float32)
        C = rng.uniform(-1.0, 1.0, (problem.M, problem.N), dtype=cp.float32)
        cp.cuda.get_current_stream().synchronize()
        return A, B, C
    except cp.cuda.memory.OutOfMemoryError:
        raise OutOfMemoryError(f"out of GPU memory for {problem.shape}") from None


def time_enqueue(enqueue: Callable[[], None], stream, options: BenchOptions) -> tuple[Stats, dict]:
    """Time one enqueue the way every op does: the Timer (warm-up, L2 flush, enough samples),
    with the SM clock and temperature sampled over the timed launches only."""
    from .cuda.nvml import ClockSampler

    timer = Timer(stream, warmup=options.warmup, repeat=options.repeat, flush=options.flush,
                  min_time_ms=options.min_time_ms)
    sampler = ClockSampler()
    try:
        stats = timer.measure(enqueue, around=sampler)
    finally:
        timer.close()
    return stats, sampler.summary()


def run_point(impl: Any, problem: GemmProblem, stream, options: BenchOptions,
              inputs=None) -> PointResult:
    """Verify (unless options.check is off) and time one implementation on one problem."""
    params = dict(options.params.get(impl.name) or options.tuned.get((impl.name, problem.shape), {}))
    result = PointResult(impl.name, impl.kind, problem, "ERROR", params=params)
    try:
        runner = GemmRunner(impl, params)
        result.params, result.resources = runner.params, runner.resources
        if options.check:
            verdict, result.seed = verify_runner(runner, problem, stream)
            result.verdict = verdict
            if not verdict.passed:
                result.status, result.reason = "FAIL", verdict.reason
                return result
        A, B, C = inputs if inputs is not None else _allocate(problem, new_seed())
        result.stats, result.clocks = time_enqueue(lambda: runner.enqueue(problem, A, B, C, stream), stream, options)
        result.status = "PASS" if options.check else "UNCHECKED"
    except LaunchError:
        raise  # the CUDA context is unusable after this: stop the run (rows so far are kept)
    except GemmlabError as exc:
        result.status, result.reason = "ERROR", str(exc)
    return result


def run_bench(impls: Iterable[Any], problems: Iterable[GemmProblem], options: BenchOptions,
              on_result: Callable[[PointResult], None] | None = None) -> list[PointResult]:
    """Every implementation on every problem; cuBLAS and the kernels share the timing inputs."""
    from .cuda.device import device

    dev = device()
    stream = dev.create_stream()
    results = []
    impls = list(impls)
    for problem in problems:
        inputs = _allocate(problem, new_seed())
        for impl in impls:
            result = run_point(impl, problem, stream, options, inputs)
            results.append(result)
            if on_result:
                on_result(result)
        del inputs
    return results


def check_each(impls: Iterable[Any], problems: Iterable[Any], new_point: Callable[[Any, Any], Any],
               new_runner: Callable[[Any, dict], Any], check: Callable[[Any, Any, Any], None],
               on_result: Callable[[Any], None] | None = None) -> list:
    """The verification loop every op shares: one runner per implementation (compiled once),
    one point per problem; a GemmlabError becomes that point's ERROR, a LaunchError ends
    the sweep (the CUDA context is gone). `check(point, runner, stream)` fills the verdict."""
    from .cuda.device import device

    stream = device().create_stream()
    problems = list(problems)
    results = []
    for impl in impls:
        runner = None
        for problem in problems:
            point = new_point(impl, problem)
            try:
                if runner is None:
                    runner = new_runner(impl, point.params)
                point.params, point.resources = runner.params, runner.resources
                check(point, runner, stream)
                point.status = "PASS" if point.verdict.passed else "FAIL"
                point.reason = point.verdict.reason
            except LaunchError:
                raise
            except GemmlabError as exc:
                point.reason = str(exc)
            results.append(point)
            if on_result:
                on_result(point)
    return results


def verify_sweep(impls: Iterable[Any], problems: Iterable[GemmProblem],
                 params: Mapping[str, Mapping[str, int]] | None = None,
                 on_result: Callable[[PointResult], None] | None = None) -> list[PointResult]:
    """Verification only (no timing), for `gemmlab verify` and the GPU tests."""
    def check(point: PointResult, runner: GemmRunner, stream) -> None:
        point.verdict, point.seed = verify_runner(runner, point.problem, stream)

    return check_each(impls, problems,
                      lambda impl, p: PointResult(impl.name, impl.kind, p, "ERROR",
                                                  params=dict((params or {}).get(impl.name, {}))),
                      GemmRunner, check, on_result)


def raise_on_failure(results: Iterable[Any], where: Callable[[Any], str] = lambda r: r.problem.shape) -> None:
    failed = [r for r in results if r.status == "FAIL"]
    if failed:
        r = failed[0]
        raise VerificationError(f"{r.impl} failed at {where(r)}: {r.reason}"
                                + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))

