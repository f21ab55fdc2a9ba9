"""Running the CLI in-process and the one-line refusal every bad input must get (exit 2, a single
line starting "error: "), for the new-user review tests."""
from gemmlab.cli import main


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(code, err, needle):
    assert code == 2 and needle in err, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
