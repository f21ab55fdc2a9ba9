"""The sweep: compile every kept point in parallel, then verify and time each on the GPU.

Every trial becomes a results row (kind 'tune'), including compile failures and spills,
so a sweep's database says what was tried and why each point was dropped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..bench import BenchOptions, PointResult, run_point
from ..problem import GemmProblem
from ..registry import KernelSpec
from .compile_pool import compile_all


@dataclass
class TuneOptions:
    warmup: int = 2
    repeat: int = 10
    jobs: int | None = None
    min_time_ms: float = 20.0


def tune(spec: KernelSpec, problem: GemmProblem, points: list[dict], options: TuneOptions,
         on_result: Callable[[PointResult], None] | None = None) -> list[PointResult]:
    from ..cuda.device import device, info

    dev = device()
    outcomes = compile_all(spec.name, points, info().arch, options.jobs)
    stream = dev.create_stream()
    results = []
    for outcome in outcomes:
        if outcome.error:
            result = PointResult(spec.name, "kernel", problem, "ERROR", params=outcome.params, reason=outcome.error,
                                 resources=outcome.resources)
        else:
            bench_options = BenchOptions(warmup=options.warmup, repeat=options.repeat, check=True,
                                         min_time_ms=options.min_time_ms, params={spec.name: outcome.params})
            result = run_point(spec, problem, stream, bench_options)
        results.append(result)
        if on_result:
            on_result(result)
    return results


def best(results: list[PointResult]) -> PointResult | None:
    timed = [r for r in results if r.status == "PASS" and r.gflops]
    return max(timed, key=lambda r: r.gflops) if timed else None
