"""The sweep: choose points (a strategy), compile them in parallel, run each in a worker
process (verify, then time), record every trial - failures and spills included - and
keep going whatever one candidate does.

Where the candidates run is an executor (executors.py): this machine's GPUs (the default)
or a Dask cluster. Either way this process is the only writer of the results database, and a
row is written as soon as its trial's answer arrives."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..problem import GemmProblem
from ..registry import KernelSpec
from ..harness.tuned import canonical, tried_points
from .executors import LocalExecutor, TrialExecutor
from .search import Strategy
from .worker import DEFAULT_TASK


@dataclass
class TuneOptions:
    warmup: int = 2
    repeat: int = 10
    min_time_ms: float = 20.0
    jobs: int | None = None  # NVRTC processes
    devices: list[int | None] = field(default_factory=lambda: [None])
    timeout_s: float = 120.0  # per candidate, in its worker
    time_limit_s: float | None = None  # stop starting candidates after this
    resume: bool = False
    task_path: str = DEFAULT_TASK
    precompile: bool = True  # compile a static space up front (else each worker compiles its own)


@dataclass
class TuneSummary:
    trials: list[dict] = field(default_factory=list)  # every recorded row
    skipped: int = 0  # already in the database (--resume)
    compiled: int = 0
    compile_seconds: float = 0.0  # from the sweep's start to its last compilation (they overlap the trials)
    wall_seconds: float = 0.0
    restarts: int = 0

    @property
    def best(self) -> dict | None:
        timed = [t for t in self.trials if t.get("status") == "PASS" and t.get("gflops")]
        return max(timed, key=lambda t: t["gflops"]) if timed else None


def _row(spec: KernelSpec, problem: GemmProblem, params: dict, result: dict) -> dict:
    """A complete results row, also for a candidate whose worker died before answering."""
    row = {k: v for k, v in result.items() if k not in ("fatal", "worker")}
    if result.get("worker"):  # which worker answered: a column of extra, not of the table
        row["extra"] = {**(row.get("extra") or {}), "worker": result["worker"]}
    row.update(op=spec.op, impl=spec.name, impl_kind="kernel", params=params, M=problem.M, N=problem.N,
               K=problem.K, alpha=problem.alpha, beta=problem.beta, dtype=problem.dtype)
    row.setdefault("status", "ERROR")
    return row


def tune(spec: KernelSpec, problem: GemmProblem, strategy: Strategy, options: TuneOptions, arch: str,
         store: Any = None, run_id: int | None = None, gpu: str | None = None,
         on_result: Callable[[dict], None] | None = None, executor: TrialExecutor | None = None) -> TuneSummary:
    executor = executor or LocalExecutor(options)
    summary = TuneSummary()
    start = time.perf_counter()
    deadline = start + options.time_limit_s if options.time_limit_s else None
    done = tried_points(store, gpu, spec.name, problem) if (options.resume and store is not None) else {}
    for key, gflops in done.items():  # a learning strategy starts from what is recorded
        strategy.prior(json.loads(key), gflops)

    def record(row: dict) -> None:
        summary.trials.append(row)
        if store is not None:
            store.add_result(run_id, **{"flush": True, **row})  # tune always times with a cold L2
        if on_result:
            on_result(row)

    extra: dict[str, dict] = {}
    compiling = None
    if strategy.static and options.precompile:
        # every point not yet recorded goes to the compilers now, in the order it will run; a
        # trial starts as soon as its own point is compiled, so compiling overlaps the trials
        compiling = executor.compile(spec.name, [p for p in strategy.points if canonical(p) not in done], arch)

    def compiled(point: dict, key: str) -> bool:
        """Wait for this point's compilation; a failure or a spill is recorded as its row."""
        outcome = compiling.outcome(point)
        extra[key] = {"compile_seconds": outcome.seconds}
        if not outcome.error:
            summary.compiled += 1
            return True
        r = outcome.resources
        record(_row(spec, problem, point, {
            "status": "ERROR", "reason": outcome.error, "registers": r.registers if r else None,
            "spill_stores": r.spill_stores if r else None, "extra": extra[key]}))
        strategy.tell(point, None)
        return False

    def tasks():
        while deadline is None or time.perf_counter() < deadline:
            point = strategy.ask()
            if point is None:
                return
            key = canonical(point)
            if key in done:
                summary.skipped += 1
                continue
            if compiling is not None and not compiled(point, key):
                continue
            yield {"impl": spec.name, "params": point, "M": problem.M, "N": problem.N, "K": problem.K,
                   "dtype": problem.dtype,
                   "alpha": problem.alpha, "beta": problem.beta, "warmup": options.warmup,
                   "repeat": options.repeat, "min_time_ms": options.min_time_ms}

    def finished(task: dict, result: dict) -> None:
        row = _row(spec, problem, task["params"], result)
        if canonical(task["params"]) in extra:
            row["extra"] = {**(row.get("extra") or {}), **extra[canonical(task["params"])]}
        record(row)
        strategy.tell(task["params"], row.get("gflops") if row["status"] == "PASS" else None)

    try:
        executor.run(tasks(), finished)
    finally:
        if compiling is not None:
            summary.compile_seconds = compiling.seconds  # start to the last compilation done
            compiling.close()  # a time limit leaves points uncompiled: drop them
    summary.restarts = executor.restarts
    summary.wall_seconds = time.perf_counter() - start
    return summary
