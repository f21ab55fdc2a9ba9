"""The API's executor for the TMA hgemm rungs (3-6): tensor maps over the caller's own arrays,
encoded again only when a pointer changes, and one prepared launch per call, made through a
one-node CUDA graph (cuda/launch_graph.py).

Layouts. A B given as its transpose (an NxK array: x @ W.T, torch's transposed view of a
contiguous weight) is read in place by the rungs tagged "layout_nt" (rung 5 built with
B_KMAJOR = 1, rung 6 likewise): the tensor map describes the NxK array itself and the kernel's
K-major boxes read it, so no transposing copy is made. A KxN B is read in place by every TMA rung
(the tf32 rung through its transposed product). An A given
as its transpose (a KxM array) likewise by the rungs tagged "layout_tn" (rung 5 built with
A_MNMAJOR = 1, reading it M-major; rung 6 likewise, through registers). Where TMA cannot describe an operand (rows that are not
16-byte multiples) the executor is not built and the caller copies instead (in_place_refusal
says why).
"""
from __future__ import annotations

from ..cuda.launch_graph import LaunchGraph, gemm_key
from .launches import FastGemm, prepared, tma_signature
from .shared_workspaces import kernel_workspace, shared_scratch
from .interface import ITEMSIZE


def tma_fast(spec, problem) -> bool:
    """Whether a TMA rung runs this shape straight from the caller's arrays: every row a 16-byte
    multiple (else padded copies)."""
    return not _unfit(spec, problem)


def _unfit(spec, problem) -> str:
    """Why the caller's arrays cannot be handed to the kernel as they are ("" when they can)."""
    from ..kernels.hgemm.specs import kmajor_b_rule, mnmajor_a_rule
    from ..kernels.hgemm.tma_rows import row_rule

    item = ITEMSIZE.get(problem.dtype, 4)  # tf32: fp32 storage
    b_rows = row_rule(problem, "N", item)  # B as KxN, rows of N
    a_rows = "" if problem.a_transposed else row_rule(problem, "K", item)  # A as MxK, rows of K
    if problem.a_transposed:
        reason = mnmajor_a_rule(problem)
        if reason:
            return f"{spec.name} {reason}"
    if problem.b_transposed:
        reason = kmajor_b_rule(problem)
        if reason:
            return f"{spec.name} {reason}"
    elif b_rows:
        return f"{spec.name}: rows of B need {b_rows}; they are padded"
    if a_rows:
        return f"{spec.name}: rows of A need {a_rows}; they are padded"
    out = problem.out_dtype
    reason = row_rule(problem, "N", ITEMSIZE[out])
    return f"{spec.name}: rows of the {out} C need {reason}; C is padded" if reason else ""


def in_place_refusal(spec, problem, layout: tuple[bool, bool]) -> str:
    """Why kernel `spec` cannot read operands given in `layout` ((A transposed, B transposed))
    in place ("" when it can). A transposed A on a rung tagged "layout_tn", a transposed B on
    one tagged "layout_nt", on a shape whose rows TMA can describe, are read in place;
    otherwise the API copies the operands to row-major first."""
    if "tma" not in spec.tags:
        return f"{spec.name} reads row-major operands only: a transposed operand is copied"
    if layout[0] and "layout_tn" not in spec.tags:
        return f"{spec.name} reads A row-major only: a transposed A is copied"
    if layout[1] and "layout_nt" not in spec.tags:
        return f"{spec.name} reads B row-major only: a transposed B is copied"
    reason = _unfit(spec, problem)
    return f"{reason} - the transposed operands are copied to row-major instead" if reason else ""


def copies_to_row_major(spec, problem, layout: tuple[bool, bool]) -> bool:
    """Whether a call naming `spec` copies operands given in `layout` to row-major and runs the nn
    kernel (api/calls.gemm): a library other than cuBLAS, or a kernel that cannot read them in place."""
    if not any(layout) or spec.name == "cublas":
        return False
    return spec.kind != "kernel" or bool(in_place_refusal(spec, problem, layout))


