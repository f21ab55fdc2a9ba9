"""The results database: round trips, exports, durability, concurrent writers, file naming."""
from __future__ import annotations

import contextlib
import csv
import json
import multiprocessing as mp
import os
import re
import sqlite3

import pytest

from gemmlab.errors import BadArgumentError

from gemmlab import store as store_mod
from gemmlab.outputs import batch_file_path
from gemmlab.store import RESULT_COLUMNS, SCHEMA_VERSION, ResultStore

ENV = {"git": "abc123+dirty", "gpu": {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132},
       "packages": {"torch": None, "numpy": "2.0"}}


def _point(**over):
    row = dict(op="sgemm", impl="03_smem_blocking", impl_kind="kernel", params={"BM": 32, "BK": 8},
               M=4097, N=1000, K=3, alpha=1.5, beta=-0.5, dtype="float32", status="PASS",
               rel_err=1.2e-7, tol=1e-5, seed=7, flush=True, t_min_ms=1.0, t_median_ms=1.25,
               t_mean_ms=1.3, t_stdev_ms=0.05, count=50, gflops=12345.6, gbps=321.0,
               sm_clock_min_mhz=1755, sm_clock_max_mhz=1980, temp_max_c=61, clock_warning=False,
               registers=40, spill_stores=0, smem_static=8192, extra={"note": "x", "list": [1, 2]})
    row.update(over)
    return row


def test_round_trip(tmp_path):
    db = tmp_path / "deep" / "dir" / "r.db"  # parent dirs are created
    s = ResultStore(db)
    assert s.last_run_id() is None
    run = s.start_run("bench", ["gemmlab", "bench", "--impl", "a b"], ENV)
    rid = s.add_result(run, **_point())
    s.add_result(run, op="sgemm", impl="cublas", impl_kind="baseline", status="UNCHECKED")

    assert s.last_run_id() == run
    (r,) = s.runs()
    assert r["kind"] == "bench" and r["command"] == "gemmlab bench --impl 'a b'"
    assert r["env"] == ENV and r["git_rev"] == "abc123+dirty" and r["gpu"] == "NVIDIA H100 80GB HBM3"
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", r["started"])

    rows = s.results(run_id=run)
    assert [x["impl"] for x in rows] == ["03_smem_blocking", "cublas"]
    got = rows[0]
    assert got["id"] == rid and got["run_id"] == run and got["created"]
    for key, value in _point().items():
        if key in ("flush", "clock_warning"):
            assert got[key] == int(value)  # booleans are stored as 0/1
        else:
            assert got[key] == value, key
    assert got["params"] == {"BM": 32, "BK": 8} and got["extra"] == {"note": "x", "list": [1, 2]}
    assert rows[1]["params"] is None and rows[1]["t_median_ms"] is None
    assert set(got) == set(RESULT_COLUMNS)


def test_numpy_scalars_are_stored_as_numbers(tmp_path):
    np = pytest.importorskip("numpy")
    s = ResultStore(tmp_path / "r.db")
    run = s.start_run("verify", "x", {})
    s.add_result(run, rel_err=np.float32(0.25), M=np.int64(64), params={"BM": np.int32(16)})
    (r,) = s.results()
    assert r["rel_err"] == 0.25 and type(r["rel_err"]) is float
    assert r["M"] == 64 and type(r["M"]) is int and r["params"] == {"BM": 16}


def test_filters(tmp_path):
    s = ResultStore(tmp_path / "r.db")
    r1 = s.start_run("bench", "one", {})
    r2 = s.start_run("tune", "two", {})
    s.add_result(r1, op="sgemm", impl="a")
    s.add_result(r1, op="sgemm", impl="b")
    s.add_result(r2, op="reduce", impl="a")
    assert len(s.results()) == 3
    assert [r["impl"] for r in s.results(run_id=r1)] == ["a", "b"]
    assert [r["run_id"] for r in s.results(impl="a")] == [r1, r2]
    assert [r["op"] for r in s.results(op="reduce")] == ["reduce"]
    assert s.results(run_id=r2, impl="b") == []
    assert [r["kind"] for r in s.runs()] == ["bench", "tune"] and s.last_run_id() == r2


