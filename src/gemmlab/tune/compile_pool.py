"""Compile many candidates in parallel: NVRTC in a process pool, sharing the disk cache.

A failure or a spill is a result with its reason, never an exception for the sweep. The
compilations are a stream: the sweep asks for one point's outcome when its trial is due, so
the first trials run while later points still compile.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from ..cuda.compile import Resources
from ..harness.tuned import canonical


_niced = False


def background_priority() -> None:
    """Lower this compiling process's CPU priority, once. Compilations fill every core while
    trials run beside them; a trial's process must not wait for a core, as its timing loop and
    verification are the sweep's critical path (and a trial slowed by a busy CPU is noise)."""
    global _niced
    if not _niced:
        _niced = True
        try:
            os.nice(10)
        except (AttributeError, OSError):  # no nice on this platform: compile at normal priority
            pass


@dataclass
class CompileOutcome:
    params: dict
    resources: Resources | None
    seconds: float
    error: str = ""
    cache_key: str = ""  # where the cubin is in the NVRTC cache (empty when it failed)


def compile_one(args) -> CompileOutcome:
    name, params, arch = args
    from .. import registry
    from ..cuda.compile import compile_kernel
    from ..errors import GemmlabError

    try:
        ck = compile_kernel(registry.get(name), params, arch=arch)
    except GemmlabError as exc:
        return CompileOutcome(params, None, 0.0, str(exc))
    r = ck.resources
    why = spills(r)
    if why:
        return CompileOutcome(params, r, ck.compile_seconds, why)
    return CompileOutcome(params, r, ck.compile_seconds, cache_key=ck.cache_key)


def spills(r) -> str:
    """Why a build is no candidate ("" when it is): local memory, which a tuned kernel must not use.
    Asked of a precompiled point here and of every other point when its trial has run (worker)."""
    if r is None or not (r.spill_stores or r.spill_loads or r.stack_frame):
        return ""
    return f"spills ({r.spill_stores} B stores, {r.spill_loads} B loads, {r.stack_frame} B stack)"


class CompileStream:
    """Compilations under way, one future per point (a concurrent.futures or a Dask future):
    outcome(point) waits for that point's. `unpack` turns a future's value into its outcome;
    `fallback(point)`, when given, compiles a point whose future failed (its worker died) here."""

    def __init__(self, futures: dict[str, Any], unpack: Callable[[Any], CompileOutcome] = lambda v: v,
                 shutdown: Callable[[], None] = lambda: None,
                 fallback: Callable[[dict], CompileOutcome] | None = None):
        self._start = self._last = time.perf_counter()
        self._lock = threading.Lock()
        self._futures, self._unpack, self._shutdown, self._fallback = futures, unpack, shutdown, fallback
        for future in futures.values():
            future.add_done_callback(self._done)

    def _done(self, _future) -> None:
        with self._lock:
            self._last = max(self._last, time.perf_counter())

    def outcome(self, point: dict) -> CompileOutcome:
        future = self._futures.pop(canonical(point))
        try:
            value = future.result()
        except Exception:  # noqa: BLE001 - the process or worker compiling it is gone
            if self._fallback is None:
                raise
            outcome = self._fallback(point)
            self._done(future)
            return outcome
        return self._unpack(value)

    @property
    def seconds(self) -> float:
        """From the start to the last compilation that finished."""
        return self._last - self._start

    def close(self) -> None:
        for future in self._futures.values():
            future.cancel()
        self._shutdown()


class _Now:
    """A future that runs when asked: the one-process way (jobs=1)."""

    def __init__(self, fn: Callable[[], Any]):
        self._fn, self._callbacks = fn, []

    def add_done_callback(self, fn) -> None:
        self._callbacks.append(fn)

    def result(self) -> Any:
        value = self._fn()
        for fn in self._callbacks:
            fn(self)
        return value

    def cancel(self) -> bool:
        return True


def compile_stream(name: str, points: list[dict], arch: str, jobs: int | None = None) -> CompileStream:
    """Start compiling every point on `jobs` processes (default: every core), in order."""
    jobs = jobs or os.cpu_count() or 1
    if jobs <= 1 or len(points) <= 1:
        return CompileStream({canonical(p): _Now(lambda p=p: compile_one((name, p, arch))) for p in points})
    # spawn: the parent may hold a CUDA context, which must not be forked
    import multiprocessing as mp

    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=background_priority)
    futures = {canonical(p): pool.submit(compile_one, (name, p, arch)) for p in points}
    return CompileStream(futures, shutdown=lambda: pool.shutdown(wait=False, cancel_futures=True))