class TmaGemm(FastGemm):
    """A TMA hgemm rung bound to one shape; tensor maps re-encoded only for a new pointer. With
    layout nt the B map describes the caller's NxK array (B^T), read K-major by the kernel."""

    path = "kernel"
    owns_workspace = False  # True with a split-K workspace: then bound to one stream

    def __init__(self, runner, problem):
        from ..kernels.hgemm.specs import persistent_schedule, tma_boxes
        from ..ops.hgemm_tma import tma_geometry

        spec, params = runner.impl, runner.params
        self.name = runner.name
        self.dtype, self.out = problem.dtype, problem.out_dtype
        self.item = ITEMSIZE.get(problem.dtype, 4)  # tf32: fp32 storage
        self.M, self.N, self.K = problem.M, problem.N, problem.K
        if (runner.layout, runner.out_dtype) != (problem.layout, problem.out_dtype):  # built for another problem
            raise ValueError(f"{spec.name} was built for layout {runner.layout} and a {runner.out_dtype} C, the "
                             f"problem is {problem.layout} with a {problem.out_dtype} C")
        self.b_nk, self.a_km = problem.b_transposed, problem.a_transposed
        self.boxes = tma_boxes(spec, params)
        geometry = tma_geometry(runner, problem)
        self.store_c = "C" in self.boxes
        work = None  # the split-K workspace, where rungs 5-6 slice K
        self.launch = prepared(runner.compiled, geometry, tma_signature(self.store_c))
        first = self.launch.signature.count("tmap")  # the tensor maps lead
        for i, v in enumerate((self.M, self.N, self.K)):
            self.launch.set(first + i, v)
        if self.store_c:
            self.launch.set(first + 6, self.N)  # ldc: C is dense
            floats = spec.workspace_floats(problem, params)
            self.launch.set(first + 7, 0)
            if floats:  # the stream's shared block (the split-K flags cleared at a handover), else its own
                work = kernel_workspace(floats, spec.workspace_flag_floats(problem, params))
                work.bind([self.launch.slots[first + 7]])
                self.workspace = work.owner
                self.owns_workspace = True
            for i, x in enumerate(persistent_schedule(problem, params)):
                self.launch.set(first + 8 + i, x)
        self._alpha, self._beta, self._c = (self.launch.slots[first + i] for i in (3, 4, 5))
        self._ptrs = [None, None, None]
        self.graph = LaunchGraph((self.launch,), keep=(getattr(self, "workspace", None),), scratch=shared_scratch(work))

    def run(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int) -> None:
        item = self.item
        ptrs = self._ptrs
        if a != ptrs[0]:
            if self.a_km:  # the KxM array as it lies in memory (A given transposed)
                self.launch.tmap(0).encode(self.dtype, a, self.K, self.M, self.M * item, self.boxes["A"])
            else:
                self.launch.tmap(0).encode(self.dtype, a, self.M, self.K, self.K * item, self.boxes["A"])
            ptrs[0] = a
        if b != ptrs[1]:
            if self.b_nk:  # the NxK array as it lies in memory (W of x @ W.T)
                self.launch.tmap(1).encode(self.dtype, b, self.N, self.K, self.K * item, self.boxes["B"])
            else:
                self.launch.tmap(1).encode(self.dtype, b, self.K, self.N, self.N * item, self.boxes["B"])
            ptrs[1] = b
        if self.store_c and c != ptrs[2]:
            self.launch.tmap(2).encode(self.out, c, self.M, self.N, self.N * ITEMSIZE[self.out], self.boxes["C"])
            ptrs[2] = c
        self._alpha.value, self._beta.value, self._c.value = alpha, beta, c
        self.graph.launch(stream, gemm_key(a, b, c, alpha, beta))
