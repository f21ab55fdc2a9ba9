"""An executor's kernel launches run as one CUDA graph whose arguments are updated in place.

Why: on the device's driver (580, CUDA 13) launching a prepared kernel costs 3.8-5.8 us of host
time (cuLaunchKernelEx / cuLaunchKernel through ctypes), launching a graph of the same kernel
1.8-2.7 us, and copying new arguments into a node of an instantiated graph
(cuGraphExecKernelNodeSetParams) 1.1 us (session 21, H200, `.scratch/s21_prims*.py`). A plan or
a plain call that repeats its arguments - the same buffers, as plans and most loops do - pays the
graph launch alone; one with new pointers pays the update and the launch, still less than a
direct launch. The capture check and the graph launch go through CuPy's Cython wrappers of the
runtime (streamIsCapturing, graphLaunch), not ctypes: 0.18 and 1.80 us instead of 0.40 and 2.10,
2.05 us the pair instead of 2.57 (session 22, H200, in-process). The runtime sees the context
gemmlab makes current, and a CUgraphExec / CUstream is the same handle as its cudaGraphExec_t /
cudaStream_t. The argument update has no CuPy wrapper and stays ctypes, as do building,
instantiating and freeing.

How: the launches (PreparedLaunch objects, in order) are added to a graph as kernel nodes, each
depending on the one before, with their cluster dimensions as node attributes. The graph is
instantiated once per stream it runs on (a graph's launches are ordered behind each other, so
two streams sharing one would be serialised). Each node reads its arguments from the launch's
own slots: the caller writes the slots, then calls `launch(stream, key)` with a key naming what
it wrote (pointers, scalars); a key unlike the last one launched on that stream copies the slots
into every node first.

The rules:
- A stream that is being captured (torch.cuda.graph, CuPy's capture) gets the launches directly,
  so the user's graph records kernels as it would without this. So does one whose capture check
  fails (the legacy stream while another stream captures in global mode) or reports an
  invalidated capture.
- A stream's graph is built and instantiated in relaxed capture mode: another stream's capture in
  global mode (torch.cuda.graph's default) would otherwise count cuGraphInstantiate as an unsafe
  call and fail. cuGraphLaunch itself cannot join a capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
  and the capture is lost: measured in session 21), hence the check on every call.
- Any driver error while building or instantiating turns the graph off for this object for good
  (`disabled_reason` says why): every stream's instantiation is freed and every call then
  launches directly, as before. A failed argument update raises, and the next call on that
  stream copies every node's arguments again (a failure midway leaves no half-updated graph).
- Launches recorded into a user's capture are pinned (`pin_captured`): the user's graph holds the
  addresses of the buffers the launches use (a split-K workspace, a sum's partials and counter,
  cuBLASLt's workspace), and replays them for as long as it lives, past the point where the API's
  bounded caches or a use_tuning would drop the executor and return those buffers to the pool.
  So whatever was captured is kept for the life of the process. A workspace the executor shares
  with the stream's others (`scratch`) is not what the user's graph records: the launches it
  captures run on one of the executor's own, and that is what is pinned
  (api/shared_workspaces.py), not the shared block, which may be large.
- Up to STREAMS_KEPT streams keep an instantiation; past that the least recently launched one is
  dropped (a program cycling through more streams than that pays an instantiation per change of
  stream; one that keeps returning to a few keeps theirs).
"""
from __future__ import annotations

import ctypes
import weakref
from collections import OrderedDict
from typing import Hashable, Sequence

from ..errors import LaunchError
from .launcher import (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, PreparedLaunch, driver, error_name, raw_driver,
                       relaxed_capture)

_captured: dict = {}  # id -> an object whose memory a user's captured graph may use: kept for good


def pin_captured(obj) -> None:
    """Keep `obj` (and what it holds) alive for the life of the process: a user's graph captured
    its launches and may replay them at any time (the module's rules)."""
    _captured[id(obj)] = obj


def captured(is_capturing, stream: int) -> bool:
    """is_capturing(stream) (CuPy's streamIsCapturing), with a failed check (CUDARuntimeError) or
    an invalidated capture (RuntimeError) counted as capturing: such a stream gets direct calls."""
    try:
        return is_capturing(stream)
    except RuntimeError:
        return True


def is_captured(stream: int) -> bool:
    """captured() through CuPy's streamIsCapturing: for the paths that ask once per call, not per launch."""
    from cupy_backends.cuda.api import runtime

    return captured(runtime.streamIsCapturing, stream)


