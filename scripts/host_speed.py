"""How fast is this host's CPU, and does it stay so? The evidence behind `gemmlab bench --api`'s
"host probe us" column (session 28).

Usage: PYTHONPATH=src python3 scripts/host_speed.py [--seconds 30] [--per-cpu] [--pin CPU]

Samples, every 0.25 s for --seconds, the API bench's own probe (`apibench.host_probe_us`, a
fixed pure-Python workload) and, where torch has a GPU, the host time of torch.empty_like and of
torch.mm at 512^3 bf16 (no sync between calls: host time, as the API bench reads it). Each
sample names the CPU it ran on. At the end: the fastest reading, and how many samples read
more than 1.5x that (the "slow phase"). --per-cpu first pins the process to each allowed CPU in
turn (a few readings each); --pin keeps it on one CPU for the whole series.

What it showed on the lent machines (2026-11-26, `--per-cpu --seconds 25`, twice on an H100, once
on an H200; docs/results/h*-host-speed-session28*.txt): the readings fall in two groups, one
about twice the other. The probe read 1.8-2.2 us or 2.9-4.9 us, with 4-12 of about 100 readings
in between (a reading that spans a switch); torch.empty_like 1.7-2.2 or 2.9-6.5 us. The group
changes every second or so. 41-44 of about 100 probe readings, and 43-50 of empty_like's, were
in the slow group, on an idle VM (load average 0.1-0.7). Pinned to each CPU in turn, 3 to 9 of
the 16 read slow, and a different set each time. An earlier version of this script, pinned for
40 s to a CPU that had just probed fast (H100), saw 96 of 159 readings slow (its output is not
kept). The speed belongs to the virtual CPU's moment, not to the process.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from gemmlab.apibench import host_probe_us  # noqa: E402
from gemmlab.apitargets import SLOW_PROBE as SLOW  # noqa: E402  (the API bench's own slow-phase mark)


def _cpu_reader():
    """A function giving the CPU this thread runs on (glibc's sched_getcpu), or None where glibc
    has none."""
    try:
        libc = ctypes.CDLL(None)
        libc.sched_getcpu.restype = ctypes.c_int
        return libc.sched_getcpu
    except (OSError, AttributeError):
        return lambda: None


def _torch_calls() -> dict:
    """Host-time calls on torch's GPU, or none without torch or a GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return {}
    except ImportError:
        return {}
    a = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
    return {"empty_like": lambda: torch.empty_like(a), "torch.mm 512^3": lambda: torch.mm(a, a),
            "_sync": torch.cuda.synchronize}


def _host_us(fn, n: int = 100) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def sample(calls: dict) -> dict:
    """One reading of the probe and of each torch call (microseconds)."""
    out = {"probe": statistics.median(host_probe_us() for _ in range(3))}
    for name, fn in calls.items():
        if not name.startswith("_"):
            out[name] = _host_us(fn)
    if "_sync" in calls:
        calls["_sync"]()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="Sample this host's CPU speed over time (and per CPU): the "
                                 "evidence behind `gemmlab bench --api`'s host probe column.")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--per-cpu", action="store_true", help="pin to each allowed CPU in turn first")
    ap.add_argument("--pin", type=int, default=None, help="stay on this CPU for the series")
    args = ap.parse_args()
    allowed = sorted(os.sched_getaffinity(0))
    if not args.seconds > 0:
        ap.error(f"--seconds must be above 0, not {args.seconds}")
    if args.pin is not None and args.pin not in allowed:
        ap.error(f"--pin {args.pin}: not one of this process's CPUs {allowed}")
    calls, cpu_now = _torch_calls(), _cpu_reader()
    for _ in range(3):
        sample(calls)  # warm: the first torch calls build what later ones reuse
    print(f"CPUs {allowed}; load average {os.getloadavg()[0]:.2f}")
    if args.per_cpu:
        for cpu in allowed:
            os.sched_setaffinity(0, {cpu})
            readings = [sample(calls) for _ in range(4)]
            print(f"pinned to CPU {cpu:3d}: " + "  ".join(
                f"{k} {statistics.median(r[k] for r in readings):6.1f}" for k in readings[0]), flush=True)
        os.sched_setaffinity(0, set(allowed))
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    series, start = [], time.time()
    while time.time() - start < args.seconds:
        reading = sample(calls)
        series.append(reading)
        print(f"{time.time() - start:6.1f} s  CPU {cpu_now()}  " + "  ".join(
            f"{k} {v:6.1f}" for k, v in reading.items()), flush=True)
        time.sleep(0.25)
    for name in series[0]:
        values = [r[name] for r in series]
        fastest = min(values)
        slow = sum(v > SLOW * fastest for v in values)
        print(f"{name}: fastest {fastest:.1f} us, median {statistics.median(values):.1f}, slowest "
              f"{max(values):.1f}; {slow} of {len(values)} readings above {SLOW}x the fastest")
    return 0


if __name__ == "__main__":
    from gemmlab.errors import run_script

    sys.exit(run_script(main))
