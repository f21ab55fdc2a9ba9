"""ReduceRunner._ensure without a GPU: buffers that CuPy made on its current stream are waited for
on the host only where the launches go to another stream. The API's runner path (a CUB or torch
sum) enqueues inside its call's stream, so its first call no longer waits on the host for the work
queued there (session 36); bench's prepare(), which does not say the stream, still waits."""
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from gemmlab.ops.reduce_passes import ReduceRunner


@pytest.fixture
def cupy_on(monkeypatch):
    """A CuPy stand-in whose current stream is handle 7; returns the list of synchronisations."""
    waits = []
    current = SimpleNamespace(ptr=7, synchronize=lambda: waits.append(7))
    fake = SimpleNamespace(empty=lambda *a, **k: SimpleNamespace(size=a[0] if a and a[0] else 1),
                           zeros=lambda *a, **k: SimpleNamespace(size=a[0]), float32=np.float32,
                           uint32=np.uint32, cuda=SimpleNamespace(get_current_stream=lambda: current))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return waits


def _baseline_runner():
    runner = ReduceRunner.__new__(ReduceRunner)  # a library baseline: nothing compiled
    runner.compiled, runner.impl = None, SimpleNamespace(ceiling=False)
    runner._bufs, runner._counter, runner._scratch, runner._out = [], None, None, None
    return runner


def test_a_first_enqueue_on_cupys_own_stream_does_not_wait(cupy_on):
    _baseline_runner()._ensure(1000, SimpleNamespace(handle=7))
    assert cupy_on == []


@pytest.mark.parametrize("stream", [None, SimpleNamespace(handle=9)])
def test_buffers_made_for_another_or_an_unknown_stream_are_waited_for(cupy_on, stream):
    runner = _baseline_runner()
    runner._ensure(1000, stream)
    assert cupy_on == [7]
    runner._ensure(1000, stream)  # nothing new to make: nothing to wait for
    assert cupy_on == [7]
