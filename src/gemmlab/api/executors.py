"""Executors: one implementation bound to one problem shape, ready to run on new pointers.

An executor is built once per (implementation, shape, dtype, stream) and then costs, per call,
the argument slots that changed and one graph launch: gemmlab's kernels run their launches as
one CUDA graph per stream whose arguments are copied in when they change (cuda/launch_graph.py;
1.5-2.5 us less host time than launching each kernel, session 21), directly under a user's
stream capture:
- KernelGemm: sgemm, bgemm and the non-TMA hgemm rungs (with the split-K reduction launch and
  a workspace where the kernel has one);
- TmaGemm (api/tma_executors.py): the TMA hgemm rungs on shapes whose rows are 16-byte multiples
  (tensor maps encoded again only when a pointer changes), with a B given transposed (x @ W.T)
  read in place by the rungs that take layout nt;
- CublasGemm: cuBLAS called directly: one prepared cublasLtMatmul (cuda/cublaslt.py), else the
  classic entry points (cuda/cublas.py), a repeated call replayed from a CUDA graph
  (cuda/graph_replay.py); it reads transposed operands in place (NoInPlaceLayout
  marks a shape whose transposed operands must be copied);
- KernelReduce: the reduce rungs, every pass prepared, with their own partials and counters;
- RunnerGemm / RunnerReduce: everything else (Triton and torch baselines, TMA shapes that need
  padded copies or B transposed) through the op's runner - correct, not fast.
Executors own their buffers, except the GEMMs' workspaces (cuBLASLt's, split-K's and stream-K's),
which the executors built for one stream share (api/shared_workspaces.py: their calls run in that
stream's order); one executor runs one call at a time. The API keeps them per thread, and an
executor with a workspace (owns_workspace) per stream too, so two streams never race on one.
"""
from __future__ import annotations

from dataclasses import replace

from ..cuda.graph_replay import GraphReplay
from ..cuda.launch_graph import LaunchGraph, gemm_key, pin_if_captured
from ..errors import BadArgumentError, LaunchError, NoGPUError
from .launches import REDUCE_SIGNATURES, SPLITK_REDUCE_SIGNATURE, FastGemm, gemm_signature, prepared, workspace
from .operands import Operand, cupy_view
from .shared_workspaces import kernel_workspace, library_workspace, shared_scratch
from .tma_executors import TmaGemm, in_place_refusal, tma_fast


