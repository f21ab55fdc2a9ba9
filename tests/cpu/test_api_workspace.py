"""api/launches.workspace without a GPU: an executor built for one stream (launching_on) takes its
buffers from CuPy's pool on that stream and clears them there, the host not waiting; one built for
no stream (a plan's) or for a stream being captured makes them on CuPy's current stream and waits
for them. cuBLASLt's workspace comes the same way, not cleared. CuPy, the stream switch and the
capture query are stood in for."""
import contextlib
import sys
import threading
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from gemmlab.api import launches, library_workspaces
from gemmlab.cuda.cublas import WORKSPACE_BYTES


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
    monkeypatch.setattr(library_workspaces, "_blocks", weakref.WeakValueDictionary())
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


def test_cublaslts_workspace_is_one_block_per_stream_shared_by_its_executors(pool):
    # fp32 asks for 2-29 MiB per shape: one each held gigabytes in a program whose shapes change
    with launches.launching_on(11):
        ptr, owner = library_workspaces.library_workspace(1 << 20)
        ptr2, owner2 = library_workspaces.library_workspace(1 << 10)  # another shape, less: the same block
    with launches.launching_on(12):
        ptr3, owner3 = library_workspaces.library_workspace(1 << 10)  # another stream: its own
    assert pool == [("empty", 1 << 20, 11), ("empty", 1 << 10, 12)]  # made on its stream, no wait
    assert ptr == ptr2 == owner.ptr != 0 and owner2 is owner and owner3 is not owner and ptr3 == owner3.ptr


def test_a_larger_need_gets_a_new_block_of_twice_the_size_and_older_executors_keep_theirs(pool):
    with launches.launching_on(11):
        _, small = library_workspaces.library_workspace(1 << 20)
        _, big = library_workspaces.library_workspace((1 << 20) + 1)
        _, again = library_workspaces.library_workspace(1 << 10)
    assert big is not small and big.nbytes == 2 << 20 and again is big
    assert pool == [("empty", 1 << 20, 11), ("empty", 2 << 20, 11)]
    with launches.launching_on(11):
        _, large = library_workspaces.library_workspace(17 << 20)  # more than twice: what it asks
        _, cap = library_workspaces.library_workspace(18 << 20)  # twice would pass cuBLAS's most
    assert large.nbytes == 17 << 20 and cap.nbytes == WORKSPACE_BYTES == 32 << 20


def test_a_streams_block_goes_with_its_last_executor(pool):
    import gc

    with launches.launching_on(11):
        _, owner = library_workspaces.library_workspace(4096)
    del owner
    gc.collect()
    assert 11 not in library_workspaces._blocks
    with launches.launching_on(11):
        library_workspaces.library_workspace(4096)
    assert [entry[0] for entry in pool] == ["empty", "empty"]  # made again


def test_a_plans_cublaslt_workspace_is_its_own_and_waited_for(pool):
    _, first = library_workspaces.library_workspace(4096)
    _, second = library_workspaces.library_workspace(4096)
    assert first is not second
    assert pool == [("empty", 4096, None), "wait", ("empty", 4096, None), "wait"]


def test_a_stream_being_captured_gets_a_cublaslt_workspace_of_its_own(pool):
    pool.capturing.add(11)
    with launches.launching_on(11):
        _, first = library_workspaces.library_workspace(4096)
        _, second = library_workspaces.library_workspace(4096)
    assert first is not second and 11 not in library_workspaces._blocks


def test_the_per_thread_default_stream_gets_a_block_per_thread(pool):
    # handle 2 is cudaStreamPerThread: another stream in each thread, running at the same time, so
    # one block between two threads would be used by two streams at once (session 37's review)
    per_thread = library_workspaces.PER_THREAD_STREAM
    got = {}

    def build(name):
        with launches.launching_on(per_thread):
            got[name] = library_workspaces.library_workspace(4096)[1]

    build("main")
    other = threading.Thread(target=build, args=("other",))
    other.start()
    other.join()
    build("main again")
    assert got["other"] is not got["main"] and got["main again"] is got["main"]
    with launches.launching_on(11):  # an ordinary handle is one stream for every thread
        mine = library_workspaces.library_workspace(4096)[1]
    seen = []
    t = threading.Thread(target=lambda: seen.append(_build_on(11)))
    t.start()
    t.join()
    assert seen == [mine]


def _build_on(stream):
    with launches.launching_on(stream):
        return library_workspaces.library_workspace(4096)[1]
