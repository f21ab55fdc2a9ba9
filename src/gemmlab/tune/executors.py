"""Where a sweep's candidates run: one small interface, two back ends.

- LocalExecutor (the default, no extra dependency): NVRTC in a process pool on this machine,
  then one worker process per local GPU (worker.WorkerPool).
- dask_executor.DaskExecutor (`pip install "gemmlab[cluster]"`): compilation on any Dask worker,
  trials on the GPU workers of one GPU model.

The tuner only asks an executor to compile a list of points and to run a stream of tasks,
answering each with on_result(task, result) as soon as it is known.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol

from .compile_pool import CompileOutcome, compile_all
from .worker import WorkerPool


class TrialExecutor(Protocol):
    restarts: int  # worker processes replaced during run()

    def compile(self, impl: str, points: list[dict], arch: str) -> Iterable[CompileOutcome]: ...

    def run(self, tasks: Iterator[dict], on_result: Callable[[dict, dict], None]) -> None: ...


class LocalExecutor:
    """This machine: `jobs` NVRTC processes, one candidate process per GPU in options.devices."""

    def __init__(self, options: Any):
        self.options = options
        self.restarts = 0

    def compile(self, impl: str, points: list[dict], arch: str) -> list[CompileOutcome]:
        return compile_all(impl, points, arch, self.options.jobs)

    def run(self, tasks: Iterator[dict], on_result: Callable[[dict, dict], None]) -> None:
        pool = WorkerPool(devices=self.options.devices, task_path=self.options.task_path,
                          timeout_s=self.options.timeout_s)
        pool.run(tasks, on_result)
        self.restarts = pool.restarts
