"""One interface over the reduce kernels and baselines: prepare once, then enqueue a sum.

A block-partials rung (1-8) reaches the scalar in passes: the same kernel on its own partials
until one value is left (plan()). Rungs 9-10 need one launch and a workspace of partials and
self-resetting counters. Baselines enqueue their library call. Buffers are allocated once per
size, outside any timed region; one runner serves one stream at a time.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..kernels.reduce.specs import CONTIGUOUS, SINGLE_PASS
from ..registry import Launch
from ..cuda.prepared import PreparedImpl
from ..problem import ReduceProblem


def plan(spec, params: Mapping[str, int], n: int) -> list[tuple[int, Launch]]:
    """(elements in, launch) of every pass that takes n elements to one value."""
    passes = []
    m = n
    while True:
        launch = spec.launch(ReduceProblem(m), params)
        passes.append((m, launch))
        if SINGLE_PASS in spec.tags or launch.grid[0] == 1:
            return passes
        if launch.grid[0] >= m:  # a configuration that does not shrink would never end
            raise ValueError(f"{spec.name}: a pass over {m} elements makes {launch.grid[0]} partials")
        m = launch.grid[0]


class ReduceRunner(PreparedImpl):
    """A reduce kernel compiled for the current device (or a baseline), ready to enqueue."""

    def __init__(self, impl: Any, params: Mapping[str, int] | None = None, arch: str | None = None):
        super().__init__(impl, params, arch)
        self._bufs: list = []  # ping-pong partial buffers (passes) or [partials] (single pass)
        self._counter = None
        self._scratch = None  # the copy baseline's destination
        self._out = None

    @property
    def single_pass(self) -> bool:
        return self.compiled is not None and SINGLE_PASS in self.impl.tags

    @property
    def contiguous(self) -> bool:
        return self.compiled is not None and CONTIGUOUS in self.impl.tags

    def plan(self, n: int) -> list[tuple[int, Launch]]:
        return plan(self.impl, self.params, n)

    def grids(self, n: int) -> list[int]:
        """Blocks of each launch for n elements (empty for a baseline)."""
        return [launch.grid[0] for _, launch in self.plan(n)] if self.compiled else []

    def bytes_moved(self, n: int) -> int:
        return getattr(self.impl, "bytes_per_element", 4) * n

    # -- buffers --------------------------------------------------------------------------

    def _ensure(self, n: int, stream=None) -> None:
        """Every buffer n elements need. CuPy makes (and zeroes) them on its current stream; the
        host waits for that only where the launches go to another `stream` (a cuda.core Stream;
        None: not known, as prepare()'s callers before timing). The API runs inside its call's
        stream, so its first call of a shape does not wait on the host for the work queued there."""
        import cupy as cp

        allocated = False
        if self._out is None:
            self._out = cp.empty((), dtype=cp.float32)
            allocated = True
        if self.compiled is not None:
            grids = self.grids(n)
            if self.single_pass:
                need = [grids[0]]
                if self._counter is None:  # [tickets, next tile]: the kernels leave both at 0
                    self._counter = cp.zeros(2, dtype=cp.uint32)
                    allocated = True
            else:  # pass k writes buffer k % 2 (reading the other one); the last pass writes out
                inner = grids[:-1]
                need = [max(inner[0::2], default=0), max(inner[1::2], default=0)]
            while len(self._bufs) < len(need):
                self._bufs.append(None)
            for i, size in enumerate(need):
                if size and (self._bufs[i] is None or self._bufs[i].size < size):
                    self._bufs[i] = cp.empty(size, dtype=cp.float32)
                    allocated = True
        elif getattr(self.impl, "ceiling", False):
            if self._scratch is None or self._scratch.size < n:
                self._scratch = cp.empty(n, dtype=cp.float32)
                allocated = True
        if allocated:
            current = cp.cuda.get_current_stream()
            if stream is None or current.ptr != int(stream.handle):
                current.synchronize()  # CuPy worked on its own stream

    def prepare(self, n: int) -> None:
        """Allocate every buffer n elements need (call before timing)."""
        self._ensure(n)

    def poison(self) -> None:
        """NaN in every partial buffer and in out, so an unwritten value cannot pass."""
        import cupy as cp

        for buf in self._bufs:
            if buf is not None:
                buf.fill(np.nan)
        if self._out is not None:
            self._out.fill(np.nan)
        cp.cuda.get_current_stream().synchronize()

    # -- launches -------------------------------------------------------------------------

    def _launch(self, launch: Launch, stream, src_ptr: int, m: int, dst_ptr: int) -> None:
        from ..cuda.launch import launch_kernel

        args = [src_ptr, np.int64(m), dst_ptr]
        if self.single_pass:
            args += [self._bufs[0].data.ptr, self._counter.data.ptr]
        launch_kernel(self.compiled, launch, stream, *args)

    def enqueue(self, x, stream, out=None):
        """sum(x) on `stream` (a cuda.core Stream); x a contiguous 1-D fp32 CuPy array.

        Returns the result: `out` (a 0-d fp32 CuPy array) or the runner's own for a kernel,
        the library's fresh 0-d array or tensor for a baseline, the copy for the ceiling.
        """
        n = int(x.size)
        self._ensure(n, stream)
        if self.compiled is None:
            return self.impl.enqueue(x, int(stream.handle), self._scratch)
        out = self._out if out is None else out
        passes = self.plan(n)
        src = x.data.ptr
        for k, (m, launch) in enumerate(passes):
            last = k == len(passes) - 1
            dst = out.data.ptr if last else self._bufs[k % 2].data.ptr
            self._launch(launch, stream, src, m, dst)
            src = dst
        return out

    def enqueue_first_pass(self, x, stream):
        """Only the first launch (block partials); returns the partials (a view, gridDim.x long)."""
        if self.compiled is None or self.single_pass:
            raise ValueError(f"{self.name} has no block-partials pass")
        n = int(x.size)
        self._ensure(n, stream)
        m, launch = self.plan(n)[0]
        grid = launch.grid[0]
        if grid == 1:
            self._launch(launch, stream, x.data.ptr, m, self._out.data.ptr)
            return self._out.reshape(1)
        self._launch(launch, stream, x.data.ptr, m, self._bufs[0].data.ptr)
        return self._bufs[0][:grid]

    def counter_value(self) -> int | None:
        """The single-pass counters' sum (0 between launches), None for other implementations."""
        return int(self._counter.get().sum()) if self._counter is not None else None


def value_of(result) -> float:
    """A 0-d result (CuPy array, torch tensor, NumPy) as a Python float (synchronises)."""
    if hasattr(result, "item"):
        return float(result.item())
    return float(result)
