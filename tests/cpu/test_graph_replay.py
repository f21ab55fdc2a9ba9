"""GraphReplay's rules (cuda/graph_replay.py) against a fake driver (and fake CuPy runtime calls
for the capture check and the graph launch): what is captured when, what replays, what goes
direct, and that a failed capture turns replay off without losing the call. The GPU half (real
graphs, every replay against fp64) is tests/gpu/test_graph_replay.py."""
import gc
import threading

import pytest
from cupy_backends.cuda.api import runtime

from gemmlab.cuda import graph_replay, launch_graph
from gemmlab.errors import LaunchError
from gemmlab.cuda.graph_replay import CAPTURE_AFTER, KEPT, GraphReplay


class FakeDriver:
    def __init__(self, fail: str = ""):
        self.fail, self.capturing, self.launched, self.destroyed, self.next = fail, 0, [], [], 100
        self.mode, self.modes_at_instantiate = 0, []  # this thread's capture mode (0: global)
        self.check_error = None  # raised by the capture check (CuPy's streamIsCapturing) when set
        self.modes_at_destroy, self.refuse_destroy = [], set()  # the capture mode at each destroy; graphs not freed

    def cuThreadExchangeStreamCaptureMode(self, ref):
        ref._obj.value, self.mode = self.mode, ref._obj.value
        return 0

    def _ret(self, name):
        return 1 if self.fail == name else 0

    def streamIsCapturing(self, stream):  # CuPy's runtime wrappers take and give plain ints
        assert type(stream) is int
        if self.check_error is not None:
            raise self.check_error
        return bool(self.capturing)

    def graphLaunch(self, exe, stream):
        assert type(exe) is int and type(stream) is int
        if self.fail == "launch":
            raise runtime.CUDARuntimeError(906)
        self.launched.append((exe, stream))

    def cuStreamCreate(self, ref, flags):
        ref._obj.value = 7
        return self._ret("create")

    def cuStreamBeginCapture_v2(self, s, mode):
        return self._ret("begin")

    def cuStreamEndCapture(self, s, ref):
        ref._obj.value = 55
        return self._ret("end")

    def cuGraphInstantiateWithFlags(self, ref, graph, flags):
        self.modes_at_instantiate.append(self.mode)
        self.next += 1
        ref._obj.value = self.next
        return self._ret("instantiate")

    def cuGraphDestroy(self, graph):
        return 0

    def cuGraphExecDestroy(self, exe):
        self.modes_at_destroy.append(self.mode)
        if exe.value in self.refuse_destroy:
            return 1
        self.destroyed.append(exe.value)
        return 0

    def cuStreamDestroy_v2(self, s):
        return 0


@pytest.fixture
def fake(monkeypatch):
    def make(fail=""):
        drv = FakeDriver(fail)
        monkeypatch.setattr(graph_replay, "driver", lambda: drv)
        for name in ("streamIsCapturing", "graphLaunch"):
            monkeypatch.setattr(runtime, name, getattr(drv, name))
        monkeypatch.setattr(graph_replay, "error_name", lambda err: f"CUresult {err}")
        return drv
    return make


class Recorder:
    workspace_bytes = 4096

    def __init__(self, raises_on_stream=None):
        self.calls, self.raises_on_stream = [], raises_on_stream

    def __call__(self, alpha, a, b, beta, c, stream):
        if stream == self.raises_on_stream:
            raise RuntimeError("not capturable")
        self.calls.append((alpha, a, b, beta, c, stream))


def test_a_repeat_is_captured_once_on_the_private_stream_then_replayed(fake):
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    assert rec.calls == [(1.0, 1, 2, 0.0, 3, 42)] and drv.launched == []  # first: direct
    g(1.0, 1, 2, 0.0, 3, 42)
    assert rec.calls[-1] == (1.0, 1, 2, 0.0, 3, 7)  # captured on the private stream, not run on 42
    assert drv.launched == [(101, 42)] and g.replays == 1
    g(1.0, 1, 2, 0.0, 3, 43)
    assert len(rec.calls) == 2 and drv.launched[-1] == (101, 43) and g.replays == 2
    assert g.workspace_bytes == 4096  # the wrapped call's attributes show through
    # instantiated in relaxed mode (another stream's global capture must not fail), then restored
    assert drv.modes_at_instantiate == [2] and drv.mode == 0


