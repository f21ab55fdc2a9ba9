"""The report's tables as plain data (title, header, rows), rendered to Markdown or HTML.

Benchmark tables follow seed 002 and `gemmlab bench`: GFLOP/s (median), share of cuBLAS in
the same run, speedup over the previous rung of the same ladder (main ladder, seed 002's
sequence, seed 004's sequence).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..profile.ncu import METRICS
from .data import ReportData, Run


@dataclass
class SimpleTable:
    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    right: set[int] = field(default_factory=set)  # right-aligned columns
    note: str = ""  # a line under the title: the command behind the numbers

    def add(self, *cells) -> None:
        self.rows.append([str(c) for c in cells])


def shape_of(r: dict) -> str:
    """n=... for a sum, else MxNxK: the key the bench tables and plots group a run's rows by
    (every row of one run has one input type, layout and C type)."""
    if r.get("M") is None and r.get("elements") is not None:  # a reduce row
        return f"n={r['elements']}"
    return f"{r['M']}x{r['N']}x{r['K']}"


def problem_of(r: dict) -> str:
    """A profile row's problem in full: shape_of, with the batch, the input type (other than
    fp32), the layout (other than nn) and C's type (other than fp32) where the row has them."""
    if r.get("M") is None:
        return shape_of(r)
    shape = (f"{r['batch']}x" if r.get("batch") not in (None, 1) else "") + shape_of(r)
    extras = [r[k] for k, default in (("dtype", "fp32"), ("layout", "nn")) if r.get(k) not in (None, default)]
    if r.get("out_dtype") not in (None, "fp32"):
        extras.append(f"C {r['out_dtype']}")
    return " ".join([shape, *extras])


def _ordered(values) -> list:
    seen: dict = {}
    for v in values:
        seen.setdefault(v, None)
    return list(seen)


def family_of(impl: str) -> str | None:
    from .. import registry
    from ..errors import GemmlabError

    try:
        spec = registry.select(impl, op="sgemm")[0]
    except GemmlabError:
        return None
    return registry.family(spec) if spec.kind == "kernel" else None


def rung_of(impl: str) -> int | None:
    from .. import registry
    from ..errors import GemmlabError

    try:
        return getattr(registry.select(impl, op="sgemm")[0], "rung", None)
    except GemmlabError:
        return None


def run_note(run: Run) -> str:
    gpu = run.gpu
    if not gpu and isinstance(run.env.get("gpu"), dict):
        gpu = run.env["gpu"].get("name")
    bits = [f"run {run.id}", run.started[:19].replace("T", " ")]
    if gpu:
        bits.append(str(gpu))
    if run.git_rev:
        bits.append(f"git {run.git_rev[:12]}")
    return f"Command: `{run.command}` ({', '.join(bits)})"


def bench_grid(rows: list[dict]) -> tuple[list[str], list[str], dict]:
    shapes = _ordered(shape_of(r) for r in rows)
    impls = _ordered(r["impl"] for r in rows)
    at = {(r["impl"], shape_of(r)): r for r in rows}
    return shapes, impls, at


def _gflops_cell(r: dict | None) -> str:
    if r is None:
        return "-"
    if r.get("gflops") is None:
        return r.get("status") or "-"
    return f"{r['gflops']:,.0f}" + ("" if r.get("status") == "PASS" else " (unchecked)")


def bench_tables(data: ReportData, run: Run, baseline: str = "cublas") -> list[SimpleTable]:
    rows = data.results_of(run.id)
    shapes, impls, at = bench_grid(rows)
    right = set(range(1, len(shapes) + 1))
    note = run_note(run)
    gflops = SimpleTable("GFLOP/s (median, 2MNK / time)", ["impl", *shapes], right=right, note=note)
    share = SimpleTable(f"Share of {baseline} (same run)", ["impl", *shapes], right=right, note=note)
    speed = SimpleTable("Speedup over the previous rung (of the same ladder: main, seed 002, seed 004)",
                        ["impl", *shapes], right=right, note=note)
    previous: dict[str, str] = {}
    for impl in impls:
        gflops.add(impl, *(_gflops_cell(at.get((impl, s))) for s in shapes))
        cells = []
        for s in shapes:
            mine, base = at.get((impl, s)), at.get((baseline, s))
            ok = mine and base and mine.get("gflops") and base.get("gflops")
            cells.append(f"{100 * mine['gflops'] / base['gflops']:.1f}%" if ok else "-")
        share.add(impl, *cells)
        kind = next((at[(impl, s)].get("impl_kind") for s in shapes if (impl, s) in at), None)
        fam = family_of(impl) if kind == "kernel" else None
        if fam is not None:
            prev = previous.get(fam)
            cells = []
            for s in shapes:
                mine, before = at.get((impl, s)), at.get((prev, s)) if prev else None
                ok = mine and before and mine.get("gflops") and before.get("gflops")
                cells.append(f"{mine['gflops'] / before['gflops']:.2f}x" if ok else "-")
            speed.add(impl, *cells)
            previous[fam] = impl
    tables = [gflops]
    if any((baseline, s) in at for s in shapes):
        tables.append(share)
    tables.append(speed)
    bad = [r for r in rows if r.get("status") in ("FAIL", "ERROR")]
    if bad:
        t = SimpleTable("Points without a time", ["impl", "shape", "status", "reason"], note=note)
        for r in bad:
            t.add(r["impl"], shape_of(r), r["status"], r.get("reason") or "")
        tables.append(t)
    return tables


