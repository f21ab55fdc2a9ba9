"""Three CLI defects left after session 35's sweep (no GPU): a refused command left behind the
empty folders it had made for its outputs; `tune --dry-run` ignored the options only a real run
uses; a file option typed with a trailing slash (`--db new/`) lost it to typer's Path and made a
FILE named new. Each test failed before its fix (noted per test)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .cli_lines import one_line, run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _refused(result, needle):
    code, _, err = result
    one_line(code, err, needle)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# --- 1. the folders a refused command made ------------------------------------------------------

REPORT_DB = str(FIXTURES / "report.db")


@pytest.mark.parametrize("args, needle", [
    (["bench", "--markdown", "new/x/t.md", "--impl", "bogus"], "unknown kernel 'bogus'"),
    (["bench", "--csv", "new/x/r.csv", "--json", "new/x/r.csv"], "both name"),
    (["bench", "--json", "new/r.json", "--M", "0"], "--M"),
    (["bench", "--api", "sgemm", "--markdown", "new/x/a.md", "--sizes", "abc"], "'abc'"),
    (["profile", "--reports", "new/x/reps", "--impl", "bogus"], "unknown kernel 'bogus'"),
    (["profile", "--csv", "new/x/p.csv", "--timeout", "nan"], "--timeout nan"),
    (["report", "--db", REPORT_DB, "--out", "new/x/rep", "--size", "12345"], "--size 12345"),
])
def test_a_refused_command_leaves_no_folder_it_made(capsys, tmp_path, monkeypatch, args, needle):
    """Was: the refusal's one line, and new/ (with new/x/) left behind, empty."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *args)
    assert code == 2 and needle in err, err
    assert _tree(tmp_path) == []


def test_folders_that_were_there_are_kept_even_empty(capsys, tmp_path, monkeypatch):
    """Only the levels the command made go: here, new/ under the empty folder that was there."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old").mkdir()
    code, _, err = run(capsys, "bench", "--markdown", "old/new/t.md", "--impl", "bogus")
    assert code == 2, err
    assert _tree(tmp_path) == ["old"]


def test_a_made_folder_that_holds_anything_is_kept_with_its_parents(tmp_path):
    from gemmlab.outputs import make_folder, remove_made_folders

    made = tmp_path / "a" / "b" / "c"
    make_folder(made)
    (tmp_path / "a" / "b" / "kept.txt").write_text("written meanwhile")
    remove_made_folders()
    assert _tree(tmp_path) == ["a", "a/b", "a/b/kept.txt"]


def test_a_command_that_succeeds_keeps_its_folders_and_the_next_removes_only_its_own(tmp_path):
    """A folder made by an earlier command in the process (empty, as a --reports folder with no
    report in it may be) is not the next command's to remove when that one is refused."""
    from gemmlab.outputs import make_folder, removes_made_folders_on_failure

    first = removes_made_folders_on_failure(lambda: make_folder(tmp_path / "first") or 0)
    second = removes_made_folders_on_failure(lambda: make_folder(tmp_path / "second") or 2)
    assert first() == 0 and second() == 2
    assert _tree(tmp_path) == ["first"]


# --- 2. tune --dry-run and the options only a run uses -------------------------------------------

@pytest.mark.parametrize("args, named", [
    (["--plot"], "--plot"),
    (["--db", "r.db"], "--db"),
    (["--resume"], "--resume"),
    (["--jobs", "2"], "--jobs"),
    (["--devices", "0"], "--devices"),
    (["--timeout", "120"], "--timeout"),  # the default's value, typed: given all the same
    (["--time", "10"], "--time"),
    (["--cluster", "local"], "--cluster"),
    (["--cluster", "local", "--compile-workers", "1", "--gpu", "H100"], "--cluster, --compile-workers, --gpu"),
])
def test_a_dry_run_refuses_what_only_a_run_uses(capsys, tmp_path, monkeypatch, args, named):
    """Was: exit 0 after counting the space, the option ignored without a word."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "tune", "--impl", "naive", "--dry-run", *args)
    one_line(code, err, f"{named}: not taken with --dry-run")
    assert out == "" and _tree(tmp_path) == []


def test_a_dry_run_takes_what_shapes_the_space_and_says_what_the_budget_leaves(capsys, tmp_path, monkeypatch):
    """Was: --budget accepted and never mentioned."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "tune", "--impl", "vectorize", "--dry-run", "--M", "1024", "--N", "1024",
                         "--K", "1024", "--op", "sgemm", "--dtype", "fp32", "--param", "BK=8,16",
                         "--strategy", "random", "--budget", "3", "--seed", "5")
    assert code == 0, err
    assert "--budget 3: a run would time 3 of the " in out
    assert _tree(tmp_path) == []


def test_a_bad_value_is_named_before_the_dry_run_refusal(capsys):
    _refused(run(capsys, "tune", "--impl", "naive", "--dry-run", "--devices", "0,0"), "names GPU 0 twice")


def test_bench_api_refuses_a_default_value_typed(capsys):
    """Was: --warmup 3 and --check passed with --api (the same values as the defaults), ignored."""
    _refused(run(capsys, "bench", "--api", "sgemm", "--warmup", "3", "--check", "--op", "sgemm"),
             "--op, --warmup, --check: not taken with --api")


# --- 3. a file option typed as a folder --------------------------------------------------------

@pytest.mark.parametrize("args, typed", [
    (["analyze", "--arch", "sm_90", "--impl", "naive", "--db", "new/"], "--db 'new/'"),
    (["analyze", "--arch", "sm_90", "--impl", "naive", "--db=new/."], "--db 'new/.'"),
    (["tune", "--impl", "naive", "--db", "new/"], "--db 'new/'"),
    (["bench", "--impl", "naive", "--csv", "new/"], "--csv 'new/'"),
    (["bench", "--impl", "naive", "--json", "new/"], "--json 'new/'"),
    (["bench", "--impl", "naive", "--markdown", "new/"], "--markdown 'new/'"),
    (["bench", "--impl", "naive", "--db", "new/"], "--db 'new/'"),
    (["profile", "--impl", "naive", "--csv", "new/"], "--csv 'new/'"),
])
def test_a_file_option_typed_as_a_folder_is_refused(capsys, tmp_path, monkeypatch, args, typed):
    """Was: analyze wrote its rows to a FILE named new (exit 0); the others went on to 'no GPU' or
    'no ncu' (and on a GPU machine would have written the file new)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *args)
    one_line(code, err, f"{typed} names a folder: give a file path such as 'new/results.")
    assert _tree(tmp_path) == []


def test_a_file_typed_with_a_slash_after_it_is_not_read(capsys, tmp_path, monkeypatch):
    """Was: report read report.db as if the '/' were not there (exit 0)."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(FIXTURES / "report.db", tmp_path / "report.db")
    code, _, err = run(capsys, "report", "--db", "report.db/", "--out", "rep")
    one_line(code, err, "--db 'report.db/' names a folder: give a file path such as 'report.db'")
    assert _tree(tmp_path) == ["report.db"]


def test_an_existing_folder_is_refused_typed_either_way(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    _refused(run(capsys, "analyze", "--arch", "sm_90", "--impl", "naive", "--db", "dir/"), "names a folder")
    _refused(run(capsys, "analyze", "--arch", "sm_90", "--impl", "naive", "--db", "dir"), "is a directory")
    assert _tree(tmp_path) == ["dir"]