@pytest.mark.parametrize("changed", [(2.0, 1, 2, 0.0, 3), (1.0, 9, 2, 0.0, 3), (1.0, 1, 9, 0.0, 3),
                                     (1.0, 1, 2, 0.5, 3), (1.0, 1, 2, 0.0, 9)])
def test_any_changed_argument_goes_direct(fake, changed):
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    g(1.0, 1, 2, 0.0, 3, 42)
    alpha, a, b, beta, c = changed
    g(alpha, a, b, beta, c, 42)
    assert rec.calls[-1] == (alpha, a, b, beta, c, 42) and g.replays == 1


def test_a_capturing_stream_gets_the_library_call_itself(fake):
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    g(1.0, 1, 2, 0.0, 3, 42)
    drv.capturing = 1
    g(1.0, 1, 2, 0.0, 3, 42)
    assert rec.calls[-1] == (1.0, 1, 2, 0.0, 3, 42) and g.replays == 1


@pytest.mark.parametrize("make_error", [lambda: runtime.CUDARuntimeError(906),  # the legacy stream under a global capture
                                        lambda: RuntimeError("the stream capture was invalidated")])
def test_a_failed_capture_check_makes_the_call_itself(fake, make_error):
    """A capture check that raises (a CUDA error, or CuPy's invalidated capture) counts as
    capturing: a repeat is neither captured nor replayed, and replay stays on for later. (The
    error is made here and let go at the end: a raised one keeps its traceback, and with it the
    replay and its place in the live count, for as long as the error lives.)"""
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    error = drv.check_error = make_error()
    g(1.0, 1, 2, 0.0, 3, 42)
    g(1.0, 1, 2, 0.0, 3, 42)  # a repeat: not captured while the check fails
    assert rec.calls == [(1.0, 1, 2, 0.0, 3, 42)] * 2 and drv.modes_at_instantiate == []
    drv.check_error = None
    g(1.0, 1, 2, 0.0, 3, 42)
    assert drv.launched == [(101, 42)] and g.replays == 1
    drv.check_error = error
    g(1.0, 1, 2, 0.0, 3, 42)  # a graph exists: the call is made itself all the same
    assert rec.calls[-1] == (1.0, 1, 2, 0.0, 3, 42) and g.replays == 1 and g.enabled
    drv.check_error = None  # else the replay's own finalizer reaches it (driver, error, traceback)