def test_unknown_field_and_bad_values_rejected(tmp_path):
    s = ResultStore(tmp_path / "r.db")
    run = s.start_run("bench", "x", {})
    with pytest.raises(ValueError, match="t_median"):
        s.add_result(run, impl="a", t_median=1.0)  # typo of t_median_ms
    with pytest.raises(ValueError):
        s.add_result(run, id=5)  # the row id is the database's
    with pytest.raises(ValueError, match="status"):
        s.add_result(run, status="OK")
    with pytest.raises(ValueError, match="impl_kind"):
        s.add_result(run, impl_kind="library")
    with pytest.raises(sqlite3.IntegrityError):
        s.add_result(run + 100, impl="a")  # no such run
    assert s.results() == []  # nothing half-written


def test_csv_export(tmp_path):
    s = ResultStore(tmp_path / "r.db")
    r1 = s.start_run("bench", "x", ENV)
    r2 = s.start_run("bench", "y", ENV)
    s.add_result(r1, **_point())
    s.add_result(r2, **_point(impl="other", params=None))
    out = s.export_csv(tmp_path / "out" / "all.csv")
    with open(out, newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == RESULT_COLUMNS
        rows = list(reader)
    assert [r["impl"] for r in rows] == ["03_smem_blocking", "other"]
    assert json.loads(rows[0]["params"]) == {"BM": 32, "BK": 8}
    assert json.loads(rows[0]["extra"])["list"] == [1, 2]
    assert rows[0]["M"] == "4097" and float(rows[0]["t_median_ms"]) == 1.25 and rows[0]["status"] == "PASS"
    assert rows[1]["params"] == ""

    with open(s.export_csv(tmp_path / "one.csv", run_id=r2), newline="") as f:
        only = list(csv.DictReader(f))
    assert [r["impl"] for r in only] == ["other"]


def test_json_export(tmp_path):
    s = ResultStore(tmp_path / "r.db")
    r1 = s.start_run("bench", "x", ENV)
    r2 = s.start_run("tune", "y", {"git": None})
    s.add_result(r1, **_point())
    s.add_result(r2, impl="t")
    doc = json.loads(s.export_json(tmp_path / "all.json").read_text())
    assert doc["schema_version"] == SCHEMA_VERSION
    assert [r["id"] for r in doc["runs"]] == [r1, r2] and doc["runs"][0]["env"] == ENV
    assert doc["results"][0]["params"] == {"BM": 32, "BK": 8} and doc["results"][0]["gflops"] == 12345.6

    doc = json.loads(s.export_json(tmp_path / "one.json", run_id=r2).read_text())
    assert [r["kind"] for r in doc["runs"]] == ["tune"]
    assert [r["impl"] for r in doc["results"]] == ["t"]


def test_rows_visible_to_second_store(tmp_path):
    path = tmp_path / "r.db"
    a = ResultStore(path)
    run = a.start_run("bench", "x", ENV)
    a.add_result(run, impl="k1")
    b = ResultStore(path)  # first one still open: each add must already be committed
    assert [r["impl"] for r in b.results()] == ["k1"]
    b.add_result(run, impl="k2")
    assert [r["impl"] for r in a.results()] == ["k1", "k2"]
    a.close()
    b.close()
    with ResultStore(path) as c:
        assert len(c.results()) == 2 and c.runs()[0]["env"] == ENV
        assert c._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _write_then_die(path, n):
    s = ResultStore(path)
    run = s.start_run("bench", "killed", {})
    for i in range(n):
        s.add_result(run, impl=f"k{i}")
    os._exit(3)  # no close, no cleanup: what a crash or a kill looks like to SQLite


def _writer(path, tag, n, barrier):
    # a timeout: where the other writer died, this one fails instead of waiting for ever (a
    # child left waiting kept pytest from exiting, so a regression there hung CI)
    barrier.wait(60)  # both processes create the schema and write at the same moment
    s = ResultStore(path)
    run = s.start_run("tune", tag, {"git": tag})
    # and both write their rows at once: without this the first often finished its rows while the
    # second was still opening, and a writer that fails at once on a locked database passed
    barrier.wait(60)
    for i in range(n):
        s.add_result(run, impl=tag, seed=i, params={"i": i})
    s.close()


def test_interrupted_process_keeps_rows(tmp_path):
    path = tmp_path / "r.db"
    p = mp.get_context("spawn").Process(target=_write_then_die, args=(str(path), 5))
    p.start()
    p.join(60)
    assert p.exitcode == 3
    s = ResultStore(path)
    assert [r["impl"] for r in s.results()] == [f"k{i}" for i in range(5)]


def test_concurrent_writers(tmp_path):
    path = str(tmp_path / "fresh.db")  # not created yet: the schema creation races too
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    n = 150
    procs = [ctx.Process(target=_writer, args=(path, tag, n, barrier)) for tag in ("p1", "p2")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    for p in procs:  # one still running is a failure below, not a child pytest waits for at exit
        if p.is_alive():
            p.kill()
            p.join(10)
    assert [p.exitcode for p in procs] == [0, 0]
    s = ResultStore(path)
    assert s._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    runs = {r["command"]: r["id"] for r in s.runs()}
    assert set(runs) == {"p1", "p2"}
    for tag, run in runs.items():
        rows = s.results(run_id=run)
        assert [r["seed"] for r in rows] == list(range(n)) and {r["impl"] for r in rows} == {tag}
        assert [r["params"]["i"] for r in rows] == list(range(n))
    assert s.schema_version == SCHEMA_VERSION


def test_migration_hook(tmp_path, monkeypatch):
    path = tmp_path / "r.db"
    s = ResultStore(path)
    s.add_result(s.start_run("bench", "old", {}), impl="k")
    s.close()
    assert SCHEMA_VERSION == len(store_mod.MIGRATIONS) >= 1

    def v2(db):
        db.execute("ALTER TABLE results ADD COLUMN occupancy REAL")

    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, v2])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    s = ResultStore(path)
    assert s.schema_version == SCHEMA_VERSION + 1
    cols = [r[1] for r in s._db.execute("PRAGMA table_info(results)")]
    assert "occupancy" in cols
    assert [r["impl"] for r in s.results()] == ["k"]  # old rows kept
    s.close()

    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:1])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", 1)
    before = path.read_bytes()
    with pytest.raises(BadArgumentError, match="schema version 2"):
        ResultStore(path)  # an older gemmlab refuses a newer file instead of misreading it
    assert path.read_bytes() == before


