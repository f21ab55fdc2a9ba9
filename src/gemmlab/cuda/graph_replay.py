"""A library call replayed from a CUDA graph when it repeats exactly.

Why: a prepared cublasLtMatmul still spends 9-18 us of host time inside cuBLAS on every call
(docs/api.md, scripts/cublas_call_time.py), most of it deciding again what it decided last time.
Launching a graph that holds the kernels of that call costs one cuGraphLaunch, a few
microseconds. A call is a pure function of its arguments (pointers, scalars; the shape and the
workspace are fixed by the prepared call), so when the same arguments come again the captured
kernels do exactly what the library would do: the graph reads the memory at the pointers when
it runs, so new data in the same buffers is seen. The capture check and the graph launch of a
replay go through CuPy's Cython wrappers of the runtime (streamIsCapturing, graphLaunch), not
ctypes: 0.18 and 1.80 us instead of 0.40 and 2.10, 2.05 us the pair instead of 2.57 (session 22,
H200, in-process). The runtime sees the context gemmlab makes current, and a CUgraphExec /
CUstream is the same handle as its cudaGraphExec_t / cudaStream_t.

The rules:
- A call whose arguments were made directly CAPTURE_AFTER times (among the last few argument sets
  made directly) is captured once into a graph (on a private stream, relaxed mode, so nobody
  else's capture is disturbed) and launched; from then on those arguments replay. A few argument
  sets are kept (least recently used dropped), so a plan that alternates between two outputs
  replays both. Why not at the first repeat (until session 37): a capture and instantiation costs
  120-800 us of host time (H200, cuBLASLt at 1100-1300 x 4096 x 4096, bf16 and fp32), a direct
  call 20-25 us and a replay a few; a program whose shapes change (an LLM's token count) meets
  each shape's arguments again now and then, and captured at every second meeting, for graphs
  its next meeting, with another output address, did not use.
- A call on a stream that is itself being captured (torch.cuda.graph, CuPy's capture) is made
  directly, so the user's graph records the library call as it would without us. So is one whose
  capture check fails (the legacy stream while another stream captures in global mode) or
  reports an invalidated capture.
- The library call a user's capture records is pinned for good (launch_graph's rules): the
  user's graph holds its workspace.
- Any driver error while capturing turns replay off for this call object for good: it then
  behaves exactly as the plain call.
- At most GRAPHS_LIMIT graphs live in the process. Past it a capture is refused, not made room
  for: the call is made directly, and asked again at its next repeat. A graph costs device memory,
  676 KiB for a cuBLASLt bf16 GEMM 4096 wide (H100, session 38), which the driver keeps for later
  graphs even when the graph is freed; 512 executors of a thread with four graphs each held 1.35
  GB. Evicting a graph to make room would thrash a program that cycles through more shapes than
  the limit (each shape captured, 120-800 us, then evicted before it came again), and would free
  a graph another thread may be launching (a plan's).
- Graphs that went idle do give their places up. A capture refused at the limit looks, at most
  once per IDLE_SECONDS, at the replays of plain calls its own thread captured (the executors of
  plain calls are the thread's, so none of them is launching now), and frees the graphs of those
  that launched nothing since it last looked. A program that moved on from its first shapes to
  others in the same thread gets graphs for the new ones within a second or two, where it would
  otherwise wait for the old shapes' executors to be dropped (past core.MAX_EXECUTORS new
  shapes). A cycle through more shapes than the limit that takes longer than IDLE_SECONDS churns
  (graphs freed and captured again); one that comes round sooner frees nothing.
- A plan's graphs are counted but never refused or freed as idle (`bounded` off): the user keeps
  a plan on purpose, for its low cost per call, and how many plans live is the user's choice; the
  limit is on what plain calls keep on their own.
"""
from __future__ import annotations

import ctypes
import threading
import time
import weakref
from collections import OrderedDict
from typing import Callable

