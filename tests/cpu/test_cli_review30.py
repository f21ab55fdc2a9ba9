"""Session 30's new-user walk-through (no GPU): what a command cannot record into or write is said
before "no GPU" and before any work; writability is tried, not asked (root passes every access
check); API misuse that returned an empty list or raised another library's error."""
import sys
from pathlib import Path

import pytest

import gemmlab

from .cli_lines import one_line, run

# /proc takes no new file, for root too (os.access says it is writable for root)
PROC = Path("/proc")
needs_proc = pytest.mark.skipif(not PROC.is_dir(), reason="needs Linux's /proc (a folder no one can create files in)")


def _garbage(path: Path) -> Path:
    path.write_bytes(b"not a database at all, " * 64)
    return path


@pytest.mark.parametrize("command", [
    ["bench", "--impl", "naive", "--sizes", "64"],
    ["tune", "--impl", "vectorize", "--M", "256", "--N", "256", "--K", "256", "--param", "BK=8"],
])
def test_a_database_it_cannot_use_is_said_before_no_gpu(capsys, tmp_path, command):
    """Was: "no GPU" on a machine without one, and the database's problem only once a GPU was
    there; the file is left byte for byte."""
    db = _garbage(tmp_path / "bad.db")
    before = db.read_bytes()
    code, out, err = run(capsys, *command, "--db", db)
    one_line(code, err, "is not a usable gemmlab results database")
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.db"]


@needs_proc
def test_a_database_folder_that_takes_no_file_is_refused_before_the_analysis(capsys, tmp_path):
    """Was: the whole analysis printed, then "cannot open ... as a results database"."""
    code, out, err = run(capsys, "analyze", "--impl", "naive", "--arch", "sm_90", "--db",
                         PROC / "gemmlab-no-such-folder" / "r.db")
    one_line(code, err, "cannot open /proc/gemmlab-no-such-folder/r.db as a results database")
    assert "naive" not in out


def test_a_new_database_is_not_made_by_the_check(capsys, tmp_path, monkeypatch):
    """The check before work tries the folder with a file it removes: without a GPU, bench stops
    at "no GPU" (or runs, with one) and leaves no database and no folder made for it."""
    from gemmlab.outputs import database_ready

    database_ready(tmp_path / "new" / "deeper" / "r.db")
    assert list(tmp_path.iterdir()) == []


@needs_proc
@pytest.mark.parametrize("option", ["--markdown", "--csv", "--json"])
def test_an_output_in_a_folder_that_takes_no_file_is_refused(capsys, option):
    code, out, err = run(capsys, "bench", "--impl", "naive", "--sizes", "64", option, PROC / "gemmlab-x.out")
    one_line(code, err, "is not writable")


@needs_proc
def test_an_existing_file_that_cannot_be_written_is_refused():
    from gemmlab.errors import BadArgumentError
    from gemmlab.outputs import output_file

    with pytest.raises(BadArgumentError, match="is not writable"):
        output_file(PROC / "version", "--markdown")  # read-only for root too


@pytest.mark.parametrize("options", [("--csv", "--json"), ("--csv", "--markdown"), ("--json", "--markdown")])
def test_two_outputs_naming_one_file_are_refused(capsys, tmp_path, monkeypatch, options):
    monkeypatch.chdir(tmp_path)
    first, second = options
    code, out, err = run(capsys, "bench", "--impl", "naive", "--sizes", "64", first, "out.txt", second,
                         tmp_path / "out.txt")
    one_line(code, err, f"{first} and {second} both name")


def test_profile_refuses_one_file_for_csv_and_json(capsys, tmp_path):
    code, out, err = run(capsys, "profile", "--impl", "naive", "--csv", tmp_path / "x", "--json", tmp_path / "x")
    one_line(code, err, "--csv and --json both name")


@pytest.mark.parametrize("args, needle", [
    (["compile", "--impl", "nosuch"], "unknown kernel 'nosuch'"),
    (["compile", "--impl", "vectorize", "--params", "BM=7"], "breaks constraint"),
])
def test_compile_names_and_params_before_the_gpu_is_asked(capsys, args, needle):
    """Was: "no GPU ...; pass --arch" for a typo in a kernel's name."""
    code, out, err = run(capsys, *args)
    one_line(code, err, needle)


def test_a_failed_write_after_the_work_is_one_line_exit_2(capsys, monkeypatch):
    """A disk that fills during the run: one line naming the file, not "internal error" (exit 3)."""
    import gemmlab.envinfo

    def full(*_):
        raise OSError(28, "No space left on device", "table.md")

    monkeypatch.setattr(gemmlab.envinfo, "collect_env", full)
    code, out, err = run(capsys, "env")
    one_line(code, err, "No space left on device: table.md")


def test_list_kernels_refuses_an_unknown_op():
    with pytest.raises(gemmlab.BadArgumentError, match="op 'nope': choose one of"):
        gemmlab.list_kernels("nope")
    with pytest.raises(gemmlab.BadArgumentError):
        gemmlab.list_kernels(5)