def _sha(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("make", ["tables, version 0", "own analyses table", "version 5, other tables",
                                  "version 1, runs and results of its own"])
def test_another_programs_database_is_refused_and_left_as_it_was(tmp_path, make):
    """Tables gemmlab did not stamp (user_version 0), a version without runs and results, or runs
    and results without the columns gemmlab's schema of that version gives them, are another
    program's: refused before anything is written (not even the switch to WAL)."""
    import sqlite3

    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    if make == "own analyses table":
        db.execute("CREATE TABLE analyses (id INTEGER, note TEXT)")
    elif make == "version 1, runs and results of its own":
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("CREATE TABLE results (id INTEGER PRIMARY KEY, run_id INTEGER, value REAL)")
        db.execute("INSERT INTO runs (name) VALUES ('theirs')")
        db.execute("PRAGMA user_version = 1")
    else:
        db.execute("CREATE TABLE runs (who TEXT)" if make == "tables, version 0" else "CREATE TABLE notes (x)")
    if make == "version 5, other tables":
        db.execute("PRAGMA user_version = 5")
    db.commit()
    db.close()
    before = _sha(path)
    with pytest.raises(BadArgumentError, match=r"is an SQLite database of another program \(tables: "):
        ResultStore(path)
    assert _sha(path) == before and not (tmp_path / "other.db-wal").exists()


def test_a_damaged_results_database_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "r.db"
    s = ResultStore(path)
    run = s.start_run("bench", "x", {})
    for i in range(400):  # a few pages of rows
        s.add_result(run, impl="k" * 50, M=i)
    s.close()
    data = bytearray(path.read_bytes())
    for start in range(4096, len(data), 4096):  # every page's b-tree header and cell pointers overwritten
        data[start:start + 1000] = bytes(range(250)) * 4
    path.write_bytes(bytes(data))
    before = _sha(path)
    with pytest.raises(BadArgumentError, match="is damaged|not a usable gemmlab results database"):
        ResultStore(path)
    assert _sha(path) == before


def test_paths_that_cannot_hold_a_database_are_refused_in_one_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(BadArgumentError, match="is a directory"):
        ResultStore(tmp_path)
    with pytest.raises(BadArgumentError, match="is a directory"):
        ResultStore("")
    with pytest.raises(BadArgumentError, match=r"^cannot open .*afile/x.db as a results database"):
        ResultStore(tmp_path / "afile" / "x.db")


def test_default_db_constant():
    assert str(store_mod.DEFAULT_DB).replace(os.sep, "/") == "gemmlab-results/results.db"


def test_batch_file_path_naming(tmp_path):
    p = batch_file_path(tmp_path / "raw")
    assert p.parent == tmp_path / "raw" and p.exists()
    assert re.fullmatch(r"bench_fp32_\d{8}_\d{6}\.txt", p.name)
    q = batch_file_path(tmp_path / "raw", prefix="tune_sgemm")
    assert re.fullmatch(r"tune_sgemm_\d{8}_\d{6}(_\d+)?\.txt", q.name)


def test_batch_file_path_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.setattr("gemmlab.outputs.time.strftime", lambda fmt: "20260225_214132")
    existing = tmp_path / "bench_fp32_20260225_214132.txt"
    existing.write_text("old results")
    a = batch_file_path(tmp_path)
    b = batch_file_path(tmp_path)
    assert a.name == "bench_fp32_20260225_214132_1.txt"
    assert b.name == "bench_fp32_20260225_214132_2.txt"
    assert existing.read_text() == "old results"


def test_a_file_that_is_not_a_database_is_refused_in_one_line_and_left_alone(tmp_path, capsys):
    from gemmlab.cli import main
    from gemmlab.errors import BadArgumentError

    bad = tmp_path / "results.db"
    junk = b"this is not SQLite\n" * 200
    bad.write_bytes(junk)
    with pytest.raises(BadArgumentError, match="not a usable gemmlab results database"):
        ResultStore(bad)
    code = main(["report", "--db", str(bad), "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert bad.read_bytes() == junk


def test_a_fresh_database_opened_by_many_at_once_is_never_taken_for_another_programs(tmp_path):
    """The foreign-file check reads user_version and the tables in one snapshot: read apart, an
    opener could see the tables another had just created under version 0 (a review reproduced it
    in 35 of 200 trials with 4 threads) and refuse gemmlab's own new file."""
    import threading

    errors = []
    for trial in range(30):
        path = tmp_path / f"fresh{trial}.db"
        start = threading.Barrier(6)

        def open_it():
            start.wait()
            try:
                ResultStore(path).close()
            except Exception as exc:  # noqa: BLE001 - any failure is the finding
                errors.append(f"{trial}: {exc}")

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def _read_only(path):
    """Make `path` unwritable even for root (chattr +i) where that works, else by its mode; the
    undo function, or None where neither stops this process writing."""
    import os
    import subprocess

    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0:
        return lambda: subprocess.run(["chattr", "-i", str(path)], check=True)
    if os.geteuid() == 0:
        return None
    path.chmod(0o555 if path.is_dir() else 0o444)  # a folder keeps its x bits: its files stay readable
    return lambda: path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_read_only_database_is_refused_when_opened_for_writing_and_read_otherwise(tmp_path):
    """A file this process cannot write is refused at open (one line), not at the first row after
    a command's work; a reader (write=False) still opens it; its bytes are left as they were."""
    path = tmp_path / "ro.db"
    with ResultStore(path) as store:
        store.start_run("bench")
    before = _sha(path)
    undo = _read_only(path)
    if undo is None:
        pytest.skip("neither chattr nor the file's mode stops root writing here")
    try:
        with pytest.raises(BadArgumentError, match=r"ro.db is not a usable gemmlab results database \(read-only\)"):
            ResultStore(path)
        with ResultStore(path, integrity=False, write=False) as store:
            assert len(store.runs()) == 1
    finally:
        undo()
    assert _sha(path) == before


def _tuned_db(path, journal="wal"):
    """A gemmlab file with one run, in WAL mode as gemmlab writes it, or switched back to a
    rollback journal (as sqlite3's .backup leaves a copy), where a WAL switch shows in its bytes."""
    with ResultStore(path) as store:
        store.start_run("tune")
    if journal != "wal":
        with contextlib.closing(sqlite3.connect(path)) as db:
            assert db.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    return path


@pytest.mark.parametrize("name, journal", [("tuned.db", "wal"), ("tuned.db", "delete"), ("a b#1?.db", "wal")])
def test_a_reader_changes_nothing_in_the_file_it_reads(tmp_path, name, journal):
    """write=False (the API's tuning reader, report's) cannot write the file and leaves nothing
    beside it: the old reader switched a file to WAL; a mode=ro reader left -wal and -shm files
    beside every WAL file (only a read-write connection removes them when it closes)."""
    path = _tuned_db(tmp_path / name, journal)
    before = _sha(path)
    with ResultStore(path, integrity=False, write=False) as store:
        assert [r["kind"] for r in store.runs()] == ["tune"]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.start_run("bench")
    assert _sha(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no -wal or -shm left behind


def test_a_reader_refuses_an_empty_file_and_leaves_it_empty(tmp_path):
    """The old reader wrote gemmlab's schema into an empty file named by GEMMLAB_DB."""
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(BadArgumentError, match=r"empty.db holds no gemmlab results \(an empty database\)"):
        ResultStore(path, write=False, named_by="GEMMLAB_DB")
    assert path.stat().st_size == 0


def test_a_reader_refuses_a_missing_file_and_makes_none(tmp_path):
    path = tmp_path / "no" / "such.db"
    with pytest.raises(BadArgumentError, match=r"cannot open .*such.db as a results database"):
        ResultStore(path, write=False)
    assert not (tmp_path / "no").exists()


def test_a_reader_sees_what_a_writer_commits_while_both_are_open(tmp_path):
    """A tune run writing (WAL) while a program reads its tuned parameters."""
    path = tmp_path / "live.db"
    with ResultStore(path) as writer:
        writer.start_run("tune")
        with ResultStore(path, integrity=False, write=False) as reader:
            assert len(reader.runs()) == 1
            writer.start_run("tune")
            assert len(reader.runs()) == 2
            with pytest.raises(sqlite3.OperationalError, match="readonly|query_only"):
                reader.start_run("bench")


def test_a_reader_reads_a_file_in_a_folder_it_cannot_write(tmp_path):
    """A tuning database shipped in a read-only folder (a read-only mount, an image's folder): a
    WAL file there needs a -shm file SQLite cannot make, and the read-only open refused it
    (SQLITE_READONLY_DIRECTORY); with no writer possible there it is read as immutable."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    with ResultStore(folder / "tuned.db") as store:
        store.start_run("tune")
    undo = _read_only(folder)
    if undo is None:
        pytest.skip("neither chattr nor the folder's mode stops root writing here")
    try:
        with ResultStore(folder / "tuned.db", integrity=False, write=False) as store:
            assert [r["kind"] for r in store.runs()] == ["tune"]
    finally:
        undo()
    assert sorted(p.name for p in folder.iterdir()) == ["tuned.db"]


def test_a_reader_through_a_link_judges_the_folder_of_the_file_itself(tmp_path):
    """A link in a writable folder to a file in a read-only one reads it (the folder looked at was
    the link's, and the read-only open was refused); a link in a read-only folder to a live file
    elsewhere is not read as immutable, which skips the rows still in its -wal."""
    shipped, live, links = tmp_path / "shipped", tmp_path / "live", tmp_path / "links"
    for folder in (shipped, live, links):
        folder.mkdir()
    _tuned_db(shipped / "tuned.db")
    (links / "to-shipped.db").symlink_to(shipped / "tuned.db")
    with ResultStore(live / "tuned.db") as writer:
        writer.start_run("tune")  # in the -wal while the writer is open (no checkpoint yet)
        (links / "to-live.db").symlink_to(live / "tuned.db")
        undo_shipped, undo_links = _read_only(shipped), _read_only(links)
        if undo_shipped is None:
            pytest.skip("neither chattr nor the folder's mode stops root writing here")
        try:
            with ResultStore(links / "to-shipped.db", integrity=False, write=False) as store:
                assert len(store.runs()) == 1
        finally:
            undo_shipped()
        try:
            with ResultStore(links / "to-live.db", integrity=False, write=False) as store:
                assert len(store.runs()) == 1
        finally:
            undo_links()


def test_a_wal_with_rows_and_no_shm_in_a_read_only_folder_is_refused_not_read_stale(tmp_path):
    """A copy shipped with its -wal but not its -shm: read as immutable it would skip the -wal's
    rows (here every row: an empty database); SQLite's read-only open refuses it instead."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    path = folder / "tuned.db"
    with ResultStore(path) as writer:
        writer.start_run("tune")
        copies = {p.name: p.read_bytes() for p in folder.iterdir()}  # as a crash leaves them
    for p in folder.iterdir():
        p.unlink()
    (folder / "tuned.db").write_bytes(copies["tuned.db"])
    (folder / "tuned.db-wal").write_bytes(copies["tuned.db-wal"])
    assert (folder / "tuned.db-wal").stat().st_size > 0
    undo = _read_only(folder)
    if undo is None:
        pytest.skip("neither chattr nor the folder's mode stops root writing here")
    try:
        with pytest.raises(BadArgumentError, match="cannot open .*tuned.db as a results database"):
            ResultStore(path, integrity=False, write=False)
    finally:
        undo()


def test_a_damage_report_of_several_lines_is_refused_in_one(tmp_path):
    """quick_check's first row may hold several lines ('*** in database main ***' then the page)."""
    from gemmlab.store import refusal

    path = _tuned_db(tmp_path / "t.db")

    class Reporting:  # the file's own answers, and a damage report of two lines
        def __init__(self, db):
            self.db = db
            self.in_transaction = db.in_transaction

        def execute(self, sql):
            if sql.startswith("PRAGMA quick_check"):
                return [("*** in database main ***\nOn tree page 3 cell 0: invalid page number 99",)]
            return self.db.execute(sql)

    with contextlib.closing(sqlite3.connect(path)) as db:
        why = refusal(Reporting(db), path)
    assert "\n" not in why
    assert why.endswith("is damaged (SQLite quick_check: *** in database main *** On tree page 3 cell 0: "
                        "invalid page number 99); name another one with --db")


# -- fourth audit (mutation testing of store.py): behaviours no test pinned before ----------------


def _foreign_with_tables(path, names):
    with contextlib.closing(sqlite3.connect(path)) as db:
        for name in names:
            db.execute(f"CREATE TABLE {name} (x)")
        db.commit()


@pytest.mark.parametrize("names, shown", [
    (["e", "d", "c", "b", "a"], "a, b, c, d, e)"),
    (["f", "e", "d", "c", "b", "a"], "a, b, c, d, e, ...)"),
])
def test_another_programs_database_is_named_by_its_first_five_tables(tmp_path, names, shown):
    """The refusal shows the foreign file's tables sorted, five at most, and '...' only where
    there are more than five: the user recognises which program's file was named."""
    path = tmp_path / "other.db"
    _foreign_with_tables(path, names)
    with pytest.raises(BadArgumentError) as info:
        ResultStore(path)
    assert f"(tables: {shown}; name another file with --db" in str(info.value)


_V1_RUNS = (("id", "INTEGER PRIMARY KEY AUTOINCREMENT"), ("started", "TEXT NOT NULL"), ("kind", "TEXT NOT NULL"),
            ("command", "TEXT"), ("env", "TEXT"), ("git_rev", "TEXT"), ("gpu", "TEXT"))


def _gemmlab_like(path, version):
    """A file with gemmlab's schema-1 tables made by hand, stamped with `version`."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        for table, schema in (("runs", _V1_RUNS), ("results", store_mod._V1_RESULT_SCHEMA)):
            db.execute(f"CREATE TABLE {table} ({', '.join(f'{name} {sqltype}' for name, sqltype in schema)})")
        db.execute(f"PRAGMA user_version = {version}")
        db.commit()
    return path


def test_a_file_stamped_with_a_later_version_lacking_its_columns_is_refused(tmp_path, monkeypatch):
    """The columns are checked against the schema of the file's own version (every migration up to
    it), not version 1's: a file stamped 2 without version 2's column is not gemmlab's."""
    def v2(db):
        db.execute("ALTER TABLE results ADD COLUMN occupancy REAL")

    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, v2])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", 2)
    path = _gemmlab_like(tmp_path / "r.db", 2)
    with pytest.raises(BadArgumentError, match="is an SQLite database of another program"):
        ResultStore(path)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("ALTER TABLE results ADD COLUMN occupancy REAL")
        db.commit()
    with ResultStore(path) as s:
        assert s.schema_version == 2


def test_integrity_false_skips_the_damage_check():
    """refusal(integrity=False) does not run quick_check (it reads the whole file): a report of
    damage is not looked for, so the file is not refused for it."""
    from gemmlab.store import refusal

    class Damaged:  # a gemmlab file's answers, but any quick_check reports damage
        def __init__(self, db):
            self.db, self.in_transaction = db, db.in_transaction

        def execute(self, sql):
            if sql.startswith("PRAGMA quick_check"):
                return [("On tree page 3 cell 0: invalid page number 99",)]
            return self.db.execute(sql)

    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        store_mod._schema_v1(db)
        db.execute("PRAGMA user_version = 1")
        assert refusal(Damaged(db), "x.db", integrity=False) is None
        assert "is damaged" in refusal(Damaged(db), "x.db", integrity=True)


def test_a_store_opened_without_integrity_does_not_check_the_whole_file(tmp_path, monkeypatch):
    """ResultStore(integrity=False) hands integrity=False on to the refusal check (the API's tuning
    reader opens with it so as not to read a large file through at every first call)."""
    path = _tuned_db(tmp_path / "t.db")
    seen = []
    real = store_mod.refusal
    monkeypatch.setattr(store_mod, "refusal", lambda db, p, integrity=True, named_by="--db":
                        seen.append((integrity, named_by)) or real(db, p, integrity, named_by))
    ResultStore(path, integrity=False, write=False, named_by="GEMMLAB_DB").close()
    ResultStore(path).close()
    assert seen == [(False, "GEMMLAB_DB"), (True, "--db")]


def test_a_refusal_names_the_setting_the_caller_gave(tmp_path):
    """named_by is what the user changes to name another file (GEMMLAB_DB for the API's reader):
    every refusal says it, the foreign-file one included."""
    path = tmp_path / "other.db"
    _foreign_with_tables(path, ["notes"])
    with pytest.raises(BadArgumentError, match=r"name another file with GEMMLAB_DB$"):
        ResultStore(path, write=False, named_by="GEMMLAB_DB")


def test_retry_gives_up_on_a_lock_after_its_tries_and_raises_other_errors_at_once(monkeypatch):
    """_retry waits out 'database is locked' a bounded number of times and then raises it (never
    returns None as if the statement had run); any other error is raised at its first try."""
    monkeypatch.setattr(store_mod.time, "sleep", lambda s: None)
    for message, tries in (("database is locked", 4), ("no such table: runs", 1)):
        calls = []

        def failing():
            calls.append(1)
            raise sqlite3.OperationalError(message)

        with pytest.raises(sqlite3.OperationalError, match=message):
            ResultStore._retry(failing, tries=4)
        assert len(calls) == tries, message


def test_a_migration_that_fails_leaves_the_file_at_its_version_and_unlocked(tmp_path, monkeypatch):
    """A migration step that raises (here not an SQLite error, as an interrupt would) is rolled back
    at once: the file keeps its version and columns, and no write lock is left held by the
    half-made store (another writer could not start until it was collected)."""
    path = tmp_path / "r.db"
    with ResultStore(path) as s:
        s.add_result(s.start_run("bench"), impl="k")

    def v2(db):
        db.execute("ALTER TABLE results ADD COLUMN occupancy REAL")
        raise RuntimeError("interrupted")

    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, v2])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", 2)
    with pytest.raises(RuntimeError, match="interrupted") as info:
        ResultStore(path)
    with contextlib.closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as db:
        db.execute("BEGIN IMMEDIATE")  # "database is locked" while the failed migration holds it
        db.execute("ROLLBACK")
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        assert "occupancy" not in {r[1] for r in db.execute("PRAGMA table_info(results)")}
    if os.path.isdir("/proc/self/fd"):  # nor the file left open by the half-made store
        assert _open_fds_to(path.resolve()) == []
    del info


