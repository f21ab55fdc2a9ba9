"""Stateful plans in the style of nvmath-python's Matmul: choose, compile and prepare once, then
execute for a few microseconds.

    p = gemmlab.Matmul(A, B, C, alpha=1.0, beta=0.0)   # sgemm (fp32), hgemm (fp16/bf16), bgemm (3-D)
    p = gemmlab.Matmul(A16, B16, out_dtype="bf16")     # hgemm writing C in the inputs' 16-bit type
    p.execute()                                       # C = alpha*A@B + beta*C; returns C
    p.execute(A=A2)                                   # new operands of the same shape, dtype, layout
    s = gemmlab.Sum(x); s.execute()                   # a 0-d fp32 result, the plan's own

A plan's operands must be contiguous and 16-byte aligned (make them so once; a plan never copies
on the hot path), or for sgemm/hgemm A and B may be transposed views of such arrays (x @ W.T:
torch's or CuPy's W.T), which the plan reads in place through cuBLAS's transpose flags or, for
B, a TMA rung that takes layout nt; a named kernel that cannot is refused with the reason. Without C a plan owns its output and returns the same array from every
execute. execute() runs on the stream the operands' framework has current at that moment
(torch.cuda.current_stream(), CuPy's current stream), or the one A's __cuda_array_interface__
producer names (as the calls do, A's last given), or on `stream=`; that is what lets
torch.cuda.graph and CuPy's stream capture record it. A plan is one piece of state: execute it
from one thread at a time, and on one stream at a time (its workspaces are its own).
"""
from __future__ import annotations

from typing import Any, Mapping

from ..cuda.graph_replay import GraphReplay
from ..errors import BadArgumentError
from . import checks, core, dispatch, streams, tuning
from .operands import ALIGN, Operand, current_stream_reader, new_output, read, shape_text, transposed


def _dense(op: Operand, what: str) -> Operand:
    if not op.dense:
        raise BadArgumentError(f"{what} must be contiguous and 16-byte aligned for a plan "
                               f"(pass a contiguous copy once, e.g. {what}.contiguous())")
    return op


def _unbounded_replay(executor) -> None:
    """A plan's cuBLAS replay keeps its graphs past graph_replay.GRAPHS_LIMIT, which bounds what
    plain calls keep on their own: a plan is kept on purpose, for its cost per call."""
    replay = getattr(executor, "call", None)
    if isinstance(replay, GraphReplay):
        replay.bounded = False


def _named_streams(*ops: Operand) -> tuple[int, ...]:
    """The streams __cuda_array_interface__ producers named for a plan's operands (torch and CuPy
    operands follow their framework's current stream, read at each execute): each execute waits
    for them, and their producers' next work waits for it."""
    return tuple({op.stream for op in ops if op.named})


class _Plan:
    caller = "gemmlab plan"

    def _stream(self, stream) -> int | None:
        """stream= as a raw handle, None where not given (then the operands' stream, read after
        any new operands are bound: the calls run on A's, and so does a plan)."""
        core.setup()
        return None if stream is None else streams.handle(stream)

    def _rebind(self, x, what: str, old: Operand, dtypes: tuple[str, ...], as_transposed: bool = False) -> Operand:
        new = read(x, what, self.caller)
        if new.shape != old.shape or new.dtype != old.dtype:
            raise BadArgumentError(f"{what} is {shape_text(new.shape)} {new.dtype}; this plan was made for "
                                   f"{shape_text(old.shape)} {old.dtype}")
        checks.check(new, what, dtypes, len(old.shape), self.caller, core._state["device"])
        if what == "C":
            checks.writable(new, what, self.caller)
        if as_transposed:
            if not transposed(new):
                address = ", and its address is not 16-byte aligned" if new.ptr % ALIGN else ""
                raise BadArgumentError(f"{what}: this plan was made for a transposed view (torch's or CuPy's W.T) of a "
                                       f"contiguous, 16-byte aligned matrix, and this {what} is not one{address}")
            return new
        return _dense(new, what)

    @property
    def impl(self) -> str:
        return self._executor.choice.impl

    @property
    def path(self) -> str:
        """kernel (a gemmlab kernel, prepared launch), library (cuBLAS called directly) or runner."""
        return self._executor.path

    def explain(self) -> str:
        ex = self._executor
        graphs = getattr(ex, "graph", None) or getattr(ex, "call", None)  # a kernel's launches, cuBLAS's replay
        off = "" if getattr(graphs, "enabled", True) else getattr(graphs, "disabled_reason", "") or "no reason kept"
        return dispatch.describe(ex.choice, self.caller, self._text, core._state["gpu"], core._state["arch"],
                                 self._tuning, getattr(ex, "library_call", None), off)


