"""What an op is, as the harness sees it: one `Op` object per op (sgemm, hgemm, bgemm, reduce).

The harness (gemmlab.harness) knows nothing of a particular op. It asks the op for:
- problems: the default sizes, how `--sizes`/`--M --N --K`/`--n` become problems, the
  verification sweep, the dtypes it takes;
- implementations: which registered kernels and baselines may run a problem (refusal), and a
  prepared runner for one (compiled, its calling convention bound);
- data: the timing inputs, one enqueue, the verification of one run against fp64;
- measurement: the bytes a point moves, the fields its database row carries, and the tables
  (figures of merit, shares of named baselines, speedup over the previous rung) as data.
Everything here is plain data or plain functions: an op module fills them in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from .. import registry
from ..errors import BadArgumentError


@dataclass(frozen=True)
class Metric:
    """One table of a figure per point: `value(point)` (None: no figure), shown with `fmt`."""

    title: str
    value: Callable[[Any], float | None]
    fmt: str = "{:,.0f}"


@dataclass(frozen=True)
class Share:
    """One table of `metric(point) / metric(reference's point)` at the same problem, in percent."""

    title: str
    reference: str
    metric: Callable[[Any], float | None]
    skip: tuple[str, ...] = ()  # rows that get "-" (the reference of another share, say)


@dataclass(frozen=True)
class ShapeArgs:
    """The problem options of `bench`/`verify` as the user gave them (None: not given)."""

    M: int | None = None
    N: int | None = None
    K: int | None = None
    sizes: str | None = None
    n: str | None = None
    batch: int | None = None
    alpha: float = 1.0
    beta: float = 0.0
    dtype: str | None = None
    layout: str | None = None  # hgemm: op(A) op(B), "nn" or "nt" (B given as NxK)
    out_dtype: str | None = None  # hgemm: the type of C, fp32 or the 16-bit input type

    @property
    def one_gemm(self) -> bool:
        return any(d is not None for d in (self.M, self.N, self.K))


def device_inputs(make, *args):
    """make(*args) on the GPU, finished before the caller's stream uses it; no memory: one line."""
    import cupy as cp

    from ..errors import OutOfMemoryError

    try:
        out = make(*args)
        cp.cuda.get_current_stream().synchronize()  # CuPy filled them on its own stream
        return out
    except cp.cuda.memory.OutOfMemoryError:
        shape = getattr(args[0], "shape", "") if args else ""
        raise OutOfMemoryError(f"out of GPU memory for {shape or 'the inputs'}") from None


