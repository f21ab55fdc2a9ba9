"""`gemmlab profile`: one ncu run per implementation over the target process, rows stored.

Kernels are picked out by their mangled names with --launch-skip past the warm-up (see
ncu.py); a library baseline (cuBLAS...), whose kernel names are not known beforehand, by the
NVTX range the target opens around its profiled call.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import GemmlabError
from . import ncu as N
from .target import RANGE, launches_per_gemm, launches_per_sum, parse_target_line

BASELINE_LAUNCH_CAP = 16  # a library call inside the NVTX range launches at most this many kernels


@dataclass
class ProfiledKernel:
    """One profiled launch, ready to be a `profiles` row."""

    impl: str
    impl_kind: str
    label: str  # column title: the impl, or impl:kernel for a second kernel of one GEMM
    kernel: str
    status: str  # OK | ERROR
    reason: str = ""
    headline: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    fields: dict = field(default_factory=dict)
    target: dict = field(default_factory=dict)
    command: str = ""
    source: dict | None = None  # where the warps stalled (source.summarize), with --source

    def row(self, problem, params: dict, ncu_version: str, skip: int, count: int) -> dict:
        m = self.metrics
        read, write = m.get("dram__bytes_read.sum"), m.get("dram__bytes_write.sum")
        flops = executed_flops(problem, m, main=self.label == self.impl)
        row = dict(op=op_of(problem), impl=self.impl, impl_kind=self.impl_kind, kernel=self.kernel, params=params,
                   **shape_fields(problem), status=self.status, reason=self.reason,
                   verified=self.target.get("verified"), rel_err=self.target.get("rel_err"),
                   launch_skip=skip, launch_count=count, grid=self.fields.get("Grid Size"),
                   block=self.fields.get("Block Size"),
                   dram_bytes=(read + write) if read is not None and write is not None else None,
                   flops=flops, ncu_version=ncu_version, ncu_command=self.command,
                   metrics=self.metrics or None,
                   extra={"label": self.label, **({"fields": self.fields} if self.fields else {}),
                          **({"source": self.source} if self.source else {})})
        row.update({k: v for k, v in self.headline.items()})
        return row


def op_of(problem) -> str:
    return problem.op


def executed_flops(problem, metrics: dict, main: bool = True) -> float | None:
    """FLOPs of the profiled launch: twice its FFMAs where the op's kernels multiply-add on the
    CUDA cores (what ran, padding included); the problem's 2MNK for the tensor-core ops, whose
    MMA instructions ncu does not count as FLOPs, on the GEMM's `main` kernel only (not a
    library's second kernel); none for a sum."""
    from ..ops import of

    if op_of(problem) == "reduce":
        return None
    if of(problem).math == "tensor":
        return float(problem.flops) if main else None
    ffma = metrics.get("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")
    return 2 * ffma if ffma is not None else None


def shape_fields(problem) -> dict:
    """The problem's columns of a profiles row: sizes, and the type, layout, C type and batch
    where the op has them."""
    if op_of(problem) == "reduce":
        return {"elements": problem.n}
    fields = {"M": problem.M, "N": problem.N, "K": problem.K, "dtype": problem.dtype, "layout": problem.layout,
              "out_dtype": problem.out_dtype}
    if hasattr(problem, "batch"):
        fields["batch"] = problem.batch
    return fields


def target_args(problem) -> list[str]:
    """The problem, for the target's command line (any op: problem_to_dict's JSON)."""
    from ..problem import problem_to_dict

    return ["--problem", json.dumps(problem_to_dict(problem), sort_keys=True)]


def short_kernel_name(kernel: str) -> str:
    """'void gemmlab::sgemm_splitk_reduce<256>(int, ...)' -> 'sgemm_splitk_reduce'."""
    head = kernel.split("(", 1)[0]
    head = re.sub(r"<.*$", "", head)
    return head.split("::")[-1].split()[-1] if head.strip() else kernel


def ncu_version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r"Version\s+(\S+)", out)
    return m.group(1) if m else out.strip().splitlines()[-1] if out.strip() else ""


