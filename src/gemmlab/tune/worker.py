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
READY = {"ready": True}  # a worker's first message: prepared, reading tasks from now on


def resolve(path: str) -> Callable[[dict], dict]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def visible_id(index: int) -> str:
    """What CUDA_VISIBLE_DEVICES must say to show a child process GPU `index` as this process
    counts it: under a CUDA_VISIBLE_DEVICES of its own, `index` is a position in that list
    (--devices 1 with CUDA_VISIBLE_DEVICES=4,5 is GPU 5), else the driver's own number."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    physical = [d.strip() for d in visible.split(",")] if visible else None
    return physical[index] if physical and index < len(physical) else str(index)


def _worker_main(conn, device: int | None, task_path: str) -> None:
    if device is not None:  # before any CUDA call: this process sees only its GPU
        os.environ["CUDA_VISIBLE_DEVICES"] = visible_id(device)
    run = resolve(task_path)
    prepare = getattr(importlib.import_module(task_path.partition(":")[0]), "prepare_worker", None)
    if prepare is not None:  # imports and the CUDA context, while the first point still compiles
        prepare()
    try:
        conn.send(READY)  # the parent's clock for a task starts now: start-up is not the candidate's time
    except OSError:  # the parent went while this one started (closed, killed): nobody to tell, nothing to run
        return
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        result = run(task)
        try:
            conn.send(result)
        except OSError:  # the parent is gone (a Dask worker killed mid-trial): nobody to answer
            return
        if result.get("fatal"):
            os._exit(3)  # a sticky CUDA error: this context is unusable, the parent starts a new worker


_stream = None


def prepare_worker() -> None:
    """What run_candidate's first trial would pay for, done when the process starts: the
    imports, the device's context and the stream. A failure here is left for that trial to
    meet and report as its row."""
    global _stream
    try:
        from ..cuda.device import device
        from ..harness.bench import run_point

        del run_point  # imported for its import time, paid here

        if _stream is None:
            _stream = device().create_stream()
    except Exception:  # noqa: BLE001 - reported by the first trial, with the point it concerns
        pass


def run_candidate(task: dict) -> dict:
    """Verify and time one parameter set of one kernel (runs inside a worker)."""
    global _stream
    from .. import registry
    from ..harness.bench import BenchOptions, run_point
    from ..cuda.device import device
    from ..errors import GemmlabError, LaunchError
    from ..problem import GemmProblem
    from .compile_pool import spills

    problem = GemmProblem(task["M"], task["N"], task["K"], task.get("alpha", 1.0), task.get("beta", 0.0),
                          task.get("dtype", "fp32"))
    try:
        if _stream is None:
            _stream = device().create_stream()
        spec = registry.get(task["impl"])
        options = BenchOptions(warmup=task.get("warmup", 2), repeat=task.get("repeat", 10),
                               min_time_ms=task.get("min_time_ms", 20.0), params={spec.name: task["params"]})
        result = run_point(spec, problem, _stream, options)
        row = result.row()
        spilled = spills(result.resources)
        if spilled and row.get("status") == "PASS":  # a point not compiled up front (bayes): as a precompiled one's row
            row.update(status="ERROR", reason=spilled)
        # which GPU ran it (with --devices each worker sees only its own)
        row["extra"] = {**(row.get("extra") or {}), "device": os.environ.get("CUDA_VISIBLE_DEVICES", "0")}
        return {**row, "fatal": False}
    except LaunchError as exc:
        return {"impl": task["impl"], "params": task["params"], "status": "ERROR", "reason": str(exc), "fatal": True}
    except GemmlabError as exc:
        return {"impl": task["impl"], "params": task["params"], "status": "ERROR", "reason": str(exc), "fatal": False}


class CandidateProcess:
    """One spawned process that runs candidates one at a time on one GPU.

    The local pool multiplexes several of these; a Dask worker owns one and runs its trials
    in it, so a candidate that crashes, hangs or poisons its context costs that process, never
    the worker that hosts it.
    """

    def __init__(self, device: int | None = None, task_path: str = DEFAULT_TASK):
        self.device, self.task_path = device, task_path
        self.process = self.conn = None
        self.task: dict | None = None
        self.started = 0.0  # when the task in flight was sent, or when the process said it was ready
        self.ready = False
        self._ctx = mp.get_context("spawn")  # never fork a process that may hold a CUDA context

    def start(self) -> None:
        """Start the process now (send starts it otherwise): it prepares while points compile."""
        if self.process is None:
            parent, child = self._ctx.Pipe()
            self.process = self._ctx.Process(target=_worker_main, args=(child, self.device, self.task_path),
                                             daemon=True)
            self.process.start()
            child.close()
            self.conn, self.ready = parent, False

    def send(self, task: dict) -> None:
        if self.process is not None and not self.process.is_alive():
            self.kill()  # it died with no task in flight (as it started, the OOM killer): not this task's doing
        self.start()
        self.task, self.started = task, time.monotonic()
        try:
            self.conn.send(task)
        except OSError:  # it died since that look: receive() reads its pipe's end and answers that it died
            pass

    def receive(self, now: float) -> dict | None:
        """The answer to the task in flight (call when conn is readable): a dead process is an
        ERROR result, and a fatal result or a death replaces the process. None where the message
        was the process saying it is ready: the task's clock starts again at `now`, so a new
        process's imports and CUDA context (seconds; after every crash) never count against the
        candidate's --timeout."""
        try:
            result = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(5)
            result = {"status": "ERROR", "reason": f"the worker died (exit code {self.process.exitcode})",
                      "fatal": True}
        if result == READY:
            self.ready, self.started = True, now  # read after the send: now is never earlier
            return None
        if result.get("fatal"):
            self.kill()
        self.task = None
        return result

    def expire(self, timeout_s: float) -> dict:
        """The task in flight ran past timeout_s (or the process took that long to start): end the
        process, answer ERROR."""
        reason = f"timed out after {timeout_s:.0f} s" if self.ready else \
            f"the worker did not start within {timeout_s:.0f} s"
        self.kill()
        self.task = None
        return {"status": "ERROR", "reason": reason, "fatal": True}

    def call(self, task: dict, timeout_s: float) -> dict:
        """Run one task and wait for it (the Dask worker's way): timeout_s for the process to
        start, if it must, then timeout_s for the task."""
        self.send(task)
        while wait([self.conn], timeout=max(0.0, self.started + timeout_s - time.monotonic())):
            result = self.receive(time.monotonic())
            if result is not None:
                return result
        return self.expire(timeout_s)

    def kill(self) -> None:
        if self.process is not None:
            if self.process.is_alive():
                self.process.kill()
            self.process.join(5)
        self.process = self.conn = None

    def close(self) -> None:
        if self.process is not None:
            try:
                self.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
            self.process.join(2)
        self.kill()


@dataclass
class WorkerPool:
    """The local back end: one CandidateProcess per GPU of this machine, fed from one queue."""

    devices: list[int | None] = field(default_factory=lambda: [None])
    task_path: str = DEFAULT_TASK
    timeout_s: float = 120.0
    restarts: int = 0

    def __post_init__(self) -> None:
        self._slots = [CandidateProcess(d, self.task_path) for d in self.devices]
        for slot in self._slots:
            slot.start()

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
                        slot.send(task)
                busy = [s for s in self._slots if s.task is not None]
                if not busy:
                    return
                ready = wait([s.conn for s in busy], timeout=1.0)
                now = time.monotonic()
                for slot in busy:
                    task = slot.task
                    if slot.conn in ready:
                        result = slot.receive(now)
                        if result is None:  # ready: its candidate's clock starts now
                            continue
                    elif now - slot.started > self.timeout_s:
                        result = slot.expire(self.timeout_s)
                    else:
                        continue
                    if slot.process is None:
                        self.restarts += 1
                    result.setdefault("worker", "local" if slot.device is None else f"GPU {slot.device}")
                    on_result(task, result)
        finally:
            self.close()

    def close(self) -> None:
        for slot in self._slots:
            slot.close()
