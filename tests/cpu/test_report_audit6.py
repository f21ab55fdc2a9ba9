"""Tests that could not fail, sixth audit: the report (report/tables.py, render.py, plots.py).

Mutants of these modules (a flipped comparison, a dropped branch, another format or order)
that the suite let through, each killed here by the exact cell, line, order or plot data a
reader of the report would see. Everything is built in memory (ReportData, Run) or on a tiny
database; the plots are caught before they are drawn to a file (no GPU, no browser).
"""
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from gemmlab.profile.ncu import METRICS
from gemmlab.report import plots, render
from gemmlab.report.data import ReportData, Run
from gemmlab.report.render import Doc, headlines
from gemmlab.report.tables import (SimpleTable, analysis_tables, bench_tables, env_table, problem_of, profile_errors,
                                   profile_table, run_note, runs_table, shape_of, stall_table, tune_table)

from .test_report_review26 import H100, _env

STARTED = "2026-11-27T10:20:30.123456+00:00"
A = "64x64x64"
B = "128x128x128"
C = "256x256x256"


def _run(run_id=1, kind="bench", command="gemmlab bench", env=None, git=None, gpu="GPU A"):
    return Run(run_id, STARTED, kind, command, env if env is not None else {}, git, gpu)


def _row(impl, n, gflops=None, status="PASS", kind="kernel", run_id=1, op="sgemm", **more):
    return dict(run_id=run_id, op=op, impl=impl, impl_kind=kind, M=n, N=n, K=n, status=status, gflops=gflops, **more)


def _data(runs, results=(), profiles=(), analyses=(), bandwidth=()):
    return ReportData(Path("r.db"), {r.id: r for r in runs}, list(results), list(profiles), list(analyses),
                      list(bandwidth))


# -- tables.py: the note under each table, shapes and problems ---------------------------------------------


def test_run_note_names_command_time_gpu_and_twelve_digits_of_the_revision():
    run = _run(7, command="gemmlab bench --sizes 64", env={"gpu": {"name": "Env GPU"}}, git="0123456789abcdef",
               gpu=None)
    assert run_note(run) == ("Command: `gemmlab bench --sizes 64` "
                             "(run 7, 2026-11-27 10:20:30, Env GPU, git 0123456789ab)")
    run.gpu = "Row GPU"  # the runs table's GPU column comes before the environment's name
    assert run_note(run) == ("Command: `gemmlab bench --sizes 64` "
                             "(run 7, 2026-11-27 10:20:30, Row GPU, git 0123456789ab)")


def test_shape_and_problem_name_a_sum_a_batch_and_only_the_non_default_types():
    assert shape_of({"M": None, "elements": 1 << 20}) == "n=1048576"
    plain = dict(M=64, N=32, K=16, batch=1, dtype="fp32", layout="nn", out_dtype="fp32")
    assert problem_of(plain) == "64x32x16", "a batch of 1 and the default types are not named"
    assert problem_of({**plain, "batch": 4, "dtype": "bf16", "layout": "nt", "out_dtype": "bf16"}) == \
        "4x64x32x16 bf16 nt C bf16"


# -- tables.py: the benchmark tables --------------------------------------------------------------------------


def _bench_rows():
    """Two ladders (main: naive, coalescing, vectorize; seed 002: tiled, tiled_rb1x4) and cuBLAS, at three
    shapes listed smallest first, with a point that failed, one that erred, one unchecked and gaps."""
    return [
        _row("naive", 64, 100.0), _row("naive", 128, 400.0), _row("naive", 256, 800.0),
        _row("coalescing", 64, 150.0), _row("coalescing", 128, 1200.0, status="UNCHECKED"),
        _row("tiled", 64, 50.0), _row("tiled", 128, status="FAIL"),
        _row("tiled_rb1x4", 64, 75.0), _row("tiled_rb1x4", 128, status="ERROR", reason="launch failed"),
        _row("cublas", 64, 200.0, kind="baseline"), _row("cublas", 128, 1600.0, kind="baseline"),
        _row("cublas", 256, status="ERROR", kind="baseline", reason="cuBLAS error 13"),
        _row("vectorize", 64, 300.0),
    ]


def test_bench_tables_cell_by_cell():
    run = _run()
    tables = bench_tables(_data([run], _bench_rows()), run)
    assert [t.title for t in tables] == [
        "GFLOP/s (median, 2MNK / time)", "Share of cublas (same run)",
        "Speedup over the previous rung (of the same ladder: main, seed 002, seed 004)", "Points without a time"]
    gflops, share, speed, bad = tables
    for t in (gflops, share, speed):  # shapes in the order the run measured them, numbers right-aligned
        assert t.header == ["impl", A, B, C] and t.right == {1, 2, 3} and t.note == run_note(run)
    assert gflops.rows == [["naive", "100", "400", "800"],
                           ["coalescing", "150", "1,200 (unchecked)", "-"],  # thousands grouped; not verified
                           ["tiled", "50", "FAIL", "-"],  # no time: its status
                           ["tiled_rb1x4", "75", "ERROR", "-"],
                           ["cublas", "200", "1,600", "ERROR"],
                           ["vectorize", "300", "-", "-"]]
    assert share.rows == [["naive", "50.0%", "25.0%", "-"],  # cuBLAS without a time at 256: no share
                          ["coalescing", "75.0%", "75.0%", "-"],
                          ["tiled", "25.0%", "-", "-"],
                          ["tiled_rb1x4", "37.5%", "-", "-"],
                          ["cublas", "100.0%", "100.0%", "-"],
                          ["vectorize", "150.0%", "-", "-"]]
    # each rung over the previous one of its own ladder; the first of a ladder and cuBLAS have none
    assert speed.rows == [["naive", "-", "-", "-"],
                          ["coalescing", "1.50x", "3.00x", "-"],
                          ["tiled", "-", "-", "-"],
                          ["tiled_rb1x4", "1.50x", "-", "-"],
                          ["vectorize", "2.00x", "-", "-"]]
    assert bad.header == ["impl", "shape", "status", "reason"]
    assert bad.rows == [["tiled", B, "FAIL", ""], ["tiled_rb1x4", B, "ERROR", "launch failed"],
                        ["cublas", C, "ERROR", "cuBLAS error 13"]]


