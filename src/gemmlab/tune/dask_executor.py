"""Trials on a Dask cluster: the executor the tuner drives for one GPU model (cluster.py holds
the session it runs on). Compilation goes to the CPU-only workers (any worker without them),
trials to that model's GPU workers, `depth` in flight per worker; a trial lost to a dead, hung or
silent worker is retried once on another worker, then recorded as ERROR with both reasons."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..harness.tuned import canonical
from .cluster import GPU_RESOURCE, ClusterError, ClusterSession
from .compile_pool import CompileOutcome, CompileStream, compile_one
from .remote import INFRASTRUCTURE_FAILURES, compile_point, run_trial, start_trial_process

CLIENT_GRACE_S = 60.0  # beyond the in-worker timeout, before the client gives up on an answer


@dataclass
class _Attempt:
    task: dict
    tries: int = 0
    submitted: float = 0.0
    first_failure: str | None = None
    first_worker: str | None = None


class DaskExecutor:
    """Trials of one GPU model on that model's workers, `depth` in flight per worker: enough to
    keep each GPU busy, few enough that an adaptive strategy learns from nearly every answer."""

    def __init__(self, session: ClusterSession, model: str, task_path: str, timeout_s: float, depth: int = 2):
        self.session, self.model = session, model
        # trials queued per worker: the next one waits on the worker while this one runs, so the
        # GPU does not idle for a client round trip between trials (measured: 18% of the trial
        # phase at one in flight per worker, rung 10 at 4096^3 on two H200s)
        self.depth = depth
        self.task_path, self.timeout_s = task_path, timeout_s
        self.restarts = 0  # trials retried after a worker died, hung or stopped answering
        self._entries: dict[str, str] = {}  # canonical params -> cache key (the client's cache holds it)
        self._warming: list = []  # futures of the GPU workers' candidate-process starts (kept alive)

    @property
    def deadline_s(self) -> float:
        """A queued trial may wait for the ones before it on its worker, each up to timeout_s to
        run and, after a crash, timeout_s more for the new candidate process to start."""
        return self.depth * 2 * self.timeout_s + CLIENT_GRACE_S

    def _addresses(self) -> list[str]:
        return [a for a, w in self.session.refresh().items() if w.model == self.model]

    def compile(self, impl: str, points: list[dict], arch: str) -> CompileStream:
        """NVRTC for every point, queued now in trial order: on the CPU-only workers if there are
        any (a GPU worker's one thread is for trials), else on any. Each entry lands in the
        client's cache on its way to the trial."""
        from ..cuda.compile import install_cache_entry

        # the GPU workers start their candidate processes now, ready when the first point is
        self._warming = [self.session.client.submit(start_trial_process, self.task_path, workers=[a],
                                                    allow_other_workers=False, pure=False, priority=20)
                         for a in self._addresses()]
        cpu_workers = self.session.cpu_workers()
        where = {"workers": cpu_workers, "allow_other_workers": False} if cpu_workers else {}
        client = self.session.client
        futures = {canonical(p): client.submit(compile_point, impl, p, arch, pure=False, **where) for p in points}

        def unpack(value) -> CompileOutcome:
            outcome, files = value
            if outcome.cache_key and files:
                install_cache_entry(outcome.cache_key, files)
                self._entries[canonical(outcome.params)] = outcome.cache_key
            return outcome

        # a compile lost with its worker (KilledWorker) is done here rather than failing the sweep
        return CompileStream(futures, unpack, fallback=lambda p: compile_one((impl, p, arch)))

    def _submit(self, attempt: _Attempt, exclude: str | None = None):
        from ..cuda.compile import read_cache_entry

        workers = self._addresses()
        if not workers:
            raise ClusterError(f"no {self.model} worker is left in the cluster")
        if exclude and len(workers) > 1:
            workers = [a for a in workers if a != exclude]
        key = self._entries.get(canonical(attempt.task["params"]))
        files = read_cache_entry(key) if key else None
        attempt.submitted = time.monotonic()
        return self.session.client.submit(
            run_trial, attempt.task, self.task_path, self.timeout_s, (key, files) if files else None,
            resources={GPU_RESOURCE: 1}, workers=workers, allow_other_workers=False, pure=False,
            priority=10)  # ahead of any compilation queued on the same worker

    def _outcome(self, future) -> tuple[dict, str | None] | None:
        """The trial's result, or an ERROR result for a task the cluster lost, and the worker;
        None while the task is still under way (a result lost with its worker is recomputed)."""
        from distributed.scheduler import KilledWorker

        status = future.status
        if status == "finished":
            try:
                result = future.result(timeout=30)
                return result, result.get("worker")
            except Exception:  # noqa: BLE001 - its worker died before the result was fetched
                status = future.status
        if status == "error":
            exc = future.exception()
            if isinstance(exc, KilledWorker):
                last = getattr(exc.last_worker, "address", None)
                return {"status": "ERROR", "reason": f"KilledWorker: its worker {last} died", "fatal": True}, last
            return {"status": "ERROR", "reason": f"{type(exc).__name__}: {exc}", "fatal": False}, None
        if status == "cancelled" or _scheduler_gone(self.session):
            raise ClusterError("the Dask scheduler went away")
        return None

    def run(self, tasks: Iterator[dict], on_result: Callable[[dict, dict], None]) -> None:
        from distributed import wait

        pending = iter(tasks)
        in_flight: dict[Any, _Attempt] = {}
        exhausted = False
        try:
            while True:
                while not exhausted and len(in_flight) < self.depth * max(1, len(self._addresses())):
                    task = next(pending, None)
                    if task is None:
                        exhausted = True
                        break
                    attempt = _Attempt(task)
                    in_flight[self._submit(attempt)] = attempt
                if not in_flight:
                    return
                try:
                    done, _ = wait(list(in_flight), timeout=1.0, return_when="FIRST_COMPLETED")
                except TimeoutError:  # Dask's wait raises where concurrent.futures returns
                    done = set()
                now = time.monotonic()
                for future in list(in_flight):
                    attempt = in_flight[future]
                    if future in done and (outcome := self._outcome(future)) is not None:
                        result, worker = outcome
                    elif now - attempt.submitted > self.deadline_s:
                        worker = _processing_worker(self.session, future.key)
                        future.cancel()
                        result = {"status": "ERROR", "fatal": True,
                                  "reason": f"no answer from the cluster after {self.deadline_s:.0f} s"}
                    else:
                        continue
                    del in_flight[future]
                    reason = result.get("reason") or ""
                    if result.get("status") == "ERROR" and attempt.tries == 0 and reason.startswith(
                            INFRASTRUCTURE_FAILURES):
                        attempt.tries, attempt.first_failure, attempt.first_worker = 1, reason, worker
                        self.restarts += 1
                        in_flight[self._submit(attempt, exclude=worker)] = attempt
                        continue
                    if attempt.first_failure:
                        result = {**result, "extra": {**(result.get("extra") or {}), "retried_after": attempt.first_failure,
                                                      "first_worker": attempt.first_worker}}
                    on_result(attempt.task, result)
        finally:
            for future in in_flight:
                future.cancel()


def _scheduler_gone(session: ClusterSession) -> bool:
    try:
        session.client.scheduler_info()
        return session.client.status not in ("running", "connecting")
    except Exception:  # noqa: BLE001 - any failure to reach it means the same here
        return True


def _processing_worker(session: ClusterSession, key) -> str | None:
    try:
        for address, keys in session.client.processing().items():
            if key in keys:
                return address
    except Exception:  # noqa: BLE001
        pass
    return None
