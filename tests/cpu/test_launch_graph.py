"""LaunchGraph's rules (cuda/launch_graph.py) against a fake driver (and fake CuPy runtime calls
for the capture check and the graph launch): the graph built once with its nodes in order and
cluster dimensions, one instantiation per stream in relaxed capture mode, arguments copied in only
when the key changes, direct launches under capture (or when the capture check fails), and any
failure while building turning the graph off without losing a call. The GPU half (real graphs,
every result against fp64) is tests/gpu/test_launch_graph.py."""
import ctypes

import pytest
from cupy_backends.cuda.api import runtime

from gemmlab.cuda import launch_graph, launcher
from gemmlab.cuda.launch_graph import STREAMS_KEPT, LaunchGraph
from gemmlab.errors import LaunchError


class FakeDriver:
    def __init__(self, fail: str = "", fail_set_at: int = 0):
        self.fail, self.capturing, self.mode, self.next = fail, set(), 0, 100
        self.modes_at_destroy = []  # the capture mode at each destroy
        self.check_error = None  # raised by the capture check (CuPy's streamIsCapturing) when set
        self.fail_set_at, self.sets = fail_set_at, 0  # the n-th SetParams fails (0: none)
        self.direct, self.launched, self.updated, self.destroyed = [], [], [], []
        self.nodes, self.attrs, self.instantiated, self.node_params = [], [], [], {}

    def _new(self, ref):
        self.next += 1
        ref._obj.value = self.next
        return self.next

    def _ret(self, name):
        return 1 if self.fail == name else 0

    def cuLaunchKernelEx(self, cfg, kernel, params, extra):
        self.direct.append((kernel.value, cfg._obj.hStream))
        return 0

    def streamIsCapturing(self, stream):  # CuPy's runtime wrappers take and give plain ints
        assert type(stream) is int
        if self.check_error is not None:
            raise self.check_error
        return stream in self.capturing

    def cuThreadExchangeStreamCaptureMode(self, ref):
        ref._obj.value, self.mode = self.mode, ref._obj.value
        return 0

    def cuGraphCreate(self, ref, flags):
        self._new(ref)
        return self._ret("create")

    def cuKernelGetFunction(self, ref, kernel):
        ref._obj.value = kernel.value + 1000  # the kernel's CUfunction in this context
        return self._ret("function")

    def cuGraphAddKernelNode_v2(self, ref, graph, deps, count, params):
        node = self._new(ref)
        p = params._obj
        self.nodes.append((node, None if deps is None else deps._obj.value, count.value, p.func))
        self.node_params[node] = (p.func, p.kern, (p.gridDimX, p.gridDimY, p.gridDimZ),
                                  (p.blockDimX, p.blockDimY, p.blockDimZ), p.sharedMemBytes, p.kernelParams)
        return self._ret("add")

    def cuGraphKernelNodeSetAttribute(self, node, attr, value):
        self.attrs.append((node.value, attr, tuple(value._obj[:3])))
        return self._ret("attr")

    def cuGraphInstantiateWithFlags(self, ref, graph, flags):
        self.instantiated.append((self._new(ref), self.mode))
        return self._ret("instantiate")

    def cuGraphExecKernelNodeSetParams_v2(self, exe, node, params):
        self.sets += 1
        if self.sets == self.fail_set_at:
            return 1
        p = params._obj
        assert self.node_params[node.value][5] == p.kernelParams, "each node is updated from its own slots"
        self.updated.append((exe.value, node.value))
        return self._ret("set")

    def graphLaunch(self, exe, stream):
        assert type(exe) is int and type(stream) is int
        if self.fail == "launch":
            raise runtime.CUDARuntimeError(906)
        self.launched.append((exe, stream))

    def cuGraphExecDestroy(self, exe):
        self.destroyed.append(exe.value)
        self.modes_at_destroy.append(self.mode)
        return 0

    def cuGraphDestroy(self, graph):
        self.modes_at_destroy.append(self.mode)
        return 0


