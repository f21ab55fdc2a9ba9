"""api/launches.workspace without a GPU: an executor built for one stream (launching_on) takes its
buffers from CuPy's pool on that stream and clears them there, the host not waiting; one built for
no stream (a plan's) or for a stream being captured makes them on CuPy's current stream and waits
for them. cuBLASLt's workspace comes the same way, not cleared, and so do the kernels' shared
workspaces (api/shared_workspaces.py), whose flags a handover clears. CuPy, the stream switch, the
capture query, memsets and the driver's allocations are stood in for."""
import contextlib
import sys
import threading
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from gemmlab.api import launches, shared_workspaces
from gemmlab.cuda.cublaslt import WORKSPACE_BYTES


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
    monkeypatch.setattr(shared_workspaces, "_blocks", weakref.WeakValueDictionary())
    monkeypatch.setattr(shared_workspaces, "_kernel_blocks", weakref.WeakValueDictionary())
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
        ptr, owner = shared_workspaces.library_workspace(1 << 20)
        ptr2, owner2 = shared_workspaces.library_workspace(1 << 10)  # another shape, less: the same block
    with launches.launching_on(12):
        ptr3, owner3 = shared_workspaces.library_workspace(1 << 10)  # another stream: its own
    assert pool == [("empty", 1 << 20, 11), ("empty", 1 << 10, 12)]  # made on its stream, no wait
    assert ptr == ptr2 == owner.ptr != 0 and owner2 is owner and owner3 is not owner and ptr3 == owner3.ptr


def test_a_larger_need_gets_a_new_block_of_twice_the_size_and_older_executors_keep_theirs(pool):
    with launches.launching_on(11):
        _, small = shared_workspaces.library_workspace(1 << 20)
        _, big = shared_workspaces.library_workspace((1 << 20) + 1)
        _, again = shared_workspaces.library_workspace(1 << 10)
    assert big is not small and big.nbytes == 2 << 20 and again is big
    assert pool == [("empty", 1 << 20, 11), ("empty", 2 << 20, 11)]
    with launches.launching_on(11):
        _, large = shared_workspaces.library_workspace(17 << 20)  # more than twice: what it asks
        _, cap = shared_workspaces.library_workspace(18 << 20)  # twice would pass cuBLAS's most
    assert large.nbytes == 17 << 20 and cap.nbytes == WORKSPACE_BYTES == 32 << 20


def test_a_streams_block_goes_with_its_last_executor(pool):
    import gc

    with launches.launching_on(11):
        _, owner = shared_workspaces.library_workspace(4096)
    del owner
    gc.collect()
    assert 11 not in shared_workspaces._blocks
    with launches.launching_on(11):
        shared_workspaces.library_workspace(4096)
    assert [entry[0] for entry in pool] == ["empty", "empty"]  # made again


def test_a_plans_cublaslt_workspace_is_its_own_and_waited_for(pool):
    _, first = shared_workspaces.library_workspace(4096)
    _, second = shared_workspaces.library_workspace(4096)
    assert first is not second
    assert pool == [("empty", 4096, None), "wait", ("empty", 4096, None), "wait"]


def test_a_stream_being_captured_gets_a_cublaslt_workspace_of_its_own(pool):
    pool.capturing.add(11)
    with launches.launching_on(11):
        _, first = shared_workspaces.library_workspace(4096)
        _, second = shared_workspaces.library_workspace(4096)
    assert first is not second and 11 not in shared_workspaces._blocks


def test_the_per_thread_default_stream_gets_a_block_per_thread(pool):
    # handle 2 is cudaStreamPerThread: another stream in each thread, running at the same time, so
    # one block between two threads would be used by two streams at once (session 37's review)
    per_thread = shared_workspaces.PER_THREAD_STREAM
    got = {}

    def build(name):
        with launches.launching_on(per_thread):
            got[name] = shared_workspaces.library_workspace(4096)[1]

    build("main")
    other = threading.Thread(target=build, args=("other",))
    other.start()
    other.join()
    build("main again")
    assert got["other"] is not got["main"] and got["main again"] is got["main"]
    with launches.launching_on(11):  # an ordinary handle is one stream for every thread
        mine = shared_workspaces.library_workspace(4096)[1]
    seen = []
    t = threading.Thread(target=lambda: seen.append(_build_on(11)))
    t.start()
    t.join()
    assert seen == [mine]


def _build_on(stream):
    with launches.launching_on(stream):
        return shared_workspaces.library_workspace(4096)[1]


@pytest.fixture
def memsets(monkeypatch):
    """(pointer, value, bytes, stream) of each memsetAsync; device_alloc's (bytes, what) in .made."""
    from cupy_backends.cuda.api import runtime

    from gemmlab.cuda import launcher

    class Log(list):
        made: list

    log = Log()
    log.made = []
    monkeypatch.setattr(runtime, "memsetAsync", lambda *a: log.append(a))
    monkeypatch.setattr(launcher, "device_alloc", lambda n, what: log.made.append((n, what)) or (0xA000, 77))
    monkeypatch.setattr(launcher, "device_free", lambda *a: None)
    return log