def test_bench_tables_without_the_baseline_have_no_share_table():
    run = _run()
    rows = [r for r in _bench_rows() if r["impl"] != "cublas" and r["status"] == "PASS"]
    assert [t.title for t in bench_tables(_data([run], rows), run)] == [
        "GFLOP/s (median, 2MNK / time)",
        "Speedup over the previous rung (of the same ladder: main, seed 002, seed 004)"]


# -- tables.py: profiles ------------------------------------------------------------------------------------


def _label(key):
    return next(m.label for m in METRICS if m.key == key)


def test_profile_table_columns_rows_and_formats():
    """A kernel and its split-K reduction at one problem, a batched cuBLAS that failed its check at another,
    and an ERROR (no column). Rows no kernel recorded are left out; one kernel's value gives the row."""
    n = 4096
    work = 2 * n ** 3
    profiles = [
        dict(run_id=1, impl="hopper_simt", status="OK", M=n, N=n, K=n, dram_bytes=work / 1234.5, dram_gbps=2500.4,
             verified=1),
        dict(run_id=1, impl="hopper_simt", status="OK", M=n, N=n, K=n, dram_bytes=1e6, verified=0,
             extra={"label": "hopper_simt reduce"}),
        dict(run_id=1, impl="cublas", status="FAIL", M=64, N=64, K=64, batch=8, dram_bytes=2 * 64 ** 3 * 8 / 20),
        dict(run_id=1, impl="naive", status="ERROR", M=32, N=32, K=32, reason="ncu failed"),
    ]
    run = _run(kind="profile")
    t = profile_table(_data([run], profiles=profiles), run)
    assert t.title == f"Nsight Compute metrics at {n}x{n}x{n}, 8x64x64x64"
    assert t.header == ["metric", "hopper_simt", "hopper_simt reduce", "cublas"] and t.right == {1, 2, 3}
    assert t.rows == [
        [_label("dram_gbps"), "2,500", "-", "-"],
        # the reduction's bytes are not the GEMM's; the batch counts in the work
        ["Arithmetic intensity (2MNK / DRAM bytes)", "1,234.5", "-", "20.0"],
        ["Verified before profiling", "yes", "no", "-"],
    ]


def test_profile_errors_list_every_status_but_ok():
    profiles = [dict(run_id=1, impl="a", status="OK"), dict(run_id=1, impl="b", status="FAIL"),
                dict(run_id=1, impl="c", status="ERROR", reason="ncu: no kernel matched"),
                dict(run_id=2, impl="d", status="ERROR")]
    run = _run(kind="profile")
    t = profile_errors(_data([run, _run(2)], profiles=profiles), run)
    assert t.rows == [["b", "FAIL", ""], ["c", "ERROR", "ncu: no kernel matched"]]
    assert profile_errors(_data([run], profiles=profiles[:1]), run) is None


def test_stall_table_rows_and_none_without_samples():
    source = {"regions": {
        "main loop": {"samples_pct": 81.46, "reasons": [["wait", 40.4], ["barrier", 9.6]]},
        "outside the main loop": {"samples_pct": 18.54, "reasons": []}},
        "hottest": [{"offset": 0x80, "region": "main loop", "samples_pct": 12.34,
                     "sass": "FFMA R1, R2, R3, R4 ; " + "." * 26 + "past 48 characters"},
                    {"offset": 0x90, "region": "main loop", "sass": "LDS R5, [R6]", "samples_pct": 3.0}]}
    profiles = [dict(run_id=1, impl="naive", status="OK", extra={"label": "naive", "source": source}),
                dict(run_id=1, impl="cublas", status="OK", extra={"label": "cublas"})]
    run = _run(kind="profile")
    t = stall_table(_data([run], profiles=profiles), run)
    assert t.right == {2}
    assert t.rows == [  # the region's first (hottest) instruction, its offset in 4 hex digits, SASS cut at 48
        ["naive", "main loop", "81.5%", "wait 40%, barrier 10%",
         "0x0080 FFMA R1, R2, R3, R4 ; " + "." * 26 + " (12.3%)"],
        ["naive", "outside the main loop", "18.5%", "-", "-"]]
    assert stall_table(_data([run], profiles=profiles[1:]), run) is None


# -- tables.py: analyses ------------------------------------------------------------------------------------