from ..errors import LaunchError
from .launch_graph import captured, gemm_key, pin_captured
from .launcher import CU_STREAM_CAPTURE_MODE_RELAXED, driver, error_name, relaxed_capture

CU_STREAM_NON_BLOCKING = 1
CU_STREAM_CAPTURE_STATUS_NONE = 0
KEPT = 4  # argument sets with a graph each: a plan alternating between a few outputs replays all
CAPTURE_AFTER = 2  # direct calls with the same arguments before they are captured (the rules above)
# Graphs alive in the process (the rules above): about 340 MiB of device memory at 676 KiB each.
# Past it calls run directly: about 30 us of host time a call against a replay's 5-8 us, still far
# below rebuilding (H100, session 39: 2000 bf16 shapes cycling, 39 us a call with 512 graphs live,
# against 233 us when the executors were bounded at 512 and rebuilt; with 2048 graphs the same
# loop held 1318 MiB more).
GRAPHS_LIMIT = 512
_live = [0]  # graphs alive now
_live_lock = threading.RLock()  # re-entrant: a finalizer (_destroy) may run in a thread that holds it
# A capture refused at the limit first frees the graphs of its own thread's plain-call replays that
# launched nothing for this long (the rules above). Long enough that a program cycling through more
# shapes than the limit reaches every graph again before it counts as idle when its calls are short,
# which is when replays matter; a longer cycle churns (docs/api.md, "Idle graphs give their places up").
IDLE_SECONDS = 1.0
_now = time.monotonic
_threads = threading.local()  # .holders: this thread's bounded replays with graphs (weakly); .swept: when last looked


def _admit(bounded: bool = True) -> bool:
    """Count one more graph in, unless GRAPHS_LIMIT are alive and the replay is bounded."""
    with _live_lock:
        if bounded and _live[0] >= GRAPHS_LIMIT:
            return False
        _live[0] += 1
        return True


def _release(count: int) -> None:
    with _live_lock:
        _live[0] -= count


def live_graphs() -> int:
    """How many captured graphs are alive in the process (the tests and diagnostics read it)."""
    return _live[0]


def _free_graphs(execs: OrderedDict, lib) -> None:
    """Free the graphs (one still running is freed by the driver when it completes) and give their
    places back. In relaxed capture mode: while a stream captures in global mode (torch.cuda.graph's
    default), in this thread or another, the destroy would be refused and that capture
    invalidated. A graph the driver does not free stays, with its place."""
    with relaxed_capture(lib):
        kept = [(key, entry) for key, entry in execs.items() if lib.cuGraphExecDestroy(entry[0])]
    _release(len(execs) - len(kept))
    execs.clear()
    execs.update(kept)


def _destroy(execs: OrderedDict, private: list, libs: list) -> None:
    """Free the graphs and the capture stream (nothing to do when nothing was ever captured)."""
    if not libs:
        return
    _free_graphs(execs, libs[0])
    if private:
        with relaxed_capture(libs[0]):  # as the graphs' (_free_graphs)
            libs[0].cuStreamDestroy_v2(private.pop())


def _holders() -> weakref.WeakSet:
    holders = getattr(_threads, "holders", None)
    if holders is None:
        holders = _threads.holders = weakref.WeakSet()
        _threads.swept = float("-inf")
    return holders


def _reclaim_idle() -> bool:
    """For a capture refused at the limit: free the graphs of this thread's bounded replays that
    launched nothing since the last look, looking at most once per IDLE_SECONDS; whether any
    place came back. Only this thread's: another thread may be launching its own."""
    holders = _holders()
    now = _now()
    if now - _threads.swept < IDLE_SECONDS:
        return False
    _threads.swept = now
    freed = False
    for replay in list(holders):
        if not replay._execs:  # freed meanwhile (turned off, or its executor going)
            holders.discard(replay)
        elif replay.replays == replay._replays_seen:  # the refused replay's own stale graphs too
            freed = replay._free_idle() > 0 or freed
            if not replay._execs:
                holders.discard(replay)
        else:
            replay._replays_seen = replay.replays
    return freed


