"""The scripts/ entry points fail as the CLI does: bad input is one line on stderr and exit 2,
never a traceback (gemmlab.errors.run_script); --help prints usage and changes nothing."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemmlab.errors import BadArgumentError, VerificationError, run_script

ROOT = Path(__file__).resolve().parents[2]


def _run(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [
    ("scripts/sanitize_hgemm.py", "no_such_kernel"),
    ("scripts/sanitize_kernels.py", "--op", "bgemm", "no_such_kernel"),
    ("scripts/hgemm_variants.py", "--sizes", "4096x"),
    ("scripts/profile_hgemm.py", "persistent", "bf16", "64", "CM=two"),
], ids=lambda a: " ".join(a))
def test_bad_input_is_one_line_and_exit_2(args):
    r = _run(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].split(": ")[1] == "error", r.stderr


def test_help_writes_nothing():
    target = ROOT / "src/gemmlab/kernels/hgemm/wgmma_ops.cuh"
    before = target.stat().st_mtime_ns
    r = _run("scripts/gen_wgmma_ops.py", "--help")
    assert r.returncode == 0 and "usage" in r.stdout
    assert target.stat().st_mtime_ns == before, "--help regenerated the file"


def test_run_script_maps_failures_to_exit_codes(capsys):
    def bad():
        raise BadArgumentError("size 'x' is not an integer")

    def wrong():
        raise VerificationError("max error 3.0 above the bound")

    def missing():
        import gemmlab_no_such_module  # noqa: F401

    assert run_script(bad) == 2
    assert run_script(wrong) == 1
    assert run_script(missing) == 2
    assert run_script(lambda: None) == 0 and run_script(lambda: 1) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and "gemmlab_no_such_module" in lines[2]