def test_analysis_tables_cells_ncu_occupancy_and_the_sass_mix():
    """ncu's theoretical occupancy is found across sm_90a/sm_90 and whatever order the parameters were
    stored in, from the kernel itself (not its split-K reduction)."""
    prof = _run(1, kind="profile", env=H100)
    ana = _run(2, kind="analyze", env={})
    profiles = [dict(run_id=1, impl="hopper_simt", params={"BM": 128, "BN": 64}, theoretical_occupancy_pct=12.5,
                     status="OK"),
                dict(run_id=1, impl="hopper_simt", params={"BM": 128, "BN": 64}, theoretical_occupancy_pct=50.0,
                     status="OK", extra={"label": "hopper_simt reduce"})]
    base = dict(run_id=2, smem_static=1024, smem_dynamic=49152, threads=256, blocks_per_sm=1, limiter="registers")
    analyses = [
        dict(base, impl="hopper_simt", arch="sm_90a", params={"BN": 64, "BM": 128}, registers=168, spill_stores=8,
             spill_loads=4, occupancy_pct=12.5, sass_reason="cuobjdump missing",
             sass={"tool": "nvdisasm 12.8", "loop": {"FFMA": 512, "LDS": 16, "LDSM": 16, "total": 700},
                   "whole": {"FFMA": 1, "total": 2}}),
        dict(base, impl="naive", arch="sm_80", params={}, registers=40, occupancy_pct=66.67,
             sass={"whole": {"FFMA": 10, "LDS.128": 4, "total": 30}}),
    ]
    occ, mix = analysis_tables(_data([prof, ana], profiles=profiles, analyses=analyses), ana)
    assert occ.right == {2, 3, 4, 5, 6, 7, 8, 10}
    assert occ.rows == [
        ["hopper_simt", "sm_90a", "168", "1024", "49152", "12", "256", "1", "12.5%", "registers", "12.5%"],
        ["naive", "sm_80", "40", "1024", "49152", "0", "256", "1", "66.7%", "registers", "-"]]
    assert occ.note == run_note(ana) + " SASS: cuobjdump missing."
    assert mix.title == "SASS instruction mix of the main loop (static counts; nvdisasm 12.8)"
    # the loop's counts where there is a loop, else the whole kernel's; LDSM is a shared load
    assert mix.rows == [["hopper_simt", "512", "16", "0", "0", "0", "0", "0", "0", "0", "0", "16.0", "700"],
                        ["naive", "10", "0", "4", "0", "0", "0", "0", "0", "0", "0", "2.5", "30"]]


# -- tables.py: tuning, environment, runs -------------------------------------------------------------------


def test_tune_table_ranks_the_fastest_first_with_parameters_in_the_kernels_order():
    run = _run(kind="tune", command="gemmlab tune --impl blocktiling_1d")
    rows = [_row("blocktiling_1d", 512, g, op="sgemm", dtype="fp32", t_median_ms=0.123456 * i, registers=32 + i,
                 params={"TM": 4, "BK": 8, "BN": 64, "BM": 16 * i, "ZZ": 1})
            for i, g in enumerate([900.0, 1500.0, 1200.0, 700.0, 2100.0, 1000.0, 1100.0, 1300.0, 1400.0, 1600.0,
                                   1700.0, 800.0], 1)]
    rows.append(_row("blocktiling_1d", 512, None, status="FAIL", params={"BM": 1}))
    t = tune_table(_data([run], rows), run)
    assert t.title == "Tuning blocktiling_1d (sgemm fp32) at 512x512x512: best 10 of 13 points"
    assert t.right == {0, 1, 2, 3}
    assert [r[:2] for r in t.rows] == [["1", "2,100"], ["2", "1,700"], ["3", "1,600"], ["4", "1,500"],
                                       ["5", "1,400"], ["6", "1,300"], ["7", "1,200"], ["8", "1,100"],
                                       ["9", "1,000"], ["10", "900"]]
    assert t.rows[0] == ["1", "2,100", "0.6173", "37", "BM=80,BN=64,BK=8,TM=4,ZZ=1"]
    few = tune_table(_data([run], rows[:2] + rows[-1:]), run, top=10)
    assert few.title == "Tuning blocktiling_1d (sgemm fp32) at 512x512x512: best 2 of 3 points"
    hgemm = [_row("persistent", 256, 5.0, op="hgemm", dtype="bf16", params={"BN": 128})]
    assert tune_table(_data([run], hgemm), run).title.startswith("Tuning persistent (hgemm bf16) at 256x256x256:")


def test_env_table_keys_and_installed_packages_only():
    env = {"gpu": {"name": "GPU A", "sm_count": 132, "compute_capability": "sm_90"}, "python": "3.12.1",
           "packages": {"torch": "2.5.1", "triton": None, "numpy": "2.1.0"}}
    t = env_table(_run(3, env=env))
    assert t.title == "Environment of run 3 (bench, 2026-11-27 10:20:30)"
    assert t.rows == [["GPU", "GPU A"], ["compute capability", "sm_90"], ["SMs", "132"], ["Python", "3.12.1"],
                      ["packages", "torch 2.5.1, numpy 2.1.0"]]


def test_runs_table_counts_every_kind_of_row():
    runs = [_run(1, command="gemmlab bench --sizes 64", git="0123456789abcdef"), _run(2, kind="profile", gpu=None)]
    data = _data(runs, [_row("naive", 64, 1.0)], profiles=[dict(run_id=2), dict(run_id=2)],
                 analyses=[dict(run_id=2)])
    t = runs_table(data)
    assert t.right == {0, 5}
    assert t.rows == [["1", "bench", "2026-11-27 10:20:30", "GPU A", "0123456789ab", "1", "`gemmlab bench --sizes 64`"],
                      ["2", "profile", "2026-11-27 10:20:30", "-", "-", "3", "`gemmlab bench`"]]


