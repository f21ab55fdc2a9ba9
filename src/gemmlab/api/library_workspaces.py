"""cuBLASLt's workspaces (cuda/cublaslt.py's `allocate`): one per stream, shared by the executors
built for that stream; a plan's of its own.

Why shared: the heuristic asks for a workspace per shape, and for fp32 it asks for a lot: 2-29
MiB for 250 of 300 shapes x @ W.T (W 4096 x 4096, M up to 2048; bf16: 1 MiB at most, 0 for most;
H200, session 37, `.scratch/s37_ws.py`). Each executor owned its own, so a program whose shapes
change held up to 512 of them per thread (gigabytes). Work on one stream runs in order, so every
executor built for that stream can use one workspace, as cuBLAS shares its handle's among its
calls: the executors of one stream hold the same block, and it goes back to that stream's pool
(never waited for: api/launches.workspace) when the last of them is dropped. A larger need than
the block has gets a new block of twice the size or more, which the executors built from then on
share; the older ones keep theirs while they live.

Not shared: a plan's (it may run on any stream), nor one built while its stream is being captured
(launches.workspace makes those on CuPy's current stream and waits for them). A user's graph
that records a call on a stream holds that stream's block (launch_graph pins the executor, and
with it the block): replaying two such graphs at once on two streams races on it, as two graphs
of one shape did before, and as torch's cuBLAS workspace of a stream does."""
from __future__ import annotations

import threading
import weakref

from ..cuda.cublas import WORKSPACE_BYTES
from ..cuda.launch_graph import is_captured
from .launches import building_stream, workspace

_lock = threading.RLock()  # reentrant: a block dropped while it is held runs _forget on this thread
_blocks: dict[int, weakref.ref] = {}  # stream -> its newest shared block (dead once its executors are gone)


class SharedBlock:
    """One stream's workspace: the CuPy buffer, its pointer and size; the executors hold it."""

    __slots__ = ("buffer", "ptr", "nbytes", "__weakref__")

    def __init__(self, buffer, nbytes: int):
        self.buffer, self.ptr, self.nbytes = buffer, buffer.data.ptr, nbytes


def library_workspace(nbytes: int) -> tuple[int, object]:
    """(pointer, owner) of `nbytes` (or more) of workspace: the building stream's shared block
    (made there, no wait), else (a plan's; a stream being captured) a buffer of its own."""
    stream = building_stream()
    if stream is None or is_captured(stream):  # a failed query counts as a capture
        buf = workspace(nbytes, "uint8", zeroed=False)
        return buf.data.ptr, buf
    with _lock:
        ref = _blocks.get(stream)
        block = ref() if ref is not None else None
        if block is None or block.nbytes < nbytes:
            size = min(max(nbytes, 2 * block.nbytes if block else 0), max(nbytes, WORKSPACE_BYTES))
            block = SharedBlock(workspace(size, "uint8", zeroed=False), size)
            _blocks[stream] = weakref.ref(block, lambda r, s=stream: _forget(s, r))
    return block.ptr, block


def _forget(stream: int, ref: weakref.ref) -> None:
    """A stream's block gone with its last executor: its entry too, unless a newer one replaced it."""
    with _lock:
        if _blocks.get(stream) is ref:
            del _blocks[stream]