def test_a_refused_graph_launch_raises_naming_the_error(fake):
    """The launch's CUDARuntimeError becomes a LaunchError named by its status."""
    fake("launch")
    g = GraphReplay(Recorder(), capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    with pytest.raises(LaunchError, match="cuGraphLaunch of a captured library call failed [(]cudaErrorStreamCaptureImplicit: "):
        g(1.0, 1, 2, 0.0, 3, 42)


def test_only_the_last_few_argument_sets_keep_a_graph(fake):
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    for c in range(KEPT + 1):
        g(1.0, 1, 2, 0.0, c, 42)
        g(1.0, 1, 2, 0.0, c, 42)
    assert len(g._execs) == KEPT and drv.destroyed == [101]  # the oldest graph freed


@pytest.mark.parametrize("fail", ["create", "begin", "end", "instantiate"])
def test_a_failed_capture_turns_replay_off_and_the_call_still_runs(fake, fail):
    drv, rec = fake(fail), Recorder()
    g = GraphReplay(rec, capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    g(1.0, 1, 2, 0.0, 3, 42)
    assert not g.enabled and g.disabled_reason and g.replays == 0
    assert rec.calls[-1] == (1.0, 1, 2, 0.0, 3, 42)  # the second call ran directly all the same
    g(1.0, 1, 2, 0.0, 3, 42)
    assert drv.launched == [] and rec.calls[-1][-1] == 42


def test_a_call_that_refuses_capture_turns_replay_off(fake):
    drv, rec = fake(), Recorder(raises_on_stream=7)
    g = GraphReplay(rec, capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    g(1.0, 1, 2, 0.0, 3, 42)
    assert not g.enabled and "refused capture" in g.disabled_reason
    assert rec.calls[-1] == (1.0, 1, 2, 0.0, 3, 42)


def test_a_call_that_failed_is_not_captured_when_it_comes_again(fake):
    drv = fake()
    state = {"fail": True}

    def flaky(alpha, a, b, beta, c, stream):
        if state["fail"]:
            raise ValueError("misaligned")

    g = GraphReplay(flaky, capture_after=1)
    with pytest.raises(ValueError):
        g(1.0, 1, 2, 0.0, 3, 42)
    state["fail"] = False
    g(1.0, 1, 2, 0.0, 3, 42)  # direct: the failed call never counted as a first
    assert g.replays == 0 and drv.launched == [] and g.enabled


def test_a_replayed_graph_counts_as_recently_used(fake):
    """KEPT graphs, the oldest replayed again, one more captured: the one dropped is the least
    recently used (the second), not the oldest captured."""
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    for c in range(KEPT):
        g(1.0, 1, 2, 0.0, c, 42)
        g(1.0, 1, 2, 0.0, c, 42)
    exe, handle = g._execs[(1, 2, 0, 1.0, 0.0)]
    first = exe.value
    assert handle == first  # the int the runtime's graphLaunch takes
    g(1.0, 1, 2, 0.0, 0, 42)  # the first graph replayed: now the most recently used
    g(1.0, 1, 2, 0.0, KEPT, 42)
    g(1.0, 1, 2, 0.0, KEPT, 42)  # captured: one graph must go
    assert (1, 2, 0, 1.0, 0.0) in g._execs and (1, 2, 1, 1.0, 0.0) not in g._execs
    assert drv.destroyed == [first + 1]


def test_alpha_minus_zero_is_not_replayed_from_plus_zeros_graph(fake):
    """-0.0 == 0.0, but alpha -0.0 writes zeros of the other sign: each sign keeps its own graph."""
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    g(0.0, 1, 2, 0.0, 3, 42)
    g(0.0, 1, 2, 0.0, 3, 42)  # captured with +0.0 and replayed
    assert g.replays == 1 and str(rec.calls[-1][0]) == "0.0"
    g(-0.0, 1, 2, 0.0, 3, 42)  # not the +0.0 graph: made directly, with its own sign
    assert g.replays == 1 and str(rec.calls[-1][0]) == "-0.0" and rec.calls[-1][-1] == 42
    g(-0.0, 1, 2, 0.0, 3, 42)  # a repeat of -0.0: captured with -0.0
    assert g.replays == 2 and str(rec.calls[-1][0]) == "-0.0" and rec.calls[-1][-1] == 7
    g(0.0, 1, 2, 0.0, 3, 42)
    assert g.replays == 3 and drv.launched[-1] == (101, 42)  # +0.0's own graph again


def test_a_library_call_recorded_into_a_capture_is_pinned(fake, monkeypatch):
    """The user's graph holds the prepared call's workspace: the call is kept for good once a
    capture recorded it, and not before."""
    monkeypatch.setattr(launch_graph, "_captured", {})
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    g(1.0, 1, 2, 0.0, 3, 42)  # replayed
    assert launch_graph.captured_count() == 0
    drv.capturing = 1
    g(1.0, 1, 2, 0.0, 3, 42)
    g(2.0, 1, 2, 0.0, 3, 42)  # a first call of its arguments, under capture
    assert launch_graph._captured == {id(rec): rec}


def test_a_loop_alternating_between_two_outputs_replays_both(fake):
    """`y = hgemm(x, w)` in a loop keeps the last result alive while the next is made, so the
    allocator hands out two C addresses in turn; with only the previous call remembered no key
    ever repeated it, and every call went to the library directly."""
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    for c in (3, 4, 3, 4, 3, 4):
        g(1.0, 1, 2, 0.0, c, 42)
    assert len(rec.calls) == 4  # two direct calls, then one capture each (on the private stream)
    assert [call[5] for call in rec.calls] == [42, 42, 7, 7] and g.replays == 4


def test_the_capture_check_is_asked_once_per_direct_call(fake, monkeypatch):
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=1)
    asked = []
    real = drv.streamIsCapturing
    monkeypatch.setattr(runtime, "streamIsCapturing", lambda s: asked.append(s) or real(s))
    g(1.0, 1, 2, 0.0, 3, 42)  # first: not seen, asked once before the direct call
    drv.capturing = 1
    g(1.0, 1, 2, 0.0, 3, 42)  # seen: asked once, capturing, so the call is made directly
    assert len(asked) == 2 and len(rec.calls) == 2


def test_by_default_arguments_are_captured_after_capture_after_direct_calls(fake):
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec)
    assert g.capture_after == CAPTURE_AFTER >= 2
    for _ in range(CAPTURE_AFTER):
        g(1.0, 1, 2, 0.0, 3, 42)
    assert rec.calls == [(1.0, 1, 2, 0.0, 3, 42)] * CAPTURE_AFTER and drv.modes_at_instantiate == []
    g(1.0, 1, 2, 0.0, 3, 42)
    assert rec.calls[-1][-1] == 7 and drv.launched == [(101, 42)] and g.replays == 1  # captured, launched
    g(1.0, 1, 2, 0.0, 3, 42)
    assert len(rec.calls) == CAPTURE_AFTER + 1 and g.replays == 2


def test_a_shape_met_now_and_then_with_new_outputs_captures_nothing(fake):
    """A program whose shapes change meets one shape's executor every so often, with the output
    wherever the allocator put it that time: an address met twice is not worth a capture
    (120-800 us against a 20-25 us direct call, session 37), and was captured until then."""
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec)
    for c in (3, 4, 3, 5, 4, 6):  # each address at most twice
        g(1.0, 1, 2, 0.0, c, 42)
    assert drv.modes_at_instantiate == [] and g.replays == 0 and len(rec.calls) == 6
    assert all(call[-1] == 42 for call in rec.calls)