def _fmt(v, digits: int) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def profile_table(data: ReportData, run: Run) -> SimpleTable:
    rows = [p for p in data.profiles if p["run_id"] == run.id]
    ok = [p for p in rows if p.get("status") != "ERROR"]
    shapes = _ordered(problem_of(p) for p in ok)
    labels = [(p.get("extra") or {}).get("label") or p["impl"] for p in ok]
    t = SimpleTable(f"Nsight Compute metrics at {', '.join(shapes) or '-'}", ["metric", *labels],
                    right=set(range(1, len(labels) + 1)), note=run_note(run))
    for m in METRICS:
        if ok and all(p.get(m.key) is None for p in ok):  # a metric this run did not record (an older gemmlab's)
            continue
        t.add(m.label, *(_fmt(p.get(m.key), m.digits) for p in ok))
    t.add("Arithmetic intensity (2MNK / DRAM bytes)",
          *(_fmt(2 * p["M"] * p["N"] * p["K"] * (p.get("batch") or 1) / p["dram_bytes"], 1)
            if p.get("dram_bytes") and is_main(p) and p.get("M") is not None else "-" for p in ok))
    t.add("Verified before profiling", *("yes" if p.get("verified") == 1 else "no" if p.get("verified") == 0 else "-"
                                         for p in ok))
    return t


def is_main(p: dict) -> bool:
    """The GEMM's own kernel, not a second kernel of the same GEMM (split-K's reduction)."""
    return ((p.get("extra") or {}).get("label") or p["impl"]) == p["impl"]


def stall_table(data: ReportData, run: Run) -> SimpleTable | None:
    """Where the warps stalled (`gemmlab profile --source`): each kernel's samples in its main loop
    and outside it, the leading stall reasons of each, and its hottest instruction."""
    rows = [p for p in data.profiles if p["run_id"] == run.id and "regions" in ((p.get("extra") or {}).get("source") or {})]
    if not rows:
        return None
    t = SimpleTable("Where the warps stall (ncu warp-state sampling, per SASS instruction)",
                    ["kernel", "region", "share of samples", "leading stall reasons", "hottest instruction"],
                    right={2}, note=run_note(run))
    for p in rows:
        s = p["extra"]["source"]
        label = (p.get("extra") or {}).get("label") or p["impl"]
        hot = {}
        for h in s.get("hottest", []):
            hot.setdefault(h["region"], h)
        for region, r in s.get("regions", {}).items():
            reasons = ", ".join(f"{name} {pct:.0f}%" for name, pct in r.get("reasons", [])) or "-"
            h = hot.get(region)
            where = f"{h['offset']:#06x} " if h and h.get("offset") is not None else ""
            hottest = f"{where}{h['sass'][:48]} ({h['samples_pct']:.1f}%)" if h else "-"
            t.add(label, region, f"{r['samples_pct']:.1f}%", reasons, hottest)
    return t


def profile_errors(data: ReportData, run: Run) -> SimpleTable | None:
    bad = [p for p in data.profiles if p["run_id"] == run.id and p.get("status") != "OK"]
    if not bad:
        return None
    t = SimpleTable("Profiled kernels without metrics or with a failed check", ["impl", "status", "reason"],
                    note=run_note(run))
    for p in bad:
        t.add(p["impl"], p["status"], p.get("reason") or "")
    return t


LOOP_COLUMNS = ("FFMA", "LDS", "LDS.128", "LDG", "LDG.128", "LDGSTS", "STS", "BAR", "HMMA", "HGMMA")


