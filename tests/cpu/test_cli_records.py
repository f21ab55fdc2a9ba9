"""What a command records must survive it, and what it records must say how it was measured
(session 25's CLI review): no table written over a results database; sizes past 32 bits, and
a verify that would check nothing, refused before any work; --no-flush rows marked as such in
the database and in the report; a profile metric the run did not record left out of the table."""
import hashlib

import pytest

from gemmlab.cli import main
from gemmlab.errors import BadArgumentError
from gemmlab.outputs import output_file


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("option", ["--csv", "--json", "--markdown"])
@pytest.mark.parametrize("which", ["the database", "its -wal file", "another results database"])
def test_no_table_is_written_over_a_results_database(capsys, tmp_path, monkeypatch, option, which):
    """bench --db r.db --csv r.db ran, then wrote its CSV over the database it had just filled:
    every recorded run was lost. Refused in one line, exit 2, before any work, the file as it was."""
    from gemmlab.store import ResultStore

    monkeypatch.chdir(tmp_path)
    db, other = tmp_path / "r.db", tmp_path / "old.db"
    ResultStore(db).close()
    ResultStore(other).close()
    target = {"the database": db, "its -wal file": tmp_path / "r.db-wal", "another results database": other}[which]
    before = _sha(other)
    code, out, err = run(capsys, "bench", "--sizes", "64", "--db", str(db), option, str(target))
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert ("results database this command writes" in err) if which != "another results database" \
        else ("is an SQLite database" in err), err
    assert _sha(other) == before


def test_output_file_takes_ordinary_files_and_devices(tmp_path):
    plain = tmp_path / "t.csv"
    plain.write_text("old table\n")
    assert output_file(plain, "--csv", tmp_path / "r.db") == plain  # an old table is overwritten, as before
    assert output_file(tmp_path / "new" / "t.json", "--json", tmp_path / "r.db").parent.is_dir()
    assert output_file("/dev/null", "--csv") is not None  # not a regular file: not read
    with pytest.raises(BadArgumentError, match="results database this command writes"):
        output_file(tmp_path / "sub" / ".." / "r.db", "--csv", tmp_path / "r.db")  # the same file, spelt otherwise