def _target_env() -> dict:
    """The target imports this very gemmlab, installed or run from a source tree."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


@dataclass
class Plan:
    """What ncu must do for one implementation."""

    kernels: list[str] | None  # mangled names; None for a baseline (NVTX range instead)
    skip: int
    count: int
    params: dict


def plan_for(impl: Any, problem, params: dict, warmup: int, arch: str) -> Plan:
    if impl.kind != "kernel":
        return Plan(None, 0, BASELINE_LAUNCH_CAP, {})
    from ..cuda.compile import compile_kernel
    from ..ops import of

    # the kernel the target's runner builds for this problem (hgemm: with its dtype, layout and C
    # type flags), so that the mangled name ncu filters on is the one that runs
    ck = compile_kernel(impl, of(problem).kernel_params(impl, params, problem), arch=arch)  # warms the cache too
    kernels = [ck.mangled]
    if op_of(problem) == "reduce":  # one kernel, launched once per pass
        per_call = launches_per_sum(impl, problem.n, ck.params)
    else:
        per_call = launches_per_gemm(impl, problem, ck.params)
        if per_call == 2:  # split-K: the GEMM kernel, then its reduction
            kernels.append(compile_kernel(impl.splitk_reduce, arch=arch).mangled)
    return Plan(kernels, warmup * per_call, per_call, ck.params)


def _our_sass(impl: Any, params: dict, arch: str):
    """(instructions, main loop) of our kernel's SASS, for lining ncu's samples up with it;
    (None, None) where no disassembler is installed."""
    from ..cuda.compile import compile_kernel
    from . import sass as S

    tool = S.find_tool()
    if tool is None:
        return None, None
    ck = compile_kernel(impl, params, arch=arch)
    try:
        fn = S.function_for(S.parse_sass(S.disassemble(ck.cubin, tool)), ck.mangled)
    except GemmlabError:
        return None, None
    return fn.instructions, fn.main_loop()


def source_summaries(ncu: str, report: Path, impl: Any, plan: Plan, arch: str, kernels: list) -> list[dict]:
    """Per profiled kernel, where its warps stalled (source.summarize), from the report's source
    page, its blocks taken in order (a sum's passes launch one kernel several times, each its own
    block); our own kernel's samples split at its main loop. A page ncu cannot print gives each
    kernel {"error": why}."""
    from .source import parse_source_csv, summarize

    try:
        proc = subprocess.run(N.source_command(ncu, report), capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return [{"error": "ncu did not print the source page within 300 s"}] * len(kernels)
    blocks = [b for b in parse_source_csv(proc.stdout) if b.rows]
    if not blocks:
        found = N.diagnose(proc.stdout + "\n" + proc.stderr)
        why = str(found) if found else "ncu's source page holds no warp samples (SourceCounters not collected?)"
        return [{"error": why}] * len(kernels)
    out: list[dict] = []
    next_block = 0
    for n, result in enumerate(kernels):
        named = [i for i in range(next_block, len(blocks)) if blocks[i].name == result.kernel]
        at = named[0] if named else next_block  # by name where ncu printed it, else by position
        if at >= len(blocks):
            out.append({"error": "no block of ncu's source page for this kernel"})
            continue
        next_block = at + 1
        instructions, loop = (None, None)
        if n == 0 and plan.kernels is not None:
            instructions, loop = _our_sass(impl, plan.params, arch)
        out.append(summarize(blocks[at], instructions, loop))
    return out


def report_path(workdir: Path, name: str, problem) -> Path:
    """`name`'s .ncu-rep at this problem in `workdir`, a new file each time: an earlier run's in the
    same --reports folder (which its stored ncu command names) is never written over."""
    label = getattr(problem, "shape", None) or f"n{problem.n}"
    path, k = workdir / f"{name}-{label}.ncu-rep", 2
    while path.exists():
        path, k = workdir / f"{name}-{label}-{k}.ncu-rep", k + 1
    return path


def profile_one(ncu: str, impl: Any, problem, params: dict, warmup: int, arch: str, workdir: Path,
                timeout: float = 600, check: bool = True, source: bool = False) -> tuple[Plan, list[ProfiledKernel]]:
    """Run ncu over the target for one implementation; NcuError(fatal) when ncu cannot work here.
    `source`: also sample warp states per instruction (ncu's SourceCounters section)."""
    from ..harness.dispatched import DISPATCH

    plan = plan_for(impl, problem, params, warmup, arch)
    report = report_path(workdir, impl.name, problem)
    # `dispatch` (the API's choice) is a stand-in: the target runs the implementation it stands for,
    # with the chosen parameters (plan.params), which builds the same kernel
    runs_as = impl.same_as if impl.name == DISPATCH and getattr(impl, "same_as", None) else impl.name
    target = [sys.executable, "-m", "gemmlab.profile.target", "--impl", runs_as, *target_args(problem),
              "--params", json.dumps(plan.params), "--warmup", str(warmup)]
    if not check:
        target.append("--no-check")
    cmd = N.profile_command(ncu, target, report, kernels=plan.kernels, skip=plan.skip, count=plan.count,
                            nvtx_range=RANGE if plan.kernels is None else None,
                            sections=(N.SOURCE_SECTION,) if source else ())
    shown = shlex.join(["ncu", *cmd[1:]])  # the full command, kept with the row

    def error(reason: str) -> tuple[Plan, list[ProfiledKernel]]:
        return plan, [ProfiledKernel(impl.name, impl.kind, impl.name, "", "ERROR", reason, command=shown)]

    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_target_env())
    except subprocess.TimeoutExpired:
        return error(f"ncu did not finish within {timeout:.0f} s")
    output = proc.stdout + "\n" + proc.stderr
    info = parse_target_line(output) or {}
    if info.get("error"):
        return error(f"the target failed: {info['error']}")
    problem_found = N.diagnose(output)
    if problem_found is not None and (problem_found.fatal or not report.exists()):
        if problem_found.fatal:
            raise problem_found
        return error(str(problem_found))
    if not report.exists():
        tail = " | ".join(ln for ln in output.strip().splitlines()[-3:])
        return error(f"ncu wrote no report (exit {proc.returncode}): {tail[:300]}")
    if plan.kernels is None and not info.get("nvtx", False):
        return error("no NVTX binding (cupy.cuda.nvtx or torch) to mark the baseline's launch")
    imported = subprocess.run(N.import_command(ncu, report), capture_output=True, text=True, timeout=300)
    results = N.parse_raw_csv(imported.stdout)
    if not results:
        problem_found = N.diagnose(imported.stdout + imported.stderr)
        return error(str(problem_found) if problem_found else "ncu's report holds no kernel")
    stalls = source_summaries(ncu, report, impl, plan, arch, results) if source else [None] * len(results)
    out = []
    for n, r in enumerate(results):
        if n == 0:
            label = impl.name
        elif r.kernel == results[0].kernel:  # a reduce kernel's later passes
            label = f"{impl.name}:pass{n + 1}"
        else:  # split-K's reduction
            label = f"{impl.name}:{short_kernel_name(r.kernel)}"
        reason = ""
        if info.get("verified") is False:
            reason = f"verification failed: {info.get('reason', '')}"
        asked = {name: r.metrics.get(name) for name in N.metric_names()}  # not ncu's ~200 device attributes
        out.append(ProfiledKernel(impl.name, impl.kind, label, r.kernel, "OK" if not reason else "FAIL", reason,
                                  r.headline(), asked, r.fields, info, shown, stalls[n]))
    return plan, out