# -- render.py: the page -----------------------------------------------------------------------------------


def _doc_of_every_block(tmp_path):
    folder = tmp_path / "plots"
    folder.mkdir()
    png, svg = folder / "p.png", folder / "p.svg"
    png.write_bytes(b"\x89PNG fake")
    svg.write_text("<svg/>")
    doc = Doc("Mine & yours")
    doc.p("Read `a.db` **now**")
    doc.h(1, "Bench & Results!")
    doc.bullets([])  # nothing to list: no list
    doc.bullets(["one", "two"])
    t = SimpleTable("T | 1", ["impl", "64"], right={1}, note="Command: `x`")
    t.add("a|b<c", "1\n2")
    doc.table(t)
    doc.plot(plots.Plot("p", "A <b> plot", "It shows **x** by `y`", png, svg))
    return doc


def test_markdown_of_every_kind_of_block(tmp_path):
    md = _doc_of_every_block(tmp_path).markdown(tmp_path)
    assert md == "\n".join([
        "# Mine & yours", "",
        "Read `a.db` **now**", "",
        "## Bench & Results!", "",
        "- one", "- two", "",
        "**T | 1**", "",
        "Command: `x`", "",
        "| impl | 64 |", "| --- | ---: |",
        "| a\\|b<c | 1 2 |", "",  # a bar in a cell escaped, a line break kept in its row
        "![A <b> plot](plots/p.png)", "",
        "*It shows **x** by `y`* ([SVG](plots/p.svg))"]) + "\n"


def test_html_of_every_kind_of_block(tmp_path):
    import base64

    page = _doc_of_every_block(tmp_path).html(tmp_path)
    lines = page.splitlines()
    png = base64.b64encode(b"\x89PNG fake").decode()
    for line in ("<title>Mine &amp; yours</title>", "<h1>Mine &amp; yours</h1>",
                 "<p>Read <code>a.db</code> <strong>now</strong></p>",
                 '<h2 id="bench-results">Bench &amp; Results!</h2>',
                 "<ul><li>one</li><li>two</li></ul>",
                 '<div class="table"><table><caption>T | 1</caption><thead><tr><th class="">impl</th>'
                 '<th class="num">64</th></tr></thead><tbody><tr><td class="">a|b&lt;c</td><td class="num">1',
                 '2</td></tr></tbody></table><p class="note">Command: <code>x</code></p></div>',
                 f'<figure><img src="data:image/png;base64,{png}" alt="A &lt;b&gt; plot"><figcaption>It shows '
                 '<strong>x</strong> by <code>y</code> (<a href="plots/p.svg">SVG</a>)</figcaption></figure>'):
        assert line in lines, line
    assert "<ul></ul>" not in page


def _headline_data(**bench2):
    """Two bench runs on GPU A (the newer one read), then a profile run on GPU B; a bandwidth of each GPU."""
    gpu_a = _env("GPU A", "sm_90", 132, 1980)
    runs = [_run(1, env=gpu_a), _run(2, env=gpu_a, command="gemmlab bench --sizes 4096"),
            _run(3, kind="profile", env=_env("GPU B", "sm_80", 108, 1410), gpu="GPU B")]
    n = 4096
    rows = [_row("naive", n, 999.0, run_id=1)]
    rows += [_row(impl, n, g, kind=kind, run_id=2) for impl, g, kind in bench2.get("rows", (
        ("naive", 100.0, "kernel"), ("coalescing", 355.0, "kernel"), ("cublas", 1000.0, "baseline")))]
    bandwidth = [dict(run_id=2, method="copy", gbps=2000.0), dict(run_id=3, method="copy", gbps=3000.0)]
    return _data(runs, rows, bandwidth=bandwidth)


def test_headlines_of_the_latest_bench_run_and_its_gpu():
    assert headlines(_headline_data()) == [
        "At 4096x4096x4096 the fastest gemmlab kernel is **coalescing** with 355 GFLOP/s, 35.5% of cuBLAS (1,000) "
        "(run 2).",
        "From rung 1 (naive) to rung 2 (coalescing): 4x at 4096x4096x4096.",
        "FP32 FMA peak of the GPU (GPU A): 132 SMs x 128 lanes x 2 x 1.98 GHz = 66.9 TFLOP/s.",
        "Measured DRAM bandwidth (GPU A): copy, 2,000 GB/s (run 2)."]
    one_rung = headlines(_headline_data(rows=(("naive", 100.0, "kernel"), ("cublas", 1000.0, "baseline"))))
    assert not any(line.startswith("From rung") for line in one_rung), "one rung is no ladder"


