"""The report and profile findings of session 26's review, on databases made here (no GPU): one
GPU's roofline, hgemm tune runs, every analysis kept, dispatch not named a kernel, no page over a
database, a new .ncu-rep per run, --timeout finite, 'selected' not a stall."""
import shutil
from pathlib import Path

import pytest

from gemmlab.profile import rows
from gemmlab.report import data as report_data
from gemmlab.report.render import build, headlines, write_report
from gemmlab.store import ResultStore


def _env(name, cc, sms, mhz):
    return {"gpu": {"name": name, "compute_capability": cc, "sm_count": sms, "max_sm_clock_mhz": mhz}}


H100 = _env("NVIDIA H100 80GB HBM3", "sm_90", 132, 1980)
A100 = _env("NVIDIA A100-SXM4-80GB", "sm_80", 108, 1410)


def _profile(store, db, env, impl, bandwidth, duration_us, dram_bytes):
    run = store.start_run("profile", f"gemmlab profile --impl {impl}", env)
    c = rows.connect(db)
    rows.insert(c, "bandwidth", run, method="copy", bytes=2, median_ms=1.0, gbps=bandwidth)
    rows.insert(c, "profiles", run, op="sgemm", impl=impl, impl_kind="kernel", params={}, M=4096, N=4096, K=4096,
                status="OK", duration_us=duration_us, dram_bytes=dram_bytes, extra={"label": impl})
    c.commit()
    return run


def test_a_roofline_and_its_ceilings_are_one_gpus(tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as store:
        _profile(store, db, A100, "vectorize", 1500.0, 9000.0, 4e8)
        _profile(store, db, H100, "naive", 2900.0, 270000.0, 8e9)
    doc, plots = build(report_data.load(db), tmp_path / "out", None, "t", "gemmlab report")
    roofs = [p for p in plots if p.name.startswith("roofline")]
    assert len(roofs) == 1 and "on NVIDIA H100 80GB HBM3" in roofs[0].title
    assert "2,900 GB/s" in roofs[0].caption and "1,500" not in roofs[0].caption
    lines = headlines(report_data.load(db))
    assert any("DRAM bandwidth (NVIDIA H100 80GB HBM3): copy, 2,900 GB/s" in line for line in lines), lines


def test_hgemm_tune_runs_and_every_analysis_reach_the_report(tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as store:
        run = store.start_run("tune", "gemmlab tune --op hgemm --impl persistent --dtype bf16", H100)
        for bn, g in ((128, 600000.0), (256, 700000.0)):
            store.add_result(run, op="hgemm", impl="persistent", impl_kind="kernel", params={"BN": bn}, M=4096, N=4096,
                             K=4096, dtype="bf16", status="PASS", gflops=g, t_median_ms=0.2, flush=True)
        c = rows.connect(db)
        for op, impl in (("sgemm", "vectorize"), ("hgemm", "persistent")):
            r = store.start_run("analyze", f"gemmlab analyze --op {op} --impl {impl}", {})
            rows.insert(c, "analyses", r, op=op, impl=impl, arch="sm_90", params={"BM": 128}, registers=113,
                        smem_static=8192, smem_dynamic=0, threads=256, blocks_per_sm=2, occupancy_pct=25.0,
                        limiter="registers")
        c.commit()
    paths = write_report(db, tmp_path / "out")
    text = Path(paths[0]).read_text()
    assert "No tuning rows in this database" not in text and "Tuning persistent (hgemm bf16)" in text
    assert "vectorize" in text and "gemmlab analyze --op sgemm --impl vectorize" in text, "the older analysis stays"


def test_dispatch_is_not_named_the_fastest_kernel(tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as store:
        run = store.start_run("bench", "gemmlab bench --impl autotuned,dispatch,cublas --sizes 4096", H100)
        for impl, kind, g in (("autotuned", "kernel", 41000.0), ("dispatch", "kernel", 41300.0),
                              ("cublas", "baseline", 51000.0)):
            store.add_result(run, op="sgemm", impl=impl, impl_kind=kind, params={}, M=4096, N=4096, K=4096,
                             dtype="fp32", status="PASS", gflops=g, t_median_ms=1.0, flush=True)
    lines = headlines(report_data.load(db))
    assert any("fastest gemmlab kernel is **autotuned**" in line for line in lines), lines


def test_no_page_of_the_report_is_written_over_a_database(tmp_path):
    from gemmlab.errors import BadArgumentError

    db = tmp_path / "r.db"
    ResultStore(db)
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(db, out / "report.html")  # an SQLite file where a page would go
    with pytest.raises(BadArgumentError, match="SQLite database"):
        write_report(db, out)
    own = tmp_path / "report.md"  # the database read, named as the page
    ResultStore(own)
    with pytest.raises(BadArgumentError, match="results database this command writes"):
        write_report(own, tmp_path)
    assert own.read_bytes().startswith(b"SQLite format 3")


def test_each_profile_run_keeps_its_own_ncu_report(tmp_path):
    from gemmlab.problem import GemmProblem
    from gemmlab.profile.profiler import report_path

    p = GemmProblem(4096, 4096, 4096)
    first = report_path(tmp_path, "cublas", p)
    first.write_text("run 1")
    second = report_path(tmp_path, "cublas", p)
    assert first.name == "cublas-4096x4096x4096.ncu-rep" and second != first and not second.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_timeout_that_is_not_a_finite_positive_number_is_one_line(capsys, value):
    from gemmlab.cli import main

    assert main(["profile", "--impl", "cublas", "--timeout", value]) == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and len(err.strip().splitlines()) == 1, err


def test_selected_is_not_a_stall_reason():
    from gemmlab.profile.source import _reason_columns

    header = ["Address", "smsp__pcsamp_warps_issue_stalled_selected", "smsp__pcsamp_warps_issue_stalled_barrier"]
    assert list(_reason_columns(header).values()) == ["barrier"]
