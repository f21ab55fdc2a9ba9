"""Tests that could not fail, seventh audit: hand-made mutants of api/core.py, api/executors.py and
cuda/graph_replay.py that every other CPU test let through, each pinned here by what a user would
see (a kernel launched with its arguments in the wrong slots, a split-K sum or a pass of a sum
left out, a kernel compiled for another layout or parameters, an executor or a compiled kernel
built twice or shared where it must not be, a refusal's words, a thread's caches use_tuning does
not reach, a CUDA stream or graph the replay leaks or captures again after turning off). No GPU:
the executors are built for real over stand-ins for what needs the driver (prepared launches
that keep their slots, a launch graph that records what each launch would read, buffers with
made-up addresses), fake_api_gpu's process state, and test_graph_replay's fake driver."""
from __future__ import annotations

import contextlib
import threading
import time
import types
import weakref

import pytest

import gemmlab
from gemmlab import ops, registry
from gemmlab.api import core, executors, launches, shared_workspaces, tuning
from gemmlab.api.launches import BGEMM_SIGNATURE, GEMM_SIGNATURE, REDUCE_SIGNATURES, SPLITK_REDUCE_SIGNATURE
from gemmlab.cuda import cublaslt, graph_replay, launch_graph, launcher
from gemmlab.cuda.graph_replay import CU_STREAM_CAPTURE_MODE_RELAXED, KEPT, GraphReplay
from gemmlab.cuda.launch_graph import gemm_key
from gemmlab.problem import BatchedGemmProblem, GemmProblem

from . import fake_api_gpu, test_graph_replay as replay_tests
from .fake_api_gpu import CAI
from .test_api_audit6 import _refused
from .test_cublaslt import _fake_lt
from .test_graph_replay import Recorder, _captured

# fixtures, bound here by name (so no unused import)
fake_gpu = fake_api_gpu.fake_gpu
fake, budget, clock = replay_tests.fake, replay_tests.budget, replay_tests.clock

H100 = ("NVIDIA H100 80GB HBM3", "sm_90")


# -- stand-ins for what needs the driver ------------------------------------------------------------

class Slot:
    """A prepared launch's argument slot (a ctypes scalar: 0 until set)."""

    value = 0


class MapSlot(Slot):
    """A tensor map slot: each encode kept, (dtype, base, rows, cols, row pitch, box, swizzle)."""

    def __init__(self):
        self.encoded = []

    def encode(self, *args):
        self.encoded.append(args)


class Launch:
    """What executors.prepared makes, without a kernel handle: the compiled module, geometry and
    signature it was made with, and its slots."""

    def __init__(self, module, geometry, signature):
        self.module, self.geometry, self.signature = module, geometry, tuple(signature)
        self.slots = [MapSlot() if kind == "tmap" else Slot() for kind in self.signature]

    def set(self, index, value):
        self.slots[index].value = value

    def tmap(self, index):
        return self.slots[index]

    def values(self) -> tuple:
        return tuple(slot.value for slot in self.slots)


class Graph:
    """A LaunchGraph that records, at each launch, its stream, its key and every launch's slots
    as the kernels would read them."""

    def __init__(self, launches, keep=(), scratch=None):
        self.launches, self.keep, self.scratch = tuple(launches), keep, scratch
        self.launched = []

    def launch(self, stream, key):
        self.launched.append((stream, key, [launch.values() for launch in self.launches]))


class Module:
    """A compiled kernel; kernel() loads its module (counted)."""

    def __init__(self):
        self.loads = 0

    def kernel(self):
        self.loads += 1


class Buffer:
    """A CuPy buffer an executor owns: made-up address, and how it was asked for."""

    def __init__(self, count, dtype="float32", zeroed=True):
        self.count, self.dtype, self.zeroed = count, dtype, zeroed
        self.data = types.SimpleNamespace(ptr=next(fake_api_gpu._addresses))


def runner(op_name: str, impl, params=None, built=None):
    """A runner as op.prepare / prepare_for make it: `impl` with its parameters resolved (a hgemm
    rung's as given: its build parameters come from the problem), modules for kernels."""
    kernel = impl.kind == "kernel"
    return types.SimpleNamespace(
        name=impl.name, impl=impl, given=params, built=built,
        params=impl.resolve(params) if kernel and op_name != "hgemm" else dict(params or {}),
        compiled=Module() if kernel else None,
        reduce=Module() if kernel and impl.splitk_reduce is not None else None,
        single_pass="single_pass" in impl.tags)


