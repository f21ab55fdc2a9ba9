"""`gemmlab report` from fixture databases: tables, plots (PNG + SVG), Markdown and HTML, no GPU.

tests/fixtures/h200-bench.db is the real benchmark database of docs/results (H200, bench only);
tests/fixtures/report.db is the database of the run behind docs/report (bench, profile,
analyze and tune rows from one GPU session).
"""
import re
import shutil
from pathlib import Path

import pytest

from gemmlab.cli import main
from gemmlab.report import data as rdata
from gemmlab.report.render import write_report

FIX = Path(__file__).resolve().parents[1] / "fixtures"
BENCH_DB = FIX / "h200-bench.db"
FULL_DB = FIX / "report.db"


@pytest.fixture
def bench_db(tmp_path):
    path = tmp_path / "bench.db"
    shutil.copy(BENCH_DB, path)
    return path


def _digest(path: Path) -> tuple:
    """The file's bytes (sha256), and whether SQLite left a -wal or -shm file beside it: a report
    only reads, so both stay as they were (a row count would miss an UPDATE)."""
    import hashlib

    side = tuple(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))
    return hashlib.sha256(path.read_bytes()).hexdigest(), side


def test_report_from_the_bench_database(bench_db, tmp_path, capsys):
    before = _digest(bench_db)
    out = tmp_path / "rep"
    code = main(["report", "--db", str(bench_db), "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert _digest(bench_db) == before, "the report must not write to the database"
    md = (out / "report.md").read_text()
    # seed 002's three tables, with the numbers of docs/results/h200-default-bench.md
    assert "**GFLOP/s (median, 2MNK / time)**" in md and "**Share of cublas (same run)**" in md
    assert "| autotuned | 819 | 3,625 | 15,089 | 40,943 | 41,634 |" in md
    assert "| vectorize | 17.4% | 13.9% | 27.1% | 64.2% | 61.2% |" in md
    assert "| vectorize | 0.95x | 0.91x | 0.91x | 1.53x | 1.49x |" in md  # over blocktiling_2d
    # the command behind the numbers, and the environment
    assert "Command: `gemmlab bench --db /root/out/results/results.db --markdown /root/out/bench.md`" in md
    assert "| GPU | NVIDIA H200 |" in md and "| driver | 580.159.04 |" in md
    assert "66.9 TFLOP/s" in md  # FP32 peak from the run's SM count and clock
    # plots: seed 002's two, the ladder bars, a roofline from counted bytes
    for name in ("gflops_fp32", "rel_to_cublas_fp32", "ladder_4096x4096x4096", "roofline_4096x4096x4096"):
        png, svg = out / "plots" / f"{name}.png", out / "plots" / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000, name
        assert "<svg" in svg.read_text()[:2000], name
        assert f"](plots/{name}.png)" in md
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and html.count("<table>") >= 5
    assert "No profile rows" in html  # what is missing is said, not hidden


def test_report_with_analysis_rows_added_without_gpu(bench_db, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    assert main(["analyze", "--impl", "ladder", "--arch", "sm_90", "--db", str(bench_db)]) == 0
    capsys.readouterr()
    out = tmp_path / "rep"
    assert main(["report", "--db", str(bench_db), "--out", str(out), "--size", "2048"]) == 0
    md = (out / "report.md").read_text()
    assert "**Compile report and theoretical occupancy**" in md
    row = next(line for line in md.splitlines() if line.startswith("| hopper_simt | sm_90 |"))
    assert "| 12.5% | registers |" in row
    assert (out / "plots" / "ladder_2048x2048x2048.png").exists()
    assert f"Command: `gemmlab analyze --db {bench_db}`" in md  # options left at their defaults are not repeated


def test_report_on_an_empty_database_says_what_is_missing(tmp_path):
    from gemmlab.store import ResultStore

    db = tmp_path / "empty.db"
    ResultStore(db).close()
    out = tmp_path / "rep"
    write_report(db, out)
    md = (out / "report.md").read_text()
    assert "No SGEMM benchmark rows" in md and "No profile rows" in md and "No tuning rows" in md


def test_missing_database_is_one_line(tmp_path, capsys):
    code = main(["report", "--db", str(tmp_path / "nope.db"), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: no results database at") and len(err.strip().splitlines()) == 1


def test_peak_and_bandwidth_from_the_environment(bench_db):
    d = rdata.load(bench_db)
    peak, why = d.fp32_peak_gflops()
    assert peak == pytest.approx(132 * 128 * 2 * 1.98)  # GFLOP/s and "132 SMs" in why
    assert d.dram_gbps()[0] is None


@pytest.mark.skipif(not FULL_DB.exists(), reason="tests/fixtures/report.db not captured yet")
def test_report_from_the_full_gpu_database(tmp_path):
    db = tmp_path / "full.db"
    shutil.copy(FULL_DB, db)
    out = tmp_path / "rep"
    written = write_report(db, out)
    md = (out / "report.md").read_text()
    d = rdata.load(db)
    assert d.profiles and d.bandwidth and d.tune_runs() and d.analyses
    # the profile table: every headline metric some row recorded as a row (one no row recorded,
    # as the tensor pipe in this older database, is left out), every profiled kernel as a column
    from gemmlab.profile.ncu import METRICS

    for m in METRICS:
        recorded = any(p.get(m.key) is not None for p in d.profiles if p["status"] != "ERROR")
        assert (f"| {m.label} |" in md) == recorded, m.label
    assert sum(f"| {m.label} |" in md for m in METRICS) >= len(METRICS) - 2
    ok = [p for p in d.profiles if p["status"] == "OK"]
    assert len(ok) >= 2
    header = next(line for line in md.splitlines() if line.startswith("| metric |"))
    for p in ok[:2]:
        assert p["impl"] in header
    # roofline with the measured bandwidth, tuning heatmap, ncu's occupancy beside gemmlab's
    assert "GB/s (measured)" in (out / "plots" / "roofline_4096x4096x4096.svg").read_text()
    assert (out / "plots" / "roofline_1024x1024x1024.png").exists()  # seed 002's trio, profiled at 1024^3
    assert any(p.name.startswith("tune_") for p in written)
    occ_rows = [line for line in md.splitlines() if line.startswith("| ") and "| sm_90 |" in line]
    assert any(re.search(r"\| \d+\.\d% \| [a-z ,]+ \| \d+\.\d% \|$", line) for line in occ_rows)


def test_profile_rows_of_a_tensor_core_problem_with_their_stall_samples(tmp_path):
    """Rows as `gemmlab profile --op hgemm --source` stores them: the table names the whole
    problem (type, layout, C type), and a table says where each kernel's warps stalled."""
    from gemmlab.profile import rows
    from gemmlab.store import ResultStore

    db = tmp_path / "p.db"
    store = ResultStore(db)
    run_id = store.start_run("profile", "gemmlab profile --op hgemm --impl persistent --source", {})
    store.close()
    source = {"kernel": "void gemmlab::hgemm_persistent<...>", "samples": 1000.0, "aligned": True,
              "note": "main loop 0x1000..0x2000", "regions": {
                  "main loop": {"samples_pct": 81.5, "reasons": [["wait", 40.0], ["math_pipe_throttle", 30.0]]},
                  "outside the main loop": {"samples_pct": 18.5, "reasons": [["barrier", 55.0]]}},
              "hottest": [{"offset": 0x1230, "region": "main loop", "sass": "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4]",
                           "samples_pct": 12.0, "reason": "wait"},
                          {"offset": 0x2450, "region": "outside the main loop", "sass": "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100",
                           "samples_pct": 6.5, "reason": "barrier"}]}
    conn = rows.connect(db)
    rows.insert(conn, "profiles", run_id, op="hgemm", impl="persistent", impl_kind="kernel", kernel="k", M=4096,
                N=4096, K=4096, dtype="bf16", layout="nt", out_dtype="bf16", status="OK", verified=True,
                duration_us=190.0, dram_bytes=1e8, extra={"label": "persistent", "source": source})
    rows.insert(conn, "profiles", run_id, op="hgemm", impl="cublas", impl_kind="baseline", kernel="sm90_xmma", M=4096,
                N=4096, K=4096, dtype="bf16", layout="nt", out_dtype="bf16", status="OK", duration_us=191.0,
                dram_bytes=1e8, extra={"label": "cublas"})
    out = tmp_path / "rep"
    write_report(db, out)
    md = (out / "report.md").read_text()
    assert "Nsight Compute metrics at 4096x4096x4096 bf16 nt C bf16" in md
    assert "Where the warps stall" in md
    line = next(ln for ln in md.splitlines() if "outside the main loop" in ln and "persistent" in ln)
    assert "18.5%" in line and "barrier 55%" in line and "0x2450 BAR.SYNC" in line and "(6.5%)" in line
    assert "wait 40%, math_pipe_throttle 30%" in md
    assert md.count("| cublas |") <= 1, "a kernel without samples has no stall rows"


def test_the_other_ops_bench_runs_as_their_own_tables(tmp_path):
    """hgemm, bgemm and reduce bench rows (as `gemmlab bench --op ...` stores them) get the tables
    their op describes: its figures and its shares of the reference baselines, computed from the
    rows; before, the report showed the SGEMM ladder only."""
    from gemmlab.store import ResultStore

    db = tmp_path / "ops.db"
    store = ResultStore(db)
    h = store.start_run("bench", "gemmlab bench --op hgemm --dtype bf16 --layout nt --impl persistent,cublas", {})
    for impl, kind, t in (("persistent", "kernel", 0.190), ("cublas", "baseline", 0.200)):
        store.add_result(h, op="hgemm", impl=impl, impl_kind=kind, M=4096, N=4096, K=4096, dtype="bf16",
                         status="PASS", t_median_ms=t, gflops=2 * 4096 ** 3 / (t * 1e6),
                         extra={"layout": "nt", "out_dtype": "fp32"})
    r = store.start_run("bench", "gemmlab bench --op reduce --impl single_pass", {})
    n = 1 << 24
    for impl, kind, t, gbps in (("single_pass", "kernel", 0.030, 2237.0), ("cub", "baseline", 0.033, 2033.0),
                                ("copy", "baseline", 0.050, 2684.0)):
        store.add_result(r, op="reduce", impl=impl, impl_kind=kind, M=n, N=1, K=1, dtype="fp32", status="PASS",
                         t_median_ms=t, gbps=gbps)
    store.add_result(r, op="reduce", impl="tile_queue", impl_kind="kernel", M=n, N=1, K=1, dtype="fp32",
                     status="FAIL", reason="relative error 1e-3 > bound")
    b = store.start_run("bench", "gemmlab bench --op bgemm", {})
    store.add_result(b, op="bgemm", impl="cublas", impl_kind="baseline", M=64, N=256, K=256, dtype="fp32",
                     status="PASS", t_median_ms=0.01, gflops=100.0, extra={"batch": 16})
    store.add_result(b, op="bgemm", impl="cublas", impl_kind="baseline", M=64, N=256, K=256, dtype="fp32",
                     status="PASS", t_median_ms=0.02, gflops=50.0, extra={"batch": 8})
    store.add_result(b, op="bgemm", impl="dispatch", impl_kind="kernel", M=64, N=256, K=256, dtype="fp32",
                     status="PASS", t_median_ms=0.005, gflops=200.0, extra={"batch": 16})
    store.close()
    out = tmp_path / "rep"
    write_report(db, out)
    md = (out / "report.md").read_text()
    assert "No SGEMM benchmark rows" in md and "## Tensor-core GEMM (hgemm)" in md and "## Sum reduction (reduce)" in md
    assert "hgemm (bf16, layout nt, C fp32): GFLOP/s" in md
    line = next(ln for ln in md.splitlines() if ln.startswith("| persistent |") and "%" in ln)
    assert "105.3%" in line, "share of cuBLAS: 0.200 / 0.190"
    after_cub = md[md.index("reduce: share of cub"):].splitlines()
    cub = next(ln for ln in after_cub if ln.startswith("| single_pass |"))
    assert "110.0%" in cub, "share of cub: its time over ours, 0.033 / 0.030"
    assert "| impl | 2^24 |" in md
    assert "tile_queue" in md and "relative error 1e-3 > bound" in md
    assert "16x64x256x256" in md, "bgemm's batch from extra"
    assert ("hgemm (bf16, layout nt, C fp32) at 4096x4096x4096: the fastest gemmlab kernel is **persistent**, "
            "105.3% of cublas") in md
    assert "reduce at 2^24: the fastest gemmlab kernel is **single_pass**, 110.0% of cub" in md
    assert "bgemm at" not in md, "dispatch stands for some implementation: not a kernel of ours to headline"
    after_bgemm = md[md.index("bgemm: share of cublas"):].splitlines()
    assert "| impl | 16x64x256x256 | 8x64x256x256 |" in after_bgemm, "batches of one shape stay apart"
    assert next(ln for ln in after_bgemm if ln.startswith("| dispatch |")) == "| dispatch | 200.0% | - |"
    after_copy = md[md.index("reduce: share of the copy bandwidth"):].splitlines()
    assert next(ln for ln in after_copy if ln.startswith("| single_pass |")) == "| single_pass | 83.3% |"


def test_a_size_the_run_did_not_measure_is_refused_in_one_line(bench_db, tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["report", "--db", str(bench_db), "--out", str(out), "--size", "9999"]) == 2
    err = capsys.readouterr().err
    assert "--size 9999: the latest SGEMM bench run" in err and "2048x2048x2048" in err, err
    assert main(["report", "--db", str(bench_db), "--out", str(out), "--size", "abc"]) == 2
    assert "size 'abc' is not an integer or MxNxK" in capsys.readouterr().err


def test_a_size_with_no_sgemm_bench_run_is_refused_before_the_page_is_written(tmp_path, capsys):
    """--size picks the ladder plot's shape; with no SGEMM bench run there is no plot, and the option
    used to be ignored without a word."""
    from gemmlab.store import ResultStore

    db = tmp_path / "empty.db"
    ResultStore(db).close()
    out = tmp_path / "rep"
    assert main(["report", "--db", str(db), "--out", str(out), "--size", "2048"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--size 2048: this database has no SGEMM bench run to plot" in err, err
    assert not (out / "report.md").exists()
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0  # without --size: the page of what is missing


def test_a_title_with_line_breaks_stays_one_heading(tmp_path):
    """--title "a\\nb" ended the Markdown heading at the break; a blank one leaves no heading."""
    from gemmlab.store import ResultStore

    db = tmp_path / "empty.db"
    ResultStore(db).close()
    write_report(db, tmp_path / "a", title="speed\n\n  of   rung 5\r\n")
    assert (tmp_path / "a" / "report.md").read_text().splitlines()[0] == "# speed of rung 5"
    write_report(db, tmp_path / "b", title=" \n ")
    assert (tmp_path / "b" / "report.md").read_text().splitlines()[0] == "# gemmlab report"
