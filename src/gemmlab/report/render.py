"""`gemmlab report`: report.md and report.html (plots embedded) from the results database.

The HTML is written by hand with the standard library (html.escape) rather than a template
engine: the page is a handful of headings, tables and figures, a template library would be
one more dependency to install and to ship as package data, and escaping every cell
explicitly is easy to check. Plots are embedded as base64 PNG so the page is one
self-contained file; the SVGs sit beside it in plots/.
"""
from __future__ import annotations

import base64
import html
import re
from datetime import datetime
from pathlib import Path

from ..errors import BadArgumentError
from ..outputs import output_file, output_folder
from .data import ReportData, Run, load
from .plots import Plot, gflops_plot, ladder_plot, ladder_shape, roofline_plot, tune_plots
from .op_tables import OTHER_OPS, op_bench_tables, op_headline
from .tables import (SimpleTable, analysis_tables, bench_tables, env_table, profile_errors, profile_table, stall_table,
                     rung_of, runs_table, tune_table)


OP_HEADINGS = {"hgemm": "Tensor-core GEMM (hgemm)", "bgemm": "Batched SGEMM (bgemm)", "reduce": "Sum reduction (reduce)"}


class Doc:
    """A report as a list of blocks, rendered twice (Markdown, HTML)."""

    def __init__(self, title: str):
        self.title = " ".join(title.split()) or "gemmlab report"  # one line: a newline would end the heading
        self.blocks: list[tuple[str, object]] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", (level, text)))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def bullets(self, items: list[str]) -> None:
        if items:
            self.blocks.append(("ul", items))

    def table(self, t: SimpleTable) -> None:
        self.blocks.append(("table", t))

    def plot(self, plot: Plot) -> None:
        self.blocks.append(("plot", plot))

    # -- Markdown --------------------------------------------------------------------
    def markdown(self, base: Path) -> str:
        out = [f"# {self.title}", ""]
        for kind, value in self.blocks:
            if kind == "h":
                level, text = value
                out += [f"{'#' * (level + 1)} {text}", ""]
            elif kind == "p":
                out += [value, ""]
            elif kind == "ul":
                out += [f"- {item}" for item in value] + [""]
            elif kind == "table":
                out += _md_table(value) + [""]
            elif kind == "plot":
                rel = value.png.relative_to(base).as_posix()
                svg = value.svg.relative_to(base).as_posix()
                out += [f"![{value.title}]({rel})", "", f"*{value.caption}* ([SVG]({svg}))", ""]
        return "\n".join(out).rstrip() + "\n"

    # -- HTML ------------------------------------------------------------------------
    def html(self, base: Path) -> str:
        body = [f"<h1>{_inline(self.title)}</h1>"]
        for kind, value in self.blocks:
            if kind == "h":
                level, text = value
                anchor = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
                body.append(f'<h{level + 1} id="{anchor}">{_inline(text)}</h{level + 1}>')
            elif kind == "p":
                body.append(f"<p>{_inline(value)}</p>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in value) + "</ul>")
            elif kind == "table":
                body.append(_html_table(value))
            elif kind == "plot":
                data = base64.b64encode(value.png.read_bytes()).decode()
                svg = html.escape(value.svg.relative_to(base).as_posix())
                body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(value.title)}">'
                            f'<figcaption>{_inline(value.caption)} (<a href="{svg}">SVG</a>)</figcaption></figure>')
        return _PAGE.format(title=html.escape(self.title), body="\n".join(body))


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(t: SimpleTable) -> list[str]:
    lines = [f"**{t.title}**", ""]
    if t.note:
        lines += [t.note, ""]
    align = ["---:" if i in t.right else "---" for i in range(len(t.header))]
    lines.append("| " + " | ".join(_md_cell(h) for h in t.header) + " |")
    lines.append("| " + " | ".join(align) + " |")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    return lines


def _inline(text: str) -> str:
    """Escape, then the little Markdown the text uses: `code`, **bold**, *italic*."""
    s = html.escape(str(text))
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    s = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)
    return s