@pytest.fixture
def device(monkeypatch):
    """Executors built over the stand-ins: returns the list of buffers they asked for. Each
    shared kernel workspace is a real KernelWorkspace at address 0xF000 over a stream's block."""
    asked = []

    def workspace(count, dtype="float32", zeroed=True):
        asked.append(Buffer(count, dtype, zeroed))
        return asked[-1]

    def kernel_workspace(floats, flag_floats):
        block = types.SimpleNamespace(last=None)
        return shared_workspaces.KernelWorkspace(0xF000, block, block, 4 * floats, 4 * flag_floats)

    import gemmlab.cuda.device as cuda_device

    monkeypatch.setattr(cuda_device, "info", lambda index=None: types.SimpleNamespace(sm_count=132))  # an H100's
    monkeypatch.setattr(executors, "prepared", Launch)
    monkeypatch.setattr(executors, "LaunchGraph", Graph)
    monkeypatch.setattr(executors, "workspace", workspace)
    monkeypatch.setattr(executors, "kernel_workspace", kernel_workspace)
    return asked


@pytest.fixture
def built(fake_gpu, device, monkeypatch):
    """core._new_executor for real on fake_gpu's H100: each op's prepare / prepare_for records
    the runners it makes (returned), with what they were built for; a TMA rung's fast executor
    records the runner and problem it was given; cuBLASLt prepares any GEMM."""
    runners = []
    monkeypatch.setattr(core, "_runners", {})
    for op_name in ("sgemm", "bgemm", "hgemm", "reduce"):
        op = ops.get(op_name)

        def prepare(impl, params, dtype, op_name=op_name):
            runners.append(runner(op_name, impl, params, ("prepare", dtype)))
            return runners[-1]

        def prepare_for(impl, params, problem, op_name=op_name):
            runners.append(runner(op_name, impl, params, ("prepare_for", problem)))
            return runners[-1]

        monkeypatch.setattr(op, "prepare", prepare)
        monkeypatch.setattr(op, "prepare_for", prepare_for)
    monkeypatch.setattr(executors, "TmaGemm", lambda shared, problem: types.SimpleNamespace(
        runner=shared, problem=problem, fast=True, owns_workspace=False))
    monkeypatch.setattr(cublaslt, "PreparedLtGemm", _fake_lt(None))
    return runners


def _run(ex, a=0xA000, b=0xB000, c=0xC000, alpha=2.0, beta=0.5, stream=5):
    ex.run(a, b, c, alpha, beta, stream)
    return ex.graph.launched[-1]


# -- executors.py: what each launch reads ------------------------------------------------------------

def test_a_kernels_launch_reads_the_shape_scalars_and_pointers_in_its_signatures_order(device):
    """GEMM_SIGNATURE: M N K alpha A B beta C; A and B in each other's slots is B @ A. The key
    names the scalars too: the graph copies the slots into its nodes only for a new key."""
    problem = GemmProblem(64, 48, 32, 1.0, 0.0)
    ex = executors.KernelGemm(runner("sgemm", registry.get("vectorize", "sgemm")), problem, batched=False)
    assert ex.main.signature == GEMM_SIGNATURE and ex.reduce is None
    stream, key, (main,) = _run(ex)
    assert main == (64, 48, 32, 2.0, 0xA000, 0xB000, 0.5, 0xC000)
    assert stream == 5 and key == gemm_key(0xA000, 0xB000, 0xC000, 2.0, 0.5)


def test_a_batched_launch_reads_each_operands_batch_stride_and_the_batch_count(device):
    """BGEMM_SIGNATURE: M N K alpha A strideA B strideB beta C strideC batch; a stride or count
    wrong computes other matrices' products, or only the first batch's."""
    problem = BatchedGemmProblem(64, 48, 32, 1.0, 0.0, batch=3)
    ex = executors.KernelGemm(runner("bgemm", registry.get("batched_pipeline", "bgemm")), problem, batched=True)
    assert ex.main.signature == BGEMM_SIGNATURE
    _, _, (main,) = _run(ex)
    assert main == (64, 48, 32, 2.0, 0xA000, 64 * 32, 0xB000, 32 * 48, 0.5, 0xC000, 64 * 48, 3)


