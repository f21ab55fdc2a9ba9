"""Nsight Compute: the metrics gemmlab reads, the ncu command line, and its CSV.

One kernel launch is profiled per ncu run: the target process (profile/target.py) warms
the kernel up, then launches it once more; ncu is told the kernel's mangled name
(--kernel-name-base mangled --kernel-name ...) and to skip the warm-up launches
(--launch-skip W --launch-count 1). Clocks are left alone (--clock-control none): ncu's
default would lock them to base, and the lent GPUs do not allow it. Caches are flushed
before each replay pass (--cache-control all, the default), as the benchmark flushes L2.

Every metric name below was checked against `ncu --query-metrics` on an H100/H200
(tests/fixtures/ncu/: the query output and a real CSV of the ladder).
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import GemmlabError


@dataclass(frozen=True)
class Metric:
    key: str  # column name in the profiles table
    label: str  # what the table shows (seed 002's words where it has them)
    name: str  # the ncu metric
    unit: str  # as shown
    scale: float = 1.0  # ncu base unit -> shown unit
    digits: int = 2


# The side-by-side table, in this order.
METRICS: tuple[Metric, ...] = (
    Metric("duration_us", "Duration (us)", "gpu__time_duration.sum", "us", 1e-3, 1),
    Metric("achieved_occupancy_pct", "Achieved Occupancy (%)", "sm__warps_active.avg.pct_of_peak_sustained_active", "%"),
    Metric("theoretical_occupancy_pct", "Theoretical Occupancy (%)", "sm__maximum_warps_per_active_cycle_pct", "%"),
    Metric("warp_cycles_per_issue", "Warp Cycles per Issued Instruction",
           "smsp__average_warp_latency_per_inst_issued.ratio", "cycles"),
    Metric("stall_mio_throttle", "Stall MIO Throttle (cycles/inst)",
           "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio", "cycles"),
    Metric("stall_barrier", "Stall Barrier (cycles/inst)",
           "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "cycles"),
    Metric("stall_long_scoreboard", "Stall Long Scoreboard (cycles/inst)",
           "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "cycles"),
    Metric("stall_short_scoreboard", "Stall Short Scoreboard (cycles/inst)",
           "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio", "cycles"),
    Metric("sm_throughput_pct", "Compute (SM) Throughput (% of peak)", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    # the tensor cores' busy share: HMMA counts every tensor-core MMA on Hopper, wgmma's too (91%
    # for rung 5 at 4096^3 in docs/tensor-cores.md; ncu's gmma-only counterpart reads n/a there)
    Metric("tensor_pipe_pct", "Tensor Pipe Busy (% of peak)",
           "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "%"),
    Metric("memory_throughput_pct", "Memory Throughput (% of peak)",
           "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    Metric("dram_throughput_pct", "DRAM Throughput (% of peak)", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    Metric("dram_gbps", "DRAM Bandwidth (GB/s)", "dram__bytes.sum.per_second", "GB/s", 1e-9, 0),
    Metric("l2_hit_rate_pct", "L2 Hit Rate (%)", "lts__t_sector_hit_rate.pct", "%"),
    # how busy the L2 slices are (ncu's "L2 Cache Throughput"): a GEMM whose tiles all read L2 at
    # once can be held by it with the DRAM far from its peak (rung 5 at 4096^3, issue 14)
    Metric("l2_throughput_pct", "L2 Throughput (% of peak)", "lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    Metric("smem_conflicts_ld", "Shared Bank Conflicts, loads",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "", 1.0, 0),
    Metric("smem_conflicts_st", "Shared Bank Conflicts, stores",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "", 1.0, 0),
    Metric("registers", "Registers per Thread", "launch__registers_per_thread", "", 1.0, 0),
    Metric("smem_dynamic", "Dynamic Shared Memory (B/block)", "launch__shared_mem_per_block_dynamic", "B", 1.0, 0),
    Metric("smem_static", "Static Shared Memory (B/block)", "launch__shared_mem_per_block_static", "B", 1.0, 0),
)

# Collected and stored too (the roofline, the occupancy cross-check, the clock).
EXTRA_METRICS: tuple[str, ...] = (
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__inst_executed.sum",
    "sm__cycles_elapsed.avg.per_second",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks",
    "launch__grid_size",
    "launch__block_size",
    "launch__waves_per_multiprocessor",
)

METRIC_KEYS = tuple(m.key for m in METRICS)


def metric_names() -> list[str]:
    return [m.name for m in METRICS] + list(EXTRA_METRICS)


def base_name(metric: str) -> str:
    """'sm__throughput.avg.pct_of_peak_sustained_elapsed' -> 'sm__throughput' (what
    `ncu --query-metrics` lists)."""
    return metric.split(".", 1)[0]


# -- finding ncu and reading what it says ----------------------------------------------

def find_ncu() -> str | None:
    env = os.environ.get("GEMMLAB_NCU")
    if env:
        return env if Path(env).is_file() and os.access(env, os.X_OK) else None  # not a folder, runnable
    path = shutil.which("ncu")
    if path:
        return path
    candidates = sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"), reverse=True)
    candidates += sorted(Path("/usr/local").glob("cuda*/bin/ncu"), reverse=True)
    candidates += sorted(Path("/usr/local").glob("cuda*/nsight-compute*/ncu"), reverse=True)
    return str(candidates[0]) if candidates else None


NO_NCU = ("ncu (Nsight Compute) was not found: `gemmlab profile` needs it on PATH or in GEMMLAB_NCU "
          "(`gemmlab analyze` needs no GPU and no ncu)")


def no_ncu() -> str:
    """Why find_ncu() found none, naming GEMMLAB_NCU's value where that is what failed."""
    env = os.environ.get("GEMMLAB_NCU")
    if env:
        return f"GEMMLAB_NCU={env!r} is not a runnable file (unset it to look for ncu on PATH)"
    return NO_NCU

