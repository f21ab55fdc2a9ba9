"""Where a sweep's candidates run: one small interface, two back ends.

- LocalExecutor (the default, no extra dependency): NVRTC in a process pool on this machine,
  then one worker process per local GPU (worker.WorkerPool).
- dask_executor.DaskExecutor (`pip install "gemmlab[cluster]"`): compilation on any Dask worker,
  trials on the GPU workers of one GPU model.

The tuner asks an executor to start compiling a list of points (a CompileStream: it waits for
one point's outcome when that trial is due) and to run a stream of tasks, answering each with
on_result(task, result) as soon as it is known.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterator, Protocol

from .compile_pool import CompileStream, compile_stream
from .worker import WorkerPool


class TrialExecutor(Protocol):
    restarts: int  # worker processes replaced during run()

    def compile(self, impl: str, points: list[dict], arch: str) -> CompileStream: ...

    def run(self, tasks: Iterator[dict], on_result: Callable[[dict, dict], None]) -> None: ...


class LocalExecutor:
    """This machine: `jobs` NVRTC processes (default: the cores the trials leave), one candidate
    process per GPU in options.devices."""

    def __init__(self, options: Any):
        self.options = options
        self.restarts = 0

    def compile(self, impl: str, points: list[dict], arch: str) -> CompileStream:
        # the trials run meanwhile: leave their processes a core each
        jobs = self.options.jobs or max(1, (os.cpu_count() or 1) - len(self.options.devices))
        return compile_stream(impl, points, arch, jobs)

    def run(self, tasks: Iterator[dict], on_result: Callable[[dict, dict], None]) -> None:
        pool = WorkerPool(devices=self.options.devices, task_path=self.options.task_path,
                          timeout_s=self.options.timeout_s)
        pool.run(tasks, on_result)
        self.restarts = pool.restarts
