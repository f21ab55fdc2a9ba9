"""The command line on a GPU: a small bench end to end, and running out of memory."""
import sqlite3

from gemmlab.cli import main


def test_bench_end_to_end(tmp_path, capsys):
    db = tmp_path / "r.db"
    md = tmp_path / "t.md"
    code = main(["bench", "--impl", "naive,vectorize,cublas", "--sizes", "96,130x70x33", "--db", str(db),
                 "--markdown", str(md), "--csv", str(tmp_path / "r.csv")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "share of cublas" in out and "130x70x33" in out
    rows = sqlite3.connect(db).execute("SELECT impl, status, gflops, t_median_ms, count FROM results").fetchall()
    assert len(rows) == 6 and all(r[1] == "PASS" and r[2] > 0 and r[3] > 0 and r[4] >= 10 for r in rows)
    assert (tmp_path / "r.csv").read_text().count("\n") == 7
    assert "| vectorize |" in md.read_text()


def test_out_of_memory_is_one_line_and_keeps_rows(tmp_path, capsys):
    db = tmp_path / "r.db"
    code = main(["bench", "--impl", "naive", "--sizes", "64,300000x300000x4", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and "out of GPU memory" in err and len(err.strip().splitlines()) == 1
    statuses = sqlite3.connect(db).execute("SELECT status FROM results").fetchall()
    assert statuses == [("PASS",)], "the point measured before the failure is kept"


def test_bench_api_end_to_end(tmp_path, capsys):
    """`gemmlab bench --api` at one small shape: every call timed beside the framework's, a bench
    figure where the shape is large enough, and the host probe read beside every loop."""
    md = tmp_path / "api.md"
    code = main(["bench", "--api", "sgemm,reduce", "--sizes", "512", "--n", "1048576", "--markdown", str(md)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "probe" in out and "us/call" in out and "Against issue 13's targets" in out
    assert "| loops >= 95% of bench |" in md.read_text(), "the markdown ends with the targets"
    rows = [ln for ln in md.read_text().splitlines() if ln.startswith("| 512x512x512 |") or ln.startswith("| 1048576 |")]
    assert len(rows) == 2 * 4 + 2 * 3, rows  # torch and CuPy: the reference, two calls and a plan (sums: one call)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 10 and float(cells[3]) > 0 and float(cells[5].replace(",", "")) > 0, row
        assert float(cells[9]) > 0, "the host probe is read beside every loop"
        if cells[1].startswith(("gemmlab", "Matmul", "Sum")):
            assert cells[7].endswith("%"), "a gemmlab row has its bench figure beside it"
