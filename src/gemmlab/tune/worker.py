"""Candidates run in worker processes, so that one bad candidate cannot end the sweep.

An illegal address poisons a CUDA context for good, a bad launch can hang the GPU, and a
segfault ends the process: each worker owns one GPU (its own context) and runs one
candidate at a time. When a candidate crashes its worker, hangs past the timeout, or
leaves a sticky CUDA error, that candidate is recorded as ERROR with the reason, the
worker is replaced, and the sweep goes on. Results reach the parent one by one, so an
interrupted sweep loses at most the candidates in flight.
"""
from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Callable, Iterator

DEFAULT_TASK = "gemmlab.tune.worker:run_candidate"


def _resolve(path: str) -> Callable[[dict], dict]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _worker_main(conn, device: int | None, task_path: str) -> None:
    if device is not None:  # before any CUDA call: this process sees only its GPU
        os.environ["CUDA_VISIBLE_DEVICES"] = str(device)
    run = _resolve(task_path)
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        result = run(task)
        conn.send(result)
        if result.get("fatal"):
            os._exit(3)  # a sticky CUDA error: this context is unusable, the parent starts a new worker


_stream = None


def run_candidate(task: dict) -> dict:
    """Verify and time one parameter set of one kernel (runs inside a worker)."""
    global _stream
    from .. import registry
    from ..harness.bench import BenchOptions, run_point
    from ..cuda.device import device
    from ..errors import GemmlabError, LaunchError
    from ..problem import GemmProblem

    problem = GemmProblem(task["M"], task["N"], task["K"], task.get("alpha", 1.0), task.get("beta", 0.0))
    try:
        if _stream is None:
            _stream = device().create_stream()
        spec = registry.get(task["impl"])
        options = BenchOptions(warmup=task.get("warmup", 2), repeat=task.get("repeat", 10),
                               min_time_ms=task.get("min_time_ms", 20.0), params={spec.name: task["params"]})
        result = run_point(spec, problem, _stream, options)
        row = result.row()
        # which GPU ran it (with --devices each worker sees only its own)
        row["extra"] = {**(row.get("extra") or {}), "device": os.environ.get("CUDA_VISIBLE_DEVICES", "0")}
        return {**row, "fatal": False}
    except LaunchError as exc:
        return {"impl": task["impl"], "params": task["params"], "status": "ERROR", "reason": str(exc), "fatal": True}
    except GemmlabError as exc:
        return {"impl": task["impl"], "params": task["params"], "status": "ERROR", "reason": str(exc), "fatal": False}


@dataclass
class _Slot:
    device: int | None
    process: object = None
    conn: object = None
    task: dict | None = None
    started: float = 0.0


@dataclass
class WorkerPool:
    devices: list[int | None] = field(default_factory=lambda: [None])
    task_path: str = DEFAULT_TASK
    timeout_s: float = 120.0
    restarts: int = 0

    def __post_init__(self) -> None:
        self._ctx = mp.get_context("spawn")  # never fork a process that may hold a CUDA context
        self._slots = [_Slot(d) for d in self.devices]

    def _start(self, slot: _Slot) -> None:
        parent, child = self._ctx.Pipe()
        slot.process = self._ctx.Process(target=_worker_main, args=(child, slot.device, self.task_path), daemon=True)
        slot.process.start()
        child.close()
        slot.conn = parent

    def _replace(self, slot: _Slot) -> None:
        if slot.process is not None and slot.process.is_alive():
            slot.process.kill()
        if slot.process is not None:
            slot.process.join(5)
        self.restarts += 1
        slot.process = slot.conn = None

    def run(self, tasks: Iterator[dict], on_result: Callable[[dict, dict], None]) -> None:
        """Feed tasks to the workers until exhausted; on_result(task, result) for each."""
        pending = iter(tasks)
        exhausted = False
        try:
            while True:
                for slot in self._slots:  # hand out work to idle slots
                    if slot.task is None and not exhausted:
                        task = next(pending, None)
                        if task is None:
                            exhausted = True
                            break
                        if slot.process is None:
                            self._start(slot)
                        slot.task, slot.started = task, time.monotonic()
                        slot.conn.send(task)
                busy = [s for s in self._slots if s.task is not None]
                if not busy:
                    return
                ready = wait([s.conn for s in busy], timeout=1.0)
                now = time.monotonic()
                for slot in busy:
                    if slot.conn in ready:
                        try:
                            result = slot.conn.recv()
                        except (EOFError, OSError):
                            slot.process.join(5)
                            code = slot.process.exitcode
                            result = {"status": "ERROR", "reason": f"the worker died (exit code {code})", "fatal": True}
                            self._replace(slot)
                        else:
                            if result.get("fatal"):
                                self._replace(slot)
                        task, slot.task = slot.task, None
                        on_result(task, result)
                    elif now - slot.started > self.timeout_s:
                        self._replace(slot)
                        task, slot.task = slot.task, None
                        on_result(task, {"status": "ERROR", "reason": f"timed out after {self.timeout_s:.0f} s",
                                         "fatal": True})
        finally:
            self.close()

    def close(self) -> None:
        for slot in self._slots:
            if slot.process is not None:
                try:
                    slot.conn.send(None)
                except (OSError, BrokenPipeError):
                    pass
                slot.process.join(2)
                if slot.process.is_alive():
                    slot.process.kill()
                slot.process = slot.conn = None
