"""The workspaces that the executors built for one stream share: cuBLASLt's (library_workspace,
cuda/cublaslt.py's `allocate`) and gemmlab kernels' split-K planes, stream-K flags and partial
tiles (kernel_workspace). A plan's are its own.

Why shared: each executor owned a workspace sized for its shape, and a program whose shapes
change keeps up to 2048 executors per thread (core.MAX_EXECUTORS; 512 until session 39).
- cuBLASLt's heuristic asks for 2-29 MiB for 250 of 300 fp32 shapes x @ W.T (W 4096 x 4096, M up
  to 2048; bf16: 1.1 MiB at most, 0 for most; H200, session 37, `.scratch/s37_ws.py`).
- fp32 x @ W (row-major, M changing) is decided for rung 14 with stream-K from M ~400 to 1200
  (N = K = 4096): 33 MiB of flags and partial tiles each (two 128x256 slots a block, 132
  blocks), so 512 executors held 16.9 GB (H200, session 38, `scripts/changing_shapes.py fp32
  --layout nn`).
Work on one stream runs in order, so the executors built for that stream can take turns with one
block: they hold it, and it goes back to that stream's pool (never waited for:
api/launches.workspace) when the last of them is dropped. A larger need than the block has gets a
new block of twice the size or more (up to the kind's `most`, past which exactly the need), which
the executors built from then on share; the older ones keep theirs while they live.

cuBLASLt's blocks are a stream's: the library needs nothing of a workspace between calls. The
per-thread default stream (handle 2) is another stream in each thread, so there the block is the
thread's. The kernels' blocks are always a thread's: the flags at a workspace's head (stream-K's
tiles, the persistent rung's split-K tiles) must be zero before a launch. A kernel leaves its own
zero, but another executor's partials may lie where they are, so an executor that finds another
has used the block since clears its flags first (KernelWorkspace.handover: a memset of a few
hundred bytes, queued in order). That needs the calls issued in the order they are queued, which
one thread's are.

Not shared: a plan's (it may run on any stream), nor one built while its stream is being captured
(launches.workspace makes those on CuPy's current stream and waits for them: a host wait in the
middle of the user's capture, once per shape). A kernel's own is zeroed when made, and stays so.

Captures: a user's graph records no shared block. A call made on a stream being captured runs on
a workspace of its executor's own (cuBLASLt: cuda/cublaslt.py, captured_call; kernels:
KernelWorkspace.captured, which records the clearing of the flags ahead of the kernel), made at its
first capture and kept with launch_graph's pin; otherwise a graph replayed on another stream would
race with every call still made on the recording stream, the case of a warm-up on the stream then
captured (CuPy's usual way, or torch.cuda.graph(stream=s) after a warm-up on s)."""
from __future__ import annotations

import itertools
import threading
import weakref
from contextlib import contextmanager

from ..cuda.cublaslt import WORKSPACE_BYTES
from .launches import ordered_stream, workspace

PER_THREAD_STREAM = 2  # cudaStreamPerThread (CU_STREAM_PER_THREAD): the same handle, another stream in each thread
# stream (with the thread where the handle is PER_THREAD_STREAM) -> its newest block, while executors hold it
_blocks: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
# (stream, thread) -> the newest block of the kernels' workspaces
_kernel_blocks: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
KERNEL_BLOCK_MOST = 64 << 20  # growth past this is to the need exactly (split-K planes of a large C can be GBs)


class SharedBlock:
    """One stream's workspace: the CuPy buffer, its pointer and size, and (kernels') the number of
    the workspace whose launch used it last (a number, not the workspace: the workspace holds the
    block, and a cycle would keep both until the cyclic collector ran); the executors hold it."""

    __slots__ = ("buffer", "ptr", "nbytes", "last", "__weakref__")

    def __init__(self, buffer, nbytes: int):
        self.buffer, self.ptr, self.nbytes, self.last = buffer, buffer.data.ptr, nbytes, None


def _shared_block(blocks, key, nbytes: int, most: int) -> SharedBlock:
    """The block under `key` if it holds `nbytes`, else a new one there (made on the building
    stream, not cleared: library_workspace needs nothing of it, kernel_workspace clears flags)."""
    block = blocks.get(key)
    if block is None or block.nbytes < nbytes:
        size = min(max(nbytes, 2 * block.nbytes if block else 0), max(nbytes, most))
        block = blocks[key] = SharedBlock(workspace(size, "uint8", zeroed=False), size)
    return block


