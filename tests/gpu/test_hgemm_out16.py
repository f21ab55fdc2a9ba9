"""C in the input type on the GPU (--out-dtype fp16|bf16): rung 5 with OUT16 and the baselines (cuBLAS
GemmEx with a 16-bit C, torch.mm / addmm_ into a 16-bit tensor), each against the fp64 product with
the bounds of a 16-bit result (ops/hgemm_check.py), C NaN-poisoned in its own storage when beta == 0
and a 16-bit C0 read when beta != 0; both layouts, the odd-shape and aligned sweeps, larger shapes,
other parameters. Then the rounding itself, exactly: at K = 1 the fp32 result is the exact product
(times alpha = 1.5, still exact), so every implementation must return its round-to-nearest-even
bits - the kernel's cvt.rn and cuBLAS's epilogue alike."""
import numpy as np
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops import hgemm_check as hv
from gemmlab.ops.base import device_inputs
from gemmlab.ops.hgemm import HgemmRunner
from gemmlab.problem import GemmProblem

from .hgemm_sweeps import assert_all_pass, skip_unavailable

OUT16 = [i for i in registry.all_impls("hgemm") if i.kind == "baseline" or "out16" in i.tags]
HALF = ("fp16", "bf16")
LARGE = ((1024, 1024, 1024), (2048, 1032, 4096), (1000, 3000, 2000), (1031, 517, 1027))
OTHER_PARAMS = [{"CM": 1}, {"BN": 128, "STAGES": 6, "CM": 2, "GROUP_M": 1}, {"BN": 128, "CM": 1, "GROUP_M": 16}]


def test_the_16bit_output_implementations():
    assert {i.name for i in OUT16} == {"persistent", "cublas", "torch"}


@pytest.mark.parametrize("layout", ["nn", "nt"])
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("impl", OUT16, ids=lambda i: i.name)
def test_sweep_16bit_c(impl, dtype, layout):
    skip_unavailable(impl)
    problems = hv.sweep_problems(dtype, hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES, layout=layout, out=dtype)
    assert_all_pass(verify_sweep([impl], problems))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("impl", OUT16, ids=lambda i: i.name)
def test_large_16bit_c(impl, dtype):
    skip_unavailable(impl)
    problems = [p for layout in ("nn", "nt") for p in hv.sweep_problems(dtype, LARGE, layout=layout, out=dtype)]
    assert_all_pass(verify_sweep([impl], problems))


@pytest.mark.parametrize("params", OTHER_PARAMS, ids=str)
@pytest.mark.parametrize("dtype", HALF)
def test_persistent_16bit_c_other_parameters(params, dtype):
    impl = registry.get("persistent", "hgemm")
    skip_unavailable(impl)
    shapes = hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES + ((1000, 1000, 1000),)
    problems = [p for layout in ("nn", "nt") for p in hv.sweep_problems(dtype, shapes, layout=layout, out=dtype)]
    assert_all_pass(verify_sweep([impl], problems, {"persistent": params}))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("impl", OUT16, ids=lambda i: i.name)
def test_rounding_is_to_nearest_even_exactly(impl, dtype):
    import cupy as cp

    from gemmlab.cuda.device import device, sync_or_raise

    skip_unavailable(impl)
    # 300 x 520 products of K = 1: ties, values near 1 and fp16's subnormals (products down to 2^-48)
    p = GemmProblem(300, 520, 1, 1.5, 0.0, dtype, "nn", dtype)
    # made on CuPy's stream and finished before the launch on another one (device_inputs): without
    # it, cuBLAS's first call on a cold process could read inputs still being written (a flake
    # seen in a full GPU run: every result wrong)
    A, B, C = device_inputs(hv.make_inputs, p, 11)
    runner = HgemmRunner(impl, dtype=dtype, out_dtype=dtype)
    stream = device().create_stream()
    runner.enqueue(p, A, B, C, stream)
    sync_or_raise(stream)
    exact = (1.5 * hv.decode(cp.asnumpy(A), dtype) @ hv.decode(cp.asnumpy(B), dtype)).astype(np.float32)
    want = hv.round_to(exact, dtype).view(np.uint16)
    got = cp.asnumpy(C).view(np.uint16)
    bad = np.flatnonzero(got != want)
    first = bad[:3]
    assert bad.size == 0, (f"{impl.name}: {bad.size} of {got.size} results are not the round-to-nearest-even bits; "
                           f"first at {first.tolist()}: got {got.ravel()[first].tolist()}, want "
                           f"{want.ravel()[first].tolist()} (exact {exact.ravel()[first].tolist()})")


def test_a_runner_built_for_one_c_type_refuses_the_other():
    from gemmlab.cuda.device import device
    from gemmlab.errors import BadArgumentError

    impl = registry.get("persistent", "hgemm")
    skip_unavailable(impl)
    runner = HgemmRunner(impl, {"OUT16": 1}, dtype="bf16")
    assert runner.params["OUT16"] == 0, "the problem sets the flag, not --params"
    p = GemmProblem(64, 64, 64, dtype="bf16", out_dtype="bf16")
    A, B, C = hv.make_inputs(p, 1)
    with pytest.raises(BadArgumentError, match="prepared for C in fp32, the problem's C is bf16"):
        runner.enqueue(p, A, B, C, device().create_stream())


def test_cli_bench_16bit_c(tmp_path, capsys):
    import sqlite3

    from gemmlab.cli import main

    impl = registry.get("persistent", "hgemm")
    skip_unavailable(impl)
    db = tmp_path / "r.db"
    code = main(["bench", "--op", "hgemm", "--dtype", "bf16", "--out-dtype", "bf16", "--layout", "nt",
                 "--impl", "persistent,cublas,torch", "--sizes", "256,130x70x33", "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "256x256x256 nt C bf16" in out and "bf16 output" in out
    rows = sqlite3.connect(db).execute("SELECT status, extra FROM results").fetchall()
    assert len(rows) == 6 and all(r[0] == "PASS" and '"out_dtype": "bf16"' in r[1] for r in rows)