class KernelGemm(FastGemm):
    """A non-TMA GEMM kernel (sgemm, bgemm, hgemm rungs 1-2) bound to one shape."""

    path = "kernel"
    owns_workspace = False  # True with a split-K workspace: then bound to one stream
    maps = False  # True for rung 15: tensor maps over A and B lead its arguments

    def __init__(self, runner, problem, batched: bool):
        self.name = runner.name
        M, N, K = problem.M, problem.N, problem.K
        geometry = runner.impl.launch(problem, runner.params)
        self.reduce = None
        work = None  # the split-K or stream-K workspace, where the kernel has one
        if batched:
            self.main = prepared(runner.compiled, geometry, gemm_signature(runner.impl, batched))
            for i, v in enumerate((M, N, K)):
                self.main.set(i, v)
            self.main.set(5, M * K)
            self.main.set(7, K * N)
            self.main.set(10, M * N)
            self.main.set(11, problem.batch)
            self._slots = [self.main.slots[i] for i in (3, 4, 6, 8, 9)]
        else:
            impl = runner.impl
            takes_w = impl.takes_workspace
            # rung 15: two tensor maps lead, and a trailing flag says whether they describe A and B
            self.maps = "tma_maps" in impl.tags
            first = 2 if self.maps else 0
            self.main = prepared(runner.compiled, geometry, gemm_signature(impl, batched))
            for i, v in enumerate((M, N, K)):
                self.main.set(first + i, v)
            self._slots = [self.main.slots[first + i] for i in (3, 4, 5, 6, 7)]
            floats = impl.workspace_floats(problem, runner.params) if takes_w else 0
            if floats:  # the stream's shared block (stream-K's flags cleared at a handover), else its own
                work = kernel_workspace(floats, impl.workspace_flag_floats(problem, runner.params))
                self.workspace = work.owner
                self.owns_workspace = True
            if takes_w:
                self.main.set(first + 8, 0)
            if self.maps:
                from ..kernels.sgemm.specs import tma_ffma_boxes, tma_ffma_maps_fit

                self._boxes = tma_ffma_boxes(runner.params)
                self._dims = (M, N, K)
                self._fits = lambda a, b: tma_ffma_maps_fit(M, N, K, a, b)
                self._mapped = [None, None]  # the A and B the maps now describe
                self._decided = None  # the (A, B) the maps and the flag were last set for
                self._flag = self.main.slots[first + 9]
            slices = geometry.grid[2]
            if getattr(runner, "reduce", None) is not None and slices > 1:
                from ..ops.sgemm import splitk_reduce_launch

                self.reduce = prepared(runner.reduce, splitk_reduce_launch(M, N), SPLITK_REDUCE_SIGNATURE)
                for i, v in enumerate((M, N, slices)):
                    self.reduce.set(i, v)
                self._reduce_slots = [self.reduce.slots[i] for i in (3, 5, 6)]
            if work is not None:  # the kernel's pointer, and the sum's where split-K runs
                work.bind([self.main.slots[first + 8]] + ([self.reduce.slots[4]] if self.reduce is not None else []))
        # one graph of the call's launches (the slices, then their sum, where split-K runs)
        self.graph = LaunchGraph((self.main,) if self.reduce is None else (self.main, self.reduce),
                                 keep=(getattr(self, "workspace", None),), scratch=shared_scratch(work))

    def _encode_maps(self, a: int, b: int) -> None:
        """Rung 15's maps over A and B where they fit (flag 1), re-encoded only for a new pointer;
        else flag 0 and the kernel copies element by element (the maps are not read)."""
        if (a, b) == self._decided:  # a plan's repeated call: nothing to decide again (6 us of Python)
            return
        self._decided = None  # until the flag and both maps are set (an encode may raise)
        M, N, K = self._dims
        if not self._fits(a, b):
            self._flag.value = 0
            self._decided = (a, b)
            return
        if a != self._mapped[0]:
            rows, cols, swizzle = self._boxes["A"]
            self.main.tmap(0).encode("fp32", a, M, K, 4 * K, (rows, cols), swizzle)
            self._mapped[0] = a
        if b != self._mapped[1]:
            rows, cols, swizzle = self._boxes["B"]
            self.main.tmap(1).encode("fp32", b, K, N, 4 * N, (rows, cols), swizzle)
            self._mapped[1] = b
        self._flag.value = 1
        self._decided = (a, b)

    def run(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int) -> None:
        s_alpha, s_a, s_b, s_beta, s_c = self._slots
        s_alpha.value, s_a.value, s_b.value, s_beta.value, s_c.value = alpha, a, b, beta, c
        if self.maps:
            self._encode_maps(a, b)
        if self.reduce is not None:
            r_alpha, r_beta, r_c = self._reduce_slots
            r_alpha.value, r_beta.value, r_c.value = alpha, beta, c
        self.graph.launch(stream, gemm_key(a, b, c, alpha, beta))


class LayoutNotSupported(Exception):
    """An executor cannot read this operand layout in place (the caller makes dense copies)."""


class NoInPlaceLayout:
    """Stands in the executor cache for a shape whose transposed operands must be copied: the
    hot path sees fast = False and hands the call to the general path, which copies."""

    fast = False
    owns_workspace = False

    def __init__(self, choice, why: str):
        self.choice, self.why = choice, why