def test_a_split_k_kernel_sums_its_slices_in_the_same_graph_through_its_streams_workspace(device):
    """Split K into 4: the kernel writes 4 partial products to the workspace and the sum's launch
    (M N slices alpha W beta C) writes C; the workspace is the stream's shared block, so the
    executor is kept per stream and the graph hands the block over (scratch)."""
    spec = registry.get("hopper_simt", "sgemm")
    problem = GemmProblem(256, 256, 8192, 1.0, 0.0)
    ex = executors.KernelGemm(runner("sgemm", spec, {"SPLITK": 4}), problem, batched=False)
    assert ex.owns_workspace and ex.graph.launches == (ex.main, ex.reduce)
    assert ex.graph.scratch is not None and ex.graph.scratch.ptr == 0xF000
    assert ex.reduce.signature == SPLITK_REDUCE_SIGNATURE
    _, _, (main, total) = _run(ex)
    assert main == (256, 256, 8192, 2.0, 0xA000, 0xB000, 0.5, 0xC000, 0xF000)
    assert total == (256, 256, 4, 2.0, 0xF000, 0.5, 0xC000)
    _, _, (_, total) = _run(ex, c=0xD000, alpha=1.0, beta=0.0)  # the sum reads each call's scalars and C
    assert total == (256, 256, 4, 1.0, 0xF000, 0.0, 0xD000)


@pytest.mark.parametrize("slices, summed", [(1, False), (2, True)])
def test_the_split_k_sum_runs_where_k_is_split_and_only_there(device, slices, summed):
    """One slice writes C itself (a sum over it would read a workspace nobody wrote)."""
    spec = registry.get("hopper_simt", "sgemm")
    ex = executors.KernelGemm(runner("sgemm", spec, {"SPLITK": slices}), GemmProblem(256, 256, 8192, 1.0, 0.0),
                              batched=False)
    assert (ex.reduce is not None) is summed and len(ex.graph.launches) == 1 + summed
    assert ex.owns_workspace is summed


def test_rung_15s_launch_reads_its_tensor_maps_first_and_encodes_them_for_each_new_pointer(device):
    """tma_ffma: maps of A and B lead (M N K ... follow from slot 2), a flag says they describe
    A and B; A's rows are K floats (pitch 4K), B's N; a new A is encoded again."""
    spec = registry.get("tma_ffma", "sgemm")
    M, N, K = 256, 128, 1024
    ex = executors.KernelGemm(runner("sgemm", spec, {"SPLITK": 1}), GemmProblem(M, N, K, 1.0, 0.0), batched=False)
    _, _, (main,) = _run(ex, a=0x10000, b=0x20000)
    assert main[2:10] == (M, N, K, 2.0, 0x10000, 0x20000, 0.5, 0xC000) and main[-1] == 1
    a_map, b_map = ex.main.tmap(0), ex.main.tmap(1)
    assert [e[:5] for e in a_map.encoded] == [("fp32", 0x10000, M, K, 4 * K)]
    assert [e[:5] for e in b_map.encoded] == [("fp32", 0x20000, K, N, 4 * N)]
    _run(ex, a=0x30000, b=0x20000)
    assert [e[1] for e in a_map.encoded] == [0x10000, 0x30000] and len(b_map.encoded) == 1


def test_a_single_pass_sums_launch_reads_its_partials_then_its_zeroed_counters(device):
    """REDUCE_SIGNATURES[True]: x n out partials counters; the counters (two uint32) must start
    at zero (the kernel leaves them so), the partials need not."""
    spec = registry.get("single_pass", "reduce")
    n = 1 << 20
    ex = executors.KernelReduce(runner("reduce", spec), n)
    (launch,) = ex.launches
    assert launch.signature == REDUCE_SIGNATURES[True]
    partials, counter = ex.partials, ex.counter
    assert (partials.count, partials.zeroed) == (launch.geometry.grid[0], False)
    assert (counter.count, counter.dtype, counter.zeroed) == (2, "uint32", True)
    ex.run(0xA000, 0xC000, 5)
    ex.run(0xA000, 0xD000, 5)
    assert [(key, values) for _, key, (values,) in ex.graph.launched] == [
        ((0xA000, 0xC000), (0xA000, n, 0xC000, partials.data.ptr, counter.data.ptr)),
        ((0xA000, 0xD000), (0xA000, n, 0xD000, partials.data.ptr, counter.data.ptr))]