def _build_data():
    """Two bench runs (the older without the flush column), a profile run with an ERROR only, three analysis
    runs (the first superseded by the third: same kernel and arch) and nothing of the other ops."""
    runs = [_run(1, env={"gpu": {"name": "Old GPU"}}, command="gemmlab bench --sizes 64"),
            _run(2, env={"gpu": {"name": "New GPU"}}, command="gemmlab bench --no-flush --sizes 64"),
            _run(3, kind="analyze", command="gemmlab analyze --impl naive"),
            _run(4, kind="profile", command="gemmlab profile --impl naive"),
            _run(5, kind="analyze", command="gemmlab analyze --impl vectorize"),
            _run(6, kind="analyze", command="gemmlab analyze --impl naive --arch sm_90")]
    results = [_row("naive", 64, 10.0, run_id=1, flush=None),
               _row("naive", 64, 12.0, run_id=2, flush=0), _row("naive", 256, status="FAIL", run_id=2, flush=0)]
    base = dict(arch="sm_90", op="sgemm", params={}, smem_static=0, smem_dynamic=0, threads=256, blocks_per_sm=8,
                occupancy_pct=100.0, limiter="warps")
    analyses = [dict(base, run_id=3, impl="naive", registers=30), dict(base, run_id=5, impl="vectorize", registers=60),
                dict(base, run_id=6, impl="naive", registers=31)]
    profiles = [dict(run_id=4, impl="naive", status="ERROR", reason="ncu not found")]
    return _data(runs, results, profiles=profiles, analyses=analyses)


@pytest.fixture
def no_plots(monkeypatch):
    """build() with its plots replaced by a record of what each was asked for."""
    asked = {}
    for name in ("gflops_plot", "ladder_plot", "roofline_plot", "tune_plots"):
        monkeypatch.setattr(render, name, lambda *args, _name=name: asked.setdefault(_name, args) and [])
    return asked


def test_build_reads_the_newest_runs_and_lists_every_command(tmp_path, no_plots):
    data = _build_data()
    doc, _ = render.build(data, tmp_path, None, "t", "gemmlab report --title t")
    md = doc.markdown(tmp_path)
    lines = md.splitlines()
    assert lines[2].startswith("Generated by `gemmlab report --title t` on ") and "from `r.db` (6 runs)." in lines[2]
    assert "**Environment of run 2 (bench, 2026-11-27 10:20:30)**" in lines, "the newest run with a GPU"
    # the older run's rows have no flush column: flushed, as gemmlab always did; the newer ran --no-flush
    timed = [line for line in lines if line.startswith("Median of CUDA-event timings")]
    assert [line.split("timings ")[1][:20] for line in timed] == ["with L2 flushed befo", "of back-to-back laun"]
    assert no_plots["roofline_plot"][2] is data.runs[2], "the roofline's hollow points are the latest bench's"
    assert "**Profiled kernels without metrics or with a failed check**" in lines and "| naive | ERROR | ncu not found |" in lines
    # the newest analysis of each kernel: vectorize's (run 5) and naive's again (run 6), not run 3's
    occupancy = [line for line in lines if line.startswith(("| naive | sm_90 |", "| vectorize | sm_90 |"))]
    assert [line.split(" | ")[:3] for line in occupancy] == [["| vectorize", "sm_90", "60"], ["| naive", "sm_90", "31"]]
    assert not any(op in md for op in ("Tensor-core GEMM", "Batched SGEMM", "Sum reduction")), "no empty op headings"
    assert lines[lines.index("## Reproduce") + 2:] == [
        "- run 1 (bench): `gemmlab bench --sizes 64`", "- run 2 (bench): `gemmlab bench --no-flush --sizes 64`",
        "- run 3 (analyze): `gemmlab analyze --impl naive`", "- run 4 (profile): `gemmlab profile --impl naive`",
        "- run 5 (analyze): `gemmlab analyze --impl vectorize`",
        "- run 6 (analyze): `gemmlab analyze --impl naive --arch sm_90`", "- this report: `gemmlab report --title t`"]


def test_build_without_a_gpu_run_shows_the_newest_runs_environment(tmp_path, no_plots):
    doc, _ = render.build(_data([_run(1), _run(2, kind="analyze")]), tmp_path, None, "t", "c")
    assert "**Environment of run 2 (analyze, 2026-11-27 10:20:30)**" in doc.markdown(tmp_path).splitlines()


def test_a_size_not_measured_names_only_the_shapes_with_a_time(tmp_path, no_plots):
    from gemmlab.errors import BadArgumentError

    with pytest.raises(BadArgumentError) as err:
        render.build(_build_data(), tmp_path, "128", "t", "c")
    assert str(err.value) == ("--size 128: the latest SGEMM bench run (run 2) has no rows there; "
                              "it measured 64x64x64")


def test_write_report_returns_both_pages_and_every_plots_png_and_svg(tmp_path, monkeypatch):
    from gemmlab.store import ResultStore

    db = tmp_path / "r.db"
    ResultStore(db).close()
    out = tmp_path / "rep"
    png, svg = out / "plots" / "p.png", out / "plots" / "p.svg"
    plot = plots.Plot("p", "P", "caption", png, svg)

    def build(data, folder, size, title, command):
        png.parent.mkdir(parents=True)
        png.write_bytes(b"png")
        svg.write_text("<svg/>")
        doc = Doc(title)
        doc.plot(plot)
        return doc, [plot]

    monkeypatch.setattr(render, "build", build)
    assert render.write_report(db, out) == [out / "report.md", out / "report.html", png, svg]


# -- plots.py: what each plot draws (caught before it is saved) -------------------------------------------


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """Each plot's figure, title and caption by file stem, instead of the PNG and SVG files."""
    saved = {}

    def save(fig, out, name, title, caption):
        saved[name] = (fig.axes[0], title, caption)
        return plots.Plot(name, title, caption, out / f"{name}.png", out / f"{name}.svg")

    monkeypatch.setattr(plots, "_save", save)
    yield saved
    plt.close("all")