def analysis_tables(data: ReportData, run: Run) -> list[SimpleTable]:
    rows = [a for a in data.analyses if a["run_id"] == run.id]
    ncu_theory = {}  # ncu's theoretical occupancy of the same kernel, parameters and architecture
    for p in data.profiles:
        arch = data.gpu_env(p["run_id"]).get("compute_capability")
        if p.get("theoretical_occupancy_pct") is not None and is_main(p):
            ncu_theory[(p["impl"], json_key(p.get("params")), arch)] = p["theoretical_occupancy_pct"]
    note = run_note(run)
    occ = SimpleTable("Compile report and theoretical occupancy",
                      ["kernel", "arch", "regs", "smem static B", "smem dyn B", "spills B", "threads", "blocks/SM",
                       "occupancy", "limited by", "ncu theoretical"], right={2, 3, 4, 5, 6, 7, 8, 10}, note=note)
    for a in rows:
        theory = ncu_theory.get((a["impl"], json_key(a.get("params")), a["arch"].replace("sm_90a", "sm_90")))
        occ.add(a["impl"], a["arch"], a["registers"], a["smem_static"], a["smem_dynamic"],
                (a.get("spill_stores") or 0) + (a.get("spill_loads") or 0), a["threads"], a["blocks_per_sm"],
                f"{a['occupancy_pct']:.1f}%", a["limiter"], f"{theory:.1f}%" if theory is not None else "-")
    tables = [occ]
    with_sass = [a for a in rows if a.get("sass")]
    if with_sass:
        tool = with_sass[0]["sass"].get("tool") or with_sass[0].get("sass_tool") or ""
        mix = SimpleTable(f"SASS instruction mix of the main loop (static counts; {tool})",
                          ["kernel", *LOOP_COLUMNS, "FFMA per shared load", "total"],
                          right=set(range(1, len(LOOP_COLUMNS) + 3)), note=note)
        for a in with_sass:
            s = a["sass"]
            loop = s.get("loop") or s.get("whole") or {}
            shared = sum(loop.get(c, 0) for c in ("LDS", "LDS.64", "LDS.128", "LDSM"))
            ratio = f"{loop.get('FFMA', 0) / shared:.1f}" if shared else "-"
            mix.add(a["impl"], *(loop.get(c, 0) for c in LOOP_COLUMNS), ratio, loop.get("total", 0))
        tables.append(mix)
    reasons = {a.get("sass_reason") for a in rows if a.get("sass_reason")}
    for reason in reasons:
        occ.note += f" SASS: {reason}."
    return tables


def json_key(params) -> str:
    import json

    return json.dumps(params or {}, sort_keys=True)


def params_text(impl: str, params: dict) -> str:
    """NAME=VALUE,... in the kernel's own parameter order (the database keeps them sorted)."""
    from .. import registry
    from ..errors import GemmlabError

    try:
        order = [p.name for p in registry.select(impl, op="sgemm")[0].params]
    except GemmlabError:
        order = []
    keys = [k for k in order if k in params] + sorted(k for k in params if k not in order)
    return ",".join(f"{k}={params[k]}" for k in keys)


def tune_table(data: ReportData, run: Run, top: int = 10) -> SimpleTable:
    rows = [r for r in data.results_of(run.id, None) if r.get("gflops")]
    rows.sort(key=lambda r: -r["gflops"])
    impl = f"{rows[0]['impl']} ({rows[0].get('op') or 'sgemm'} {rows[0].get('dtype') or 'fp32'})" if rows else "-"
    total = len(data.results_of(run.id, None))
    t = SimpleTable(f"Tuning {impl} at {shape_of(rows[0]) if rows else '-'}: best {min(top, len(rows))} "
                    f"of {total} points", ["rank", "GFLOP/s", "median ms", "regs", "parameters"],
                    right={0, 1, 2, 3}, note=run_note(run))
    for n, r in enumerate(rows[:top], 1):
        t.add(n, f"{r['gflops']:,.0f}", f"{r['t_median_ms']:.4f}" if r.get("t_median_ms") else "-",
              r.get("registers") if r.get("registers") is not None else "-",
              params_text(r["impl"], r.get("params") or {}))
    return t


ENV_KEYS = (("GPU", ("gpu", "name")), ("compute capability", ("gpu", "compute_capability")),
            ("SMs", ("gpu", "sm_count")), ("L2 bytes", ("gpu", "l2_bytes")), ("memory bytes", ("gpu", "memory_bytes")),
            ("max SM clock MHz", ("gpu", "max_sm_clock_mhz")), ("max memory clock MHz", ("gpu", "max_mem_clock_mhz")),
            ("driver", ("gpu", "driver_version")), ("CUDA (driver)", ("cuda_driver",)), ("NVRTC", ("nvrtc",)),
            ("ncu", ("ncu", "version")), ("Python", ("python",)), ("OS", ("os",)), ("gemmlab", ("gemmlab",)),
            ("git revision", ("git",)), ("host", ("hostname",)))


def env_table(run: Run) -> SimpleTable:
    t = SimpleTable(f"Environment of {run.label}", ["key", "value"], note=run_note(run))
    for label, path in ENV_KEYS:
        v = run.env
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        if v is not None:
            t.add(label, v)
    packages = run.env.get("packages") or {}
    if packages:
        t.add("packages", ", ".join(f"{k} {v}" for k, v in packages.items() if v))
    return t


def runs_table(data: ReportData) -> SimpleTable:
    t = SimpleTable("Runs in this database", ["run", "kind", "started", "GPU", "git", "rows", "command"],
                    right={0, 5})
    counts: dict[int, int] = {}
    for r in data.results:
        counts[r["run_id"]] = counts.get(r["run_id"], 0) + 1
    for rows in (data.profiles, data.analyses):
        for r in rows:
            counts[r["run_id"]] = counts.get(r["run_id"], 0) + 1
    for run in data.runs.values():
        t.add(run.id, run.kind, run.started[:19].replace("T", " "), run.gpu or "-", (run.git_rev or "-")[:12],
              counts.get(run.id, 0), f"`{run.command}`")
    return t