@pytest.fixture
def fake(monkeypatch):
    def make(fail="", fail_set_at=0):
        drv = FakeDriver(fail, fail_set_at)
        for module in (launch_graph, launcher):
            monkeypatch.setattr(module, "driver", lambda: drv)
            monkeypatch.setattr(module, "raw_driver", lambda: drv)
        for name in ("streamIsCapturing", "graphLaunch"):
            monkeypatch.setattr(runtime, name, getattr(drv, name))
        monkeypatch.setattr(launch_graph, "error_name", lambda err: f"CUresult {err}")
        monkeypatch.setattr(launcher, "error_name", lambda err: f"CUresult {err}")
        return drv
    return make


def _launches(cluster=(1, 1, 1)):
    first = launcher.PreparedLaunch(11, "slices", (4, 2, 1), (128, 1, 1), 0, ("ptr", "f32"), cluster)
    second = launcher.PreparedLaunch(12, "sum", (8, 1, 1), (256, 1, 1), 0, ("ptr",))
    return first, second


def test_built_once_in_order_then_launched_as_it_is_until_the_key_changes(fake):
    drv = fake()
    g = LaunchGraph(_launches(cluster=(2, 1, 1)))
    g.launch(42, ("a", 1.0))
    (n1, dep1, count1, f1), (n2, dep2, count2, f2) = drv.nodes
    assert (dep1, count1, f1) == (None, 0, 1011) and (dep2, count2, f2) == (n1, 1, 1012)  # chained, CUfunctions
    assert drv.attrs == [(n1, launcher.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, (2, 1, 1))]
    first, second = g.launches
    assert drv.node_params[n1] == (1011, None, (4, 2, 1), (128, 1, 1), 0, first.params_address)
    assert drv.node_params[n2] == (1012, None, (8, 1, 1), (256, 1, 1), 0, second.params_address)
    (exe, mode), = drv.instantiated
    assert mode == launcher.CU_STREAM_CAPTURE_MODE_RELAXED and drv.mode == 0  # relaxed, then restored
    assert drv.updated == [(exe, n1), (exe, n2)] and drv.launched == [(exe, 42)] and drv.direct == []
    g.launch(42, ("a", 1.0))  # the same arguments: no copy
    assert len(drv.updated) == 2 and drv.launched[-1] == (exe, 42)
    g.launch(42, ("b", 1.0))  # new arguments: every node updated, then launched
    assert drv.updated[2:] == [(exe, n1), (exe, n2)] and (g.graph_launches, g.updates) == (3, 2)
    assert len(drv.nodes) == 2 and len(drv.instantiated) == 1


def test_each_stream_has_its_own_instantiation_updated_on_first_use(fake):
    drv = fake()
    g = LaunchGraph(_launches())
    g.launch(42, "k")
    g.launch(43, "k")  # same key, but the new stream's graph holds the build-time arguments
    (e42, _), (e43, _) = drv.instantiated
    assert drv.launched == [(e42, 42), (e43, 43)] and g.updates == 2
    g.launch(42, "k")
    assert g.updates == 2 and drv.launched[-1] == (e42, 42)


def test_a_capturing_stream_gets_the_kernels_directly(fake):
    drv = fake()
    g = LaunchGraph(_launches())
    drv.capturing.add(42)
    g.launch(42, "k")  # first use while capturing: nothing instantiated, the launches recorded
    assert drv.instantiated == [] and drv.direct == [(11, 42), (12, 42)] and drv.launched == []
    drv.capturing.clear()
    g.launch(42, "k")
    assert len(drv.instantiated) == 1 and len(drv.launched) == 1
    drv.capturing.add(42)
    g.launch(42, "k")
    assert drv.direct[-2:] == [(11, 42), (12, 42)] and len(drv.launched) == 1 and g.graph_launches == 1