def test_a_call_on_a_capturing_stream_goes_through_captured_call_where_the_call_has_one(fake):
    class WithOwnCapture(Recorder):
        def captured_call(self, alpha, a, b, beta, c, stream):
            self.calls.append(("captured", stream))

    drv, rec = fake(), WithOwnCapture()
    g = GraphReplay(rec, capture_after=1)
    drv.capturing = 1
    g(1.0, 1, 2, 0.0, 3, 42)
    drv.capturing = 0
    g(2.0, 1, 2, 0.0, 3, 42)
    assert rec.calls == [("captured", 42), (2.0, 1, 2, 0.0, 3, 42)]


@pytest.fixture
def budget(monkeypatch):
    """A fresh count of live graphs, and the limit set by the test; every place back at the end
    (the test's replays gone, their graphs freed). Earlier tests' replays go first, into the real
    count: one collected during the test would give its places back into the test's."""
    gc.collect()
    monkeypatch.setattr(graph_replay, "_live", [0])
    yield lambda limit: monkeypatch.setattr(graph_replay, "GRAPHS_LIMIT", limit)
    gc.collect()
    assert graph_replay.live_graphs() == 0


def test_past_the_graph_limit_a_capture_is_refused_and_the_call_made_directly(fake, budget):
    # a graph costs device memory the driver keeps (676 KiB, H100): the process holds at most the
    # limit, and makes no room by evicting (a cycling program would capture and evict for ever)
    fake()
    rec = Recorder()
    budget(2)
    first, second, third = (GraphReplay(rec, capture_after=1) for _ in range(3))
    for g in (first, second, third):
        g(1.0, 1, 2, 0.0, 3, 42)
        g(1.0, 1, 2, 0.0, 3, 42)
    assert graph_replay.live_graphs() == 2 and (first.replays, second.replays, third.replays) == (1, 1, 0)
    assert third.refused == 1 and third.enabled and rec.calls[-1][-1] == 42  # made directly, not turned off
    first.__dict__["_finalizer"]()  # the first one's graphs freed (as when its executor goes)
    assert graph_replay.live_graphs() == 1
    third(1.0, 1, 2, 0.0, 3, 42)  # asked again at its next repeat: there is room now
    assert third.replays == 1 and graph_replay.live_graphs() == 2


def test_the_live_count_follows_graphs_replaced_and_captures_that_failed(fake, budget):
    fake()
    rec = Recorder()
    budget(100)
    g = GraphReplay(rec, capture_after=1)
    for c in range(KEPT + 2):  # two replaced by newer ones
        g(1.0, 1, 2, 0.0, c, 42)
        g(1.0, 1, 2, 0.0, c, 42)
    assert graph_replay.live_graphs() == KEPT == len(g._execs)
    broken = GraphReplay(Recorder(), capture_after=1)
    fake("instantiate")
    broken(1.0, 1, 2, 0.0, 3, 42)
    broken(1.0, 1, 2, 0.0, 3, 42)
    assert not broken.enabled and graph_replay.live_graphs() == KEPT  # its place went back


