"""Kernel specs and the registry of every implementation (kernels and baselines).

A KernelSpec is data: where the CUDA source is, which C++ template it instantiates,
its tunable parameters with defaults and search spaces, its constraints (the Python
mirror of the kernel's static_asserts, checked before anything is compiled) and its
launch geometry as a function of the problem and the parameters.
"""
from __future__ import annotations

import difflib
import importlib
import math
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import BadArgumentError, ConstraintError, UnknownKernelError
from .problem import GemmProblem, comma_items

KERNEL_DIR = Path(__file__).parent / "kernels"

# The package whose import registers every op's kernels and baselines. The registry is the
# bottom layer, so it names the package instead of importing it (as a plugin host would).
_OPS_PACKAGE = "gemmlab.ops"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def is_pow2(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


@dataclass(frozen=True)
class Param:
    name: str
    default: int
    space: tuple[int, ...] = ()
    doc: str = ""
    template: bool = True  # False: a launch-time choice (read by the geometry), not a template argument


@dataclass(frozen=True)
class Constraint:
    why: str
    check: Callable[[Mapping[str, int]], bool]


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shmem: int = 0  # dynamic shared memory in bytes
    cluster: tuple[int, int, int] = (1, 1, 1)  # blocks per cluster; grid counts blocks, a multiple of it

    @property
    def threads(self) -> int:
        return math.prod(self.block)


# Device limits every kernel obeys on sm_80 and sm_90 (checked before compiling).
MAX_THREADS_PER_BLOCK = 1024
MAX_STATIC_SMEM = 48 * 1024
INT_MAX = 2**31 - 1  # template parameters are C ints


@dataclass(frozen=True)
class KernelSpec:
    name: str
    op: str
    title: str
    idea: str
    source: str  # relative to KERNEL_DIR
    entry: str  # fully qualified C++ template name
    geometry: Callable[[GemmProblem, Mapping[str, int]], Launch]
    params: tuple[Param, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    rung: int | None = None
    seed: str = ""  # the seed kernel this reproduces, for docs/ladder.md
    same_as: str | None = None  # set on variants that are another kernel with other params
    threads: Callable[[Mapping[str, int]], int] | None = None  # block size from params
    smem_bytes: Callable[[Mapping[str, int]], int] | None = None  # static smem from params
    block_tile: Callable[[Mapping[str, int]], tuple[int, int]] | None = None  # (rows, cols) of C per block
    # Split-K: the kernel takes a trailing workspace pointer; when the launch has gridDim.z > 1
    # slices, this kernel (M, N, S, alpha, W, beta, C) reduces the S partial planes into C.
    splitk_reduce: "KernelSpec | None" = None
    # Floats of zeroed scratch a launch needs behind that trailing pointer (problem, params), when
    # it is not the split-K planes (gridDim.z * M * N; the hook returns None for those):
    # stream-K's partial tiles and tile flags. The kernel leaves the flags zero again, so one
    # clearing at allocation serves every later launch of the same shape; another shape's flags
    # may lie where partials were written, and the runners clear them first.
    workspace: Callable[[GemmProblem, Mapping[str, int]], int | None] | None = None
    # Floats at the head of that workspace that must be zero before a launch (the flags; the
    # kernel leaves them zero): an executor sharing a workspace with others clears just these
    # when another has used it since (api/shared_workspaces.py). None: the whole of it.
    workspace_flags: Callable[[GemmProblem, Mapping[str, int]], int] | None = None
    # Shapes the kernel cannot take (alignment, divisibility): "" when it can, else the reason,
    # which the harness raises as one BadArgumentError line before launching.
    problem_check: Callable[[GemmProblem], str] | None = None
    # Shapes the kernel runs, but only on a slow path: "" when not, else why. The dispatch passes
    # the kernel over there; a caller who names it still gets it.
    slow_path: Callable[[GemmProblem], str] | None = None
    # The share of its rounds a launch fills with work at a shape (1.0: every SM busy to the end),
    # from its tile schedule: the dispatch lowers a kernel's figure measured at another shape by
    # how much less its rounds fill at the call's (api/dispatch.py). None: not modelled.
    round_fill: Callable[[GemmProblem, Mapping[str, int]], float] | None = None
    # The one architecture the kernel is built for, where it needs more than the device's plain
    # one (wgmma and setmaxnreg: "sm_90a", which runs on sm_90 devices only); None: any.
    arch: str | None = None
    # Input types it takes, for ops with several (hgemm: fp16, bf16, tf32); empty: the op's default.
    dtypes: tuple[str, ...] = ()
    tags: tuple[str, ...] = field(default=())

    kind = "kernel"

    def arch_for(self, device_arch: str) -> str:
        """The architecture to build for on a device of `device_arch`; refuses a device that
        cannot run the kernel's own architecture (sm_90a code runs on sm_90 only)."""
        if self.arch is None:
            return device_arch
        if self.arch.rstrip("a") != device_arch.rstrip("a"):
            raise BadArgumentError(f"{self.name} needs {self.arch} (Hopper), this GPU is {device_arch}")
        return self.arch

    @property
    def source_path(self) -> Path:
        return KERNEL_DIR / self.source

    @property
    def defaults(self) -> dict[str, int]:
        return {p.name: p.default for p in self.params}

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> dict[str, int]:
        """Defaults merged with overrides, every constraint checked; raises ConstraintError."""
        values = self.defaults
        for key, value in (overrides or {}).items():
            if key not in values:
                known = ", ".join(values) or "none"
                raise BadArgumentError(f"{self.name} has no parameter {key!r} (parameters: {known})")
            try:
                values[key] = int(value)
            except (TypeError, ValueError):
                raise BadArgumentError(f"{self.name}: parameter {key}={value!r} is not an integer") from None
        failed = self.failed_constraints(values)
        if failed:
            shown = ", ".join(f"{k}={v}" for k, v in values.items())
            raise ConstraintError(f"{self.name} with {shown} breaks constraint: {_closest(failed, overrides or {})}")
        return values

    def failed_constraints(self, values: Mapping[str, int]) -> list[str]:
        """Reasons of every constraint the values break (empty when all hold).

        A constraint that cannot even be evaluated (a division by a zero derived from
        other bad values) counts as broken rather than crashing the check.
        """
        def holds(check: Callable[[Mapping[str, int]], bool]) -> bool:
            try:
                return bool(check(values))
            except (ZeroDivisionError, ValueError, KeyError):
                return False

        if any(v < 0 for v in values.values()):
            bad = next(k for k, v in values.items() if v < 0)
            return [f"{bad} must not be negative"]
        if any(v > INT_MAX for v in values.values()):  # NVRTC would find no template instance to name
            bad = next(k for k, v in values.items() if v > INT_MAX)
            return [f"{bad} must be at most {INT_MAX} (a C int template argument)"]
        failed = [c.why for c in self.constraints if not holds(c.check)]
        if self.threads is not None and not holds(lambda v: 0 < self.threads(v) <= MAX_THREADS_PER_BLOCK):
            failed.append(f"threads per block must be in 1..{MAX_THREADS_PER_BLOCK}")
        if self.smem_bytes is not None and not holds(lambda v: self.smem_bytes(v) <= MAX_STATIC_SMEM):
            failed.append(f"static shared memory must be <= {MAX_STATIC_SMEM} B")
        return failed

    def tile(self, values: Mapping[str, int]) -> tuple[int, int]:
        """Rows and columns of C one block computes (BM x BN, or BLOCK x BLOCK)."""
        if self.block_tile is not None:
            return self.block_tile(values)
        if "BM" in values:
            return values["BM"], values["BN"]
        return values["BLOCK"], values["BLOCK"]

    def name_expression(self, values: Mapping[str, int]) -> str:
        if not self.params:
            return self.entry
        args = [str(values[p.name]) for p in self.params if p.template]
        return f"{self.entry}<{', '.join(args)}>" if args else self.entry

    def launch(self, problem: GemmProblem, values: Mapping[str, int]) -> Launch:
        g = self.geometry(problem, values)
        if g.grid[0] >= 2**31 or max(g.grid[1:]) > 65535:  # e.g. more rows of tiles than grid.y takes
            raise BadArgumentError(f"{self.name} cannot run {problem.shape}: grid {g.grid} past (2^31-1, 65535, 65535)")
        return g

    @property
    def takes_workspace(self) -> bool:
        """Whether the kernel takes the trailing workspace pointer W (split-K or `workspace`)."""
        return self.splitk_reduce is not None or self.workspace is not None

    def workspace_floats(self, problem: GemmProblem, values: Mapping[str, int]) -> int:
        """Floats of zeroed workspace one launch needs (0: none; the W argument is then null)."""
        own = self.workspace(problem, values) if self.workspace is not None else None
        if own is not None:
            return own
        slices = self.launch(problem, values).grid[2]
        return slices * problem.M * problem.N if self.splitk_reduce is not None and slices > 1 else 0

    def workspace_flag_floats(self, problem: GemmProblem, values: Mapping[str, int]) -> int:
        """Floats at the head of workspace_floats' that must be zero before a launch: 0 for the
        split-K planes (written before they are read), the flags for a `workspace` of the spec's own."""
        own = self.workspace(problem, values) if self.workspace is not None else None
        if not own:
            return 0
        return self.workspace_flags(problem, values) if self.workspace_flags is not None else own

    def variant(self, name: str, title: str, idea: str, seed: str = "", **defaults: int) -> "KernelSpec":
        """The same kernel under another name with other default parameters."""
        params = tuple(replace(p, default=defaults.pop(p.name, p.default)) for p in self.params)
        if defaults:
            raise ValueError(f"{self.name} has no parameters {sorted(defaults)}")
        return replace(self, name=name, title=title, idea=idea, seed=seed, params=params,
                       rung=None, same_as=self.name)


# Keyed by (op, name): one name may exist once per op (the sgemm and the reduce baseline
# are both called "torch"); get() without an op means the sgemm one where both exist.
_REGISTRY: dict[tuple[str, str], Any] = {}
_loaded = False
_load_lock = threading.Lock()  # first use from many threads at once: one import, no half-filled registry


def register(*impls: Any) -> None:
    for impl in impls:
        key = (impl.op, impl.name)
        if key in _REGISTRY:
            raise ValueError(f"duplicate implementation name {impl.name!r} for op {impl.op!r}")
        _REGISTRY[key] = impl


def _load() -> None:
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if not _loaded:
            importlib.import_module(_OPS_PACKAGE)
            _loaded = True


def all_impls(op: str | None = None) -> list[Any]:
    """Kernels in ladder order (rungs first, then variants), then baselines."""
    _load()
    impls = [i for i in _REGISTRY.values() if op is None or i.op == op]
    position = {key: n for n, key in enumerate(_REGISTRY)}

    def order(i: Any) -> tuple:  # rungs by number, then variants and baselines as registered
        if i.kind == "baseline":
            return (2, 0, position[(i.op, i.name)])
        return (0, i.rung, 0) if i.rung is not None else (1, 0, position[(i.op, i.name)])

    return sorted(impls, key=order)


def family(impl: Any) -> str:
    """Which ladder an implementation climbs: the main ladder, or a seed's own sequence."""
    if getattr(impl, "rung", None) is not None:
        return "ladder"
    return (impl.seed.split() or ["variants"])[0] if impl.seed else impl.kind


def kernels(op: str | None = None) -> list[KernelSpec]:
    return [i for i in all_impls(op) if i.kind == "kernel"]


def get(name: str, op: str | None = None) -> Any:
    """The implementation called `name`: of `op` when given and there, else sgemm's, else any."""
    _load()
    for key in ((op, name), ("sgemm", name)):
        if key in _REGISTRY:
            return _REGISTRY[key]
    for (_, known_name), impl in _REGISTRY.items():
        if known_name == name:
            return impl
    op_names = sorted({o for o, _ in _REGISTRY})  # the op's own names only: all ops' would not fit one line
    known = [i.name for i in all_impls(op)] if op in op_names else []
    close = difflib.get_close_matches(name.lower(), known or [n for _, n in _REGISTRY], 1)
    hint = f" - did you mean {close[0]!r}?" if close else ""
    where = f"gemmlab list --op {op}: {', '.join(known)}" if known else f"gemmlab list --op {'|'.join(op_names)}"
    raise UnknownKernelError(f"unknown kernel {name!r}{hint} ({where})")


def select(names: str, op: str = "sgemm", with_baselines: bool = True) -> list[Any]:
    """'all' | 'name' | 'a,b,c' -> implementations, in the order given ('all' in ladder order);
    'ladder', alone or in a list ('ladder,cublas'), stands for the op's rungs in order."""
    text = names.strip()
    if not text:
        raise BadArgumentError("--impl is empty")
    if text == "all":
        return [i for i in all_impls(op) if with_baselines or i.kind == "kernel"]
    picked = []
    for name in comma_items(text, "--impl"):
        if name == "all":  # else "unknown kernel 'all'"
            raise BadArgumentError(f"--impl {names!r}: 'all' stands alone (it names every implementation)")
        found = [k for k in kernels(op) if k.rung is not None] if name == "ladder" else [get(name, op)]
        if found and found[0].op != op:
            raise BadArgumentError(f"{name} is a {found[0].op} implementation, not {op}")
        picked += [i for i in found if i not in picked]  # named twice: run and stored once
    return picked


def _closest(failed: list[str], given: Mapping[str, Any]) -> str:
    """Of the broken constraints, the one that speaks of what the user gave: a given parameter's own
    rule ("PINGPONG must be 0 or 1") before one that names it, before any other (PINGPONG=2 broke
    the accumulator count first, which does not say what was wrong)."""
    def rank(why: str) -> int:
        if any(why.startswith(f"{k} ") for k in given):
            return 0
        return 1 if any(re.search(rf"\b{re.escape(k)}\b", why) for k in given) else 2

    return min(failed, key=rank)  # min keeps the first of equal ranks: the spec's own order
