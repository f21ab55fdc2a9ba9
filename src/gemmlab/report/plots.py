"""The report's plots (matplotlib, Agg backend), each saved as PNG and SVG.

- gflops_fp32: GFLOP/s against problem size, one line per kernel (seed 002's plot);
- rel_to_cublas_fp32: share of cuBLAS against size (seed 002's second plot);
- ladder_<shape>: the ladder at one size as bars, each labelled with its speedup over the
  previous rung;
- roofline: FP32 FMA peak and measured DRAM bandwidth as ceilings; each profiled kernel at
  its arithmetic intensity from ncu's DRAM bytes, other kernels (hollow) from counted bytes;
- tune_<impl>_<shape>: GFLOP/s over two tuned parameters, the best over the others.
A little over 300 lines: five plots that share their axes, colours and file writing read best
side by side in one module.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..outputs import output_file  # noqa: E402
from .data import ReportData, Run  # noqa: E402
from .tables import bench_grid, family_of, is_main, rung_of, shape_of  # noqa: E402

BASELINE_STYLE = {"cublas": ("black", "--"), "torch": ("0.45", ":"), "triton": ("tab:brown", "-.")}


@dataclass
class Plot:
    name: str  # file stem
    title: str
    caption: str  # what it shows and which command(s) produced its numbers
    png: Path
    svg: Path


def _save(fig, out: Path, name: str, title: str, caption: str) -> Plot:
    png, svg = (output_file(out / f"{name}.{ext}", "--out") for ext in ("png", "svg"))  # never over an SQLite file
    fig.savefig(png, dpi=110, bbox_inches="tight")
    fig.savefig(svg, bbox_inches="tight")
    plt.close(fig)
    return Plot(name, title, caption, png, svg)


def _flops(shape: str) -> int:
    m, n, k = (int(x) for x in shape.split("x"))
    return m * n * k


def _shape_label(shape: str) -> str:
    m, n, k = shape.split("x")
    return f"{m}³" if m == n == k else shape


def _plotted_impls(impls: list[str], at: dict, shapes: list[str]) -> list[str]:
    """The main ladder and the baselines; every implementation when none has a rung."""
    ladder = [i for i in impls if rung_of(i) is not None]
    baselines = [i for i in impls if any(at.get((i, s), {}).get("impl_kind") == "baseline" for s in shapes)]
    ladder.sort(key=lambda i: rung_of(i))
    return ladder + baselines if ladder else impls


def _colors(n: int):
    cmap = plt.get_cmap("tab20" if n > 10 else "tab10")
    return [cmap(i % cmap.N) for i in range(n)]


def gflops_plot(data: ReportData, run: Run, out: Path) -> list[Plot]:
    rows = [r for r in data.results_of(run.id) if r.get("gflops")]
    if not rows:
        return []
    shapes, impls, at = bench_grid(rows)
    shapes.sort(key=_flops)
    impls = _plotted_impls(impls, at, shapes)
    x = list(range(len(shapes)))
    plots = []
    for name, share in (("gflops_fp32", False), ("rel_to_cublas_fp32", True)):
        if share and not any(("cublas", s) in at for s in shapes):
            continue
        fig, ax = plt.subplots(figsize=(9, 5.2))
        kernels = [i for i in impls if i not in BASELINE_STYLE]
        colors = dict(zip(kernels, _colors(len(kernels))))
        for impl in impls:
            if share and impl == "cublas":
                continue
            ys = []
            for s in shapes:
                r, base = at.get((impl, s)), at.get(("cublas", s))
                if r is None or not r.get("gflops"):
                    ys.append(math.nan)
                elif share:
                    ys.append(100 * r["gflops"] / base["gflops"] if base and base.get("gflops") else math.nan)
                else:
                    ys.append(r["gflops"])
            color, style = BASELINE_STYLE.get(impl, (colors.get(impl), "-"))
            rung = rung_of(impl)
            label = f"{rung}. {impl}" if rung is not None else impl
            ax.plot(x, ys, style, marker="o", ms=3.5, lw=1.6, color=color, label=label)
        ax.set_xticks(x, [_shape_label(s) for s in shapes])
        ax.set_xlabel("problem size (M×N×K)")
        if share:
            ax.axhline(100, color="black", lw=0.8)
            ax.set_ylabel("share of cuBLAS (%)")
            title = "Share of cuBLAS SGEMM, same run"
        else:
            ax.set_ylabel("GFLOP/s (median, 2MNK / time)")
            title = "FP32 GEMM throughput"
        gpu = run.gpu or ""
        ax.set_title(f"{title} — {gpu}" if gpu else title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7.5, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        caption = (f"{title} against problem size, one line per kernel of the ladder and per baseline "
                   f"(run {run.id}: `{run.command}`).")
        plots.append(_save(fig, out, name, title, caption))
    return plots


def ladder_shape(data: ReportData, run: Run, size: str | None = None) -> str | None:
    rows = [r for r in data.results_of(run.id) if r.get("gflops")]
    shapes, impls, at = bench_grid(rows)
    if size:
        from ..problem import parse_shape

        m, n, k = parse_shape(size)
        wanted = f"{m}x{n}x{k}"
        return wanted if wanted in shapes else None
    rungs = [i for i in impls if rung_of(i) is not None]
    full = [s for s in shapes if all((i, s) in at for i in rungs)] or shapes
    return max(full, key=_flops) if full else None


def ladder_plot(data: ReportData, run: Run, out: Path, size: str | None = None) -> list[Plot]:
    shape = ladder_shape(data, run, size)
    if shape is None:
        return []
    rows = [r for r in data.results_of(run.id) if r.get("gflops") and shape_of(r) == shape]
    at = {r["impl"]: r for r in rows}
    ladder = sorted((i for i in at if rung_of(i) is not None), key=rung_of)
    if not ladder:
        ladder = [i for i in at if family_of(i) is not None]
    bars = ladder + [b for b in ("cublas",) if b in at]
    if not bars:
        return []
    values = [at[i]["gflops"] for i in bars]
    fig, ax = plt.subplots(figsize=(max(7, 0.62 * len(bars) + 2), 5))
    colors = ["black" if i == "cublas" else c for i, c in zip(bars, _colors(len(bars)))]
    ax.bar(range(len(bars)), values, color=colors)
    top = max(values)
    for n, impl in enumerate(bars):
        if impl == "cublas" or n == 0:
            text = f"{values[n]:,.0f}"
        else:
            text = f"{values[n]:,.0f}\n×{values[n] / values[n - 1]:.2f}"
        ax.text(n, values[n] + 0.01 * top, text, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(bars)), [f"{rung_of(i)}. {i}" if rung_of(i) else i for i in bars], rotation=40,
                  ha="right", fontsize=8)
    ax.set_ylabel("GFLOP/s")
    ax.set_ylim(0, top * 1.15)
    title = f"The ladder at {_shape_label(shape)}"
    ax.set_title(f"{title}: GFLOP/s and ×speedup over the previous rung")
    ax.grid(axis="y", alpha=0.3)
    caption = (f"{title}: each bar is a rung's median GFLOP/s, labelled with its speedup over the rung before it; "
               f"cuBLAS in black (run {run.id}: `{run.command}`).")
    return [_save(fig, out, f"ladder_{shape}", title, caption)]


def roofline_shapes(data: ReportData, bench: Run | None) -> list[str]:
    """One roofline per profiled shape (the benchmark's ladder shape first); the ladder shape
    alone, from counted bytes, when nothing was profiled."""
    shapes = []
    if bench is not None:
        ladder = ladder_shape(data, bench)
        if ladder:
            shapes.append(ladder)
    gemm = [p for p in data.profiles if p.get("op", "sgemm") == "sgemm" and p.get("M") is not None]
    for p in gemm:
        if shape_of(p) not in shapes:
            shapes.append(shape_of(p))
    profiled = {shape_of(p) for p in gemm}
    return [s for s in shapes if s in profiled] or shapes[:1]


def roofline_plot(data: ReportData, out: Path, bench: Run | None = None) -> list[Plot]:
    return [plot for shape in roofline_shapes(data, bench) for plot in _roofline(data, out, bench, shape)]


def _roofline(data: ReportData, out: Path, bench: Run | None, shape: str) -> list[Plot]:
    # verified kernels only (a FAIL has no time that counts), all measured on one GPU: the bench's,
    # else the newest profile's - ceilings and points of two GPUs would not read as one roofline
    profiled = [p for p in data.profiles if p.get("status") == "OK" and is_main(p)
                and p.get("op", "sgemm") == "sgemm" and p.get("dram_bytes") and p.get("duration_us") and p.get("M") is not None and shape_of(p) == shape]
    gpu_of = {i: run.gpu for i, run in data.runs.items()}
    gpu = bench.gpu if bench else (gpu_of.get(profiled[-1]["run_id"]) if profiled else None)
    latest: dict[str, dict] = {}  # the newest profile of each implementation at this shape
    for p in profiled:
        if gpu_of.get(p["run_id"]) == gpu:
            latest[p["impl"]] = p
    run_id = max((p["run_id"] for p in latest.values()), default=bench.id if bench else None)
    peak, peak_why = data.fp32_peak_gflops(run_id)
    bw, bw_why = data.dram_gbps(gpu)
    points = []  # (label, intensity, gflops, measured by ncu?)
    for p in latest.values():
        work = 2 * p["M"] * p["N"] * p["K"]
        points.append((p["impl"], work / p["dram_bytes"], work / (p["duration_us"] * 1e3), True))
    if bench is not None:
        for r in data.results_of(bench.id):
            if shape_of(r) == shape and r.get("gflops") and r["impl"] not in latest and (
                    rung_of(r["impl"]) is not None or r["impl"] == "cublas"):
                counted = 4 * (r["M"] * r["K"] + r["K"] * r["N"] + r["M"] * r["N"] * (2 if r.get("beta") else 1))
                points.append((r["impl"], 2 * r["M"] * r["N"] * r["K"] / counted, r["gflops"], False))
    if not points or peak is None:
        return []
    fig, ax = plt.subplots(figsize=(9, 5.6))
    xs = [p[1] for p in points]
    ridge = peak / bw if bw else None
    span = xs + ([ridge] if ridge else [])
    lo, hi = min(span) / 4, max(span) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    if bw:
        ax.plot(grid, [min(peak, bw * x) for x in grid], color="black", lw=1.8)
        x0 = grid[8]
        ax.annotate(f"DRAM {bw:,.0f} GB/s (measured)", (x0, bw * x0), xytext=(4, 8), textcoords="offset points",
                    fontsize=8, rotation=0)
    ax.axhline(peak, color="black", lw=0.8, ls="--")
    ax.text(grid[2], peak * 1.05, f"FP32 FMA peak {peak / 1e3:.1f} TFLOP/s", ha="left", fontsize=8)
    kernels = sorted({p[0] for p in points}, key=lambda i: (rung_of(i) is None, rung_of(i) or 0, i))
    colors = dict(zip(kernels, _colors(len(kernels))))
    colors["cublas"] = "black"
    labelled = set()
    for label, x, y, measured in points:
        rung = rung_of(label)
        ax.scatter([x], [y], s=46, color=colors[label] if measured else "none", edgecolors=colors[label],
                   linewidths=1.4, zorder=3, label=None if label in labelled else
                   (f"{rung}. {label}" if rung is not None else label))
        if rung is not None:
            ax.annotate(str(rung), (x, y), xytext=(5, -3), textcoords="offset points", fontsize=7, color="0.25")
        labelled.add(label)
    if any(not p[3] for p in points) and any(p[3] for p in points):
        ax.scatter([], [], s=46, color="none", edgecolors="0.3", label="hollow: counted bytes")
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(p[2] for p in points) / 3, peak * 2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("GFLOP/s")
    title = f"Roofline at {_shape_label(shape)}" + (f" on {gpu}" if gpu else "")
    ax.set_title(f"{title}: FP32 FMA peak and DRAM bandwidth")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=1, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    sources = []
    runs = sorted({p["run_id"] for p in latest.values()})
    if runs:
        cmds = "; ".join(f"run {i}: `{data.runs[i].command}`" for i in runs if i in data.runs)
        sources.append(f"filled: 2MNK over ncu's DRAM bytes and duration ({cmds}); ncu counts the DRAM traffic "
                       f"during the kernel, so C's last writes, still in L2 when it ends, can be missing")
    if bench is not None and any(not p[3] for p in points):
        sources.append(f"hollow: counted bytes (A and B read once, C written once) and the benchmark's median "
                       f"(run {bench.id}: `{bench.command}`)")
    caption = f"{title}. Peak: {peak_why}. Bandwidth: {bw_why}. " + "; ".join(sources) + "."
    return [_save(fig, out, f"roofline_{shape}", title, caption)]


def tune_plots(data: ReportData, out: Path) -> list[Plot]:
    plots = []
    for run in data.tune_runs():
        rows = [r for r in data.results_of(run.id, None) if r.get("params")]
        groups: dict = {}
        for r in rows:
            groups.setdefault((r["impl"], shape_of(r)), []).append(r)
        for (impl, shape), group in groups.items():
            plot = _heatmap(run, impl, shape, group, out)
            if plot:
                plots.append(plot)
    return plots


def _axes(group: list[dict]) -> tuple[str, str] | None:
    varying = []
    for key in group[0]["params"]:
        values = {r["params"].get(key) for r in group}
        if len(values) > 1:
            varying.append(key)
    for pair in (("BM", "BN"), ("BK", "STAGES"), ("TM", "TN"), ("WM", "WN")):
        if all(p in varying for p in pair):
            return pair
    return (varying[0], varying[1]) if len(varying) >= 2 else None


def _heatmap(run: Run, impl: str, shape: str, group: list[dict], out: Path) -> Plot | None:
    axes = _axes(group)
    if axes is None:
        return None
    ka, kb = axes
    xs = sorted({r["params"][kb] for r in group})
    ys = sorted({r["params"][ka] for r in group})
    best = [[math.nan] * len(xs) for _ in ys]
    tried = [[0] * len(xs) for _ in ys]
    for r in group:
        i, j = ys.index(r["params"][ka]), xs.index(r["params"][kb])
        tried[i][j] += 1
        if r.get("gflops") and r.get("status") == "PASS" and not (best[i][j] >= r["gflops"]):
            best[i][j] = r["gflops"]
    fig, ax = plt.subplots(figsize=(1.2 * len(xs) + 3, 0.9 * len(ys) + 2))
    im = ax.imshow(best, cmap="viridis", aspect="auto", origin="lower")
    finite = [v for row in best for v in row if not math.isnan(v)]
    top = max(finite) if finite else 0
    low = min(finite) if finite else 0
    for i in range(len(ys)):
        for j in range(len(xs)):
            v = best[i][j]
            text = f"{v / 1e3:.1f}" if not math.isnan(v) else ("fail" if tried[i][j] else "")
            bright = not math.isnan(v) and top > low and (v - low) / (top - low) > 0.5
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="black" if bright else "white")
    ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_yticks(range(len(ys)), [str(y) for y in ys])
    ax.set_xlabel(kb)
    ax.set_ylabel(ka)
    fig.colorbar(im, ax=ax, label="best GFLOP/s")
    title = f"Tuning {impl} at {_shape_label(shape)}"
    ax.set_title(f"{title}: best TFLOP/s over the other parameters", fontsize=10)
    caption = (f"{title}: each cell is the best verified GFLOP/s (printed in TFLOP/s) among the {len(group)} "
               f"points tried with that {ka} and {kb} ('fail': tried, none passed; blank: no point of the space) (run {run.id}: `{run.command}`).")
    return _save(fig, out, f"tune_{impl}_{shape}_run{run.id}", title, caption)


def all_plots(data: ReportData, out: Path, size: str | None = None) -> list[Plot]:
    plots: list[Plot] = []
    benches = data.bench_runs()
    bench = benches[-1] if benches else None
    if bench is not None:
        plots += gflops_plot(data, bench, out)
        plots += ladder_plot(data, bench, out, size)
    plots += roofline_plot(data, out, bench)
    plots += tune_plots(data, out)
    return plots