def test_an_unbounded_replay_a_plans_is_counted_but_never_refused(fake, budget):
    # a plan is kept on purpose for its cost per call: the limit is on what plain calls keep
    fake()
    rec = Recorder()
    budget(1)
    plain, plan = GraphReplay(rec, capture_after=1), GraphReplay(rec, capture_after=1)
    plan.bounded = False
    for g in (plain, plan, plan):
        g(1.0, 1, 2, 0.0, 3, 42)
        g(1.0, 1, 2, 0.0, 3, 42)
    assert (plain.replays, plan.replays, plan.refused) == (1, 3, 0) and graph_replay.live_graphs() == 2
    late = GraphReplay(rec, capture_after=1)
    late(1.0, 1, 2, 0.0, 3, 42)
    late(1.0, 1, 2, 0.0, 3, 42)
    assert late.refused == 1 and late.replays == 0  # past the limit, plans' graphs included


def test_a_replay_turned_off_frees_its_graphs_and_their_places(fake, budget):
    # off for good, its graphs would never launch again yet hold places until the executor went
    drv, rec = fake(), Recorder()
    budget(100)
    g = GraphReplay(rec, capture_after=1)
    for c in (3, 4):
        g(1.0, 1, 2, 0.0, c, 42)
        g(1.0, 1, 2, 0.0, c, 42)
    assert graph_replay.live_graphs() == 2 and g.replays == 2
    drv.fail = "instantiate"
    g(1.0, 1, 2, 0.0, 5, 42)
    g(1.0, 1, 2, 0.0, 5, 42)  # the capture fails: replay off
    assert not g.enabled and graph_replay.live_graphs() == 0 and sorted(drv.destroyed) == [101, 102]
    g(1.0, 1, 2, 0.0, 3, 42)  # a graph's arguments again: made directly now
    assert g.replays == 2 and rec.calls[-1] == (1.0, 1, 2, 0.0, 3, 42)


def test_replacing_a_replays_oldest_graph_needs_no_new_place(fake, budget):
    # at KEPT graphs, a new argument set's graph takes the oldest one's place: the total is the same
    drv, rec = fake(), Recorder()
    budget(KEPT)
    g = GraphReplay(rec, capture_after=1)
    for c in range(KEPT + 1):
        g(1.0, 1, 2, 0.0, c, 42)
        g(1.0, 1, 2, 0.0, c, 42)
    assert g.refused == 0 and g.replays == KEPT + 1 and graph_replay.live_graphs() == KEPT
    assert drv.destroyed == [101]  # the oldest went
    drv.fail = "end"
    g(1.0, 1, 2, 0.0, 99, 42)
    g(1.0, 1, 2, 0.0, 99, 42)  # a replacement whose capture failed: all freed, none counted twice
    assert not g.enabled and graph_replay.live_graphs() == 0


@pytest.fixture
def clock(monkeypatch):
    """A clock the test moves, and a fresh per-thread record of the replays holding graphs."""
    now = [100.0]
    monkeypatch.setattr(graph_replay, "_now", lambda: now[0])
    monkeypatch.setattr(graph_replay, "_threads", threading.local())
    return now


def _captured(rec, c):
    g = GraphReplay(rec, capture_after=1)
    g(1.0, 1, 2, 0.0, c, 42)
    g(1.0, 1, 2, 0.0, c, 42)  # captured and replayed (when admitted)
    return g