def _lines(ax):
    """label -> y values (None for a gap) of the lines in the legend."""
    return {line.get_label(): [None if y != y else float(y) for y in line.get_ydata()]
            for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_gflops_plots_one_line_per_rung_in_rung_order_then_cublas(drawn, tmp_path):
    rows = [_row("coalescing", 128, 1200.0), _row("coalescing", 64, 150.0), _row("naive", 128, 400.0),
            _row("naive", 64, 100.0), dict(_row("naive", 0, 10.0), M=32, N=32, K=512),
            _row("cublas", 128, 1600.0, kind="baseline"), _row("cublas", 64, 200.0, kind="baseline")]
    run = _run()
    made = plots.gflops_plot(_data([run], rows), run, tmp_path)
    assert [p.name for p in made] == ["gflops_fp32", "rel_to_cublas_fp32"]
    ax, title, _ = drawn["gflops_fp32"]
    assert title == "FP32 GEMM throughput" and ax.get_title() == "FP32 GEMM throughput — GPU A"
    # sizes by work, smallest first; a cube named by its side
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64³", "32x32x512", "128³"]
    assert list(_lines(ax).items()) == [("1. naive", [100.0, 10.0, 400.0]), ("2. coalescing", [150.0, None, 1200.0]),
                                        ("cublas", [200.0, None, 1600.0])]
    ax, title, _ = drawn["rel_to_cublas_fp32"]
    assert ax.get_title() == "Share of cuBLAS SGEMM, same run — GPU A"
    assert _lines(ax) == {"1. naive": [50.0, None, 25.0], "2. coalescing": [75.0, None, 75.0]}
    drawn.clear()
    no_cublas = [r for r in rows if r["impl"] != "cublas"]
    assert [p.name for p in plots.gflops_plot(_data([run], no_cublas), run, tmp_path)] == ["gflops_fp32"]


def _ladder_rows():
    """Three rungs at 128 and 256 (listed last rung first), two of them at 512, and cuBLAS."""
    rows = []
    for n, values in ((128, (200.0, 120.0, 50.0, 400.0)), (256, (600.0, 300.0, 100.0, 1200.0)),
                      (512, (900.0, None, 200.0, 2000.0))):
        for impl, g in zip(("smem_blocking", "coalescing", "naive", "cublas"), values):
            if g is not None:
                rows.append(_row(impl, n, g, kind="baseline" if impl == "cublas" else "kernel"))
    return rows


def _bars(ax):
    return ([round(p.get_height(), 6) for p in ax.patches], [t.get_text() for t in ax.texts],
            [t.get_text() for t in ax.get_xticklabels()])


def test_ladder_plot_at_the_largest_size_every_rung_ran(drawn, tmp_path):
    run = _run()
    data = _data([run], _ladder_rows())
    assert plots.ladder_shape(data, run) == "256x256x256"  # 512: coalescing did not run there
    assert plots.ladder_shape(data, run, "512") == "512x512x512" and plots.ladder_shape(data, run, "999") is None
    (plot,) = plots.ladder_plot(data, run, tmp_path)
    assert plot.name == "ladder_256x256x256" and plot.title == "The ladder at 256³"
    ax = drawn[plot.name][0]
    assert _bars(ax) == ([100.0, 300.0, 600.0, 1200.0], ["100", "300\n×3.00", "600\n×2.00", "1,200"],
                         ["1. naive", "2. coalescing", "3. smem_blocking", "cublas"])
    assert ax.get_ylim() == pytest.approx((0, 1200 * 1.15))


def test_ladder_plot_of_kernels_without_a_rung_is_their_family(drawn, tmp_path):
    run = _run()
    rows = [_row("tiled", 64, 50.0), _row("tiled_rb1x4", 64, 75.0), _row("cublas", 64, 100.0, kind="baseline")]
    (plot,) = plots.ladder_plot(_data([run], rows), run, tmp_path)
    assert _bars(drawn[plot.name][0]) == ([50.0, 75.0, 100.0], ["50", "75\n×1.50", "100"],
                                          ["tiled", "tiled_rb1x4", "cublas"])


def _roofline_data(bench_rows):
    n = 4096
    gpu_a = _env("GPU A", "sm_90", 132, 1980)
    runs = [_run(1, env=gpu_a), _run(2, kind="profile", env=gpu_a, command="gemmlab profile --impl hopper_simt"),
            _run(3, kind="profile", env=gpu_a, command="gemmlab profile --impl hopper_simt,smem_blocking"),
            _run(4, kind="profile", env=_env("GPU B", "sm_80", 108, 1410), gpu="GPU B")]
    prof = dict(op="sgemm", M=n, N=n, K=n, status="OK")
    profiles = [dict(prof, run_id=2, impl="hopper_simt", dram_bytes=1e9, duration_us=4000.0),
                dict(prof, run_id=3, impl="hopper_simt", dram_bytes=2e9, duration_us=3000.0),  # the newest
                dict(prof, run_id=3, impl="hopper_simt", dram_bytes=1e5, duration_us=10.0,
                     extra={"label": "hopper_simt reduce"}),  # split-K's second kernel, not the GEMM
                dict(prof, run_id=3, impl="smem_blocking", status="FAIL", dram_bytes=1e9, duration_us=1e4),
                dict(prof, run_id=4, impl="warptiling", dram_bytes=1e9, duration_us=1e4)]  # another GPU's
    bandwidth = [dict(run_id=3, method="copy", gbps=3000.0)]
    return _data(runs, bench_rows, profiles=profiles, bandwidth=bandwidth)


def _points(ax):
    """legend label -> (intensity, GFLOP/s, filled) of each scatter point."""
    out = {}
    for c in ax.collections:
        if len(c.get_offsets()):
            (x, y), = c.get_offsets()
            faces = c.get_facecolors()  # none for a hollow point
            out[c.get_label()] = (round(float(x), 3), round(float(y), 3), bool(len(faces) and faces[0][3]))
    return out


def test_roofline_points_ceilings_and_caption(drawn, tmp_path):
    n = 4096
    work = 2 * n ** 3
    rows = [_row("naive", n, 100.0), _row("vectorize", n, 20000.0, beta=1.0), _row("cublas", n, 50000.0, kind="baseline"),
            _row("tiled", n, 30000.0), _row("hopper_simt", n, 40000.0)]
    data = _roofline_data(rows)
    (plot,) = plots.roofline_plot(data, tmp_path, data.runs[1])
    ax, title, caption = drawn["roofline_4096x4096x4096"]
    assert _points(ax) == {
        "13. hopper_simt": (round(work / 2e9, 3), round(work / 3e6, 3), True),  # ncu's newest, filled
        "1. naive": (round(work / (4 * 3 * n * n), 3), 100.0, False),  # counted bytes: A, B read and C written
        "6. vectorize": (512.0, 20000.0, False),  # beta: C read as well
        "cublas": (round(work / (4 * 3 * n * n), 3), 50000.0, False)}
    peak = 132 * 128 * 2 * 1980 / 1e3
    assert max(ax.get_lines()[0].get_ydata()) == pytest.approx(peak), "the DRAM line stops at the peak"
    assert {t.get_text() for t in ax.texts} >= {"FP32 FMA peak 66.9 TFLOP/s", "DRAM 3,000 GB/s (measured)"}
    assert title == "Roofline at 4096³ on GPU A"
    assert caption == (
        "Roofline at 4096³ on GPU A. Peak: 132 SMs x 128 lanes x 2 x 1.98 GHz = 66.9 TFLOP/s. Bandwidth: copy, "
        "3,000 GB/s (run 3). filled: 2MNK over ncu's DRAM bytes and duration (run 3: `gemmlab profile --impl "
        "hopper_simt,smem_blocking`); ncu counts the DRAM traffic during the kernel, so C's last writes, still in "
        "L2 when it ends, can be missing; hollow: counted bytes (A and B read once, C written once) and the "
        "benchmark's median (run 1: `gemmlab bench`).")
    drawn.clear()
    plots.roofline_plot(_roofline_data(rows[-1:]), tmp_path, data.runs[1])
    assert "hollow" not in drawn["roofline_4096x4096x4096"][2], "no counted point: no word of them"


def test_roofline_shapes_are_the_profiled_ones():
    data = _roofline_data([_row("naive", 2048, 100.0)])
    data.profiles.append(dict(data.profiles[0], M=1024, N=1024, K=1024))
    assert plots.roofline_shapes(data, data.runs[1]) == ["4096x4096x4096", "1024x1024x1024"]


def test_tune_heatmap_cells_axes_and_name(drawn, tmp_path):
    run = _run(1, kind="tune", command="gemmlab tune --impl blocktiling_2d")
    point = dict(run_id=1, op="sgemm", impl="blocktiling_2d", M=512, N=512, K=512)
    rows = [dict(point, params={"BM": 64, "BN": 32, "BK": 8, "TM": 4}, gflops=1500.0, status="PASS"),
            dict(point, params={"BM": 64, "BN": 32, "BK": 8, "TM": 8}, gflops=1000.0, status="PASS"),
            dict(point, params={"BM": 64, "BN": 64, "BK": 8, "TM": 4}, gflops=3000.0, status="FAIL"),
            dict(point, params={"BM": 128, "BN": 32, "BK": 8, "TM": 4}, gflops=2500.0, status="PASS"),
            dict(point, params={"BM": 128, "BN": 32, "BK": 8, "TM": 8}, gflops=None, status="ERROR")]
    (plot,) = plots.tune_plots(_data([run], rows), tmp_path)
    assert plot.name == "tune_blocktiling_2d_512x512x512_run1"
    ax = drawn[plot.name][0]
    assert (ax.get_ylabel(), ax.get_xlabel()) == ("BM", "BN")
    # rows BM 64, 128; columns BN 32, 64: the best PASS in TFLOP/s, 'fail' where none passed, blank where none ran
    assert [t.get_text() for t in ax.texts] == ["1.5", "fail", "2.5", ""]
    assert "among the 5 points tried with that BM and BN" in plot.caption


def test_tune_heatmap_axes_without_a_known_pair_are_the_first_two_that_vary(drawn, tmp_path):
    run = _run(1, kind="tune")
    rows = [dict(run_id=1, op="sgemm", impl="tiled", M=64, N=64, K=64, status="PASS", gflops=1.0,
                 params={"TS": 16, "RM": rm, "RN": rn}) for rm in (2, 4) for rn in (2, 4)]
    (plot,) = plots.tune_plots(_data([run], rows), tmp_path)
    assert (drawn[plot.name][0].get_ylabel(), drawn[plot.name][0].get_xlabel()) == ("RM", "RN")


# -- op_tables.py: the other ops' tables and headline ----------------------------------------------------


def _hgemm_data():
    """An hgemm run at two sizes, its rows' extra without a C type (fp32 then), and a point that failed."""
    def row(impl, n, t, kind="kernel", status="PASS", **more):
        return dict(run_id=1, op="hgemm", impl=impl, impl_kind=kind, M=n, N=n, K=n, dtype="bf16", status=status,
                    t_median_ms=t, gflops=2 * n ** 3 / (t * 1e6) if t else None, extra={"layout": "nt"}, **more)

    rows = [row("persistent", 1024, 0.01), row("tma_wgmma", 1024, 0.02), row("cublas", 1024, 0.011, "baseline"),
            row("persistent", 2048, 0.08), row("tma_wgmma", 2048, 0.07), row("cublas", 2048, 0.075, "baseline"),
            row("wmma", 2048, None, status="FAIL", reason="max error 0.5")]
    return _data([_run(command="gemmlab bench --op hgemm")], rows)


def test_other_op_tables_are_the_figures_shares_and_failures_without_the_speedup():
    from gemmlab.report.op_tables import op_bench_tables

    data = _hgemm_data()
    tables = op_bench_tables(data, data.runs[1], "hgemm")
    what = "hgemm (bf16, layout nt, C fp32): "
    assert [t.title for t in tables] == [what + "GFLOP/s (median, 2MNK / time)", what + "share of cublas (same run)",
                                         what + "points without a time"]
    gflops, share, bad = tables
    assert gflops.header == ["impl", "1024x1024x1024 nt", "2048x2048x2048 nt"] and gflops.right == {1, 2}
    assert gflops.rows == [["persistent", "214,748", "214,748"], ["tma_wgmma", "107,374", "245,427"],
                           ["cublas", "195,226", "229,065"], ["wmma", "-", "FAIL"]]
    assert share.rows[:2] == [["persistent", "110.0%", "93.8%"], ["tma_wgmma", "55.0%", "107.1%"]]
    assert bad.right == set() and bad.rows == [["wmma", "2048x2048x2048", "FAIL", "max error 0.5"]]


def test_other_op_headline_is_the_fastest_kernel_at_the_largest_problem():
    from gemmlab.report.op_tables import op_headline

    assert op_headline(_hgemm_data(), "hgemm") == (
        "hgemm (bf16, layout nt, C fp32) at 2048x2048x2048: the fastest gemmlab kernel is **tma_wgmma**, "
        "107.1% of cublas (run 1).")


# -- data.py: what the report reads ------------------------------------------------------------------------


def test_runs_of_each_kind_are_those_with_rows():
    runs = [_run(1, kind="tune"), _run(2, kind="tune"), _run(3, kind="profile")]
    data = _data(runs, [_row("naive", 64, 1.0, run_id=2)], profiles=[dict(run_id=3), dict(run_id=9)])
    assert [r.id for r in data.tune_runs()] == [2], "a tune run that stored nothing has no table"
    assert [r.id for r in data.profile_runs()] == [3], "rows of a run not in the runs table are not a run"


def test_peak_of_the_newest_gpu_run_with_the_lanes_of_its_architecture():
    runs = [_run(1, env=_env("NVIDIA A100-SXM4-80GB", "sm_80", 108, 1410)), _run(2, env={})]
    data = _data(runs)
    assert data.fp32_peak_gflops() == (pytest.approx(108 * 64 * 2 * 1410 / 1e3),
                                       "108 SMs x 64 lanes x 2 x 1.41 GHz = 19.5 TFLOP/s")
    data.runs[3] = _run(3, env=_env("GPU C", "sm_90", 132, 1980))  # its own dict: its clock is dropped below
    assert data.gpu_env()["name"] == "GPU C", "the newest run with a GPU"
    del data.runs[3].env["gpu"]["max_sm_clock_mhz"]
    assert data.fp32_peak_gflops(3) == (None, "the run's environment lacks the SM count, clock or architecture")


def test_bandwidth_is_the_newest_measured_on_the_gpu_named_or_any():
    runs = [_run(1, gpu="GPU A"), _run(2, gpu="GPU B")]
    bandwidth = [dict(run_id=1, method="copy", gbps=1000.0), dict(run_id=1, method="copy", gbps=1100.0),
                 dict(run_id=2, method="triad", gbps=3000.0)]
    data = _data(runs, bandwidth=bandwidth)
    assert data.dram_gbps("GPU A") == (1100.0, "copy, 1,100 GB/s (run 1)")
    assert data.dram_gbps() == (3000.0, "triad, 3,000 GB/s (run 2)")


def test_an_hgemm_kernel_this_gemmlab_does_not_know_keeps_its_rows_in_the_report():
    """Was: `gemmlab report` refused the whole database ("error: unknown kernel 'wgmma_v0'") when an hgemm
    bench row named a kernel renamed or removed since the run: harness.tables looked its ladder up in the
    registry for the speedup table, which the report drops. The SGEMM tables took such names already."""
    from gemmlab.report.op_tables import op_bench_tables, op_headline

    data = _hgemm_data()
    for r in data.results:
        if r["impl"] == "tma_wgmma":
            r["impl"] = "wgmma_v0"
    gflops = op_bench_tables(data, data.runs[1], "hgemm")[0]
    assert gflops.rows[1] == ["wgmma_v0", "107,374", "245,427"]
    assert "the fastest gemmlab kernel is **wgmma_v0**, 107.1% of cublas" in op_headline(data, "hgemm")