def pin_if_captured(obj, stream: int) -> None:
    """pin_captured(obj) when `stream` is being captured: for the runner paths, whose buffers a
    capture records as the prepared launches' are."""
    if is_captured(stream):
        pin_captured(obj)


def captured_count() -> int:
    """How many objects capture has pinned (the tests read it)."""
    return len(_captured)


def gemm_key(a: int, b: int, c: int, alpha: float, beta: float) -> tuple:
    """What a GEMM call's graph depends on, as a key that equal calls share: its pointers and
    scalars. alpha -0.0 equals 0.0 but writes zeros of the other sign, so a zero alpha's key
    carries its sign (beta's need not: any zero beta means C is not read)."""
    return (a, b, c, alpha, beta) if alpha else (a, b, c, alpha, beta, str(alpha))


STREAMS_KEPT = 8  # instantiated graphs per object (one per stream); the least recently used is dropped past it


class KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2, as cuda.h lays it out (func set, or kern where the driver gives
    no CUfunction; ctx left null)."""

    _fields_ = [("func", ctypes.c_void_p),
                ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("kernelParams", ctypes.c_void_p), ("extra", ctypes.c_void_p),
                ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


def _destroy(execs: dict, graph: list, libs: list) -> None:
    """Free the instantiations and the graph, in relaxed capture mode: this may run while a stream
    captures in global mode (torch.cuda.graph's default), in this thread or another (a finalizer
    run by the collector, an executor dropped from a full cache at a captured call's first use),
    and there the destroys would be refused and the capture invalidated (CUDA error 900)."""
    if not libs:
        return
    lib = libs[0]
    with relaxed_capture(lib):
        for exe, _, _ in execs.values():
            lib.cuGraphExecDestroy(exe)
        execs.clear()
        if graph:
            lib.cuGraphDestroy(graph.pop())


class LaunchGraph:
    """`launch(stream, key)`: the launches, through this object's graph where it can.

    `graph_launches` counts the calls served by a graph, `updates` those that copied new arguments
    into it first (the tests read both)."""

    def __init__(self, launches: Sequence[PreparedLaunch], keep: tuple = (), scratch=None):
        self.launches = tuple(launches)
        self.keep = keep  # the buffers the launches use (pinned with the graph under a capture)
        # a workspace shared with other executors of the stream (api/shared_workspaces.py's
        # KernelWorkspace): handover(stream) before a launch when another used it since
        # (.block.last != .number); captured(stream) around the launches a user's capture records,
        # which pins the workspace it gives them in place of this object (and the shared block)
        self.scratch = scratch
        self.enabled = True
        self.disabled_reason = ""
        self.graph_launches = 0
        self.updates = 0
        # stream -> [graph exec, key it last launched, the exec as an int], least recently launched first
        self._execs: OrderedDict[int, list] = OrderedDict()
        self._recent = None  # the stream launched on last (its entry is the dict's last)
        self._graph: list = []  # the built graph (kept: instantiated again for each new stream)
        self._nodes: list = []  # (node, its KernelNodeParams) in launch order
        self._libs: list = []
        self._finalizer = weakref.finalize(self, _destroy, self._execs, self._graph, self._libs)
        self._finalizer.atexit = False  # the context may be gone at exit; the process frees all
        self._launch = self._set = self._is_capturing = self._launch_error = None  # bound on first use (_bind)

    def launch(self, stream: int, key: Hashable) -> None:
        entry = self._execs.get(stream)
        if entry is None:
            entry = self._first_on(stream)
        elif stream != self._recent:  # another stream than last time: its entry becomes the most recent
            self._execs.move_to_end(stream)
            self._recent = stream
        if entry is not None:
            try:  # captured(self._is_capturing, stream), inlined on the hot path
                capturing = self._is_capturing(stream)
            except RuntimeError:
                capturing = True
            if not capturing:
                scratch = self.scratch
                if scratch is not None and scratch.block.last != scratch.number:
                    scratch.handover(stream)
                exe, last, handle = entry
                if last != key:
                    entry[1] = None  # until every node holds the new arguments (a failure may come midway)
                    for node, params in self._nodes:
                        err = self._set(exe, node, params)
                        if err:
                            raise LaunchError(f"{self.launches[0].name}: updating a graph's arguments failed "
                                              f"({error_name(err)})")
                    entry[1] = key
                    self.updates += 1
                try:
                    self._launch(handle, stream)
                except self._launch_error as exc:  # CUDARuntimeError, which names the runtime's error itself
                    raise LaunchError(f"{self.launches[0].name}: cuGraphLaunch failed ({exc})") from exc
                self.graph_launches += 1
                return
        elif self._launch is None:  # the graph off, or a first launch under a capture
            self._bind()
        scratch = self.scratch
        if entry is not None or self._capturing(stream):  # an entry reaching here is captured
            if scratch is not None:  # the user's graph gets (and pins) a workspace of the executor's own
                with scratch.captured(stream):
                    for launch in self.launches:
                        launch.launch(stream)
                return
            pin_captured(self)
        elif scratch is not None and scratch.block.last != scratch.number:
            scratch.handover(stream)
        for launch in self.launches:
            launch.launch(stream)

    def _first_on(self, stream: int):
        """The entry [exec, last key, exec handle] of a stream not seen yet, instantiated unless
        the stream is being captured now (None then, and when the graph is off)."""
        if not self.enabled:
            return None
        if self._launch is None:
            self._bind()
        if self._capturing(stream):
            return None
        with relaxed_capture(self._libs[0]):  # another stream's capture (global mode) must not see this as unsafe
            return self._instantiate(stream)

    def _capturing(self, stream: int) -> bool:
        return captured(self._is_capturing, stream)

    def _bind(self) -> None:
        """The hot calls: CuPy's runtime wrappers (imported here: importing gemmlab needs no GPU)
        for the capture check and the launch, ctypes for the argument update."""
        raw, lib = raw_driver(), driver()
        from cupy_backends.cuda.api import runtime

        self._set = raw.cuGraphExecKernelNodeSetParams_v2
        self._is_capturing, self._launch_error = runtime.streamIsCapturing, runtime.CUDARuntimeError
        self._launch = runtime.graphLaunch
        self._libs.append(lib)

    def _build(self) -> bool:
        """The graph of the launches (once); False with the graph turned off."""
        lib = self._libs[0]
        graph = ctypes.c_void_p()
        err = lib.cuGraphCreate(ctypes.byref(graph), 0)
        if err:
            self._off(f"cuGraphCreate: {error_name(err)}")
            return False
        self._graph.append(graph)
        previous = None
        for launch in self.launches:
            func = ctypes.c_void_p()
            # the module is loaded as a library: its CUkernel has a CUfunction in this context;
            # where the driver gives none, the node names the CUkernel (kern, read when func is null)
            found = lib.cuKernelGetFunction(ctypes.byref(func), launch.kernel) == 0
            params = KernelNodeParams(func.value if found else None, *launch.grid, *launch.block, launch.shmem,
                                      launch.params_address, None, None if found else launch.kernel.value)
            node = ctypes.c_void_p()
            deps, count = (ctypes.byref(previous), 1) if previous is not None else (None, 0)
            err = lib.cuGraphAddKernelNode_v2(ctypes.byref(node), graph, deps, ctypes.c_size_t(count),
                                              ctypes.byref(params))
            if err:
                self._off(f"cuGraphAddKernelNode ({launch.name}): {error_name(err)}")
                return False
            if launch.cluster != (1, 1, 1):
                value = (ctypes.c_uint32 * 16)(*launch.cluster)
                err = lib.cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, ctypes.byref(value))
                if err:
                    self._off(f"cluster dimensions on a graph node ({launch.name}): {error_name(err)}")
                    return False
            self._nodes.append((node, ctypes.byref(params)))  # the byref keeps the structure alive
            previous = node
        return True

    def _instantiate(self, stream: int):
        """[exec, None, exec handle] for `stream` (kept), or None with the graph turned off."""
        if not self._graph and not self._build():
            return None
        lib = self._libs[0]
        exe = ctypes.c_void_p()
        err = lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), self._graph[0], ctypes.c_ulonglong(0))
        if err:
            return self._off(f"cuGraphInstantiate: {error_name(err)}")
        if len(self._execs) >= STREAMS_KEPT:  # the least recently launched goes (more streams than this is rare)
            lib.cuGraphExecDestroy(self._execs.popitem(last=False)[1][0])
        entry = self._execs[stream] = [exe, None, exe.value]  # None: no arguments copied in yet
        self._recent = stream
        return entry

    def _off(self, why: str):
        """The graph off for good: every stream's instantiation and the graph freed (a launch in
        flight finishes first), so every later call launches directly."""
        self.enabled = False
        self.disabled_reason = why
        _destroy(self._execs, self._graph, self._libs)
        self._nodes.clear()
        return None
