"""hgemm benchmark points: verify first, then time, then store - gemmlab.bench's flow with
16-bit inputs. A point that fails verification is recorded FAIL and gets no time; a shape a
kernel refuses is an ERROR row with the refusal as its reason."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..bench import (BenchOptions, PointResult, check_each, measured_fields, new_seed, raise_on_failure,
                     sync_or_raise, time_enqueue)
from ..errors import GemmlabError, LaunchError, OutOfMemoryError
from ..problem import GemmProblem
from .runner import HgemmRunner, refusal
from .verify import Verdict, compare, make_inputs

__all__ = ["HgemmPoint", "hgemm_bytes", "raise_on_failure", "run_bench", "run_point", "verify_runner", "verify_sweep"]


def hgemm_bytes(p: GemmProblem) -> int:
    """A and B read once (2 bytes an element, 4 for tf32), C written once in fp32 (and read when
    beta != 0)."""
    item = 4 if p.dtype == "tf32" else 2
    return item * (p.M * p.K + p.K * p.N) + 4 * p.M * p.N * (2 if p.beta != 0.0 else 1)


@dataclass
class HgemmPoint(PointResult):
    """gemmlab.bench's point with hgemm's bytes and op; tables.py reads it unchanged."""

    @property
    def gbps(self) -> float | None:
        return hgemm_bytes(self.problem) / (self.stats.median * 1e6) if self.stats else None

    def row(self) -> dict:
        p = self.problem
        row = dict(op="hgemm", impl=self.impl, impl_kind=self.impl_kind, params=self.params, M=p.M, N=p.N, K=p.K,
                   alpha=p.alpha, beta=p.beta, dtype=p.dtype, status=self.status, reason=self.reason,
                   seed=self.seed, gflops=self.gflops, gbps=self.gbps)
        return {**row, **measured_fields(self.verdict, self.stats, self.clocks, self.resources)}


def _inputs(problem: GemmProblem, seed: int, host: bool = False):
    import cupy as cp

    try:
        if host:  # made by NumPy and copied: no CuPy kernel runs (sanitizer runs)
            import numpy as np

            A, B, C0 = (cp.asarray(x) for x in make_inputs(problem, seed, xp=np))
        else:
            A, B, C0 = make_inputs(problem, seed)
        cp.cuda.get_current_stream().synchronize()  # CuPy filled them on its own stream
        return A, B, C0
    except cp.cuda.memory.OutOfMemoryError:
        raise OutOfMemoryError(f"out of GPU memory for {problem.shape}") from None


def verify_runner(runner: HgemmRunner, problem: GemmProblem, stream, seed: int | None = None,
                  host_data: bool = False) -> tuple[Verdict, int]:
    """Run once on fresh rounded inputs (NaN-poisoned C when beta == 0) and compare with fp64."""
    seed = new_seed() if seed is None else seed
    A, B, C0 = _inputs(problem, seed, host_data)
    C = C0.copy()
    import cupy as cp

    cp.cuda.get_current_stream().synchronize()
    runner.enqueue(problem, A, B, C, stream)
    sync_or_raise(stream)
    return compare(C, A, B, C0, problem.alpha, problem.beta, problem.dtype), seed


def run_point(impl: Any, problem: GemmProblem, stream, options: BenchOptions, inputs=None) -> HgemmPoint:
    """Verify (unless options.check is off) and time one implementation on one problem."""
    params = dict(options.params.get(impl.name) or {})
    result = HgemmPoint(impl.name, impl.kind, problem, "ERROR", params=params)
    try:
        reason = refusal(impl, problem)
        if reason:  # refused before compiling: one clear line in the failures table
            result.reason = reason
            return result
        runner = HgemmRunner(impl, params, problem.dtype)
        result.params, result.resources = runner.params, runner.resources
        if options.check:
            verdict, result.seed = verify_runner(runner, problem, stream)
            result.verdict = verdict
            if not verdict.passed:
                result.status, result.reason = "FAIL", verdict.reason
                return result
        A, B, C = inputs if inputs is not None else _inputs(problem, new_seed())[:3]
        result.stats, result.clocks = time_enqueue(lambda: runner.enqueue(problem, A, B, C, stream), stream, options)
        result.status = "PASS" if options.check else "UNCHECKED"
    except LaunchError:
        raise  # the CUDA context is unusable after this: stop the run (rows so far are kept)
    except GemmlabError as exc:
        result.status, result.reason = "ERROR", str(exc)
    return result


def run_bench(impls: Iterable[Any], problems: Iterable[GemmProblem], options: BenchOptions,
              on_result: Callable[[HgemmPoint], None] | None = None) -> list[HgemmPoint]:
    """Every implementation on every problem; cuBLAS and the kernels time the same inputs."""
    from ..cuda.device import device

    stream = device().create_stream()
    results = []
    impls = list(impls)
    for problem in problems:
        A, B, _ = _inputs(problem, new_seed())
        import cupy as cp

        C = cp.zeros((problem.M, problem.N), dtype=cp.float32)
        cp.cuda.get_current_stream().synchronize()
        for impl in impls:
            result = run_point(impl, problem, stream, options, (A, B, C))
            results.append(result)
            if on_result:
                on_result(result)
        del A, B, C
    return results


def verify_sweep(impls: Iterable[Any], problems: Iterable[GemmProblem], dtype: str,
                 params: Mapping[str, Mapping[str, int]] | None = None,
                 on_result: Callable[[HgemmPoint], None] | None = None,
                 host_data: bool = False) -> list[HgemmPoint]:
    """Verification only (no timing), for `gemmlab verify --op hgemm`, the GPU tests and the
    sanitizer. Every problem must have `dtype` (one compiled kernel per implementation)."""
    problems = list(problems)
    if any(p.dtype != dtype for p in problems):
        raise ValueError(f"verify_sweep({dtype!r}) was given problems of another dtype")

    def check(point: HgemmPoint, runner: HgemmRunner, stream) -> None:
        point.verdict, point.seed = verify_runner(runner, point.problem, stream, host_data=host_data)

    return check_each(impls, problems,
                      lambda impl, p: HgemmPoint(impl.name, impl.kind, p, "ERROR",
                                                 params=dict((params or {}).get(impl.name, {}))),
                      lambda impl, params_: HgemmRunner(impl, params_, dtype), check, on_result)