def measure_dram_bandwidth(nbytes: int = 1 << 30, repeat: int = 10) -> dict:
    """Device-to-device copy, median of CUDA-event timings; GB/s counts bytes read + written."""
    import statistics

    import cupy as cp

    free, _ = cp.cuda.runtime.memGetInfo()
    nbytes = min(nbytes, max(free // 4, 1 << 20))
    src = cp.ones(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for i in range(repeat + 2):
        start.record()
        dst.data.copy_from_device_async(src.data, nbytes)
        end.record()
        end.synchronize()
        if i >= 2:
            times.append(cp.cuda.get_elapsed_time(start, end))
    median = statistics.median(times)
    del src, dst
    return {"method": "device-to-device copy (read + write)", "bytes": int(2 * nbytes), "median_ms": median,
            "gbps": 2 * nbytes / (median * 1e6)}


def profile_many(impls: list, problem, params_for: Callable[[Any], dict], warmup: int, arch: str,
                 reports: Path | None = None, timeout: float = 600, check: bool = True,
                 on_kernel: Callable[[Plan, ProfiledKernel], None] | None = None,
                 source: bool = False) -> list[ProfiledKernel]:
    ncu = N.find_ncu()
    if ncu is None:
        raise GemmlabError(N.no_ncu())
    out: list[ProfiledKernel] = []
    with tempfile.TemporaryDirectory(prefix="gemmlab-ncu-") as tmp:
        workdir = Path(reports) if reports else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for impl in impls:
            plan, kernels = profile_one(ncu, impl, problem, params_for(impl), warmup, arch, workdir, timeout, check,
                                        source)
            for k in kernels:
                out.append(k)
                if on_kernel:
                    on_kernel(plan, k)
    return out