@pytest.mark.parametrize("args, needle", [
    (["bench", "--M", "3000000000", "--N", "1", "--K", "1"], "up to 2^31 - 65536"),
    (["bench", "--op", "bgemm", "--batch", "3000000000", "--sizes", "4"], "batch count up to 2^31 - 65536"),
    (["analyze", "--impl", "naive", "--arch", "sm_90", "--no-store", "--M", "3000000000", "--N", "1", "--K", "1"],
     "up to 2^31 - 65536"),
])
def test_sizes_past_32_bits_are_refused_whichever_option_names_them(capsys, tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("args, needle", [
    (["verify", "--op", "hgemm", "--impl", "wmma", "--layout", "nt"], "wmma"),
    (["verify", "--op", "hgemm", "--impl", "tf32_wgmma", "--dtype", "fp16"], "tf32_wgmma takes"),
])
def test_a_verify_that_would_check_nothing_is_refused_before_any_work(capsys, tmp_path, monkeypatch, args, needle):
    """A named rung that takes none of the sweep's problems passed ("all 0 checks passed", exit 0)."""
    import gemmlab.cuda.device as device

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(device, "device", lambda *a, **k: pytest.fail("reached the GPU"))
    code, out, err = run(capsys, *args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_no_flush_rows_are_recorded_and_reported_as_warm(tmp_path, monkeypatch):
    """The flush column was never written and the report said "L2 flushed" of every run."""
    import sqlite3
    from types import SimpleNamespace

    from gemmlab.harness import session
    from gemmlab.report.render import write_report
    from gemmlab.store import ResultStore

    db = tmp_path / "r.db"
    store = ResultStore(db)
    run_id = store.start_run("bench", "gemmlab bench --no-flush --sizes 64", {})
    row = dict(op="sgemm", impl="naive", impl_kind="kernel", status="PASS", M=64, N=64, K=64, alpha=1.0,
               beta=0.0, dtype="fp32", t_median_ms=0.01, gflops=50.0)
    point = SimpleNamespace(impl="naive", problem=None, row=lambda: row)

    def one_point(impls, problems, options, on_result):
        on_result(point)
        raise RuntimeError("stop after storing")  # the tables of a fake point are not the subject here

    monkeypatch.setattr(session, "run_bench", one_point)
    with pytest.raises(RuntimeError, match="stop after storing"):
        session.record_and_report(["naive"], [None], SimpleNamespace(flush=False), store=store, run_id=run_id,
                                  command="c", db=db, csv=None, json_out=None, markdown=None, batch_prefix="sgemm",
                                  describe=lambda r: "naive")
    store.close()
    assert [r[0] for r in sqlite3.connect(db).execute("SELECT flush FROM results")] == [0]
    out = tmp_path / "report"
    write_report(db, out)
    text = (out / "report.md").read_text()
    assert "warm L2 (`--no-flush`)" in text and "L2 flushed before each launch" not in text


def test_a_metric_no_profile_row_recorded_is_left_out_of_the_table():
    """A database profiled by an older gemmlab has no L2 throughput: the table had a row of '-'."""
    from pathlib import Path

    from gemmlab.report.data import ReportData, Run
    from gemmlab.report.tables import profile_table

    run = Run(1, "2026-11-26T00:00:00", "profile", "gemmlab profile", {}, None, "GPU A")
    rows = [dict(run_id=1, impl=name, status="PASS", M=64, N=64, K=64, dtype="fp32", dram_bytes=4096,
                 tensor_pipe_pct=None, l2_throughput_pct=None, sm_throughput_pct=50.0) for name in ("a", "b")]
    data = ReportData(Path("r.db"), {1: run}, [], rows, [], [])
    labels = [r[0] for r in profile_table(data, run).rows]
    assert not any(label.startswith(("Tensor Pipe", "L2 Throughput")) for label in labels), labels
    rows[1]["l2_throughput_pct"] = 40.0  # recorded for one kernel: the row stays, '-' for the other
    labels = [r[0] for r in profile_table(data, run).rows]
    assert any(label.startswith("L2 Throughput") for label in labels)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e39", "1e400"])
@pytest.mark.parametrize("option", ["--alpha", "--beta"])
def test_scalars_no_fp32_kernel_can_take_are_refused(capsys, tmp_path, monkeypatch, option, value):
    """They reached the GPU, and every kernel then FAILED with "outputs are NaN/inf"."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "bench", "--sizes", "64", option, value)
    assert code == 2 and "must be a finite fp32 value" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "gemmlab-results").exists()


def test_the_largest_fp32_scalars_are_taken():
    from gemmlab import ops

    args = ops.shape_args("sgemm", alpha=3.4028234663852886e38, beta=-1e38)
    assert args.alpha == 3.4028234663852886e38 and args.beta == -1e38


@pytest.mark.parametrize("command", ["verify", "bench"])
def test_verify_of_a_named_baseline_whose_library_is_missing_is_refused(capsys, tmp_path, monkeypatch, command):
    """It was dropped from the list silently, and verify then checked nothing and passed (bench:
    timed nothing, stored an empty run and exited 0; session 26)."""
    import gemmlab.cuda.device as device
    from gemmlab import registry

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(device, "device", lambda *a, **k: pytest.fail("reached the GPU"))
    torch_impl = registry.get("torch", "sgemm")
    monkeypatch.setattr(type(torch_impl), "unavailable_reason",
                        lambda self: "PyTorch is not installed" if self.name == "torch" else "")
    code, out, err = run(capsys, command, "--impl", "cublas,torch")
    assert code == 2 and "PyTorch is not installed" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "gemmlab-results").exists(), "refused before a run is stored"