def test_a_sum_in_passes_reads_each_passs_partials_from_the_last_and_writes_out_in_the_last(device):
    """interleaved over 2^26 elements: four passes (262144, 1024, 4, 1 partials). Each reads
    what the pass before wrote (the first x), into the other of two buffers big enough for it
    (never the one it reads), and the last writes out."""
    spec = registry.get("interleaved", "reduce")
    n = 1 << 26
    ex = executors.KernelReduce(runner("reduce", spec), n)
    grids = [launch.geometry.grid[0] for launch in ex.launches]
    assert grids == [262144, 1024, 4, 1]
    sizes = {buffer.data.ptr: buffer.count for buffer in ex.buffers}
    ex.run(0xA000, 0xC000, 5)
    _, key, passes = ex.graph.launched[-1]
    assert key == (0xA000, 0xC000)
    src = 0xA000
    for k, (x, m, out) in enumerate(passes):
        assert (x, m) == (src, n if k == 0 else grids[k - 1])
        if k < len(passes) - 1:
            assert out != x and sizes[out] >= grids[k]
        src = out
    assert src == 0xC000


def test_the_runner_path_runs_on_the_calls_stream_with_the_calls_scalars_and_is_pinned_under_capture(
        device, monkeypatch):
    """A library baseline (torch) through its op's runner: the problem carries the call's alpha
    and beta, the work goes on the call's stream, and a capture of it keeps the runner (whose
    buffers the user's graph records)."""
    import gemmlab.cuda.device as cuda_device

    events = []

    @contextlib.contextmanager
    def on(stream):
        events.append(("on", stream))
        yield
        events.append(("off", stream))

    op = types.SimpleNamespace(enqueue=lambda run, problem, views, stream: events.append(
        ("enqueue", problem.alpha, problem.beta, views, stream)))
    monkeypatch.setattr(cuda_device, "cupy_stream", on)
    monkeypatch.setattr(cuda_device, "wrap_stream", lambda handle: ("wrapped", handle))
    monkeypatch.setattr(executors, "cupy_view", lambda operand: operand.ptr)
    monkeypatch.setattr(launch_graph, "is_captured", lambda stream: stream == 13)
    monkeypatch.setattr(launch_graph, "_captured", {})
    ex = executors.RunnerGemm(runner("sgemm", registry.get("torch", "sgemm")), GemmProblem(4, 16, 8, 1.0, 0.0), op)
    a, b, c = (types.SimpleNamespace(ptr=p) for p in (0xA000, 0xB000, 0xC000))
    ex.run_operands(a, b, c, 2.0, 0.5, 5)
    assert events == [("on", 5), ("enqueue", 2.0, 0.5, (0xA000, 0xB000, 0xC000), ("wrapped", 5)), ("off", 5)]
    assert launch_graph.captured_count() == 0
    ex.run_operands(a, b, c, 1.0, 0.0, 13)
    assert launch_graph._captured == {id(ex): ex}


@pytest.mark.parametrize("compiled", [True, False])
def test_a_sum_through_its_runner_writes_out_and_is_pinned_under_capture(monkeypatch, compiled):
    """A rung's runner writes out itself (out=); a baseline's returns the value, copied into out.
    Under a capture the runner is kept: the user's graph records its buffers."""
    import gemmlab.cuda.device as cuda_device

    class View(list):  # a CuPy view, keeping what is copied into it (a baseline's value)
        def reshape(self, *shape):
            return self

        def __setitem__(self, key, value):
            self.append(value)

    calls, views = [], []

    def enqueue(flat, stream, out=None):
        calls.append((flat, stream, out))
        return None if compiled else 42.0

    def cupy_view(operand):
        views.append(View())
        return views[-1]

    run = types.SimpleNamespace(name="r", compiled=Module() if compiled else None, enqueue=enqueue)
    monkeypatch.setattr(cuda_device, "cupy_stream", lambda handle: contextlib.nullcontext())
    monkeypatch.setattr(cuda_device, "wrap_stream", lambda handle: handle)
    monkeypatch.setattr(executors, "cupy_view", cupy_view)
    monkeypatch.setattr(launch_graph, "is_captured", lambda stream: True)
    monkeypatch.setattr(launch_graph, "_captured", {})
    ex = executors.RunnerReduce(run)
    ex.run_operands(object(), object(), 7)
    x, out = views
    assert calls == [(x, 7, out if compiled else None)] and out == ([] if compiled else [42.0])
    assert launch_graph._captured == {id(ex): ex}


# -- executors.py: which executor runs what ----------------------------------------------------------

def _route(op_name, name, problem, layout=(False, False)):
    spec = registry.get(name, op_name)
    made = []

    def shared():
        made.append("shared")
        return runner(op_name, spec)

    def fresh():
        made.append("fresh")
        return runner(op_name, spec)

    ex = executors.gemm_executor(ops.get(op_name), op_name, spec, problem, shared, fresh, layout)
    return ex, made