def test_flags_are_stored_as_0_or_1_and_none_stays_null(tmp_path):
    """flush and clock_warning are booleans: any truthy value reads back 1, a falsy one 0, and a
    flag not known (None) stays NULL rather than becoming 'no'."""
    s = ResultStore(tmp_path / "r.db")
    run = s.start_run("bench")
    s.add_result(run, impl="a", flush=5, clock_warning=[])
    s.add_result(run, impl="b", flush=None, clock_warning=None)
    a, b = s.results()
    assert (a["flush"], a["clock_warning"]) == (1, 0)
    assert (b["flush"], b["clock_warning"]) == (None, None)


def test_status_and_impl_kind_may_be_left_unknown(tmp_path):
    """status=None and impl_kind=None (a point not verified, a row of another tool) are taken as
    NULL; only a value outside the known ones is refused."""
    s = ResultStore(tmp_path / "r.db")
    run = s.start_run("bench")
    s.add_result(run, impl="a", status=None, impl_kind=None)
    assert [(r["status"], r["impl_kind"]) for r in s.results()] == [(None, None)]


def test_json_columns_are_stored_with_sorted_keys(tmp_path):
    """params and extra are written as JSON with sorted keys, so the same parameters give the same
    text whatever order a caller built them in (SQL reads compare and group params as text)."""
    s = ResultStore(tmp_path / "r.db")
    run = s.start_run("tune", env={"git": "x", "a": 1})
    s.add_result(run, params={"BN": 64, "BM": 128}, extra={"z": 1, "a": 2})
    s.add_result(run, params={"BM": 128, "BN": 64})
    texts = [r["params"] for r in s.query("SELECT params FROM results ORDER BY id")]
    assert texts == ['{"BM": 128, "BN": 64}'] * 2
    assert s.query("SELECT extra FROM results WHERE extra IS NOT NULL") == [{"extra": '{"a": 2, "z": 1}'}]
    assert s.query("SELECT env FROM runs") == [{"env": '{"a": 1, "git": "x"}'}]



def _open_fds_to(path):
    fds = "/proc/self/fd"
    out = []
    for fd in os.listdir(fds):
        with contextlib.suppress(OSError):
            if os.readlink(os.path.join(fds, fd)) == str(path):
                out.append(fd)
    return out


def test_a_refused_file_is_not_left_open(tmp_path):
    """A refusal closes the connection it opened to look: the refused file is not held open while the
    error (and its traceback, which holds the half-made store) lives on in the caller."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd to count open files")
    path = tmp_path / "other.db"
    _foreign_with_tables(path, ["notes"])
    with pytest.raises(BadArgumentError) as info:
        ResultStore(path)
    assert _open_fds_to(path.resolve()) == []
    del info