def test_idle_graphs_of_the_thread_give_their_places_to_a_refused_capture(fake, budget, clock):
    # a program that moved on to new shapes gets graphs for them once the old ones stay idle
    drv, rec = fake(), Recorder()
    budget(2)
    busy, idle = _captured(rec, 1), _captured(rec, 2)
    new = _captured(rec, 3)  # refused: the first look only notes what each replay had launched
    assert new.refused == 1 and new.replays == 0 and graph_replay.live_graphs() == 2
    clock[0] += 0.5
    busy(1.0, 1, 2, 0.0, 1, 42)  # launched since the look
    new(1.0, 1, 2, 0.0, 3, 42)  # refused: too soon to look again
    assert new.refused == 2 and idle.reclaimed == 0
    clock[0] += graph_replay.IDLE_SECONDS
    new(1.0, 1, 2, 0.0, 3, 42)  # the idle replay's graph goes, the new call's takes its place
    assert (idle.reclaimed, busy.reclaimed, new.replays) == (1, 0, 1) and graph_replay.live_graphs() == 2
    assert drv.destroyed == [102] and not idle._execs and idle.enabled
    busy(1.0, 1, 2, 0.0, 1, 42)
    assert busy.replays == 3  # untouched
    idle(1.0, 1, 2, 0.0, 2, 42)  # back: made directly (no room now), exact as ever
    assert idle.refused == 1 and rec.calls[-1] == (1.0, 1, 2, 0.0, 2, 42)


def test_graphs_launched_between_looks_are_kept_however_often_captures_are_refused(fake, budget, clock):
    # a cycle through more shapes than the limit that comes round within IDLE_SECONDS frees nothing
    fake()
    rec = Recorder()
    budget(3)
    kept = [_captured(rec, c) for c in range(3)]
    extra = [GraphReplay(rec, capture_after=1) for _ in range(3)]
    for _ in range(6):
        for g, c in zip(kept + extra, range(6)):
            g(1.0, 1, 2, 0.0, c, 42)
        clock[0] += graph_replay.IDLE_SECONDS  # a look at every round
    assert sum(g.reclaimed for g in kept) == 0 and graph_replay.live_graphs() == 3
    assert all(g.replays == 7 for g in kept) and all(g.replays == 0 and g.refused == 5 for g in extra)


def test_a_plans_graphs_and_another_threads_are_never_freed_as_idle(fake, budget, clock):
    fake()
    rec = Recorder()
    budget(2)
    plan = GraphReplay(rec, capture_after=1)
    plan.bounded = False
    plan(1.0, 1, 2, 0.0, 1, 42)
    plan(1.0, 1, 2, 0.0, 1, 42)
    other = []
    t = threading.Thread(target=lambda: other.append(_captured(rec, 2)))
    t.start()
    t.join()
    assert graph_replay.live_graphs() == 2 and other[0].replays == 1
    new = _captured(rec, 3)
    for _ in range(3):
        clock[0] += graph_replay.IDLE_SECONDS
        new(1.0, 1, 2, 0.0, 3, 42)
    assert plan.reclaimed == other[0].reclaimed == 0 and new.replays == 0 and new.refused == 4


def test_a_refused_replays_own_stale_graphs_go_too_in_relaxed_mode_and_one_not_freed_keeps_its_place(
        fake, budget, clock):
    # a replay whose calls moved to new arguments frees its old graphs for them; the destroy runs in
    # relaxed capture mode (another thread's global capture would refuse it and be invalidated)
    drv, rec = fake(), Recorder()
    budget(1)
    g = _captured(rec, 1)  # graph 101 for C at 1
    stuck = GraphReplay(rec, capture_after=1)
    for step in range(4):  # C moved to 2: direct, refused (a look), refused (too soon), then 101 goes
        g(1.0, 1, 2, 0.0, 2, 42)
        clock[0] += 0.6
    assert (g.reclaimed, g.replays) == (1, 2) and drv.destroyed == [101] and graph_replay.live_graphs() == 1
    assert set(drv.modes_at_destroy) == {graph_replay.CU_STREAM_CAPTURE_MODE_RELAXED}
    drv.refuse_destroy.add(102)  # the graph for C at 2: the driver will not free it
    for step in range(4):  # direct, refused (a look), refused (too soon), refused (102 not freed)
        stuck(1.0, 1, 2, 0.0, 3, 42)
        clock[0] += 0.6
    assert g.reclaimed == 1 and len(g._execs) == 1 and graph_replay.live_graphs() == 1  # kept, counted
    assert (stuck.replays, stuck.refused) == (0, 3) and drv.modes_at_destroy[-1] == graph_replay.CU_STREAM_CAPTURE_MODE_RELAXED
    drv.refuse_destroy.clear()