@pytest.mark.parametrize("name, why", [
    ("vectorize", "vectorize reads row-major operands only: a transposed operand is copied"),
    ("torch", "torch reads row-major operands only"),
])
def test_a_transposed_operand_is_left_to_the_calls_copy_by_an_implementation_that_reads_row_major_only(
        device, name, why):
    for layout in ((False, True), (True, False)):
        problem = GemmProblem(64, 48, 32, 1.0, 0.0, layout=core.layout_letters(layout))
        with pytest.raises(executors.LayoutNotSupported) as refused:
            _route("sgemm", name, problem, layout)
        assert str(refused.value) == why


def test_a_library_baseline_and_a_tma_rung_on_padded_rows_run_through_a_runner_of_their_own(device):
    """Runners keep workspaces: the runner path never shares the compiled one."""
    ex, made = _route("sgemm", "torch", GemmProblem(64, 48, 32, 1.0, 0.0))
    assert type(ex) is executors.RunnerGemm and made == ["fresh"]
    ex, made = _route("hgemm", "persistent", GemmProblem(64, 37, 64, 1.0, 0.0, dtype="bf16"))  # C padded
    assert type(ex) is executors.RunnerGemm and made == ["fresh"]


def test_a_batched_kernel_is_launched_as_one(device):
    ex, made = _route("bgemm", "batched_pipeline", BatchedGemmProblem(64, 48, 32, 1.0, 0.0, batch=3))
    assert made == ["shared"] and ex.main.signature == BGEMM_SIGNATURE


def test_the_copy_ceiling_is_refused_as_a_sum():
    copy = registry.get("copy", "reduce")
    assert _refused(executors.reduce_executor, copy, 100, None, None) == "copy is the copy ceiling, not a reduce"


# -- core.py: building an executor --------------------------------------------------------------------

def test_a_named_row_major_kernel_with_a_transposed_operand_leaves_the_call_to_copy(built):
    ex = core._new_executor("sgemm", "fp32", (64, 48, 32), "vectorize", None, (False, True))
    assert type(ex) is executors.NoInPlaceLayout and not ex.fast and not ex.owns_workspace
    assert ex.why == "vectorize reads row-major operands only: a transposed operand is copied"
    assert ex.choice.impl == "vectorize" and built == []


@pytest.mark.parametrize("layout", [(False, True), (True, False)])
def test_a_transposed_operand_with_no_implementation_named_goes_to_cublas_with_its_transpose_flag(built, layout):
    ex = core._new_executor("sgemm", "fp32", (64, 48, 32), None, None, layout)
    assert type(ex) is executors.CublasGemm and ex.layout == layout and ex.call.call.trans == layout
    assert ex.choice.impl == "cublas" and ex.choice.reason == core.IN_PLACE_REASON


def test_a_tma_rungs_shared_kernel_is_built_for_the_layout_and_c_type_of_the_call(built):
    ex = core._new_executor("hgemm", "bf16", (256, 264, 1032), "persistent", None, (False, True), "bf16")
    (run,) = built
    assert ex.runner is run and run.built[0] == "prepare_for"
    assert (run.built[1].layout, run.built[1].out_dtype) == ("nt", "bf16")


def test_the_kernel_and_the_runner_path_are_built_with_the_parameters_chosen(built, monkeypatch):
    ex = core._new_executor("sgemm", "fp32", (64, 64, 64), "vectorize", {"BN": 64})
    assert ex.main.module is built[-1].compiled and built[-1].given == {"BN": 64}
    monkeypatch.setattr(tuning, "tuned_params", lambda spec, problem, gpu: {"BN": 128})
    ex = core._new_executor("hgemm", "bf16", (64, 37, 64), "persistent", None)  # padded: the runner path
    assert type(ex) is executors.RunnerGemm and ex.runner.given == {"BN": 128}


def test_executors_of_one_kernel_share_its_compiled_module_and_the_runner_path_does_not(built):
    first = core._new_executor("reduce", "fp32", (1000,), "interleaved", None)
    second = core._new_executor("reduce", "fp32", (5000,), "interleaved", None)
    assert first.launches[0].module is second.launches[0].module and len(built) == 1
    first = core._new_executor("sgemm", "fp32", (64, 48, 32), "torch", None)
    second = core._new_executor("sgemm", "fp32", (64, 48, 32), "torch", None)
    assert first.runner is not second.runner


