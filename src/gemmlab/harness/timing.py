"""CUDA-event timing with an L2 flush before every timed launch, and its statistics.

The method (nvbench's and triton.testing.do_bench's, see DESIGN.md):
- warm-up launches first, not counted (module load, handle creation, clocks ramping);
- cold L2 by default: a memset of twice the L2 size before every timed launch, so each
  launch reads its inputs from DRAM as it would inside a real application;
- a short spin kernel before each flush keeps the GPU busy while the host enqueues the
  flush, the start event and the launch, so host overhead never lands inside the events;
  it spins for a few times the enqueue's host time as measured during the warm-up;
- at least `repeat` samples, more until `min_time_ms` of measured time is reached;
- the median is the headline; min, mean, stdev and count are kept.
Batch mode (no flush) times `batch` back-to-back launches between two events instead:
warm L2, and the per-launch overhead of tiny kernels is amortised.
"""
from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from ..registry import KernelSpec, Launch

HOLD_NS = 20_000  # the least hold; raised per implementation to cover its host enqueue time
MAX_HOLD_NS = 2_000_000

_HOLD = KernelSpec(name="hold", op="internal", title="stream hold", idea="timing helper",
                   source="util/hold.cu", entry="gemmlab::hold",
                   geometry=lambda p, v: Launch((1, 1, 1), (1, 1, 1)))


@dataclass(frozen=True)
class Stats:
    samples_ms: tuple[float, ...]
    batch: int = 1  # launches per sample (1 unless batch mode)

    @property
    def count(self) -> int:
        return len(self.samples_ms)

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def min(self) -> float:
        return min(self.samples_ms)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples_ms)

    @property
    def stdev(self) -> float:
        return statistics.stdev(self.samples_ms) if self.count > 1 else 0.0

    def as_fields(self) -> dict[str, float]:
        return {"t_min_ms": self.min, "t_median_ms": self.median, "t_mean_ms": self.mean,
                "t_stdev_ms": self.stdev, "count": self.count}


def samples_needed(estimate_ms: float, repeat: int, min_time_ms: float, max_repeat: int) -> int:
    """At least `repeat`; more when `repeat` runs would measure less than `min_time_ms`."""
    if estimate_ms <= 0:
        return max_repeat
    return max(repeat, min(max_repeat, math.ceil(min_time_ms / estimate_ms)))


@dataclass
class Timer:
    stream: object  # a cuda.core Stream
    warmup: int = 3
    repeat: int = 10
    flush: bool = True
    min_time_ms: float = 50.0
    max_repeat: int = 1000
    _flush_buf: object = field(default=None, repr=False)
    _hold: object = field(default=None, repr=False)
    _hold_ns: int = HOLD_NS

    def _prepare(self) -> None:
        if self._hold is None:
            from ..cuda.compile import compile_kernel
            from ..cuda.device import device, info

            dev = device()
            self._hold = compile_kernel(_HOLD, arch=info().arch).kernel()
            if self.flush:
                self._flush_bytes = 2 * info().l2_bytes
                self._flush_buf = dev.allocate(self._flush_bytes, stream=self.stream)

    def _enqueue_hold(self, ns: int) -> None:
        import numpy as np
        from ..cuda.core_import import cuda_core

        core = cuda_core()
        core.launch(self.stream, core.LaunchConfig(grid=1, block=1), self._hold, np.uint64(ns))

    def _enqueue_flush(self) -> None:
        from cuda.bindings import driver

        (err,) = driver.cuMemsetD8Async(int(self._flush_buf.handle), 0, self._flush_bytes, int(self.stream.handle))
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"L2 flush memset failed: {err.name}")

    def _record(self):
        from ..cuda.core_import import cuda_core

        return self.stream.record(options=cuda_core().EventOptions(timing_enabled=True))

    def _sample_events(self, enqueue: Callable[[], None], batch: int):
        self._enqueue_hold(self._hold_ns)
        if self.flush:
            self._enqueue_flush()
        start = self._record()
        for _ in range(batch):
            enqueue()
        end = self._record()
        return start, end

    def measure(self, enqueue: Callable[[], None], around=None) -> Stats:
        """Time `enqueue` (which puts exactly one launch of the work on self.stream).

        `around`, a context manager such as a clock sampler, is entered after the warm-up
        so that it sees only the timed launches.
        """
        self._prepare()
        # Warm-up rounds of two launches each (--warmup's help says so); the last round's first
        # launch gives the estimate that sizes the run, so there is always one round.
        estimate = 0.0
        host_ns = 0
        for _ in range(max(1, self.warmup)):
            start, end = self._sample_events(enqueue, 1)
            self.stream.sync()
            estimate = end - start
            t0 = time.perf_counter_ns()
            enqueue()  # host cost of one enqueue, to size the hold
            host_ns = time.perf_counter_ns() - t0
            self.stream.sync()
        self._hold_ns = min(MAX_HOLD_NS, max(HOLD_NS, 3 * host_ns + 10_000))
        batch = 1
        if not self.flush:
            batch = max(1, min(200, math.ceil(1.0 / max(estimate, 1e-4))))  # >= ~1 ms a sample
        n = samples_needed(estimate * batch, self.repeat, self.min_time_ms, self.max_repeat)
        with around if around is not None else contextlib.nullcontext():
            events = [self._sample_events(enqueue, batch) for _ in range(n)]
            self.stream.sync()
        return Stats(tuple((end - start) / batch for start, end in events), batch=batch)

    def close(self) -> None:
        if self._flush_buf is not None:
            self._flush_buf.close(self.stream)
            self._flush_buf = None