class GraphReplay:
    """Wraps `call(alpha, a, b, beta, c, stream)` (a prepared GEMM) with graph replay of repeats.

    `replays` counts the calls served by a graph (the tests read it; a plan's explain() too)."""

    def __init__(self, call: Callable[[float, int, int, float, int, int], None], capture_after: int | None = None):
        self.call = call
        self.capture_after = CAPTURE_AFTER if capture_after is None else capture_after
        self.replays = 0
        self.refused = 0  # captures refused at GRAPHS_LIMIT (those calls were made directly)
        self.reclaimed = 0  # graphs freed as idle for a capture refused in this thread (_reclaim_idle)
        self.bounded = True  # a plan's replay is not: the user keeps it on purpose (counted, never refused)
        self._replays_seen = -1  # `replays` when _reclaim_idle last looked (-1: never)
        self.enabled = True
        self.disabled_reason = ""
        self._execs: OrderedDict = OrderedDict()  # arguments -> (graph exec, the exec as an int)
        self._private: list = []  # the capture stream, made on first capture
        self._seen: OrderedDict = OrderedDict()  # the last KEPT argument sets made directly -> how often
        self._libs: list = []  # the driver, bound on first use (building one needs no GPU)
        self._finalizer = weakref.finalize(self, _destroy, self._execs, self._private, self._libs)
        self._finalizer.atexit = False  # the context may be gone at exit; the process frees all
        self._launch = self._is_capturing = self._launch_error = None  # bound on first use (_bind)
        self._hot = None  # the graph launched last (most recently used already), and its arguments
        self._hot_key = None

    def _bind(self) -> None:
        """The hot calls through CuPy's runtime wrappers (imported here: importing gemmlab needs
        no GPU); capturing and freeing through ctypes on the driver."""
        lib = driver()
        from cupy_backends.cuda.api import runtime

        self._is_capturing, self._launch_error = runtime.streamIsCapturing, runtime.CUDARuntimeError
        self._launch = runtime.graphLaunch
        self._libs.append(lib)

    def __getattr__(self, name):  # the wrapped call's attributes (workspace_bytes, call_name, ...)
        call = self.__dict__.get("call")
        if call is None:
            raise AttributeError(name)
        return getattr(call, name)

    def __call__(self, alpha: float, a: int, b: int, beta: float, c: int, stream: int) -> None:
        self.run(a, b, c, alpha, beta, stream)

    def run(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int) -> None:
        """The call, in the executors' argument order: CublasGemm binds this method as its own run,
        one Python call fewer per call than run -> __call__ (0.4 us, session 22, H200)."""
        key = gemm_key(a, b, c, alpha, beta)
        # the arguments of the last replay (a loop's case) skip the lookup and the LRU update below
        entry = self._hot if key == self._hot_key else self._execs.get(key)
        capturing = None
        if (entry is not None or self._seen.get(key, 0) >= self.capture_after) and self.enabled:
            if self._launch is None:
                self._bind()
            try:  # captured(self._is_capturing, stream), inlined on the hot path
                capturing = self._is_capturing(stream)
            except RuntimeError:
                capturing = True
            if not capturing:
                if entry is None:
                    entry = self._capture(key, alpha, a, b, beta, c)
                if entry is not None:
                    if entry is not self._hot:
                        self._execs.move_to_end(key)
                        self._hot, self._hot_key = entry, key
                    try:
                        self._launch(entry[1], stream)
                    except self._launch_error as exc:  # CUDARuntimeError, which names the runtime's error itself
                        raise LaunchError(f"cuGraphLaunch of a captured library call failed ({exc})") from exc
                    self.replays += 1
                    return
        if capturing is None:  # not asked above
            if self._launch is None:
                self._bind()
            capturing = self._capturing(stream)
        call = self.call
        if capturing:  # a user's graph now holds the call's workspace (launch_graph's rules)
            pin_captured(call)
            call = getattr(call, "captured_call", call)  # cuBLASLt records on a workspace of its own
        call(alpha, a, b, beta, c, stream)
        # only a call that went through is worth capturing when it comes again; a few are
        # remembered, so a loop that keeps its last result alive (two C addresses in turn) replays too
        self._seen[key] = self._seen.get(key, 0) + 1
        self._seen.move_to_end(key)
        if len(self._seen) > KEPT:
            self._seen.popitem(last=False)

    def _capturing(self, stream: int) -> bool:
        return captured(self._is_capturing, stream)

    def _capture(self, key: tuple, alpha: float, a: int, b: int, beta: float, c: int):
        """(graph exec, its handle) of one call with these arguments (kept under `key`), or None with
        replay turned off. In relaxed capture mode: another stream's capture in global mode
        (torch.cuda.graph's default) would otherwise fail on the instantiation as an unsafe call."""
        replacing = len(self._execs) >= KEPT  # the new graph takes the oldest one's place
        if not replacing and not _admit(self.bounded) and not (_reclaim_idle() and _admit(self.bounded)):
            self.refused += 1
            return None
        entry = None
        try:
            with relaxed_capture(self._libs[0]):
                entry = self._capture_relaxed(key, alpha, a, b, beta, c)
        finally:
            if entry is None and not replacing:  # nothing kept: the place taken goes back
                _release(1)
        if entry is not None:
            self._hot, self._hot_key = entry, key
            if self.bounded:
                _holders().add(self)
        return entry

    def _capture_relaxed(self, key: tuple, alpha: float, a: int, b: int, beta: float, c: int):
        lib = self._libs[0]
        if not self._private:
            s = ctypes.c_void_p()
            err = lib.cuStreamCreate(ctypes.byref(s), CU_STREAM_NON_BLOCKING)
            if err:
                return self._off(f"cuStreamCreate: {error_name(err)}")
            self._private.append(s)
        s = self._private[0]
        err = lib.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED)
        if err:
            return self._off(f"cuStreamBeginCapture: {error_name(err)}")
        graph = ctypes.c_void_p()
        try:
            self.call(alpha, a, b, beta, c, s.value)
        except Exception as exc:  # the same call just ran directly: a capture-only refusal
            lib.cuStreamEndCapture(s, ctypes.byref(graph))
            if graph.value:
                lib.cuGraphDestroy(graph)
            return self._off(f"the call refused capture: {exc}")
        err = lib.cuStreamEndCapture(s, ctypes.byref(graph))
        if err or not graph.value:
            return self._off(f"cuStreamEndCapture: {error_name(err)}")
        exe = ctypes.c_void_p()
        err = lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, ctypes.c_ulonglong(0))
        lib.cuGraphDestroy(graph)
        if err:
            return self._off(f"cuGraphInstantiate: {error_name(err)}")
        if len(self._execs) >= KEPT:  # its place passes to the new graph (_capture)
            _, (old, _) = self._execs.popitem(last=False)
            lib.cuGraphExecDestroy(old)
        entry = self._execs[key] = (exe, exe.value)
        return entry

    def _free_idle(self) -> int:
        """Free the graphs (idle: _reclaim_idle); how many went. A repeat of their arguments
        captures again."""
        self._hot = self._hot_key = None
        before = len(self._execs)
        _free_graphs(self._execs, self._libs[0])
        self.reclaimed += before - len(self._execs)
        return before - len(self._execs)

    def _off(self, why: str):
        """Replay off for good: the graphs kept so far would never launch again, so they are freed
        and their places go back (they would hold GRAPHS_LIMIT's places until the executor went)."""
        self.enabled = False
        self._hot = self._hot_key = None
        if self._libs:
            _free_graphs(self._execs, self._libs[0])
        self.disabled_reason = why
        return None