class CublasGemm(FastGemm):
    """cuBLAS bound to one shape: SGEMM, GemmEx (fp16/bf16/tf32 in, fp32 out; fp16/bf16 in, the
    same type out) or strided batches.

    Through cuBLASLt where it can be prepared (cuda/cublaslt.py: the algorithm chosen once, one
    cublasLtMatmul per call), else through the classic entry points (cuda/cublas.py), which
    choose their algorithm on every call. `library_call` names the one a call makes; `lt_refusal`
    says why cuBLASLt was not used (None when it is)."""

    path = "library"
    name = "cublas"
    CLASSIC_CALLS = {"sgemm": "cublasSgemm_v2", "ex": "cublasGemmEx", "batched": "cublasSgemmStridedBatched"}

    def __init__(self, problem, op_name: str, layout: tuple[bool, bool] = (False, False)):
        from ..cuda import cublas, cublaslt

        kind = {"sgemm": "sgemm", "bgemm": "batched"}.get(op_name, "ex")
        shape = (kind, problem.M, problem.N, problem.K, problem.dtype, getattr(problem, "batch", 1))
        out = getattr(problem, "out_dtype", "fp32")
        self.lt_refusal, self.layout = None, layout
        try:
            self.call = cublaslt.PreparedLtGemm(*shape, trans_a=layout[0], trans_b=layout[1], out_dtype=out,
                                                allocate=library_workspace)
        except (LaunchError, NoGPUError) as exc:  # no cuBLASLt, or no algorithm for this GEMM
            if any(layout) and kind != "ex":  # classic SGEMM here takes no transposed operand: the caller copies
                raise LayoutNotSupported(str(exc)) from None
            self.lt_refusal = str(exc)
            self.call = cublas.PreparedGemm(*shape, out_dtype=out, trans_a=layout[0], trans_b=layout[1])
            cublas.handle()  # this thread's handle exists before any capture (cublasCreate allocates)
        # the library decides the same thing again on every call (9-18 us of host time): repeats
        # of a call replay its captured kernels instead
        self.call = GraphReplay(self.call)
        self.run = self.call.run  # the replay's bound run: one call less each time (rebind if call changes)
        self.library_call = cublaslt.CALL if self.lt_refusal is None else self.CLASSIC_CALLS[kind]
        # an Lt algorithm with a workspace: one executor per stream (two streams never share it)
        self.owns_workspace = getattr(self.call, "workspace_bytes", 0) > 0

    def run(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int) -> None:
        """The replay of the prepared call (replaced in __init__ by the replay's bound run)."""
        self.call.run(a, b, c, alpha, beta, stream)


class RunnerGemm:
    """Any implementation through its op's runner (CuPy views over the operands): the path for
    library baselines other than cuBLAS and for TMA shapes that need copies."""

    path = "runner"
    fast = False
    owns_workspace = True  # the runner keeps its own buffers

    def __init__(self, runner, problem, op):
        self.runner, self.problem, self.op = runner, problem, op
        self.name = runner.name

    def run_operands(self, a: Operand, b: Operand, c: Operand, alpha: float, beta: float, stream: int) -> None:
        from ..cuda.device import cupy_stream, wrap_stream

        problem = replace(self.problem, alpha=alpha, beta=beta)
        pin_if_captured(self, stream)  # a capture records the runner's own buffers
        with cupy_stream(stream):
            views = cupy_view(a), cupy_view(b), cupy_view(c)
            self.op.enqueue(self.runner, problem, views, wrap_stream(stream))