def _html_table(t: SimpleTable) -> str:
    head = "".join(f'<th class="{"num" if i in t.right else ""}">{_inline(h)}</th>' for i, h in enumerate(t.header))
    rows = "".join("<tr>" + "".join(f'<td class="{"num" if i in t.right else ""}">{_inline(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in t.rows)
    note = f'<p class="note">{_inline(t.note)}</p>' if t.note else ""
    return (f'<div class="table"><table><caption>{_inline(t.title)}</caption><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table>{note}</div>")


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1180px; margin: 2em auto;
       padding: 0 1.5em; color: #1d1d1f; }}
h1 {{ font-size: 1.8em; border-bottom: 2px solid #333; padding-bottom: .2em; }}
h2 {{ margin-top: 2em; border-bottom: 1px solid #ccc; }}
code {{ font: 12.5px/1.4 ui-monospace, "SFMono-Regular", Menlo, monospace; background: #f3f3f3; padding: 0 .25em;
        border-radius: 3px; }}
div.table {{ overflow-x: auto; margin: 1.2em 0; }}
table {{ border-collapse: collapse; font-size: 13px; }}
caption {{ text-align: left; font-weight: 600; padding-bottom: .3em; }}
th, td {{ border: 1px solid #d0d0d0; padding: .25em .6em; vertical-align: top; }}
th {{ background: #f0f0f0; }}
td.num, th.num {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
td:first-child {{ white-space: nowrap; }}
tbody tr:nth-child(even) {{ background: #fafafa; }}
p.note {{ font-size: 12.5px; color: #555; margin: .3em 0 0; }}
figure {{ margin: 1.5em 0; }}
figure img {{ max-width: 100%; height: auto; border: 1px solid #e4e4e4; }}
figcaption {{ font-size: 13px; color: #444; }}
</style>
</head>
<body>
{body}
<script>
// Records how many embedded plots the browser decoded (read by the headless-browser test).
window.addEventListener("load", function () {{
  var ok = 0, imgs = document.images;
  for (var i = 0; i < imgs.length; i++) if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
  document.documentElement.setAttribute("data-images-decoded", ok + "/" + imgs.length);
}});
</script>
</body>
</html>
"""


def _latest_per_arch(data: ReportData) -> list[Run]:
    """The runs holding the newest analysis of each (arch, op, kernel, parameters): a newer run on
    the same arch of another kernel or op leaves the earlier one in the report."""
    latest: dict[tuple, Run] = {}
    for run in data.analysis_runs():
        for a in data.analyses:
            if a["run_id"] == run.id:
                latest[(a["arch"], a.get("op"), a.get("impl"), str(a.get("params")))] = run
    ids = sorted({run.id for run in latest.values()})
    return [data.runs[i] for i in ids]


def headlines(data: ReportData) -> list[str]:
    out = []
    benches = data.bench_runs()
    if benches:
        run = benches[-1]
        rows = [r for r in data.results_of(run.id) if r.get("gflops")]
        shape = ladder_shape(data, run)
        at = {r["impl"]: r for r in rows if f"{r['M']}x{r['N']}x{r['K']}" == shape}
        kernels = [r for i, r in at.items() if r.get("impl_kind") == "kernel" and i != "dispatch"]
        if kernels and shape:
            best = max(kernels, key=lambda r: r["gflops"])
            base = at.get("cublas")
            share = f", {100 * best['gflops'] / base['gflops']:.1f}% of cuBLAS ({base['gflops']:,.0f})" if base else ""
            out.append(f"At {shape} the fastest gemmlab kernel is **{best['impl']}** with "
                       f"{best['gflops']:,.0f} GFLOP/s{share} (run {run.id}).")
            ladder = sorted((i for i in at if rung_of(i) is not None), key=rung_of)
            if len(ladder) >= 2:
                first, last = at[ladder[0]], at[ladder[-1]]
                out.append(f"From rung {rung_of(ladder[0])} ({ladder[0]}) to rung {rung_of(ladder[-1])} "
                           f"({ladder[-1]}): {last['gflops'] / first['gflops']:.0f}x at {shape}.")
    out += [line for line in (op_headline(data, op) for op in OTHER_OPS) if line]
    newest = max(data.runs.values(), key=lambda r: r.id, default=None)  # peak and bandwidth of one GPU
    gpu = benches[-1].gpu if benches else (newest.gpu if newest else None)
    peak, why = data.fp32_peak_gflops(benches[-1].id if benches else None)
    if peak:
        out.append(f"FP32 FMA peak of the GPU{f' ({gpu})' if gpu else ''}: {why}.")
    bw, why = data.dram_gbps(gpu)
    if bw:
        out.append(f"Measured DRAM bandwidth{f' ({gpu})' if gpu else ''}: {why}.")
    return out


def build(data: ReportData, out: Path, size: str | None, title: str, command: str) -> tuple[Doc, list[Plot]]:
    plots_dir = out / "plots"
    doc = Doc(title)
    now = datetime.now().astimezone().isoformat(timespec="seconds")
    doc.p(f"Generated by `{command}` on {now} from `{data.path.name}` ({len(data.runs)} runs). Every number "
          f"below is read from that database; the command that produced each table or plot is written under it.")
    doc.bullets(headlines(data))
    plots: list[Plot] = []

    latest = sorted(data.runs.values(), key=lambda r: r.id)
    gpu_runs = [r for r in latest if isinstance(r.env.get("gpu"), dict)]
    doc.h(1, "Environment")
    if gpu_runs:
        doc.table(env_table(gpu_runs[-1]))
    elif latest:
        doc.table(env_table(latest[-1]))
    doc.table(runs_table(data))

    benches = data.bench_runs()
    doc.h(1, "Benchmark")
    others = {op: data.bench_runs(op) for op in OTHER_OPS}
    if not benches:
        if size:  # the ladder plot it asks for has nothing to draw from: say so, as for a size not measured
            raise BadArgumentError(f"--size {size}: this database has no SGEMM bench run to plot "
                                   "(`gemmlab bench` writes them)")
        doc.p("No SGEMM benchmark rows in this database (`gemmlab bench` writes them).")
    for run in benches:
        warm = any(r.get("flush") is not None and not r["flush"] for r in data.results_of(run.id))  # --no-flush
        timed = "of back-to-back launches with a warm L2 (`--no-flush`)" if warm else "with L2 flushed before each launch"
        doc.p("Median of CUDA-event timings " + timed
              + ", after each point passed verification against fp64; cuBLAS timed by the same timer in the "
              "same process.")
        for t in bench_tables(data, run):
            doc.table(t)
    if benches:
        bench = benches[-1]
        if size and ladder_shape(data, bench, size) is None:  # before any plot is written
            measured = sorted({f"{r['M']}x{r['N']}x{r['K']}" for r in data.results_of(bench.id) if r.get("gflops")})
            raise BadArgumentError(f"--size {size}: the latest SGEMM bench run (run {bench.id}) has no rows there; "
                                   f"it measured {', '.join(measured) or 'nothing'}")
        for plot in gflops_plot(data, bench, plots_dir) + ladder_plot(data, bench, plots_dir, size):
            plots.append(plot)
            doc.plot(plot)
    for op, runs in others.items():  # the other ops, as their own description tables them
        if runs:
            doc.h(2, OP_HEADINGS[op])
        for run in runs:
            for t in op_bench_tables(data, run, op):
                doc.table(t)

    doc.h(1, "Profiling (Nsight Compute)")
    profile_runs = data.profile_runs()
    if not profile_runs:
        doc.p("No profile rows in this database (`gemmlab profile` writes them; it needs ncu and a GPU).")
    for run in profile_runs:
        doc.p("One launch per kernel after its warm-up, picked out by ncu's kernel-name filter and launch skip; "
              "clocks left alone (`--clock-control none`), caches flushed between replay passes. Durations under "
              "the profiler are not the benchmark's timings; read the ratios between kernels.")
        doc.table(profile_table(data, run))
        stalls = stall_table(data, run)
        if stalls:
            doc.table(stalls)
        errs = profile_errors(data, run)
        if errs:
            doc.table(errs)
    for plot in roofline_plot(data, plots_dir, benches[-1] if benches else None):
        plots.append(plot)
        doc.plot(plot)

    doc.h(1, "Analysis (compile report, occupancy, SASS)")
    analysis = _latest_per_arch(data)
    if not analysis:
        doc.p("No analysis rows in this database (`gemmlab analyze` writes them; it needs no GPU).")
    for run in analysis:
        doc.p("Theoretical occupancy from ptxas's registers and shared memory and the architecture's limits "
              "(the hand calculation of seed 001, done by gemmlab); where the same kernel was profiled, ncu's "
              "theoretical occupancy is shown beside it.")
        for t in analysis_tables(data, run):
            doc.table(t)

    doc.h(1, "Tuning")
    tunes = data.tune_runs()
    if not tunes:
        doc.p("No tuning rows in this database (`gemmlab tune` writes them).")
    for run in tunes:
        doc.table(tune_table(data, run))
    for plot in tune_plots(data, plots_dir):
        plots.append(plot)
        doc.plot(plot)

    doc.h(1, "Reproduce")
    doc.bullets([f"run {r.id} ({r.kind}): `{r.command}`" for r in latest] +
                [f"this report: `{command}`"])
    return doc, plots


def write_report(db: Path, out: Path, size: str | None = None, title: str = "gemmlab report",
                 command: str = "gemmlab report") -> list[Path]:
    data = load(db)  # a database that is not ours refused before the folder is made
    out = output_folder(out, "--out")
    # neither page may be the database read, or any other SQLite file, before anything is written
    md, page = (output_file(out / name, "--out", database=db) for name in ("report.md", "report.html"))
    doc, plots = build(data, out, size, title, command)
    md.write_text(doc.markdown(out))
    page.write_text(doc.html(out))
    return [md, page] + [p.png for p in plots] + [p.svg for p in plots]


__all__ = ["write_report", "build", "Doc"]