class Matmul(_Plan):
    """C = alpha * A @ B + beta * C as a plan: fp32 A, B (sgemm); fp16 or bf16 (hgemm: an fp32 C,
    or one of the inputs' type given as C or named by out_dtype; op="hgemm" runs fp32 inputs as
    tf32); 3-D fp32 batches (bgemm). impl/params as in the calls."""

    def __init__(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0, impl: str | None = None,
                 params: Mapping[str, int] | None = None, op: str | None = None, out_dtype=None):
        core.setup()
        checks.check_choice(impl, params, "gemmlab.Matmul")
        if op is None:
            op = checks.gemm_op_of(A, "gemmlab.Matmul")
        if not isinstance(op, str) or op not in checks.GEMM_DTYPES:
            raise BadArgumentError(f"op must be sgemm, hgemm or bgemm, not {op!r}")
        self.op = op
        self.caller = f"gemmlab.Matmul ({op})"
        a, b, dims, dtype = checks.gemm_operands(op, self.caller, A, B)
        if 0 in dims:
            raise BadArgumentError(f"empty problem {shape_text(dims)}: plans need M, N, K (and batch) >= 1")
        self.alpha, self.beta = checks.reals(alpha, beta, self.caller)
        self._c_given = C is not None  # beta != 0 needs a C the caller gave (_scalars)
        c = checks.output_operand(C, a, checks.c_shape(op, dims), self.beta, self.caller, op, dtype, checks.out_name(out_dtype))
        self.layout = layout = checks.layout_of(op, a, b)
        self._a = a if layout[0] else _dense(a, "A")
        self._b = b if layout[1] else _dense(b, "B")
        self._c = _dense(c, "C")
        self._apart(self._a, self._b, self._c)
        self._producers = _named_streams(self._a, self._b, self._c)
        self._dtypes = checks.GEMM_DTYPES[op]
        self._current = current_stream_reader(a)
        self._tuning = tuning.describe()  # what the choice was made with: a later use_tuning leaves a plan as it is
        self._executor = core.new_executor(op, dtype, dims, impl, params, layout, c.dtype)
        _unbounded_replay(self._executor)
        if not self._executor.fast and any(layout):
            raise BadArgumentError(f"{self._executor.why}; a plan never copies: pass contiguous operands instead")
        self._text = (f"{shape_text(dims[:3])}{f' x{dims[3]} batches' if op == 'bgemm' else ''} {dtype}"
                      + (f", C {c.dtype}" if c.dtype != "fp32" else "")
                      + (f", layout {core.layout_letters(layout)} (read in place)" if any(layout) else ""))
        self.dims, self.dtype = dims, dtype

    def execute(self, A=None, B=None, C=None, *, alpha: float | None = None, beta: float | None = None,
                stream: Any = None):
        """Run the plan (on new operands where given); returns C (the plan's own when none was given)."""
        launch = self._stream(stream)  # like everything below, checked before anything is kept
        scalars = None if alpha is None and beta is None else self._scalars(alpha, beta, C)
        a, b, c, current, producers = self._a, self._b, self._c, self._current, self._producers
        rebound = A is not None or B is not None or C is not None
        if rebound:
            a = a if A is None else self._rebind(A, "A", a, self._dtypes, self.layout[0])
            b = b if B is None else self._rebind(B, "B", b, self._dtypes, self.layout[1])
            c = c if C is None else self._rebind(C, "C", c, (c.dtype,))
            self._apart(a, b, c, own=C is None and not self._c_given)
            producers = _named_streams(a, b, c)
            if A is not None:  # the new A's stream (the stream its producer names, its framework's)
                current = current_stream_reader(a)
        if launch is None:
            launch = current()
        # the producers' streams other than the launch's (join may still refuse: nothing kept yet)
        ordered = streams.join(launch, producers) if producers and producers != (launch,) else ()
        if rebound:
            self._a, self._b, self._c, self._current, self._producers = a, b, c, current, producers
            self._c_given = self._c_given or C is not None
        if scalars is not None:
            self.alpha, self.beta = scalars
        ex = self._executor
        if ex.fast:
            ex.run(a.ptr, b.ptr, c.ptr, self.alpha, self.beta, launch)
        else:
            ex.run_operands(a, b, c, self.alpha, self.beta, launch)
        if ordered:
            streams.release(launch, ordered)
        return c.obj

    def _apart(self, a: Operand, b: Operand, c: Operand, own: bool = False) -> None:
        """Refuse a C that shares memory with A or B: the kernel would overwrite what other blocks
        still read, and a plan never copies (the plain calls work on a copy of such a C). `own`:
        C is the plan's own result, which the caller may have passed back as A or B."""
        for x, what in ((a, "A"), (b, "B")):
            if checks.overlap(c, x):
                whose, fix = (" (the plan's own result)", f"pass a copy of it as {what}") if own \
                    else ("", "pass a separate C")
                raise BadArgumentError(f"{self.caller}: C{whose} overlaps {what} in memory; a plan writes C in "
                                       f"place while it reads {what}: {fix}")

    def _scalars(self, alpha, beta, C) -> tuple[float, float]:
        """New (alpha, beta), checked before anything changes: beta != 0 reads C, refused on a plan
        whose C is its own (uninitialised until its first execute), as the plain calls refuse it."""
        alpha = self.alpha if alpha is None else checks.real(alpha, "alpha", self.caller)
        beta = self.beta if beta is None else checks.real(beta, "beta", self.caller)
        if beta != 0.0 and C is None and not self._c_given:
            raise BadArgumentError(f"{self.caller}: beta != 0 reads C, and this plan was made without one: pass C "
                                   "(C=plan.result adds to its last result)")
        return alpha, beta

    @property
    def result(self):
        return self._c.obj


