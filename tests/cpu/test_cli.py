"""Bad input gets one clear line and exit code 2, never a traceback - with or without a GPU."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gemmlab.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("args,needle", [
    (["bench", "--M", "x"], "--M"),
    (["bench", "--M", "5"], "all three"),
    (["bench", "--sizes", "0"], ">= 1"),
    (["bench", "--sizes", "12,abc"], "not an integer"),
    (["bench", "--impl", "nope"], "unknown kernel 'nope'"),
    (["bench", "--impl", "vectorize", "--params", "TM=3"], "TM must divide BM"),
    (["bench", "--impl", "vectorize", "--params", "TM"], "NAME=VALUE"),
    (["bench", "--impl", "naive,vectorize", "--params", "BK=8"], "exactly one kernel"),
    (["compile", "--arch", "sm_90", "--impl", "vectorize", "--params", "BM=3"], "breaks constraint"),
    (["compile", "--arch", "foo"], "sm_90"),
    (["bench", "--nonsense"], "nonsense"),
    (["bench", "--impl", "vectorize", "--params", "BM=64,BM=128"], "names BM twice"),
    (["bench", "--sizes", ""], "--sizes is empty"),
    (["bench", "--op", "reduce", "--n", ","], "--n is empty"),
    (["bench", "--op", "hgemm", "--dtype", ""], "--dtype ''"),
    (["bench", "--api", "sgemm", "--db", "x.db", "--impl", "naive"], "--impl, --db: not taken with --api"),
    (["compile", "--arch", "sm_90", "--impl", "cublas"], "names no gemmlab kernel"),
    (["analyze", "--op", "reduce", "--M", "5"], "--M: for the GEMM ops"),
    (["analyze", "--impl", "naive", "--no-store", "--db", "x.db"], "--db with --no-store"),
    (["bench", "--sizes", "99999999999"], "past 2^31 - 65536"),
    (["bench", "--op", "bgemm", "--sizes", "0x512"], "size '0x512': "),
    (["tune", "--impl", "naive", "--op", "foo"], "--op 'foo': choose"),
    (["bench", "--api", "sgemm", "--repeat", "5", "--no-check"], "--repeat, --no-check: not taken with --api"),
    (["bench", "--op", "reduce", "--n", "3^65-18446744073709551000"], "too large"),
    # options that were ignored (session 27): verify's sweep ran its own scalars whatever --alpha/--beta
    # said, an empty --layout or --out-dtype was read as the default, profile read --M/--K with --op reduce
    # as nothing at all (the options have defaults)
    (["verify", "--alpha", "2"], "--alpha and --beta go with --M/--N/--K"),
    (["verify", "--op", "bgemm", "--beta", "3"], "--alpha and --beta go with --M/--N/--K"),
    (["bench", "--op", "hgemm", "--layout", ""], "--layout is empty"),
    (["analyze", "--op", "hgemm", "--impl", "persistent", "--out-dtype", " "], "--out-dtype is empty"),
    (["profile", "--op", "reduce", "--M", "5", "--K", "5"], "--K/--M: for the GEMM ops; --op reduce takes --n"),
    # an empty item was skipped, so a value lost in a typo ran the rest without a word (session 30)
    (["bench", "--sizes", "1024,,2048"], "--sizes '1024,,2048' has an empty item"),
    (["bench", "--sizes", "1024,"], "--sizes '1024,' has an empty item"),
    (["bench", "--op", "bgemm", "--sizes", "8x64,,8x128"], "has an empty item"),
    (["bench", "--op", "reduce", "--n", "1024,,4096"], "--n '1024,,4096' has an empty item"),
    (["bench", "--api", "sgemm,", "--sizes", "512"], "--api 'sgemm,' has an empty item"),
    (["bench", "--api", "sgemm", "--sizes", "512,,4096"], "--sizes '512,,4096' has an empty item"),
    (["bench", "--api", "reduce", "--n", "1024,,4096"], "--n '1024,,4096' has an empty item"),
    (["tune", "--impl", "vectorize", "--devices", "0,,1"], "--devices '0,,1' has an empty item"),
    (["bench", "--api", "sgemm", "--n", "1024"], "--n sizes the reduce calls, and --api 'sgemm' times none"),
    (["tune", "--impl", "vectorize", "--param", "BM=64,,128"], "--param BM '64,,128' has an empty item"),
    (["tune", "--impl", "vectorize,naive"], "searches one kernel's space at a time"),
    (["bench", "--impl", "all,naive"], "'all' stands alone"),
    (["bench", "--op", "bgemm", "--sizes", "8x512", "--batch", "4"], "and so does --batch 4"),
    (["bench", "--api", "reduce", "--sizes", "1024"], "--sizes sizes the sgemm or hgemm calls"),
    (["analyze", "--op", "reduce", "--M", "5", "--K", "5"], "--K/--M: for the GEMM ops; --op reduce takes --n"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, needle):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert needle in err
    assert err.startswith("error: ") and "Traceback" not in err + out
    assert len(err.strip().splitlines()) == 1, err


def test_compile_all_without_gpu(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    code, out, err = run(capsys, "compile", "--arch", "sm_90", "--impl", "naive,vectorize")
    assert code == 0, err
    assert "naive" in out and "vectorize" in out


def test_list_shows_the_ladder(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    for name in ("naive", "vectorize", "tiled_rb2x4", "cublas"):
        assert name in out


def test_env_works_without_gpu(capsys):
    code, out, err = run(capsys, "env")
    assert code == 0, err
    nvrtc = [line.split("nvrtc", 1)[1].strip(" │|") for line in out.splitlines() if line.strip(" │|").startswith("nvrtc")]
    assert len(nvrtc) == 1 and re.fullmatch(r"\d+\.\d+", nvrtc[0]), f"the compiler's version, with or without a GPU: {nvrtc}"
    reason = [line for line in out.splitlines() if "gpu_reason" in line]
    assert len(reason) == 1
    if not _has_gpu():  # why there is none: some reason, whichever the driver gave
        text = reason[0].split("gpu_reason", 1)[1].strip(" │|")
        assert text and text != "-", reason[0]


def test_ctrl_c_in_a_command_exits_130_with_one_line(capsys, monkeypatch):
    """Typer turns a KeyboardInterrupt inside a command into an exit code that a non-standalone
    app returns rather than raises: main read it as success (exit 0, nothing said) until session 30."""
    import gemmlab.envinfo

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(gemmlab.envinfo, "collect_env", interrupted)
    code, out, err = run(capsys, "env")
    assert code == 130
    assert err == "error: interrupted (results recorded so far are kept)\n"


def test_sigint_to_the_command_line_exits_130():
    """The same through a real SIGINT to a running `gemmlab compile` (NVRTC works without a GPU),
    in a fresh cache: the signal goes once the first kernel is in the cache (main is running, past
    the imports) and the others are still compiling."""
    import os
    import signal
    import tempfile
    import time

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": SRC, "GEMMLAB_CACHE": cache}
        # SIGINT at its default in the child, whatever this process inherited: a test run started in
        # the background by a shell without job control ignores it, the child would inherit that,
        # and Python installs no KeyboardInterrupt handler for a signal ignored at its start
        proc = subprocess.Popen([sys.executable, "-m", "gemmlab.cli", "compile", "--arch", "sm_90"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while not any(Path(cache).rglob("*.cubin")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is not None:  # only a compile that succeeded may finish first
            assert proc.returncode == 0, f"compile failed before the signal: {proc.communicate()[1]}"
            pytest.skip("compile finished before the signal (a fast machine with a warm NVRTC)")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err


def test_console_script_entry_point_runs():
    """The `gemmlab` command that pyproject's [project.scripts] installs: the script itself where
    the install made one beside this Python, else the entry point loaded by name (`python -m
    gemmlab.cli` would pass whatever the entry point named)."""
    from importlib.metadata import entry_points

    points = entry_points(group="console_scripts", name="gemmlab")
    if not points:
        pytest.skip("gemmlab is not installed here (run from the tree): no console script to run")
    script = Path(sys.executable).parent / "gemmlab"
    load = ("import sys; from importlib.metadata import entry_points; "
            "sys.exit(entry_points(group='console_scripts', name='gemmlab')['gemmlab'].load()())")
    cmd = [str(script)] if script.exists() else [sys.executable, "-c", load]
    proc = subprocess.run([*cmd, "bench", "--impl", "nope"], capture_output=True, text=True,
                          env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and proc.stderr.startswith("error: unknown kernel"), proc.stderr


def _has_gpu():
    from gemmlab.cuda.device import gpu_available

    return gpu_available()[0]


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU: the no-GPU message cannot be seen here")
@pytest.mark.parametrize("cmd", [["bench", "--sizes", "64"], ["verify", "--impl", "naive"]])
def test_no_gpu_is_one_line_exit_2(capsys, tmp_path, cmd):
    code, out, err = run(capsys, *cmd, *(["--db", str(tmp_path / "r.db")] if cmd[0] == "bench" else []))
    assert code == 2 and err.startswith("error: no GPU") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.db").exists(), "nothing is recorded when nothing ran"


def test_markdown_tables_from_results():
    from gemmlab.harness.bench import PointResult
    from gemmlab.problem import GemmProblem
    from gemmlab.harness.tables import bench_tables, to_markdown
    from gemmlab.harness.timing import Stats

    p = GemmProblem(64, 64, 64)
    rows = [PointResult("naive", "kernel", p, "PASS", stats=Stats((1.0,))),
            PointResult("vectorize", "kernel", p, "PASS", stats=Stats((0.5,))),
            PointResult("cublas", "baseline", p, "PASS", stats=Stats((0.25,)))]
    gflops, share, speedup = bench_tables(rows)
    md = to_markdown(share)
    assert "| vectorize | 50.0% |" in md and md.splitlines()[3].startswith("| ---")
    assert "| vectorize | 2.00x |" in to_markdown(speedup)


def _sha(path):
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _foreign_db(path):
    import sqlite3

    db = sqlite3.connect(path)
    db.execute("CREATE TABLE runs (who TEXT)")
    db.execute("INSERT INTO runs VALUES ('someone else')")
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize("command", [["analyze", "--impl", "naive", "--arch", "sm_90"], ["report"]])
def test_another_programs_database_is_refused_untouched(capsys, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    db = _foreign_db(tmp_path / "theirs.db")
    before = _sha(db)
    code, out, err = run(capsys, *command, "--db", str(db))
    assert code == 2 and "is an SQLite database of another program (tables: runs)" in err, err
    assert len(err.strip().splitlines()) == 1 and _sha(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]  # no -wal, no report folder


@pytest.mark.parametrize("args, needle", [
    (["bench", "--markdown", "{file}/x.md"], "--markdown"),
    (["bench", "--csv", "{dir}"], "is a directory"),
    (["bench", "--json", "{file}/x.json"], "--json"),
    (["analyze", "--impl", "naive", "--arch", "sm_90", "--db", "{dir}"], "is a directory"),
    (["bench", "--op", "reduce", "--n", "9^999999999"], "too large"),
    (["bench", "--op", "reduce", "--n", "1<<99999999999999"], "too large"),
    (["bench", "--api", "sgemm", "--sizes", ","], "--sizes is empty"),
    (["bench", "--api", "sgemm", "--markdown", "{dir}"], "is a directory"),
    (["report", "--db", "{dir}"], "is a directory"),
    (["report", "--db", "{ours}", "--out", "{file}"], "is a file"),
    (["analyze", "--impl", "naive", "--arch", "sm_90", "--db", "{file}/r.db"], "cannot open"),
])
def test_unusable_paths_and_sizes_are_one_line_exit_2_before_any_work(capsys, tmp_path, monkeypatch, args, needle):
    """Output files are checked before a run is spent on them; sizes whose value would take
    minutes to compute are refused before computing it."""
    from gemmlab.store import ResultStore

    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    ResultStore(tmp_path / "ours.db").close()
    names = {"file": str(tmp_path / "afile"), "dir": str(tmp_path / "adir"), "ours": str(tmp_path / "ours.db")}
    code, out, err = run(capsys, *[a.format(**names) for a in args])
    assert code == 2 and needle in err, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def test_a_huge_input_is_echoed_in_a_bounded_line(capsys):
    code, out, err = run(capsys, "bench", "--op", "x" * 100_000)
    assert code == 2 and err.startswith("error: ") and len(err) < 500 and "(1000" in err, err[:200]
