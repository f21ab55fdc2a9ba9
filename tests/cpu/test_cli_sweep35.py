"""Bad input from session 35's sweep of the CLI (a helper, CPU only): each was a hang, a
traceback, an internal error (exit 3), a changed database or a silent misreading. Each now is one
line, exit 2, with the database unchanged."""
from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gemmlab.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line(result, needle):
    code, _, err = result
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, (code, err)


def _edited_copy(tmp_path, monkeypatch, fixture, *statements) -> Path:
    """A copy of `fixture` in tmp_path (the working directory now), edited by the statements."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / fixture
    shutil.copy(FIXTURES / fixture, db)
    c = sqlite3.connect(db)
    try:
        with c:  # committed
            for sql in statements:
                c.execute(sql)
    finally:
        c.close()  # the last connection: its WAL is written into the file before the file is hashed
    return db


def _refused_unchanged(capsys, tmp_path, monkeypatch, fixture, sql, needle, *command):
    """`command --db` on a copy of `fixture` edited by `sql`: one line, exit 2, the file unchanged."""
    db = _edited_copy(tmp_path, monkeypatch, fixture, sql)
    before = _sha(db)
    _one_line(run(capsys, *command, "--db", db), needle=needle)
    assert _sha(db) == before


@pytest.mark.parametrize("command", [["report", "--out", "rep"], ["bench", "--impl", "naive"],
                                     ["analyze", "--impl", "naive", "--arch", "sm_90"]])
def test_a_pipe_as_the_database_is_refused_not_waited_on(capsys, tmp_path, monkeypatch, command):
    # SQLite's first read of a named pipe blocked for good
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "pipe")
    _one_line(run(capsys, *command, "--db", tmp_path / "pipe"), needle="not a regular file")


def test_a_device_as_the_database_is_refused(capsys, tmp_path, monkeypatch):
    # /dev/null read as an empty database: an empty report and exit 0
    monkeypatch.chdir(tmp_path)
    _one_line(run(capsys, "report", "--db", "/dev/null", "--out", "rep"), needle="not a regular file")
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("sql, needle", [
    ("CREATE VIEW analyses AS SELECT 1 AS x", "a view named analyses"),
    ("CREATE TABLE profiles(id INTEGER PRIMARY KEY, note TEXT)", "a profiles table not gemmlab's"),
])
def test_analyze_refuses_rows_tables_not_its_own_before_recording_a_run(capsys, tmp_path, monkeypatch, sql, needle):
    # the run's row was committed, then ensure_tables failed (exit 3) or widened another
    # program's table by 49 columns
    _refused_unchanged(capsys, tmp_path, monkeypatch, "h200-bench.db", sql, needle,
                       "analyze", "--impl", "naive", "--arch", "sm_90")


def test_a_runs_table_with_a_column_gemmlab_cannot_fill_is_not_ours(capsys, tmp_path, monkeypatch):
    # it passed the schema check, then failed the first INSERT (IntegrityError, exit 3) after the
    # file had been switched to WAL
    from gemmlab.store import ResultStore

    monkeypatch.chdir(tmp_path)
    ResultStore(tmp_path / "fresh.db").close()
    with sqlite3.connect(tmp_path / "fresh.db") as fresh:
        version = fresh.execute("PRAGMA user_version").fetchone()[0]
        schema = [(name, sql) for name, sql in fresh.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")]
    db = tmp_path / "a.db"
    for extra, ours in ((" DEFAULT 'x'", True), ("", False)):  # fillable by its default: still ours
        db.unlink(missing_ok=True)
        with sqlite3.connect(db) as c:
            for name, sql in schema:
                if name.startswith("sqlite_"):
                    continue
                c.execute(sql[:-1] + f", owner TEXT NOT NULL{extra})" if name == "runs" else sql)
            c.execute(f"PRAGMA user_version = {version}")
        if ours:
            ResultStore(db, write=False).close()
            continue
        before = _sha(db)
        _one_line(run(capsys, "analyze", "--impl", "naive", "--arch", "sm_90", "--db", db), needle="another program")
        assert _sha(db) == before


def test_too_long_a_file_name_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "report", "--db", tmp_path / ("a" * 300 + ".db"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "File name too long" in err, err


def test_a_closed_stdout_is_no_traceback(tmp_path):
    # harness/ui.py asked sys.stdout.isatty() of None at import
    done = subprocess.run([sys.executable, "-c", "import gemmlab.harness.ui"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, cwd=tmp_path, close_fds=True,
                          preexec_fn=lambda: os.close(1))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("sql, needle", [
    ("UPDATE runs SET env = '{bad'", "env is not a JSON object"),
    ("UPDATE runs SET env = '[1]'", "env is not a JSON object"),
    ("UPDATE results SET params = 'x' WHERE id = (SELECT min(id) FROM results)", "params is not a JSON object"),
    ("UPDATE results SET gflops = 'abc' WHERE id = (SELECT min(id) FROM results)", "gflops = 'abc'"),
    ("UPDATE results SET M = 'x' WHERE id = (SELECT min(id) FROM results)", "M = 'x'"),
    ("UPDATE results SET gflops = 1e999 WHERE id = (SELECT min(id) FROM results)", "gflops = 'inf'"),
])
def test_report_refuses_a_damaged_row_in_one_line(capsys, tmp_path, monkeypatch, sql, needle):
    _refused_unchanged(capsys, tmp_path, monkeypatch, "report.db", sql, needle, "report", "--out", "rep")


def test_a_profiles_table_with_a_newer_gemmlabs_columns_is_accepted(capsys, tmp_path, monkeypatch):
    # a newer gemmlab's metrics (or a user's own nullable notes) are no reason to refuse the file
    db = _edited_copy(tmp_path, monkeypatch, "report.db", "ALTER TABLE profiles ADD COLUMN future_metric_pct REAL",
                      "CREATE TRIGGER bandwidth AFTER INSERT ON runs BEGIN SELECT 1; END")  # a trigger's name is no table's
    code, _, err = run(capsys, "report", "--db", db, "--out", "rep")
    assert code == 0, err


def test_report_refuses_a_bandwidth_table_not_its_own(capsys, tmp_path, monkeypatch):
    db = _edited_copy(tmp_path, monkeypatch, "report.db", "DROP TABLE IF EXISTS bandwidth",
                      "CREATE TABLE bandwidth(id INTEGER PRIMARY KEY, speed REAL)")
    _one_line(run(capsys, "report", "--db", db, "--out", "rep"), needle="a bandwidth table not gemmlab's")


def test_an_element_count_past_2_40_is_refused_by_every_command(capsys):
    _one_line(run(capsys, "analyze", "--no-store", "--op", "reduce", "--impl", "interleaved", "--arch", "sm_90",
                   "--n", "9" * 40), needle="too large")


@pytest.mark.parametrize("args, needle", [
    (["bench", "--repeat", "99999999999"], "--repeat"),
    (["bench", "--warmup", "5000"], "--warmup"),
    (["bench", "--impl", "vectorize", "--params", "BM=1_28"], "is not an integer"),
    (["bench", "--impl", "vectorize", "--params", "BM=\uff11\uff12\uff18"], "is not an integer"),
])
def test_out_of_range_counts_and_lax_integers_are_refused(capsys, args, needle):
    code, _, err = run(capsys, *args)
    assert code == 2 and needle in err, err


def test_a_search_space_too_large_to_enumerate_is_refused(capsys):
    values = ",".join(str(v) for v in range(1, 301))
    code, _, err = run(capsys, "tune", "--impl", "autotuned", "--dry-run",
                       *(a for name in ("BM", "BN", "BK", "TM") for a in ("--param", f"{name}={values}")))
    assert code == 2 and "points, past the 10,000,000" in err, err


def test_the_apis_tuning_reader_refuses_a_pipe(tmp_path):
    import gemmlab
    from gemmlab.errors import BadArgumentError

    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(BadArgumentError, match="not a regular file"):
        gemmlab.use_tuning(tmp_path / "pipe")


def test_an_empty_params_option_is_refused_not_ignored(capsys):
    code, _, err = run(capsys, "bench", "--impl", "vectorize", "--params", "")
    assert code == 2 and "--params is empty" in err, err


def test_report_on_an_empty_file_says_so(capsys, tmp_path, monkeypatch):
    # it wrote a report of 0 runs and exited 0
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.db").touch()
    _one_line(run(capsys, "report", "--db", tmp_path / "empty.db", "--out", "rep"), needle="is empty")
    assert not (tmp_path / "rep").exists()