def test_an_executor_is_built_in_relaxed_capture_mode(monkeypatch):
    """Built while the user's torch.cuda.graph captures in global mode, its workspace allocation
    and module load would otherwise invalidate that capture."""
    relaxed = []

    @contextlib.contextmanager
    def relaxed_capture(lib=None):
        relaxed.append(True)
        yield
        relaxed.append(False)

    monkeypatch.setattr(launcher, "relaxed_capture", relaxed_capture)
    monkeypatch.setattr(core, "_new_executor", lambda *args: relaxed[-1])
    assert core.new_executor("sgemm", "fp32", (8, 8, 8), None, None) is True and relaxed == [True, False]


# -- core.py: the compiled-kernel cache ---------------------------------------------------------------

@pytest.fixture
def compiles(monkeypatch):
    """compiled_runner over hgemm's prepare_for, recorded; an empty cache."""
    made = []

    def prepare_for(impl, params, problem):
        made.append(runner("hgemm", impl, params, ("prepare_for", problem)))
        return made[-1]

    monkeypatch.setattr(core, "_runners", {})
    monkeypatch.setattr(ops.get("hgemm"), "prepare_for", prepare_for)
    return made


def test_a_kernel_is_compiled_once_per_layout_c_type_and_parameters(compiles):
    spec = registry.get("persistent", "hgemm")

    def build(layout="nn", out="fp32", params=None):
        return core.compiled_runner("hgemm", spec, params, "bf16", GemmProblem(256, 264, 1032, 1.0, 0.0, "bf16",
                                                                               layout, out))

    nn = build()
    assert build(params={}) is nn and len(compiles) == 1  # {} is no overrides, as None
    others = [build("nt"), build(out="bf16"), build(params={"BN": 128})]
    assert len({id(r) for r in [nn] + others}) == 4 and len(compiles) == 4
    assert [(r.built[1].layout, r.built[1].out_dtype, r.given) for r in others] == [
        ("nt", "fp32", None), ("nn", "bf16", None), ("nn", "fp32", {"BN": 128})]


def test_a_compiled_kernel_and_its_split_k_sum_are_loaded_before_it_is_shared(monkeypatch):
    """Loaded under the lock: two threads never load one module."""
    monkeypatch.setattr(core, "_runners", {})
    run = runner("sgemm", registry.get("hopper_simt", "sgemm"), {"SPLITK": 4})
    monkeypatch.setattr(ops.get("sgemm"), "prepare_for", lambda impl, params, problem: run)
    assert core.compiled_runner("sgemm", run.impl, {"SPLITK": 4}, "fp32", GemmProblem(256, 256, 8192)) is run
    assert (run.compiled.loads, run.reduce.loads) == (1, 1)


def test_two_threads_asking_for_one_kernel_compile_it_once(compiles, monkeypatch):
    """The second thread finds the cache empty, waits for the lock while the first compiles, and
    then takes what the first stored."""
    spec = registry.get("persistent", "hgemm")
    problem = GemmProblem(256, 264, 1032, 1.0, 0.0, "bf16")
    compiling, looked, got = threading.Event(), threading.Event(), []
    record = ops.get("hgemm").prepare_for

    class Cache(dict):
        def get(self, key, default=None):
            found = super().get(key, default)
            if threading.current_thread() is second:
                looked.set()
            return found

    def prepare_for(impl, params, problem):
        if threading.current_thread() is first:
            compiling.set()
            looked.wait(5)  # the second thread found nothing
            time.sleep(0.05)  # and is at the lock (without one, compiling too)
        return record(impl, params, problem)

    monkeypatch.setattr(core, "_runners", Cache())
    monkeypatch.setattr(ops.get("hgemm"), "prepare_for", prepare_for)
    first = threading.Thread(target=lambda: got.append(core.compiled_runner("hgemm", spec, None, "bf16", problem)))
    second = threading.Thread(target=lambda: got.append(core.compiled_runner("hgemm", spec, None, "bf16", problem)))
    first.start()
    compiling.wait(5)  # the first is compiling before the second looks
    second.start()
    first.join(10)
    second.join(10)
    assert len(compiles) == 1 and got == [compiles[0]] * 2


# -- core.py: choosing --------------------------------------------------------------------------------

@pytest.mark.parametrize("call, says", [
    (lambda: gemmlab.reduce_sum(CAI(100), impl="vectorize"), "vectorize is a sgemm implementation, not reduce"),
    (lambda: gemmlab.sgemm(CAI(4, 8), CAI(8, 16), impl="nope"),
     "unknown sgemm implementation 'nope' (gemmlab list --op sgemm)"),
])
def test_an_implementation_of_another_op_or_none_is_refused_in_one_line(fake_gpu, call, says):
    assert _refused(call) == says
    assert not fake_api_gpu.ran(fake_gpu)


