"""Benchmark points for every op: verify first, then time, then store. One point = (implementation,
problem); the op (gemmlab.ops, found from the problem) supplies the runner, data and checks.

A point that fails verification is recorded FAIL and gets no time; a problem an implementation
refuses is an ERROR row with the refusal as its reason. Every row is written to the results
database as soon as it exists, so an interrupted run keeps what it did.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .. import ops
from ..errors import GemmlabError, LaunchError, VerificationError
from ..problem import ReduceProblem
from .dispatched import Slot
from .timing import Stats, Timer


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
class Point:
    impl: str
    impl_kind: str
    problem: Any
    status: str  # PASS | FAIL | ERROR | UNCHECKED
    params: dict = field(default_factory=dict)
    reason: str = ""
    verdict: Any = None
    stats: Stats | None = None
    seed: int | None = None
    clocks: dict = field(default_factory=dict)
    resources: Any = None
    grids: list = field(default_factory=list)  # blocks of each launch, where the op records them
    bytes_moved: int = 0  # 0: the op's count for the problem
    shares: dict = field(default_factory=dict)  # recorded shares of reference baselines (fractions)
    chosen: dict = field(default_factory=dict)  # `dispatch` points: what it resolved to (harness.dispatched)

    @property
    def op(self) -> str:
        return self.problem.op

    @property
    def timed(self) -> bool:
        return self.stats is not None

    @property
    def gflops(self) -> float | None:
        flops = ops.of(self.problem).flops(self.problem)
        return flops / (self.stats.median * 1e6) if self.stats and flops else None

    @property
    def gbps(self) -> float | None:
        if not self.stats:
            return None
        return (self.bytes_moved or ops.of(self.problem).bytes_moved(self)) / (self.stats.median * 1e6)

    def row(self) -> dict:
        """Fields for ResultStore.add_result."""
        row = dict(op=self.op, impl=self.impl, impl_kind=self.impl_kind, params=self.params, status=self.status,
                   reason=self.reason, seed=self.seed, gflops=self.gflops, gbps=self.gbps,
                   **ops.of(self.problem).row_fields(self))
        if self.chosen:  # in `extra`, so the row's params stay the kernel's own
            row["extra"] = {**(row.get("extra") or {}), "dispatch": self.chosen}
        return {**row, **measured_fields(self.verdict, self.stats, self.clocks, self.resources)}


PointResult = Point  # the name the sgemm harness used


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


def new_seed() -> int:
    return random.SystemRandom().randrange(1 << 31)


def verify_runner(runner, problem, stream, seed: int | None = None, host_data: bool = False,
                  special: bool = True):
    """Run once on fresh random inputs (NaN-poisoned outputs) and compare with fp64: (verdict, seed)."""
    seed = new_seed() if seed is None else seed
    return ops.of(problem).verify(runner, problem, stream, seed, host_data=host_data, special=special), seed


def time_enqueue(enqueue: Callable[[], None], stream, options: BenchOptions) -> tuple[Stats, dict]:
    """Time one enqueue the way every op does: the Timer (warm-up, L2 flush, enough samples),
    with the SM clock and temperature sampled over the timed launches only."""
    from ..cuda.nvml import ClockSampler

    timer = Timer(stream, warmup=options.warmup, repeat=options.repeat, flush=options.flush,
                  min_time_ms=options.min_time_ms)
    sampler = ClockSampler()
    try:
        stats = timer.measure(enqueue, around=sampler)
    finally:
        timer.close()
    return stats, sampler.summary()


def run_point(impl: Any, problem, stream, options: BenchOptions, inputs=None,
              done: Mapping[str, Point] | None = None) -> Point:
    """Verify (unless options.check is off) and time one implementation on one problem; `done`:
    the points of the same problem measured before, for the shares the op records."""
    op = ops.of(problem)
    params = dict(options.params.get(impl.name) or options.tuned.get((impl.name, problem.shape), {}))
    result = Point(impl.name, impl.kind, problem, "ERROR", params=params)
    try:
        reason = op.refusal(impl, problem)
        if reason:  # refused before compiling: one clear line in the failures table
            result.reason = reason
            return result
        runner = op.prepare_for(impl, params, problem)
        result.params, result.resources = runner.params, runner.resources
        op.annotate(result, runner)
        if options.check:
            verdict, result.seed = verify_runner(runner, problem, stream)
            result.verdict = verdict
            if not verdict.passed:
                result.status, result.reason = "FAIL", verdict.reason
                return result
        if inputs is None:
            inputs = op.timing_inputs(problem, new_seed())
        op.before_timing(runner, problem)
        result.stats, result.clocks = time_enqueue(lambda: op.enqueue(runner, problem, inputs, stream), stream,
                                                   options)
        result.status = "PASS" if options.check else "UNCHECKED"
        result.shares = op.shares_of(result, done or {})
    except LaunchError as exc:  # the CUDA context is unusable after this: stop the run (rows so far are kept)
        result.reason = str(exc)
        exc.point = result  # the point that stopped it, for the caller to record before it stops
        raise
    except GemmlabError as exc:
        result.status, result.reason = "ERROR", str(exc)
    return result


def run_bench(impls: Iterable[Any], problems: Iterable[Any], options: BenchOptions,
              on_result: Callable[[Point], None] | None = None) -> list[Point]:
    """Every implementation on every problem; the baselines and the kernels time the same inputs.
    A `dispatch` slot among them (harness.dispatched) runs its pick for each problem."""
    from ..cuda.device import device

    stream = device().create_stream()
    results = []
    impls = list(impls)
    for problem in problems:
        op = ops.of(problem)
        inputs = op.timing_inputs(problem, new_seed())
        done: dict[str, Point] = {}
        for impl in op.measure_order(impls):
            pick = impl.at(problem) if isinstance(impl, Slot) else None
            try:
                result = run_point(pick.impl if pick else impl, problem, stream, options, inputs, done)
            except LaunchError as exc:  # its row, then the stop
                if pick:
                    exc.point.chosen = pick.record
                results.append(exc.point)
                if on_result:
                    on_result(exc.point)
                raise
            if pick:
                result.chosen = pick.record
            done[impl.name] = result
            results.append(result)
            if on_result:
                on_result(result)
        del inputs
    return results


def verify_sweep(impls: Iterable[Any], problems: Iterable[Any], params: Mapping[str, Mapping[str, int]] | None = None,
                 on_result: Callable[[Point], None] | None = None, host_data: bool = False,
                 special: bool = True) -> list[Point]:
    """Verification only (no timing), for `gemmlab verify`, the GPU tests and the sanitizer runs.
    One runner per implementation and runner key (compiled once: the problem's dtype, and
    whatever else the op builds a kernel for, e.g. hgemm's layout), one point per problem
    (a plain int is a sum of that many elements);
    a GemmlabError becomes that point's ERROR, a LaunchError ends the sweep (the context is gone).
    host_data: inputs made by NumPy and copied, so that only gemmlab's kernels run (sanitizer);
    special: the ops' special-value cases (reduce: NaN and inf) too."""
    from ..cuda.device import device

    stream = device().create_stream()
    problems = [ReduceProblem(p) if isinstance(p, int) else p for p in problems]  # an int: n elements
    results = []
    for impl in impls:
        runners: dict = {}
        for problem in problems:
            op = ops.of(problem)
            point = Point(impl.name, impl.kind, problem, "ERROR", params=dict((params or {}).get(impl.name, {})))
            try:
                reason = op.refusal(impl, problem)
                if reason:
                    raise GemmlabError(reason)
                key = op.runner_key(problem)
                runner = runners.get(key)
                if runner is None:
                    runner = runners[key] = op.prepare_for(impl, point.params, problem)
                point.params, point.resources = runner.params, runner.resources
                op.annotate(point, runner)
                point.verdict, point.seed = verify_runner(runner, problem, stream, host_data=host_data,
                                                          special=special)
                point.status = "PASS" if point.verdict.passed else "FAIL"
                point.reason = point.verdict.reason
            except LaunchError as exc:  # the context is gone: this point's row, then the stop
                point.reason = str(exc)
                results.append(point)
                if on_result:
                    on_result(point)
                raise
            except GemmlabError as exc:
                point.reason = str(exc)
            results.append(point)
            if on_result:
                on_result(point)
    return results


def raise_on_failure(results: Iterable[Point]) -> None:
    failed = [r for r in results if r.status == "FAIL"]
    if failed:
        r = failed[0]
        raise VerificationError(f"{r.impl} failed at {ops.of(r.problem).where(r)}: {r.reason}"
                                + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))
