"""The scripts/ entry points fail as the CLI does: bad input is a clear error line on stderr and
exit 2, never a traceback (gemmlab.errors.run_script, argparse); --help prints usage and
changes nothing."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemmlab.errors import BadArgumentError, VerificationError, run_script

from .scripts_loader import load

ROOT = Path(__file__).resolve().parents[2]


def _run(*args):
    path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,message", [
    (("scripts/sanitize_hgemm.py", "no_such_kernel"), "unknown kernel 'no_such_kernel'"),
    (("scripts/sanitize_hgemm.py", "--dtypes", "fp8"), "--dtypes takes fp16, bf16, tf32"),
    (("scripts/sanitize_hgemm.py", "wmma", "--dtypes", "tf32"), "wmma takes none of tf32: nothing to run"),
    (("scripts/sanitize_kernels.py", "--op", "bgemm", "no_such_kernel"), "unknown kernel 'no_such_kernel'"),
    (("scripts/sanitize_reduce.py", "a", "b"), "unrecognized arguments: b"),
    (("scripts/hgemm_variants.py", "--sizes", "4096x"), "size '4096x' is not an integer or MxNxK"),
    (("scripts/hgemm_variants.py", "--bn", "wide"), "take comma-separated integers"),
    (("scripts/hgemm_variants.py", "--dtype", "fp64"), "invalid choice: 'fp64'"),
    (("scripts/profile_hgemm.py", "persistent", "bf16", "64", "CM=two"), "parameters are NAME=INTEGER"),
    (("scripts/profile_hgemm.py", "persistent", "bf16", "64", "CM=²"), "parameters are NAME=INTEGER"),
    (("scripts/profile_hgemm.py", "persistent", "fp64", "64"), "invalid choice: 'fp64'"),
    (("scripts/build_dispatch.py", "--merge", "no-such-part.json", "--out", "x.json"), "no-such-part.json"),
    (("scripts/cluster_scaling.py", "--modes", "local1,fast", "--out", "x"), "--modes: unknown fast"),
], ids=lambda a: " ".join(a) if isinstance(a, tuple) else None)
def test_bad_input_is_an_error_line_and_exit_2(args, message):
    r = _run(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert ": error: " in last and message in last, r.stderr


def test_help_writes_nothing(tmp_path, monkeypatch):
    gen = load("gen_wgmma_ops.py")
    monkeypatch.setattr(gen, "OUT", tmp_path / "wgmma_ops.cuh")
    with pytest.raises(SystemExit) as done:
        gen.main(["--help"])
    assert done.value.code == 0
    assert not (tmp_path / "wgmma_ops.cuh").exists(), "--help wrote the wrappers"


def test_run_script_maps_failures_to_exit_codes(capsys):
    def bad():
        raise BadArgumentError("size 'x' is not an integer")

    def wrong():
        raise VerificationError("max error 3.0 above the bound")

    def missing():
        import gemmlab_no_such_package  # noqa: F401

    assert run_script(bad) == 2
    assert run_script(wrong) == 1
    assert run_script(missing) == 2
    assert run_script(lambda: None) == 0 and run_script(lambda: 1) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and "gemmlab_no_such_package" in lines[2]


def test_a_missing_gemmlab_module_is_a_bug_not_a_missing_package():
    def broken():
        import gemmlab.no_such_module  # noqa: F401

    with pytest.raises(ModuleNotFoundError):
        run_script(broken)


def test_the_hgemm_sanitizer_sweep_splits_by_type_into_parts_that_cover_it():
    """sanitize_hgemm --count (no GPU): the per-type parts that test_sanitizer runs one at a time
    add up to the whole sweep, and rung 5's ping-pong and one-consumer runs are in it."""
    def counts(*args):
        out = _run("scripts/sanitize_hgemm.py", *args, "--count")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.strip().splitlines()
        return {tuple(ln.split()[:2]): int(ln.split()[2]) for ln in lines[:-1]}, int(lines[-1].split()[-1])

    whole, total = counts()
    parts = [counts("--dtypes", d) for d in ("fp16", "bf16", "tf32")]
    assert sum(t for _, t in parts) == total == sum(whole.values())
    assert {k: v for c, _ in parts for k, v in c.items()} == whole
    assert whole[("persistent", "fp16")] == whole[("persistent", "bf16")] > 1000
    assert ("persistent", "tf32") not in whole and whole[("tf32_wgmma", "tf32")] > 300