def test_the_callers_params_win_over_the_tuning_database(monkeypatch):
    monkeypatch.setattr(tuning, "tuned_params", lambda spec, problem, gpu: {"BN": 128})
    problem = GemmProblem(64, 64, 64, 1.0, 0.0)
    choice, _, chosen = core.choose("sgemm", problem, (64, 64, 64), "vectorize", {"BN": 64}, *H100)
    assert chosen == {"BN": 64} and choice.reason == "named by the caller"
    choice, _, chosen = core.choose("sgemm", problem, (64, 64, 64), "vectorize", None, *H100)
    assert chosen == {"BN": 128} and choice.reason == "named by the caller" + core.TUNED_NOTE


def test_a_16_bit_c_decided_by_the_fallback_is_not_said_to_be_measured_with_an_fp32_c():
    """No table measured anything for this GPU: there is no fp32 C to speak of."""
    problem = core.make_problem("hgemm", "bf16", (1024, 1024, 1024), (False, False), "bf16")
    choice = core.decide("hgemm", problem, (1024, 1024, 1024), None, None, "Some GPU", "sm_80")[0]
    assert choice.reason == "no table for Some GPU (sm_80) for hgemm bf16: the fallback (cublas)"


def test_a_batched_problem_keeps_its_batch_count():
    assert core.make_problem("bgemm", "fp32", (4, 16, 8, 3)).batch == 3


def test_explain_says_what_a_library_and_a_row_major_kernel_do_with_a_transposed_operand():
    nt = GemmProblem(256, 264, 1032, dtype="bf16", layout="nt")
    assert core.layout_note(registry.get("torch", "hgemm"), nt, (False, True)) == (
        "transposed operands copied to row-major first")
    assert core.layout_note(registry.get("mma_sync", "hgemm"), nt, (False, True)) == (
        "mma_sync reads row-major operands only: a transposed operand is copied")


# -- core.py: per-thread state and the executor cache ---------------------------------------------------

def test_a_new_thread_makes_the_context_current_once_and_use_tuning_reaches_its_caches(fake_gpu, monkeypatch):
    current, seen = [], []
    monkeypatch.setattr(launcher, "ensure_context", current.append)
    monkeypatch.setattr(core, "_thread_caches", weakref.WeakValueDictionary())

    def thread():
        core.setup()
        caches = (core._thread.executors, core._thread.hot_calls)
        core.setup()  # a second call keeps this thread's caches
        seen.append(core._thread.executors is caches[0] and core._thread.hot_calls is caches[1])
        for cache in caches:
            cache["shape"] = object()
        core.forget_executors()  # use_tuning
        seen.append([dict(cache) for cache in caches])

    t = threading.Thread(target=thread)
    t.start()
    t.join(10)
    assert current == [1] and seen == [True, [{}, {}]]


def test_an_executor_without_a_workspace_serves_every_stream_of_the_thread(fake_gpu, monkeypatch):
    """A CUDA graph captured on a side stream reuses the executor warmed up on another: nothing
    is built (allocated, loaded) during the capture. One with a workspace is built per stream."""
    made = []

    def new_executor(*args):
        made.append(types.SimpleNamespace(owns_workspace=len(made) > 0))
        return made[-1]

    monkeypatch.setattr(core, "new_executor", new_executor)
    shared = core.executor("sgemm", "fp32", (8, 8, 8), None, None, 7)
    assert core.executor("sgemm", "fp32", (8, 8, 8), None, None, 9) is shared and shared.stream == 7
    owner = core.executor("sgemm", "fp32", (16, 16, 16), None, None, 7)
    assert core.executor("sgemm", "fp32", (16, 16, 16), None, None, 9) is not owner and len(made) == 3


def test_an_executor_is_built_for_the_stream_it_will_launch_on(fake_gpu, monkeypatch):
    """Its workspaces are made and cleared on that stream (launches.ordered_stream)."""
    monkeypatch.setattr(launch_graph, "is_captured", lambda stream: False)
    streams = []
    monkeypatch.setattr(core, "new_executor", lambda *args: streams.append(launches.ordered_stream()) or
                        types.SimpleNamespace(owns_workspace=True))
    core.executor("sgemm", "fp32", (8, 8, 8), None, None, 11)
    assert streams == [11]