def test_kernel_workspaces_are_one_block_per_stream_and_thread(pool):
    # stream-K's 33 MiB each: 512 fp32 executors held 16.9 GB (session 38, H200)
    with launches.launching_on(11):
        streamk = shared_workspaces.kernel_workspace(1000, 32)
        planes = shared_workspaces.kernel_workspace(500, 0)  # another shape, split-K planes: the same block
    with launches.launching_on(12):
        other_stream = shared_workspaces.kernel_workspace(500, 0)
    seen = []
    t = threading.Thread(target=lambda: seen.append(_kernel_on(11)))
    t.start()
    t.join()
    assert streamk.block is planes.block and streamk.ptr == planes.ptr == streamk.block.ptr
    assert other_stream.block is not streamk.block and seen[0].block not in (streamk.block, other_stream.block)
    assert pool == [("empty", 4000, 11), ("empty", 2000, 12), ("empty", 2000, 11)]  # on its stream, not cleared, no wait
    assert (streamk.nbytes, streamk.flag_bytes, planes.flag_bytes) == (4000, 128, 0)
    assert shared_workspaces.shared_scratch(streamk) is streamk


def _kernel_on(stream):
    with launches.launching_on(stream):
        return shared_workspaces.kernel_workspace(500, 0)


def test_a_larger_kernel_need_gets_twice_the_block_up_to_the_most_then_the_need(pool):
    most = shared_workspaces.KERNEL_BLOCK_MOST
    with launches.launching_on(11):
        small = shared_workspaces.kernel_workspace(1 << 10, 0)
        bigger = shared_workspaces.kernel_workspace((1 << 10) + 1, 0)
        huge = shared_workspaces.kernel_workspace(most // 4 + 1, 0)  # past the most: exactly the need
    assert small.block.nbytes == 4 << 10 and bigger.block.nbytes == 8 << 10 and huge.block.nbytes == most + 4


def test_a_plans_kernel_workspace_is_its_own_zeroed_and_needs_no_handover(pool):
    w = shared_workspaces.kernel_workspace(64, 32)
    assert w.block is None and pool == [("zeros", 64, None), "wait"]  # zeroed: the flags start at zero
    assert shared_workspaces.shared_scratch(w) is None and shared_workspaces.shared_scratch(None) is None
    pool.capturing.add(11)
    with launches.launching_on(11):
        assert shared_workspaces.kernel_workspace(64, 32).block is None


def test_a_handover_clears_the_flags_on_the_stream_and_marks_the_block(pool, memsets):
    with launches.launching_on(11):
        streamk = shared_workspaces.kernel_workspace(1000, 32)
        planes = shared_workspaces.kernel_workspace(500, 0)
    streamk.handover(11)
    assert memsets == [(streamk.ptr, 0, 128, 11)] and streamk.block.last == streamk.number
    planes.handover(11)  # split-K planes are written before they are read: nothing to clear
    assert len(memsets) == 1 and planes.block.last == planes.number != streamk.number


def test_a_kernel_block_goes_with_its_last_executor_without_the_cyclic_collector(pool, memsets):
    # block.last names the workspace by number: holding the workspace itself made a cycle, and the
    # block (possibly GBs of split-K planes) waited for the cyclic collector (session 38's review)
    import gc

    gc.disable()
    try:
        with launches.launching_on(11):
            w = shared_workspaces.kernel_workspace(1000, 32)
        w.handover(11)
        del w
        assert (11, threading.get_ident()) not in shared_workspaces._kernel_blocks
    finally:
        gc.enable()


def test_a_capture_records_the_flags_clearing_on_a_workspace_of_the_executors_own(pool, memsets, monkeypatch):
    import ctypes

    from gemmlab.cuda import launch_graph

    monkeypatch.setattr(launch_graph, "_captured", {})
    with launches.launching_on(11):
        w = shared_workspaces.kernel_workspace(1000, 32)
    slots = [ctypes.c_uint64(), ctypes.c_uint64()]
    w.bind(slots)
    assert [s.value for s in slots] == [w.ptr, w.ptr]
    with w.captured(11):
        assert [s.value for s in slots] == [0xA000, 0xA000]
    assert [s.value for s in slots] == [w.ptr, w.ptr] and w.block.last is None  # the block untouched
    assert memsets == [(0xA000, 0, 128, 11)] and memsets.made == [(4000, "a captured kernel's workspace")]
    # the user's graph holds the executor's own workspace: that is pinned, not the shared block
    assert list(launch_graph._captured.values()) == [w._private]
    with pytest.raises(RuntimeError), w.captured(11):  # a refused launch: the slots restored all the same
        raise RuntimeError("launch refused")
    assert [s.value for s in slots] == [w.ptr, w.ptr] and len(memsets.made) == 1  # made once