def choices(names) -> str:
    """'a, b or c'."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def ratio(metric, point, base) -> float | None:
    """metric(point) / metric(base), None where either is missing."""
    if point is None or base is None:
        return None
    a, b = metric(point), metric(base)
    return a / b if a and b else None


def time_ms(point) -> float | None:
    return point.stats.median if point.stats else None


def inverse_time(point) -> float | None:
    return 1.0 / point.stats.median if point.stats else None


@dataclass
class Op:
    name: str
    title: str  # one line: what the op computes
    dtypes: tuple[str, ...] = ("fp32",)
    metrics: tuple[Metric, ...] = ()
    shares: tuple[Share, ...] = ()
    speedup_title: str = "speedup over the previous rung"
    always_measured: tuple[str, ...] = ()  # baselines every bench includes (the shares' references)
    # What its kernels multiply-add with: "ffma" (the CUDA cores; a profile counts the FLOPs it
    # executed from the FFMA instructions) or "tensor" (the tensor cores, whose instructions
    # ncu does not count as FLOPs: a profile takes the problem's 2MNK)
    math: str = "ffma"

    # --- problems ---------------------------------------------------------------------------
    def check_dtype(self, dtype: str | None) -> str:
        dtype = self.dtypes[0] if dtype is None else dtype  # '' is refused below, not read as the default
        if dtype not in self.dtypes:
            if len(self.dtypes) == 1:
                raise BadArgumentError(f"--dtype {dtype!r}: {self.name} takes {self.dtypes[0]} only")
            raise BadArgumentError(f"--dtype {dtype!r}: choose {choices(self.dtypes)}")
        return dtype

    def problems(self, args: ShapeArgs) -> list:
        """The problems `bench` runs for these options."""
        raise NotImplementedError

    def sweep(self, args: ShapeArgs) -> list:
        """The problems `verify` checks: the op's edge-case sweep, or the one shape given."""
        raise NotImplementedError

    def label(self, problem) -> str:
        return problem.shape

    # --- implementations ---------------------------------------------------------------------
    def select(self, names: str, dtype: str, with_baselines: bool = True) -> list:
        """--impl: 'all' and 'ladder' keep what takes `dtype`; one named is kept (and refused
        loudly later)."""
        impls = registry.select(names, op=self.name, with_baselines=with_baselines)
        named = {n.strip() for n in names.split(",")}
        return [i for i in impls if i.name in named or not getattr(i, "dtypes", ()) or dtype in i.dtypes]

    def refusal(self, impl: Any, problem) -> str:
        """Why `impl` cannot run `problem` ("" when it can): its dtypes, then its shape rule."""
        dtypes = getattr(impl, "dtypes", ()) or ()
        if dtypes and problem.dtype not in dtypes:
            return f"{impl.name} takes {' or '.join(dtypes)} inputs, not {problem.dtype}"
        check = getattr(impl, "problem_check", None)
        reason = check(problem) if check is not None else ""
        return f"{impl.name} {reason}" if reason else ""

    def default_impl(self, problem) -> str:
        """The implementation an entry point runs when none is named."""
        raise BadArgumentError(f"{self.name}: name an implementation (impl=...)")

    def fixed_params(self, impl: Any, dtype: str) -> dict[str, int]:
        """Template parameters the problem sets rather than a tuner or a user (e.g. hgemm's
        DTYPE flag): prepare() applies them, and a tuning space holds them fixed."""
        return {}

    def problem_flags(self, impl: Any) -> set[str]:
        """The names of fixed_params for `impl` (the same for each of its dtypes): flags no --params
        or params= may give (the problem's value would silently win)."""
        return set(self.fixed_params(impl, (getattr(impl, "dtypes", ()) or ("fp32",))[0]))

    def kernel_params(self, impl: Any, params: Mapping[str, int] | None, problem) -> dict[str, int]:
        """The parameters `impl` is built with for `problem`: `params` (a user's or a table's)
        with what the problem sets (fixed_params). What prepare_for's runner compiles; `analyze`
        builds the same kernel with no GPU."""
        return {**(params or {}), **self.fixed_params(impl, getattr(problem, "dtype", "fp32"))}

    def prepare(self, impl: Any, params: Mapping[str, int] | None, dtype: str):
        """A runner: `impl` compiled for this device (or a usable baseline), ready to enqueue."""
        raise NotImplementedError

    def prepare_for(self, impl: Any, params: Mapping[str, int] | None, problem):
        """A runner for `problem`: prepare() with the problem's dtype. An op whose kernels are built
        for more of the problem than its dtype (hgemm: the operand layout) says so here."""
        return self.prepare(impl, params, problem.dtype)

    def runner_key(self, problem) -> Any:
        """What a runner made by prepare_for is specific to: problems with equal keys share one."""
        return problem.dtype

    def measure_order(self, impls: Iterable[Any]) -> list:
        """The order a bench measures in: the shares' references first, so later rows can use them."""
        impls = list(impls)
        first = [i for name in self.always_measured for i in impls if i.name == name]
        return first + [i for i in impls if i not in first]

    # --- data --------------------------------------------------------------------------------
    def timing_inputs(self, problem, seed: int):
        raise NotImplementedError

    def enqueue(self, runner, problem, inputs, stream) -> None:
        raise NotImplementedError

    def verify(self, runner, problem, stream, seed: int, host_data: bool = False, special: bool = True):
        """One run on fresh inputs from `seed`, checked against fp64: the verdict."""
        raise NotImplementedError

    def annotate(self, point, runner) -> None:
        """Fill what the op records about a prepared point beyond params and resources."""

    def before_timing(self, runner, problem) -> None:
        """Allocate whatever the runner needs, outside the timed region."""

    # --- measurement -------------------------------------------------------------------------
    def bytes_moved(self, point) -> int:
        return point.problem.min_bytes

    def flops(self, problem) -> int | None:
        return getattr(problem, "flops", None)

    def row_fields(self, point) -> dict:
        """The problem's columns of a database row (M, N, K, alpha, beta, dtype, extra)."""
        p = point.problem
        return dict(M=p.M, N=p.N, K=p.K, alpha=p.alpha, beta=p.beta, dtype=p.dtype)

    def row_order(self, names: Sequence[str]) -> list[str]:
        """Rows of a table: as measured, with the baselines that are references last."""
        return list(names)

    def family(self, impl_name: str) -> str:
        """Which ladder a kernel climbs (the speedup table compares within one)."""
        return "ladder"

    def shares_of(self, point, done: dict) -> dict:
        """Shares a point's row records, from the points of the same problem measured before it."""
        return {}

    def header(self, dtype: str) -> tuple[str, ...]:
        return ()

    def header_for(self, args: ShapeArgs) -> tuple[str, ...]:
        """The header lines of a bench run with these options (the op's header for their dtype)."""
        return self.header(self.check_dtype(args.dtype))

    def batch_prefix(self, dtype: str) -> str:
        return f"bench_{self.name}"

    def where(self, point) -> str:
        return self.label(point.problem)