# ncu's own words -> one line for the user. Checked in this order.
_FAILURES: tuple[tuple[str, str], ...] = (
    ("ERR_NVGPUCTRPERM", "ncu may not read the GPU's performance counters on this machine "
                         "(ERR_NVGPUCTRPERM: profiling needs root or NVreg_RestrictProfilingToAdminUsers=0)"),
    ("Failed to initialize the profiler", "ncu could not start its profiler on this machine ({line})"),
    ("LibraryNotLoaded", "ncu could not load its profiling library on this machine ({line})"),
    ("Failed to find metric", "ncu does not know a metric gemmlab asked for ({line})"),
    ("not supported on this device", "ncu cannot profile this GPU ({line})"),
    ("Failed to profile", "ncu failed to profile the kernel ({line})"),
)


class NcuError(GemmlabError):
    """ncu ran but produced no usable result; `fatal` when no later kernel can succeed either."""

    def __init__(self, message: str, fatal: bool = False):
        super().__init__(message)
        self.fatal = fatal


def diagnose(output: str) -> NcuError | None:
    """The first ncu error in its output, as one line; None when there is none."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for needle, message in _FAILURES:
        for ln in lines:
            if needle in ln:
                text = re.sub(r"^==(ERROR|WARNING|PROF)==\s*", "", ln)
                fatal = needle in ("ERR_NVGPUCTRPERM", "Failed to initialize the profiler", "LibraryNotLoaded",
                                   "Failed to find metric", "not supported on this device")
                return NcuError(message.format(line=text[:200]), fatal=fatal)
    for ln in lines:
        if "No kernels were profiled" in ln:
            return NcuError("ncu profiled no kernel: the name filter or the launch skip matched nothing")
    errors = [ln for ln in lines if ln.startswith("==ERROR==")]
    if errors:
        return NcuError("ncu: " + re.sub(r"^==ERROR==\s*", "", errors[0])[:200])
    return None


# -- command lines ---------------------------------------------------------------------

SOURCE_SECTION = "SourceCounters"  # warp-state sampling per instruction (profile --source, source.py)


def profile_command(ncu: str, target: list[str], report: Path, *, kernels: list[str] | None,
                    skip: int, count: int, nvtx_range: str | None = None,
                    metrics: list[str] | None = None, sections: tuple[str, ...] = ()) -> list[str]:
    """ncu ... -- target: exactly `count` launches of `kernels` (mangled names) after `skip`;
    `sections`: ncu sections collected besides the metrics (SOURCE_SECTION for --source)."""
    cmd = [ncu, "--clock-control", "none", "--cache-control", "all", "--target-processes", "all",
           "--metrics", ",".join(metrics or metric_names()), "--export", str(report), "--force-overwrite"]
    for section in sections:
        cmd += ["--section", section]
    if kernels:
        pattern = kernels[0] if len(kernels) == 1 else "regex:^(" + "|".join(kernels) + ")$"
        cmd += ["--kernel-name-base", "mangled", "--kernel-name", pattern]
    if nvtx_range:
        cmd += ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    cmd += ["--launch-skip", str(skip), "--launch-count", str(count), "--", *target]
    return cmd


def import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"]


def source_command(ncu: str, report: Path) -> list[str]:
    """The report's source page: one row per SASS instruction with its warp samples."""
    return [ncu, "--import", str(report), "--csv", "--page", "source", "--print-source", "sass"]


# -- CSV -------------------------------------------------------------------------------

_GROUPED = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def to_number(text: str) -> float | None:
    """ncu's printed value -> float; None for n/a, empty or non-numeric cells."""
    t = text.strip().strip('"')
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    if _GROUPED.match(t):
        t = t.replace(",", "")
    try:
        value = float(t)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass
class KernelResult:
    """One profiled launch: the header fields ncu prints, then every metric."""

    kernel: str  # as ncu names it (demangled)
    fields: dict[str, str]  # ID, Kernel Name, Block Size, Grid Size, Device, CC...
    metrics: dict[str, float | None]
    units: dict[str, str]

    def value(self, name: str) -> float | None:
        return self.metrics.get(name)

    def headline(self) -> dict[str, float | None]:
        """METRICS in shown units, keyed by Metric.key."""
        out = {}
        for m in METRICS:
            v = self.metrics.get(m.name)
            out[m.key] = v * m.scale if v is not None else None
        return out


def parse_raw_csv(text: str) -> list[KernelResult]:
    """`ncu --import R --csv --page raw --print-units base` -> one KernelResult per launch.

    The first row names the columns, the second gives their units; ncu's own log lines
    (==PROF==, ==WARNING==) before the table are skipped.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if len(rows) < 2:
        return []
    header, units = rows[0], rows[1]
    first_metric = next((i for i, h in enumerate(header) if "__" in h), len(header))
    results = []
    for row in rows[2:]:
        if len(row) != len(header):
            continue
        fields = {header[i]: row[i] for i in range(first_metric)}
        metrics = {header[i]: to_number(row[i]) for i in range(first_metric, len(header))}
        unit_map = {header[i]: units[i] for i in range(first_metric, len(header))}
        results.append(KernelResult(fields.get("Kernel Name", ""), fields, metrics, unit_map))
    return results


def parse_query_metrics(text: str) -> set[str]:
    """`ncu --query-metrics [--query-metrics-mode suffix]` output -> the metric names it lists."""
    names = set()
    for line in text.splitlines():
        token = line.strip().split(" ", 1)[0] if line.strip() else ""
        if "__" in token and re.match(r"^[a-z0-9_]+__[a-z0-9_.]+$", token):
            names.add(token)
    return names
