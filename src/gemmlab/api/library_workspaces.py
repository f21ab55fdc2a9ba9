"""cuBLASLt's workspaces (cuda/cublaslt.py's `allocate`): one per stream, shared by the executors
built for that stream; a plan's of its own.

Why shared: the heuristic asks for a workspace per shape, and for fp32 it asks for a lot: 2-29
MiB for 250 of 300 shapes x @ W.T (W 4096 x 4096, M up to 2048; bf16: 1.1 MiB at most, 0 for
most; H200, session 37, `.scratch/s37_ws.py`). Each executor owned its own, so a program whose
shapes change held up to 512 of them per thread (gigabytes). Work on one stream runs in order, so
every executor built for that stream can use one workspace at a time: the executors of one
stream hold the same block, and it goes back to that stream's pool (never waited for:
api/launches.workspace) when the last of them is dropped. A larger need than the block has gets
a new block of twice the size or more, which the executors built from then on share; the older
ones keep theirs while they live. The per-thread default stream (handle 2) is another stream in
each thread, so there the block is the thread's.

Not shared: a plan's (it may run on any stream), nor one built while its stream is being captured
(launches.workspace makes those on CuPy's current stream and waits for them: a host wait in the
middle of the user's capture, once per shape).

Captures: a user's graph does not record the shared block. A call made on a stream being
captured runs on a workspace of its executor's own (cuda/cublaslt.py, captured_call), made at its
first capture and kept with launch_graph's pin; otherwise a graph replayed on another stream
would race with every call still made on the recording stream, the case of a warm-up on the
stream then captured (CuPy's usual way, or torch.cuda.graph(stream=s) after a warm-up on s)."""
from __future__ import annotations

import threading
import weakref

from ..cuda.cublas import WORKSPACE_BYTES
from .launches import ordered_stream, workspace

PER_THREAD_STREAM = 2  # cudaStreamPerThread (CU_STREAM_PER_THREAD): the same handle, another stream in each thread
# stream (with the thread where the handle is PER_THREAD_STREAM) -> its newest block, while executors hold it
_blocks: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class SharedBlock:
    """One stream's workspace: the CuPy buffer, its pointer and size; the executors hold it."""

    __slots__ = ("buffer", "ptr", "nbytes", "__weakref__")

    def __init__(self, buffer, nbytes: int):
        self.buffer, self.ptr, self.nbytes = buffer, buffer.data.ptr, nbytes


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
    block = _blocks.get(key)
    if block is None or block.nbytes < nbytes:
        size = min(max(nbytes, 2 * block.nbytes if block else 0), max(nbytes, WORKSPACE_BYTES))
        block = _blocks[key] = SharedBlock(workspace(size, "uint8", zeroed=False), size)
    return block.ptr, block