class KernelReduce:
    """A reduce rung bound to n elements: every pass prepared, its partials and counters owned."""

    path = "kernel"
    fast = True
    owns_workspace = True

    def __init__(self, runner, n: int):
        from ..ops.reduce_passes import plan

        self.name = runner.name
        passes = plan(runner.impl, runner.params, n)
        single = runner.single_pass
        self.launches = []
        if single:
            (m, launch), = passes
            self.partials = workspace(launch.grid[0], zeroed=False)
            self.counter = workspace(2, "uint32")  # the kernel leaves both at 0
            p = prepared(runner.compiled, launch, REDUCE_SIGNATURES[True])
            p.set(1, m)
            p.set(3, self.partials.data.ptr)
            p.set(4, self.counter.data.ptr)
            self.launches.append(p)
        else:
            grids = [launch.grid[0] for _, launch in passes]
            inner = grids[:-1]
            self.buffers = [workspace(max(inner[k::2], default=1), zeroed=False) for k in (0, 1)]
            src = None
            for k, (m, launch) in enumerate(passes):
                p = prepared(runner.compiled, launch, REDUCE_SIGNATURES[False])
                p.set(1, m)
                if src is not None:
                    p.set(0, src)
                if k < len(passes) - 1:
                    src = self.buffers[k % 2].data.ptr
                    p.set(2, src)
                self.launches.append(p)
        self._src = self.launches[0].slots[0]
        self._dst = self.launches[-1].slots[2]
        self.graph = LaunchGraph(self.launches, keep=(self.partials, self.counter) if single else tuple(self.buffers))

    def run(self, x: int, out: int, stream: int) -> None:
        self._src.value = x
        self._dst.value = out
        self.graph.launch(stream, (x, out))

    def run_operands(self, x: Operand, out: Operand, stream: int) -> None:
        self.run(x.ptr, out.ptr, stream)


class RunnerReduce:
    """A reduce baseline (CUB, torch) or any rung through its runner, on CuPy views."""

    path = "runner"
    fast = False
    owns_workspace = True  # the runner keeps its own buffers

    def __init__(self, runner):
        self.runner = runner
        self.name = runner.name

    def run_operands(self, x: Operand, out: Operand, stream: int) -> None:
        from ..cuda.device import cupy_stream, wrap_stream

        pin_if_captured(self, stream)  # as RunnerGemm's
        with cupy_stream(stream):
            flat = cupy_view(x).reshape(-1)
            o = cupy_view(out)
            if self.runner.compiled is not None:
                self.runner.enqueue(flat, wrap_stream(stream), out=o)
            else:
                value = self.runner.enqueue(flat, wrap_stream(stream))
                o[...] = cupy_of(value) if type(value).__module__.startswith("torch") else value


def cupy_of(x):
    import cupy as cp

    return cp.from_dlpack(x)


def gemm_executor(op, op_name: str, impl, problem, shared_runner, fresh_runner,
                  layout: tuple[bool, bool] = (False, False)):
    """The fastest executor that can run `impl` (a registry entry) on `problem`. Fast executors
    use the shared compiled kernel (`shared_runner()`, built for the problem's layout); the
    runner path gets a runner of its own (`fresh_runner()`), since runners keep workspaces. A
    transposed `layout` (A, B given as transposed views) is read in place by cuBLAS, and by the
    TMA rungs tagged for it (a transposed A: layout_tn, B: layout_nt) where TMA can describe it;
    LayoutNotSupported (with the reason) otherwise. What the kernel refuses whatever the layout
    (e.g. a 16-bit C) was refused when the call was decided (core.named_refusal, the dispatch)."""
    if any(layout) and impl.name != "cublas":
        why = in_place_refusal(impl, problem, layout) if impl.kind == "kernel" else ""
        if impl.kind != "kernel" or why:
            raise LayoutNotSupported(why or f"{impl.name} reads row-major operands only")
    if impl.kind != "kernel":
        if impl.name == "cublas":
            return CublasGemm(problem, op_name, layout)
        return RunnerGemm(fresh_runner(), problem, op)
    if "tma" in impl.tags:
        if tma_fast(impl, problem):
            return TmaGemm(shared_runner(), problem)
        return RunnerGemm(fresh_runner(), problem, op)
    return KernelGemm(shared_runner(), problem, batched=op_name == "bgemm")


def reduce_executor(impl, n: int, shared_runner, fresh_runner):
    if impl.kind == "kernel":
        return KernelReduce(shared_runner(), n)
    if getattr(impl, "ceiling", False):
        raise BadArgumentError(f"{impl.name} is the copy ceiling, not a reduce")
    return RunnerReduce(fresh_runner())