@pytest.mark.parametrize("fail", ["create", "add", "attr", "instantiate"])
def test_a_failed_build_turns_the_graph_off_and_the_call_still_runs(fake, fail):
    drv = fake(fail)
    g = LaunchGraph(_launches(cluster=(2, 1, 1)))
    g.launch(42, "k")
    assert not g.enabled and g.disabled_reason and drv.launched == []
    assert drv.direct == [(11, 42), (12, 42)] and drv.mode == 0
    g.launch(43, "k")
    assert drv.direct[-2:] == [(11, 43), (12, 43)] and len(drv.instantiated) <= 1


@pytest.mark.parametrize("fail, named", [("set", "updating a graph's arguments failed [(]CUresult 1[)]"),
                                         ("launch", "cuGraphLaunch failed [(]cudaErrorStreamCaptureImplicit: ")])
def test_a_refused_update_or_launch_raises_naming_the_error(fake, fail, named):
    """The launch's CUDARuntimeError becomes a LaunchError named by its status."""
    fake(fail)
    g = LaunchGraph(_launches())
    with pytest.raises(LaunchError, match="slices: " + named):
        g.launch(42, "k")


@pytest.mark.parametrize("error", [runtime.CUDARuntimeError(906),  # the legacy stream under a global capture
                                   RuntimeError("the stream capture was invalidated")])
def test_a_failed_capture_check_launches_directly(fake, error):
    """A capture check that raises (a CUDA error, or CuPy's invalidated capture) counts as
    capturing: on a new stream nothing is instantiated, on a known one the graph is not launched."""
    drv = fake()
    g = LaunchGraph(_launches())
    drv.check_error = error
    g.launch(42, "k")
    assert drv.instantiated == [] and drv.direct == [(11, 42), (12, 42)]
    drv.check_error = None
    g.launch(42, "k")
    assert len(drv.instantiated) == 1 and len(drv.launched) == 1
    drv.check_error = error
    g.launch(42, "k")
    assert drv.direct[-2:] == [(11, 42), (12, 42)] and len(drv.launched) == 1 and g.graph_launches == 1


def test_only_the_last_few_streams_keep_an_instantiation(fake):
    drv = fake()
    g = LaunchGraph(_launches())
    for stream in range(STREAMS_KEPT + 1):
        g.launch(1000 + stream, "k")
    assert len(g._execs) == STREAMS_KEPT and drv.destroyed == [drv.instantiated[0][0]]
    assert 1000 not in g._execs


def test_the_stream_dropped_is_the_least_recently_launched(fake):
    drv = fake()
    g = LaunchGraph(_launches())
    for stream in range(STREAMS_KEPT):
        g.launch(1000 + stream, "k")
    g.launch(1000, "k")  # the first stream used again: now the most recent
    g.launch(1000, "k")
    g.launch(2000, "k")  # one stream too many
    assert 1000 in g._execs and 1001 not in g._execs, "the least recently launched (1001) goes, not the first made"
    assert drv.destroyed == [drv.instantiated[1][0]]
    launched = len(drv.launched)
    g.launch(1000, "k")
    assert len(drv.launched) == launched + 1 and len(drv.instantiated) == STREAMS_KEPT + 1, "1000 kept its graph"


def test_the_eviction_order_follows_every_launch(fake):
    """A new stream is the most recent at once, and so is each stream launched on again: a random
    sequence of launches evicts what an OrderedDict model of least-recent use says it should."""
    import random
    from collections import OrderedDict

    fake()
    g = LaunchGraph(_launches())
    model: OrderedDict = OrderedDict()
    rng = random.Random(22)
    for _ in range(400):
        stream = 1000 + rng.randrange(STREAMS_KEPT + 3)
        g.launch(stream, "k")
        if stream in model:
            model.move_to_end(stream)
        else:
            if len(model) >= STREAMS_KEPT:
                model.popitem(last=False)
            model[stream] = True
        assert list(g._execs) == list(model), "the kept streams, least recently launched first"