# -- graph_replay.py -----------------------------------------------------------------------------------

def _log(drv, name, record=lambda *args: args):
    """Calls of the fake driver's `name`, each as record(*args), kept in the list returned."""
    calls, real = [], getattr(drv, name)

    def logged(*args):
        calls.append(record(*args))
        return real(*args)

    setattr(drv, name, logged)
    return calls


def test_a_replay_captures_on_one_stream_of_its_own_in_relaxed_mode_and_frees_its_graph_and_stream(fake):
    """One private stream for every capture (not one per capture), captured in relaxed mode (a
    library call that allocates must not fail it); the graph freed once instantiated (the exec
    is what launches), and the stream freed with the replay, in relaxed mode."""
    drv = fake()
    created = _log(drv, "cuStreamCreate", lambda ref, flags: flags)
    modes = _log(drv, "cuStreamBeginCapture_v2", lambda s, mode: mode)
    graphs = _log(drv, "cuGraphDestroy", lambda graph: graph.value)
    streams = _log(drv, "cuStreamDestroy_v2", lambda s: (s.value, drv.mode))
    g = GraphReplay(Recorder(), capture_after=1)
    for c in (3, 4):
        g(1.0, 1, 2, 0.0, c, 42)
        g(1.0, 1, 2, 0.0, c, 42)
    assert g.replays == 2 and created == [graph_replay.CU_STREAM_NON_BLOCKING]
    assert modes == [CU_STREAM_CAPTURE_MODE_RELAXED] * 2 and graphs == [55, 55]
    g._finalizer()
    assert streams == [(7, CU_STREAM_CAPTURE_MODE_RELAXED)] and drv.mode == 0


def test_a_call_that_refuses_capture_ends_the_capture_and_frees_what_it_recorded(fake):
    drv = fake()
    ended = _log(drv, "cuStreamEndCapture", lambda s, ref: s.value)
    graphs = _log(drv, "cuGraphDestroy", lambda graph: graph.value)
    g = GraphReplay(Recorder(raises_on_stream=7), capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    g(1.0, 1, 2, 0.0, 3, 42)
    assert not g.enabled and ended == [7] and graphs == [55]


def test_a_capture_that_ends_without_a_graph_turns_replay_off(fake):
    drv = fake()
    drv.cuStreamEndCapture = lambda s, ref: 0  # success, and no graph
    g = GraphReplay(Recorder(), capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    g(1.0, 1, 2, 0.0, 3, 42)
    assert not g.enabled and g.disabled_reason.startswith("cuStreamEndCapture")
    assert drv.modes_at_instantiate == [] and g.replays == 0


def test_replay_turned_off_stays_off_when_the_driver_would_capture_again(fake):
    """Off for good: a later repeat is made directly, never captured again."""
    drv, rec = fake("instantiate"), Recorder()
    g = GraphReplay(rec, capture_after=1)
    g(1.0, 1, 2, 0.0, 3, 42)
    g(1.0, 1, 2, 0.0, 3, 42)
    drv.fail = ""
    for _ in range(2):
        g(1.0, 1, 2, 0.0, 3, 42)
    assert g.replays == 0 and drv.launched == [] and len(drv.modes_at_instantiate) == 1
    assert [call[-1] for call in rec.calls] == [42, 7, 42, 42, 42]  # 7: the failed capture's


def test_the_argument_sets_remembered_are_the_most_recently_made(fake):
    """Sets 0 .. KEPT - 1, 0 again, then one more: the one forgotten is the least recently made
    (1), not the first made (0), whose next repeat is its third call and is captured."""
    drv, rec = fake(), Recorder()
    g = GraphReplay(rec, capture_after=2)
    for c in (0, *range(1, KEPT), 0, KEPT):
        g(1.0, 1, 2, 0.0, c, 42)
    g(1.0, 1, 2, 0.0, 0, 42)
    assert g.replays == 1 and drv.launched == [(101, 42)]


def test_one_look_frees_every_idle_replays_graphs(fake, budget, clock):
    rec = Recorder()
    fake()
    budget(2)
    first, second = _captured(rec, 1), _captured(rec, 2)
    new = _captured(rec, 3)  # refused: the look notes what each had launched
    clock[0] += graph_replay.IDLE_SECONDS  # exactly: looking once per IDLE_SECONDS allows this one
    new(1.0, 1, 2, 0.0, 3, 42)
    assert (first.reclaimed, second.reclaimed, new.replays) == (1, 1, 1) and graph_replay.live_graphs() == 1