class Sum(_Plan):
    """sum(x) of a float32 CUDA array as a plan; execute() returns the plan's own 0-d result."""

    caller = "gemmlab.Sum"

    def __init__(self, x, *, impl: str | None = None, params: Mapping[str, int] | None = None):
        core.setup()
        checks.check_choice(impl, params, self.caller)
        op = checks.sum_operand(x, self.caller)
        n = op.size()
        if n == 0:
            raise BadArgumentError("x is empty: a Sum plan needs at least one element (reduce_sum(x) gives 0)")
        self._x = _dense(op, "x")
        self._out = new_output(op, ())
        self._current = current_stream_reader(op)
        self._tuning = tuning.describe()
        self._executor = core.new_executor("reduce", "fp32", (n,), impl, params)
        self._text = f"n={n} fp32"

    def execute(self, x=None, *, stream: Any = None):
        launch = self._stream(stream)  # checked before a new x is kept
        op, current = self._x, self._current
        if x is not None:
            op = self._rebind(x, "x", op, ("fp32",))
            current = current_stream_reader(op)
        if launch is None:
            launch = current()
        # x written first on the stream its producer named; that producer then waits for the sum
        ordered = streams.join(launch, (op.stream,)) if op.named and op.stream != launch else ()
        self._x, self._current = op, current
        ex = self._executor
        if ex.fast:
            ex.run(op.ptr, self._out.ptr, launch)
        else:
            ex.run_operands(op, self._out, launch)
        if ordered:
            streams.release(launch, ordered)
        return self._out.obj

    @property
    def result(self):
        return self._out.obj
