"""`gemmlab bench --api`: the public entry points timed as a program calls them, against the
frameworks' own calls in the same process and run. Two figures per call, on the same shapes and inputs:
- host us/call: the wall time of a batch of back-to-back calls with no synchronisation (100, or
  fewer for calls whose GPU work is long: see `host_batch`), divided by the batch, after one untimed
  call. The calls compared take turns, batch by batch (11 rounds, the median kept), so a noisy host
  weighs on all alike; batches never fill the GPU's launch queue, so the figure is host work.
- TFLOP/s (GB/s for sums): a loop of calls timed wall-clock from the first call to the end of the
  GPU work (synchronised once at the end): what a program gets. Loops take turns as well.
Beside them: the lowest SM clock NVML saw during the loop and during bench's timed launches (a
loop of large tensor-core GEMMs draws full power for 50 ms and clocks lower than bench's bursts);
the host's speed before each loop (`host_probe_us`: the lent machines' CPUs switch between two
speeds, one about half the other, session 28, scripts/host_speed.py); and `gemmlab bench`'s
figure for the same implementation and shape (cold L2, same run), so a path that wins in the
harness and loses through the API shows up. Rows: torch.mm / torch.sum / cupy.matmul / cupy.sum
(the references), the plain gemmlab call (a new output each call, as torch.mm makes one), the
same with C given, and a plan's execute().
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

DEFAULT_GEMM_SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, (1000, 3000, 2000))
DEFAULT_SUM_SIZES = (1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 28)
HOST_BATCH = 100  # calls per host-time batch: far below the ~1000 launches a queue holds
DRAIN_S = 0.25  # GPU seconds one batch may queue: each round waits for them, and 11 rounds of 100
#                 8192^3 SGEMMs (20 ms each) would spend 22 s per call waiting, not measuring
PROBE_CALLS = 20  # about 40 us a reading: far above the timer's resolution, far below a phase (~1 s)


def _probe_work() -> int:
    return sum(range(300))  # pure Python, nothing allocated that grows


def host_probe_us() -> float:
    """Microseconds of a fixed pure-Python workload: about 1.8-2 us in the lent machines' fast
    phase, 3-4.5 us in their slow one (session 28, scripts/host_speed.py)."""
    start = time.perf_counter()
    for _ in range(PROBE_CALLS):
        _probe_work()
    return (time.perf_counter() - start) / PROBE_CALLS * 1e6


def shape_size(shape: str) -> int:
    """M*N*K of a row's "MxNxK", or the element count of a sum's "n"."""
    return math.prod(int(part) for part in shape.split("x"))


def work_units(case: str, shape: str) -> float:
    """One call's work in its figure's unit: TFLOP (2*M*N*K) for a GEMM, GB for a sum (4 bytes an
    fp32 element, as bench counts it). The loops' figures and apitargets' kernel times use it."""
    return 4 * shape_size(shape) / 1e9 if case.startswith("reduce") else 2 * shape_size(shape) / 1e12


def host_batch(work_s: float) -> int:
    """Calls per host-time batch for a call of `work_s` seconds of GPU work: 100, fewer past DRAIN_S,
    never below 10 (10 calls of >= 25 ms each are still far above the clock's resolution)."""
    return max(10, min(HOST_BATCH, int(DRAIN_S / max(work_s, 1e-9))))


@dataclass
class Row:
    case: str  # e.g. "sgemm torch"
    shape: str
    call: str  # what was timed
    host_us: float
    figure: float  # TFLOP/s or GB/s through the loop
    unit: str
    impl: str = ""
    bench_figure: float | None = None  # gemmlab bench's figure for impl at this shape
    loop_mhz: int | None = None  # the lowest SM clock during the loop (None without NVML)
    bench_mhz: int | None = None  # ... and during bench's timed launches
    probe_us: float | None = None  # host_probe_us beside the loops (median of one reading before each)
    gpu_max_mhz: int | None = None  # the GPU's highest SM clock (NVML), what "clocked down" is read against
    notes: list = field(default_factory=list)

    @property
    def clocks(self) -> str:
        """The loop's lowest SM clock, and bench's where it has a bench figure ("-": no NVML): "1605 / 1980"."""
        shown = (self.loop_mhz, self.bench_mhz) if self.bench_figure else (self.loop_mhz,)
        return " / ".join(str(m) if m else "-" for m in shown)


def _host_us(fns: list[Callable[[], object]], sync: Callable[[], None], rounds: int = 11,
             batch: int = HOST_BATCH) -> list[float]:
    """Host microseconds per call of each function, batches interleaved round by round."""
    for fn in fns:
        for _ in range(10):
            fn()
    sync()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            # the first call after a sync meets an idle stream and costs far more (H100, 8192^3: 13-19
            # us a call in batches of 11, 7 in batches of 100): untimed, so any batch reads back to back
            fn()
            start = time.perf_counter()
            for _ in range(batch):
                fn()
            times[i].append((time.perf_counter() - start) / batch * 1e6)
            sync()
    return [statistics.median(t) for t in times]


BENCH_FROM_GEMM = 512 ** 3  # M*N*K from which a GEMM row gets bench's figure (and issue 13 counts its loop)
LOOP_REPEATS = 3  # loops per throughput figure, the median reported; odd, so the probe's median is one reading


def _loops(fns: list[Callable[[], object]], sync: Callable[[], None],
           work_s: float) -> list[tuple[float, int | None, float]]:
    """Per function: seconds per call of a back-to-back loop of about 50 ms (at least 5 calls), as
    bench times per figure (the median of LOOP_REPEATS loops, each ended by a sync: one loop is at
    the mercy of a host stall); the lowest SM clock during its loops; the median of host_probe_us
    read before each loop, outside the timed span (an odd count: one phase's reading); and the
    GPU's highest SM clock (NVML; None without it). The functions take turns loop by loop: timed
    one after another, power-capped loops clocked lower the later they came (session 29, H100,
    bf16 4096^3: 1455, 1305, 1230 MHz for gemmlab's three calls after torch.mm's two)."""
    from .cuda.nvml import ClockSampler

    calls = max(5, min(2000, int(0.05 / max(work_s, 1e-7))))
    for fn in fns:
        fn()
    sync()
    per_call, probes, clocks, top = [[] for _ in fns], [[] for _ in fns], [[] for _ in fns], None
    for _ in range(LOOP_REPEATS):
        for i, fn in enumerate(fns):
            probes[i].append(host_probe_us())
            with ClockSampler() as sampler:
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                sync()
                per_call[i].append((time.perf_counter() - start) / calls)
            clocks[i] += [sampler.min_clock] if sampler.min_clock is not None else []
            top = top or sampler.max_supported_clock
    return [(statistics.median(t), min(c, default=None), statistics.median(p), top)
            for t, c, p in zip(per_call, clocks, probes)]


def _bench_figure(op: str, impl: str, problem) -> tuple[float | None, int | None]:
    """gemmlab bench's figure (same run, cold L2, medians) for one implementation and shape, and
    the lowest SM clock during its timed launches."""
    from . import registry
    from .harness.bench import BenchOptions, run_bench

    try:
        (point,) = run_bench([registry.get(impl, op)], [problem], BenchOptions(repeat=10, min_time_ms=20.0))
    except Exception:
        return None, None
    if point.status != "PASS":
        return None, None
    figure = point.gbps if op == "reduce" else (point.gflops / 1000 if point.gflops else None)
    return figure, point.clocks.get("sm_clock_min_mhz")


def _gemm_rows(kind: str, M: int, N: int, K: int, with_bench: bool) -> list[Row]:
    import cupy as cp
    import torch

    import gemmlab
    from .problem import GemmProblem

    shape = f"{M}x{N}x{K}"
    out = "fp32"
    if kind in ("sgemm torch", "hgemm torch bf16", "hgemm torch bf16 out"):
        dt = torch.float32 if kind.startswith("sgemm") else torch.bfloat16
        a = (torch.rand(M, K, device="cuda") - 0.5).to(dt)
        b = (torch.rand(K, N, device="cuda") - 0.5).to(dt)
        c = torch.empty(M, N, device="cuda")
        sync = torch.cuda.synchronize
        if dt == torch.float32:
            torch.backends.cuda.matmul.allow_tf32 = False
            refs = [("torch.mm", lambda: torch.mm(a, b))]
            call, op = gemmlab.sgemm, "sgemm"
        elif kind.endswith(" out"):  # C in bf16, as torch.mm writes it: the like-for-like comparison
            out, c = "bf16", c.to(dt)
            refs = [("torch.mm", lambda: torch.mm(a, b))]
            call, op = (lambda x, y, z=None: gemmlab.hgemm(x, y, z, out_dtype=dt)), "hgemm"
        else:
            refs = [("torch.mm (bf16 out)", lambda: torch.mm(a, b)),
                    ("torch.mm (out_dtype=fp32)", lambda: torch.mm(a, b, out_dtype=torch.float32))]
            call, op = gemmlab.hgemm, "hgemm"
    else:
        dt = cp.float32 if kind.startswith("sgemm") else cp.float16
        rng = cp.random.default_rng(0)
        a = rng.uniform(-0.5, 0.5, (M, K), dtype=cp.float32).astype(dt)
        b = rng.uniform(-0.5, 0.5, (K, N), dtype=cp.float32).astype(dt)
        c = cp.empty((M, N), dtype=cp.float32)

        def sync():
            cp.cuda.get_current_stream().synchronize()

        refs = [("cupy.matmul", lambda: cp.matmul(a, b))]
        call, op = (gemmlab.sgemm, "sgemm") if dt == cp.float32 else (gemmlab.hgemm, "hgemm")
    plan = gemmlab.Matmul(a, b, out_dtype=out)
    first = f"gemmlab.{op}(A, B{', out_dtype=bf16' if out != 'fp32' else ''})"
    mine = [(first, lambda: call(a, b)), (f"gemmlab.{op}(A, B, C)", lambda: call(a, b, c)),
            ("Matmul.execute()", plan.execute)]
    call(a, b)  # the plain call's executor exists before timing
    bench = (None, None)
    if with_bench:
        dtype = "fp32" if op == "sgemm" else ("bf16" if "bf16" in kind else "fp16")
        bench = _bench_figure(op, plan.impl, GemmProblem(M, N, K, 1.0, 0.0, dtype, "nn", out))
    return _measure(kind, shape, refs, mine, plan, sync, "TFLOP/s", bench)


def _sum_rows(kind: str, n: int, with_bench: bool) -> list[Row]:
    import cupy as cp
    import torch

    import gemmlab
    from .problem import ReduceProblem

    if kind == "reduce torch":
        x = torch.rand(n, device="cuda")
        sync = torch.cuda.synchronize
        refs = [("torch.sum", lambda: torch.sum(x))]
    else:
        x = cp.random.default_rng(0).uniform(0, 1, n, dtype=cp.float32)

        def sync():
            cp.cuda.get_current_stream().synchronize()

        refs = [("cupy.sum", lambda: cp.sum(x))]
    plan = gemmlab.Sum(x)
    mine = [("gemmlab.reduce_sum(x)", lambda: gemmlab.reduce_sum(x)), ("Sum.execute()", plan.execute)]
    gemmlab.reduce_sum(x)  # the plain call's executor exists before timing
    bench = _bench_figure("reduce", plan.impl, ReduceProblem(n)) if with_bench else (None, None)
    return _measure(kind, str(n), refs, mine, plan, sync, "GB/s", bench)


def _work_seconds(fn: Callable[[], object], sync: Callable[[], None], tries: int = 5) -> float:
    """Seconds one call takes, GPU work and a sync included: the fastest of `tries` warm calls after
    one untimed call (a first call timed alone included what the plan builds on it), which sets
    the loops' and host batches' lengths."""
    fn()
    sync()
    times = []
    for _ in range(tries):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


def _measure(kind: str, shape: str, refs: list, mine: list, plan, sync, unit: str,
             bench: tuple[float | None, int | None]) -> list[Row]:
    """Host time and loop throughput of the reference calls and gemmlab's (the plan's execute
    sets the loop length), in `unit` (work_units per second); `bench` = (figure, MHz)."""
    work, work_s = work_units(kind, shape), _work_seconds(plan.execute, sync)
    calls = refs + mine
    hosts = _host_us([fn for _, fn in calls], sync, batch=host_batch(work_s))
    figure, bench_mhz = bench
    loops = _loops([fn for _, fn in calls], sync, work_s)
    return [Row(kind, shape, name, host, work / per_call, unit, plan.impl if (name, fn) in mine else "",
                figure if (name, fn) in mine else None, mhz, bench_mhz if (name, fn) in mine else None, probe, top)
            for (name, fn), host, (per_call, mhz, probe, top) in zip(calls, hosts, loops)]


GEMM_KINDS = ("sgemm torch", "sgemm cupy", "hgemm torch bf16", "hgemm torch bf16 out", "hgemm cupy fp16")
SUM_KINDS = ("reduce torch", "reduce cupy")


def run(kinds=GEMM_KINDS + SUM_KINDS, gemm_sizes=DEFAULT_GEMM_SIZES, sum_sizes=DEFAULT_SUM_SIZES,
        with_bench: bool = True, on_row: Callable[[Row], None] | None = None) -> list[Row]:
    rows = []
    for kind in kinds:
        sizes = sum_sizes if kind.startswith("reduce") else gemm_sizes
        for size in sizes:
            if kind.startswith("reduce"):
                new = _sum_rows(kind, int(size), with_bench)
            else:
                M, N, K = (size, size, size) if isinstance(size, int) else size
                new = _gemm_rows(kind, M, N, K, with_bench and M * N * K >= BENCH_FROM_GEMM)
            for row in new:
                rows.append(row)
                if on_row:
                    on_row(row)
    return rows


def live_line(row: Row) -> str:
    """A row as `gemmlab bench --api` prints it while it runs."""
    bench = f"  bench {row.bench_figure:,.1f}" if row.bench_figure else ""
    probe = f"  probe {row.probe_us:.1f} us" if row.probe_us is not None else ""
    return (f"{row.case:20} {row.shape:>15}  {row.call:36} {row.impl:>16}  {row.host_us:8.1f} us/call  "
            f"{row.figure:10,.1f} {row.unit}{bench}  {row.clocks} MHz{probe}")


def by_shape(rows: list[Row]) -> dict[tuple[str, str], list[Row]]:
    """Rows by (case, shape), in run order; a group's first row, the framework's call, is its reference."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.case, row.shape), []).append(row)
    return groups


def to_markdown(rows: list[Row], command: str) -> str:
    """One table per case: every call's host time and throughput, and the ratios the targets use."""
    out = [f"Command: `{command}`", "",
           "host probe us: a fixed pure-Python workload timed just before each loop. It reads about the same "
           "throughout a run on a quiet host; where it doubles, the host CPU was in a slow phase and the "
           "loops of host-bound rows (the reference's too) read slower for it. The host us columns are "
           "measured apart from the loops, in interleaved rounds.", ""]
    groups = by_shape(rows)
    for case in dict.fromkeys(r.case for r in rows):
        unit = next(r.unit for r in rows if r.case == case)
        out += [f"**{case}** (host us per call, back to back; {unit} of a loop of calls; bench = `gemmlab bench` "
                f"figure of the same implementation, same run)", "",
                f"| shape | call | impl | host us | x ref host | {unit} | bench {unit} | loop / bench | "
                f"SM MHz, loop / bench | host probe us |",
                "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for (of_case, shape), group in groups.items():
            if of_case != case:
                continue
            ref = group[0]
            for r in group:
                ratio = f"{r.host_us / ref.host_us:.2f}x" if r is not ref else "-"
                bench = f"{r.bench_figure:,.1f}" if r.bench_figure else "-"
                share = f"{100 * r.figure / r.bench_figure:.0f}%" if r.bench_figure else "-"
                probe = f"{r.probe_us:.1f}" if r.probe_us is not None else "-"
                out.append(f"| {shape} | {r.call} | {r.impl or '-'} | {r.host_us:.1f} | {ratio} | {r.figure:,.1f} | "
                           f"{bench} | {share} | {r.clocks} | {probe} |")
        out.append("")
    return "\n".join(out)