def library_workspace(nbytes: int) -> tuple[int, object]:
    """(pointer, owner) of `nbytes` (or more) of workspace: the building stream's shared block
    (made there, no wait), else (a plan's; a stream being captured) a buffer of its own.
    No lock: two threads of one stream that each make a block at once keep one each, both used
    in that stream's order."""
    stream = ordered_stream()
    if stream is None:
        buf = workspace(nbytes, "uint8", zeroed=False)
        return buf.data.ptr, buf
    key = (stream, threading.get_ident()) if stream == PER_THREAD_STREAM else stream
    block = _shared_block(_blocks, key, nbytes, WORKSPACE_BYTES)
    return block.ptr, block


_numbers = itertools.count(1)
_runtime = []  # CuPy's runtime module, imported at the first memset (importing gemmlab needs no GPU)


def _memset_zero(ptr: int, nbytes: int, stream: int) -> None:
    if not _runtime:
        from cupy_backends.cuda.api import runtime

        _runtime.append(runtime)
    _runtime[0].memsetAsync(ptr, 0, nbytes, stream)


class KernelWorkspace:
    """A kernel executor's workspace: `ptr`, given to its launches in `slots` (bind), and `owner`,
    what keeps the memory. Shared (`block` set): its thread's block for the stream, cleared where
    needed by `handover` and replaced under a capture by `captured`; cuda/launch_graph.py's
    LaunchGraph calls both (its `scratch`), comparing block.last with `number`. Else the
    executor's own, zeroed when made."""

    def __init__(self, ptr: int, owner, block: SharedBlock | None, nbytes: int, flag_bytes: int):
        self.ptr, self.owner, self.block = ptr, owner, block
        self.nbytes, self.flag_bytes = nbytes, flag_bytes
        self.number = next(_numbers)  # what block.last holds after this workspace's launch
        self.slots: tuple = ()
        self._private = None  # the DeviceMemory captures record, made at the first

    def bind(self, slots) -> None:
        """The argument slots that hold the workspace pointer (the kernel's, split-K's sum's)."""
        self.slots = tuple(slots)
        for slot in self.slots:
            slot.value = self.ptr

    def handover(self, stream: int) -> None:
        """Before a launch outside a capture, when another workspace's launch used the block since
        (block.last != number): this one's flags cleared on the stream, ahead of the launch, and
        the block marked as this one's. The flags of the last launch were left zero by its kernel."""
        if self.flag_bytes:
            _memset_zero(self.ptr, self.flag_bytes, stream)
        self.block.last = self.number

    @contextmanager
    def captured(self, stream: int):
        """The launches in the block, being recorded by a user's capture, given a workspace of this
        executor's own (made at the first capture: DeviceMemory, relaxed mode), its flags'
        clearing recorded ahead of them, so that every replay of the graph starts from zero flags
        wherever it runs. That workspace is pinned for good (launch_graph.pin_captured), not the
        shared block: the user's graph holds only the former, and the latter may be large."""
        from ..cuda.launch_graph import pin_captured
        from ..cuda.launcher import DeviceMemory

        if self._private is None:
            self._private = DeviceMemory(self.nbytes, "a captured kernel's workspace")
        pin_captured(self._private)
        ptr = self._private.ptr
        if self.flag_bytes:
            _memset_zero(ptr, self.flag_bytes, stream)
        for slot in self.slots:
            slot.value = ptr
        try:
            yield
        finally:
            for slot in self.slots:
                slot.value = self.ptr


def kernel_workspace(floats: int, flag_floats: int) -> KernelWorkspace:
    """A kernel executor's workspace of `floats`, the first `flag_floats` of which must be zero
    before each launch: its thread's block for the building stream, else (a plan's; a stream
    being captured) its own, zeroed."""
    stream = ordered_stream()
    if stream is None:
        buf = workspace(floats)
        return KernelWorkspace(buf.data.ptr, buf, None, 4 * floats, 4 * flag_floats)
    block = _shared_block(_kernel_blocks, (stream, threading.get_ident()), 4 * floats, KERNEL_BLOCK_MOST)
    return KernelWorkspace(block.ptr, block, block, 4 * floats, 4 * flag_floats)


def shared_scratch(work: KernelWorkspace | None) -> KernelWorkspace | None:
    """`work` where it is a shared block's (LaunchGraph's `scratch`), else None: an own workspace
    needs neither handovers nor a stand-in under captures."""
    return work if work is not None and work.block is not None else None