def test_direct_launches_use_the_prepared_configuration(fake):
    drv = fake()
    first, _ = _launches(cluster=(2, 1, 1))
    first.launch(7)
    assert drv.direct == [(11, 7)]
    cfg = first._config
    assert (cfg.gridDimX, cfg.gridDimY, cfg.blockDimX, cfg.numAttrs) == (4, 2, 128, 1)
    assert tuple(cfg.attrs.contents.value[:3]) == (2, 1, 1)
    assert ctypes.addressof(first._params) == first.params_address


def test_a_kernel_without_a_cufunction_is_named_by_its_cukernel(fake):
    drv = fake("function")
    g = LaunchGraph(_launches())
    g.launch(42, "k")
    (n1, *_), (n2, *_) = drv.nodes
    assert drv.node_params[n1][:2] == (None, 11) and drv.node_params[n2][:2] == (None, 12)
    assert g.enabled and len(drv.launched) == 1


def test_an_update_that_fails_midway_is_redone_in_full_on_the_next_call(fake):
    """Node 1 took the new arguments, node 2 refused them: a later call with the old arguments
    must copy them into every node again, never launch the graph half old, half new."""
    drv = fake(fail_set_at=4)  # call 1 sets nodes 1-2; call 2 sets node 1 (3), then node 2 fails (4)
    g = LaunchGraph(_launches())
    g.launch(42, "old")
    with pytest.raises(LaunchError):
        g.launch(42, "new")
    updated = len(drv.updated)
    g.launch(42, "old")
    assert len(drv.updated) == updated + 2 and g.updates == 2


def test_a_graph_turned_off_stops_every_streams_graph(fake):
    drv = fake()
    g = LaunchGraph(_launches())
    g.launch(42, "k")
    drv.fail = "instantiate"
    g.launch(43, "k")  # a new stream's instantiation fails: the graph is off
    assert not g.enabled and g._execs == {} and drv.destroyed == [drv.instantiated[0][0]]
    launched = len(drv.launched)
    g.launch(42, "k")
    assert len(drv.launched) == launched and drv.direct[-2:] == [(11, 42), (12, 42)]


def test_the_structures_match_cuda_h():
    """CUDA 13's cuda.h: CUDA_KERNEL_NODE_PARAMS_v2 is 72 bytes, kern at 56 and ctx at 64;
    CUlaunchConfig 56 bytes, hStream at 32; CUlaunchAttribute 72 bytes, its value at 8."""
    from gemmlab.cuda.launch_graph import KernelNodeParams

    assert ctypes.sizeof(KernelNodeParams) == 72
    assert (KernelNodeParams.kernelParams.offset, KernelNodeParams.kern.offset, KernelNodeParams.ctx.offset) == (40, 56, 64)
    assert ctypes.sizeof(launcher.LaunchConfig) == 56 and launcher.LaunchConfig.hStream.offset == 32
    assert launcher.LaunchConfig.attrs.offset == 40 and launcher.LaunchConfig.numAttrs.offset == 48
    assert ctypes.sizeof(launcher.LaunchAttribute) == 72 and launcher.LaunchAttribute.value.offset == 8


def test_launches_recorded_into_a_capture_are_pinned_with_their_buffers(fake, monkeypatch):
    """A user's captured graph keeps the addresses of the buffers the launches use: whatever a
    capture recorded is kept alive for good (not dropped with an executor), whatever is launched
    outside a capture is not."""
    monkeypatch.setattr(launch_graph, "_captured", {})
    drv = fake()
    workspace = object()
    g = LaunchGraph(_launches(), keep=(workspace,))
    g.launch(42, "k")  # an ordinary launch: nothing pinned
    assert launch_graph.captured_count() == 0
    drv.capturing.add(42)
    g.launch(42, "k")  # a known stream under capture
    fresh = LaunchGraph(_launches())
    fresh.launch(42, "k")  # a first launch under capture
    assert launch_graph.captured_count() == 2
    assert launch_graph._captured[id(g)] is g and g.keep == (workspace,)
    g.launch(42, "k")  # once per object
    assert launch_graph.captured_count() == 2


