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
    (("scripts/sanitize_hgemm.py", "wmma", "--part", "rows256"),
     "wmma takes none of fp16, bf16, tf32 in part rows256: nothing to run"),
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
    (("scripts/host_speed.py", "--seconds", "0"), "--seconds must be above 0, not 0.0"),
    (("scripts/host_speed.py", "--pin", "100000"), "--pin 100000: not one of this process's CPUs"),
    (("scripts/changing_shapes.py", "--K", "0"), "--K and --N must be at least 1, not 0 and 4096"),
    (("scripts/changing_shapes.py", "--layout", "tn"), "invalid choice: 'tn'"),
    (("scripts/changing_shapes.py", "fp64"), "invalid choice: 'fp64'"),
    (("scripts/changing_shapes.py", "--cycle", "-1"), "--cycle, --executors and --graphs must be at least 0"),
    (("scripts/changing_shapes.py", "--passes", "0"), "--passes at least 1"),
    (("scripts/decision_cost.py", "--op", "sgemm", "--dtype", "bf16"), "--op sgemm takes fp32, not bf16"),
    (("scripts/decision_cost.py", "--shapes", "0"), "--N, --K, --shapes, --repeat and --first-m must be at least 1"),
    (("scripts/decision_cost.py", "--first-m", "0"), "--N, --K, --shapes, --repeat and --first-m must be at least 1"),
    (("scripts/first_call_cost.py", "--shapes", "0"), "--first-m, --shapes, --N and --K must be at least 1"),
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
    """sanitize_hgemm --count (no GPU): the parts that test_sanitizer runs one at a time (the
    per-type main parts and the 256-row part) add up to the whole sweep, and rung 5's ping-pong and one-consumer runs are in it."""
    def counts(*args):
        out = _run("scripts/sanitize_hgemm.py", *args, "--count")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.strip().splitlines()
        return {tuple(ln.split()[:2]): int(ln.split()[2]) for ln in lines[:-1]}, int(lines[-1].split()[-1])

    whole, total = counts()
    parts = [counts("--part", "main", "--dtypes", d) for d in ("fp16", "bf16", "tf32")]
    rows256, total256 = counts("--part", "rows256")
    assert sum(t for _, t in parts) + total256 == total == sum(whole.values())
    assert set(rows256) == {("persistent", "fp16"), ("persistent", "bf16")} and total256 > 0
    assert {k: v + rows256.get(k, 0) for c, _ in parts for k, v in c.items()} == whole
    assert whole[("persistent", "fp16")] == whole[("persistent", "bf16")] > 1000
    assert ("persistent", "tf32") not in whole and whole[("tf32_wgmma", "tf32")] > 300


def test_the_hgemm_sanitizer_sweep_runs_rung_5s_consumer_arrangements():
    """Rung 5's one-consumer, ping-pong and 256-row runs are in the sweep, each over problems
    (an empty problem list would run nothing under the sanitizer and pass)."""
    sweep = load("sanitize_hgemm.py")
    runs = [(problems, params["persistent"]) for impl, dtype, problems, params in sweep.plan("persistent", ("bf16",))
            if params]
    part = sweep.plan("persistent", ("bf16",), "rows256")
    assert part and all(params["persistent"]["BM"] == 256 for _, _, _, params in part)
    def problems_with(**want):
        return [p for problems, params in runs if all(params.get(k) == v for k, v in want.items()) for p in problems]

    assert problems_with(CONSUMERS=1)
    assert problems_with(PINGPONG=1)
    rows256 = problems_with(BM=256)
    assert {p.layout for p in rows256} == {"nn", "tt"}
    assert {p.out_dtype for p in rows256} == {"fp32", "bf16"}
    assert problems_with(BM=256, CN=2, TAILK=2) and problems_with(BM=256, CM=2, SPLITK=2)


def test_cluster_scaling_reports_a_failed_tune_in_one_line(tmp_path):
    # the tune run fails before it stores anything (an unknown kernel, on any machine): its
    # database was then opened for writing, made empty, and queried (a sqlite3 traceback)
    r = _run("scripts/cluster_scaling.py", "--impl", "no_such_kernel", "--modes", "local1", "--out", str(tmp_path))
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "local1 (exit 2) failed" in r.stderr.strip().splitlines()[-1]
    assert (tmp_path / "scaling.md").is_file() and not (tmp_path / "local1.db").exists()
