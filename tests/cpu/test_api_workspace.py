"""api/launches.workspace without a GPU: an executor built for one stream (launching_on) takes its
buffers from CuPy's pool on that stream and clears them there, the host not waiting; one built for
no stream (a plan's) or for a stream being captured makes them on CuPy's current stream and waits
for them. cuBLASLt's workspace comes the same way, not cleared. CuPy, the stream switch and the
capture query are stood in for."""
import contextlib
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from gemmlab.api import launches


@pytest.fixture
def pool(monkeypatch):
    """Records (what, count, the stream CuPy was switched to) per allocation and 'wait' per host wait."""
    from gemmlab.cuda import device, launch_graph

    class Log(list):
        capturing: set

    log, on = Log(), [None]

    @contextlib.contextmanager
    def switched(handle):
        on[0] = handle
        try:
            yield
        finally:
            on[0] = None

    current = SimpleNamespace(ptr=7, synchronize=lambda: log.append("wait"), is_capturing=lambda: False)
    def made(what):  # an array with a device pointer of its own, as CuPy's
        return lambda n, dtype: log.append((what, n, on[0])) or SimpleNamespace(
            host=np.zeros(n, dtype), data=SimpleNamespace(ptr=0x10000 * len(log)))

    fake = SimpleNamespace(zeros=made("zeros"), empty=made("empty"),
                           cuda=SimpleNamespace(get_current_stream=lambda: current))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(device, "cupy_stream", switched)
    log.capturing = set()
    monkeypatch.setattr(launch_graph, "is_captured", lambda stream: stream in log.capturing)
    return log


def test_an_executor_for_one_stream_clears_its_workspace_there_and_does_not_wait(pool):
    with launches.launching_on(11):
        launches.workspace(64)
        launches.workspace(8, zeroed=False)
    assert pool == [("zeros", 64, 11), ("empty", 8, 11)]


@pytest.mark.parametrize("zeroed", [True, False])
def test_a_plans_workspace_is_made_on_cupys_stream_and_waited_for(pool, zeroed):
    # zeroed or not: a block CuPy just freed with work queued on its stream must not reach a launch
    # on another stream before that work is done (session 36's review)
    launches.workspace(64, zeroed=zeroed)
    assert pool == [("zeros" if zeroed else "empty", 64, None), "wait"]


def test_a_stream_being_captured_gets_a_workspace_made_now(pool):
    pool.capturing.add(11)  # a clearing enqueued there would only be recorded, not run
    with launches.launching_on(11):
        launches.workspace(64)
    assert pool == [("zeros", 64, None), "wait"]


def test_the_building_stream_is_restored_after_a_nested_build_and_after_an_error(pool):
    with launches.launching_on(11):
        with launches.launching_on(12):
            launches.workspace(1)
        launches.workspace(2)
    with pytest.raises(RuntimeError), launches.launching_on(13):
        raise RuntimeError("a build that failed")
    launches.workspace(3)
    assert pool == [("zeros", 1, 12), ("zeros", 2, 11), ("zeros", 3, None), "wait"]


def test_cublaslts_workspace_comes_from_the_call_streams_pool_uncleared_with_its_owner(pool):
    # its owner, kept by the prepared GEMM, hands the block back to that stream's pool when dropped:
    # no cuMemFree, which waited for the whole device (session 37)
    with launches.launching_on(11):
        ptr, owner = launches.library_workspace(1 << 20)
    assert pool == [("empty", 1 << 20, 11)]
    assert ptr == owner.data.ptr != 0


def test_a_plans_cublaslt_workspace_is_waited_for_like_its_other_buffers(pool):
    launches.library_workspace(4096)
    assert pool == [("empty", 4096, None), "wait"]