def test_a_graph_turned_off_pins_only_the_launches_a_capture_records(fake, monkeypatch):
    monkeypatch.setattr(launch_graph, "_captured", {})
    drv = fake("create")
    g = LaunchGraph(_launches())
    g.launch(42, "k")
    assert not g.enabled and launch_graph.captured_count() == 0
    drv.capturing.add(43)
    g.launch(43, "k")
    assert launch_graph.captured_count() == 1 and drv.direct[-2:] == [(11, 43), (12, 43)]


@pytest.mark.parametrize("check, pinned", [(lambda s: s == 42, True), (lambda s: False, False),
                                           ("raise", True)])
def test_the_runner_paths_pin_what_a_capture_records(monkeypatch, check, pinned):
    """The runner paths (baselines other than cuBLAS, TMA shapes needing padded copies) own
    buffers too; a failed capture check counts as capturing."""
    monkeypatch.setattr(launch_graph, "_captured", {})

    def raising(stream):
        raise RuntimeError("the stream capture was invalidated")

    monkeypatch.setattr(runtime, "streamIsCapturing", raising if check == "raise" else check)
    runner = object()
    launch_graph.pin_if_captured(runner, 42)
    assert (launch_graph._captured == {id(runner): runner}) is pinned


class FakeScratch:
    """A shared workspace (api/shared_workspaces.py's KernelWorkspace) as LaunchGraph sees it."""

    def __init__(self, drv):
        from contextlib import contextmanager

        self.drv, self.block, self.log, self.number = drv, type("Block", (), {"last": None})(), [], 7

        @contextmanager
        def captured(stream):
            self.log.append(("captured", stream))
            yield
            self.log.append(("restored", len(self.drv.direct)))

        self.captured = captured

    def handover(self, stream):
        self.log.append(("handover", stream, len(self.drv.launched) + len(self.drv.direct)))
        self.block.last = self.number


def test_a_shared_workspace_is_handed_over_before_a_launch_only_when_another_used_it(fake):
    drv = fake()
    g = LaunchGraph(_launches())
    scratch = g.scratch = FakeScratch(drv)
    g.launch(42, "k")
    g.launch(42, "k")  # still this executor's: no clearing
    assert scratch.log == [("handover", 42, 0)] and len(drv.launched) == 2
    scratch.block.last = 8  # another executor of the stream launched on it meanwhile
    g.launch(42, "k2")
    assert scratch.log[-1] == ("handover", 42, 2) and len(drv.launched) == 3  # before the launch


def test_a_capture_runs_the_launches_on_the_executors_own_workspace_with_no_handover(fake, monkeypatch):
    monkeypatch.setattr(launch_graph, "_captured", {})
    drv = fake()
    g = LaunchGraph(_launches())
    scratch = g.scratch = FakeScratch(drv)
    drv.capturing.add(42)
    g.launch(42, "k")
    assert scratch.log == [("captured", 42), ("restored", 2)] and drv.direct == [(11, 42), (12, 42)]
    # not this object (it holds the shared block): the workspace captured() gives, which it pins
    assert launch_graph.captured_count() == 0 and scratch.block.last is None


def test_a_graph_turned_off_still_hands_the_workspace_over_before_direct_launches(fake):
    drv = fake("create")
    g = LaunchGraph(_launches())
    scratch = g.scratch = FakeScratch(drv)
    g.launch(42, "k")
    assert not g.enabled and scratch.log == [("handover", 42, 0)] and drv.direct == [(11, 42), (12, 42)]


def test_graphs_are_freed_in_relaxed_capture_mode(fake):
    # a finalizer or a dropped executor may free them while a stream captures in global mode, where
    # the destroys would be refused and the capture invalidated (CUDA error 900)
    drv = fake()
    g = LaunchGraph(_launches())
    g.launch(42, "k")
    g.launch(43, "k")
    g._finalizer()  # as when the executor goes
    assert drv.destroyed and len(drv.modes_at_destroy) == 3  # two instantiations and the graph
    assert set(drv.modes_at_destroy) == {launcher.CU_STREAM_CAPTURE_MODE_RELAXED} and drv.mode == 0