def test_list_kernels_of_every_op_names_each_once():
    names = gemmlab.list_kernels(None)
    assert len(names) == len(set(names))
    assert {"naive", "persistent", "cublas"} <= set(names)
    assert gemmlab.list_kernels("hgemm")[0] != gemmlab.list_kernels("sgemm")[0]


def test_register_torch_ops_without_torch_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(gemmlab.GemmlabError, match="register_torch_ops needs torch: pip install torch"):
        gemmlab.register_torch_ops()


def test_use_tuning_says_what_is_wrong_once(tmp_path):
    bad = _garbage(tmp_path / "bad.db")
    with pytest.raises(gemmlab.BadArgumentError) as info:
        gemmlab.use_tuning(bad)
    text = str(info.value)
    assert text.count("results database") == 1 and "--db" not in text, text
    assert "name another one with gemmlab.use_tuning(path)" in text
    with pytest.raises(gemmlab.BadArgumentError, match="is a directory"):
        gemmlab.use_tuning(tmp_path)


def test_a_named_tool_that_is_missing_is_named(monkeypatch, tmp_path):
    """GEMMLAB_NCU or GEMMLAB_CUOBJDUMP naming nothing: the message names the variable's value
    (was: "not found on PATH or in GEMMLAB_NCU", and a missing GEMMLAB_CUOBJDUMP passed over)."""
    from gemmlab.profile import ncu, sass

    missing = str(tmp_path / "nothing")
    monkeypatch.setenv("GEMMLAB_NCU", missing)
    monkeypatch.setenv("GEMMLAB_CUOBJDUMP", missing)
    assert ncu.find_ncu() is None and ncu.no_ncu().startswith(f"GEMMLAB_NCU={missing!r}")
    assert sass.find_tool() is None and missing in sass.no_tool()
    monkeypatch.delenv("GEMMLAB_NCU")
    monkeypatch.delenv("GEMMLAB_CUOBJDUMP")
    assert ncu.no_ncu() == ncu.NO_NCU and sass.no_tool() == sass.NO_TOOL


def _damaged(path: Path) -> Path:
    """A gemmlab database whose later pages are overwritten (quick_check fails), in rollback-journal
    mode, so that a switch to WAL would show in its header."""
    import sqlite3

    from gemmlab.store import ResultStore

    with ResultStore(path) as store:
        for n in range(3000):
            store.start_run("bench", f"gemmlab bench --impl run{n}", {"gpu": {"name": "x" * 40}})
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()
    data = bytearray(path.read_bytes())
    assert len(data) > 42 * 4096, "enough pages to damage"
    for page in (40, 41):
        data[page * 4096 + 8: page * 4096 + 200] = b"\xff" * 192
    path.write_bytes(bytes(data))
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    assert [r[0] for r in db.execute("PRAGMA quick_check(1)")] != ["ok"], "the damage is seen"
    db.close()
    return path


def test_a_damaged_database_is_refused_untouched_before_no_gpu(capsys, tmp_path):
    """Review of session 30: the first version of the early check opened the file as the run does,
    without the damage scan, and so switched it to WAL before anything refused it."""
    db = _damaged(tmp_path / "dmg.db")
    before = db.read_bytes()
    code, out, err = run(capsys, "bench", "--impl", "naive", "--sizes", "64", "--db", db)
    one_line(code, err, "is damaged")
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dmg.db"]


@pytest.mark.parametrize("which", ["dir", "damaged"])
def test_analyze_refuses_its_database_before_printing_anything(capsys, tmp_path, which):
    db = tmp_path / "adir" if which == "dir" else _damaged(tmp_path / "dmg.db")
    if which == "dir":
        db.mkdir()
    code, out, err = run(capsys, "analyze", "--impl", "naive", "--arch", "sm_90", "--db", db)
    one_line(code, err, "is a directory" if which == "dir" else "is damaged")
    assert out == ""


def test_a_device_may_take_two_outputs():
    from gemmlab.outputs import distinct

    null = Path("/dev/null")
    if not null.exists():
        pytest.skip("no /dev/null")
    distinct(("--csv", null), ("--json", null), ("--markdown", null))  # no error


def test_an_unexpected_oserror_is_still_an_internal_error(capsys, monkeypatch):
    """Only errors of the environment (a full disk, a read-only file system, no permission) are
    exit 2; a missing file that gemmlab itself should have (a packaged kernel) is a bug, exit 3."""
    import gemmlab.envinfo

    def missing(*_):
        raise FileNotFoundError(2, "No such file or directory", "kernels/sgemm/01_naive.cu")

    monkeypatch.setattr(gemmlab.envinfo, "collect_env", missing)
    code, out, err = run(capsys, "env")
    assert code == 3 and err.startswith("internal error: FileNotFoundError") and len(err.splitlines()) == 1
