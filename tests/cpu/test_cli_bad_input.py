"""The CLI's answers to input it cannot use, found by a pass over every command's options
(session 27): one line and exit 2, before any work, and nothing written."""
import pytest

from gemmlab.errors import BadArgumentError


@pytest.mark.parametrize("address", ["bogus", "", "tcp://", "LOCAL", "tcp://h:abc", "udp://1.2.3.4:1",
                                     "tcp://h:99999", "tcp://h:0", "tcp://:8786", "h:８７８６", "::1:8786"])
def test_a_cluster_address_that_cannot_be_one_is_refused_before_connecting(address, capsys):
    """Not 'local' nor [tcp|tls|ucx://]HOST:PORT with PORT 1-65535: one line, exit 2, no wait (a
    port past 65535 used to wait out the 30 s timeout; 'bogus' raised distributed's ValueError)."""
    from gemmlab.cli import main
    from gemmlab.tune.cluster import check_address

    with pytest.raises(BadArgumentError, match="give 'local' or a Dask scheduler's address"):
        check_address(address)
    assert main(["tune", "--impl", "naive", "--cluster", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --cluster") and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("address", ["local", "tcp://10.0.0.5:8786", "10.0.0.5:8786", "tls://sched:8786",
                                     "tcp://[::1]:8786", "ucx://gpu-node:13337", "[::1]:8786", "wss://sched:443"])
def test_scheduler_addresses_pass_the_check(address):
    from gemmlab.tune.cluster import check_address

    check_address(address)


def test_an_argument_that_is_not_utf8_is_refused_before_any_file_is_made(tmp_path, capsys):
    """A stray byte in --title/--out/--db (os.fsdecode keeps it as a lone surrogate) made report
    and analyze fail with an internal error after creating a 0-byte page or a database."""
    from gemmlab.cli import main

    out, db = tmp_path / "rep", tmp_path / "x.db"
    for args in (["report", "--db", str(db), "--out", str(out), "--title", "bad \udcff"],
                 ["analyze", "--impl", "naive", "--db", str(tmp_path / "\udcfe.db")]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: argument ") and "is not UTF-8 text" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_gemmlab_ncu_must_name_a_program(tmp_path, monkeypatch):
    """GEMMLAB_NCU naming a folder or a plain file is no ncu (it was taken for one, and failed
    when run); a runnable file is."""
    from gemmlab.profile.ncu import find_ncu

    plain = tmp_path / "ncu.txt"
    plain.write_text("")
    program = tmp_path / "ncu"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    for path, found in ((tmp_path, None), (plain, None), (program, str(program))):
        monkeypatch.setenv("GEMMLAB_NCU", str(path))
        assert find_ncu() == found


def test_compile_failures_are_counted_before_the_first_ones_words(tmp_path, monkeypatch, capsys):
    """Two kernels that use cp.async (sm_80) refused by ptxas for sm_75: the line says how many
    failed, then the first one's error ("(and 1 more)" after ptxas's words read as part of them)."""
    from gemmlab.cli import main

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    assert main(["compile", "--arch", "sm_75", "--impl", "async_pipeline,bigtile"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 2 kernels failed to compile; the first: async_pipeline") and "cp.async" in err, err
    assert "more)" not in err and len(err.strip().splitlines()) == 1

