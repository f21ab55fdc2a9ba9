"""C in the input type (--out-dtype fp16|bf16) without a GPU: the problem type, rung 5's OUT16 flag
(set from the problem, never tuned) and its TMA box, which implementations write a 16-bit C and
the one-line refusals of the others, the CLI, the inputs (a 16-bit C0, NaN-poisoned in its own
storage), the stated bounds and simulated kernels against them, the bytes a point moves,
cuBLAS's C type, and the kernel compiled with OUT16 (no spills; in SASS, one round-to-nearest
pack per pair of results). GPU: tests/gpu/test_hgemm_out16.py."""
import re
import types

import numpy as np
import pytest

from gemmlab import registry
from gemmlab.cli import main
from gemmlab.cuda import compile as cc
from gemmlab.cuda import cublas
from gemmlab.errors import BadArgumentError, ConstraintError
from gemmlab.kernels.hgemm.specs import tma_boxes
from gemmlab.ops import hgemm_check as hv
from gemmlab.ops.base import ShapeArgs
from gemmlab.ops.hgemm import OP, hgemm_bytes, refusal
from gemmlab.problem import GemmProblem

PERSISTENT = registry.get("persistent", "hgemm")
HALF = ("fp16", "bf16")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))


def test_the_problem_carries_its_output_type():
    assert GemmProblem(4, 5, 6, dtype="bf16").out_dtype == "fp32"
    assert GemmProblem(4, 5, 6, dtype="bf16", out_dtype="bf16").out_dtype == "bf16"
    with pytest.raises(BadArgumentError, match="out_dtype 'fp8' must be one of fp32, fp16, bf16"):
        GemmProblem(4, 5, 6, dtype="bf16", out_dtype="fp8")
    assert hgemm_bytes(GemmProblem(64, 32, 16, dtype="bf16", out_dtype="bf16")) == 2 * (64 * 16 + 16 * 32) + 2 * 64 * 32
    assert hgemm_bytes(GemmProblem(64, 32, 16, 1.0, 1.0, "fp16", out_dtype="fp16")) == \
        2 * (64 * 16 + 16 * 32) + 2 * 2 * 64 * 32


def test_out16_is_set_by_the_problem_not_tuned():
    param = next(p for p in PERSISTENT.params if p.name == "OUT16")
    assert param.default == 0 and param.space == ()
    with pytest.raises(ConstraintError, match="OUT16 must be 0"):
        PERSISTENT.resolve({"OUT16": 2})
    assert OP.fixed_params(PERSISTENT, "bf16", "nn", "bf16") == {"DTYPE": 1, "B_KMAJOR": 0, "OUT16": 1, "A_MNMAJOR": 0}
    assert OP.fixed_params(PERSISTENT, "fp16", "nt", "fp16") == {"DTYPE": 0, "B_KMAJOR": 1, "OUT16": 1,
                                                                 "A_MNMAJOR": 0}
    v = PERSISTENT.defaults
    assert tma_boxes(PERSISTENT, v)["C"] == (64, 32), "32 fp32 columns: 128-byte rows"
    assert tma_boxes(PERSISTENT, {**v, "OUT16": 1})["C"] == (64, 64), "64 16-bit columns: 128-byte rows"


def test_which_implementations_write_a_16bit_c():
    p = GemmProblem(64, 64, 12, dtype="bf16", out_dtype="bf16")
    takers = {i.name for i in registry.all_impls("hgemm") if not refusal(i, p)}
    assert takers == {"persistent", "cublas", "torch"}, "any shape"
    for name in ("wmma", "mma_sync", "tma_wgmma", "warp_specialized"):
        assert refusal(registry.get(name, "hgemm"), p) == (
            f"{name} writes an fp32 C only; a bf16 C runs on persistent or the baselines")
    mixed = GemmProblem(64, 64, 64, dtype="fp16", out_dtype="bf16")
    assert refusal(registry.get("cublas", "hgemm"), mixed) == "cublas: C is fp32 or the input type (fp16), not bf16"
    assert refusal(PERSISTENT, GemmProblem(9, 9, 9, dtype="fp16", layout="nt", out_dtype="fp16")) == ""


def test_problems_header_label_and_rows():
    args = ShapeArgs(sizes="256,100x30x20", dtype="bf16", layout="nt", out_dtype="bf16")
    problems = OP.problems(args)
    assert {(p.layout, p.out_dtype) for p in problems} == {("nt", "bf16")}
    assert OP.label(problems[0]) == "256x256x256 nt C bf16"
    assert OP.label(GemmProblem(8, 8, 8, dtype="fp16", out_dtype="fp16")) == "8x8x8 C fp16"
    assert OP.header_for(args) == ("hgemm: bf16 inputs, fp32 accumulation, bf16 output (rounded to nearest even); "
                                   "B given as its NxK transpose (layout nt)",)
    assert OP.header_for(ShapeArgs(dtype="fp16")) == ("hgemm: fp16 inputs, fp32 accumulation, fp32 output",)
    assert OP.runner_key(problems[0]) == ("bf16", "nt", "bf16")
    assert OP.row_fields(types.SimpleNamespace(problem=problems[1]))["extra"] == {"layout": "nt", "out_dtype": "bf16"}
    assert all(p.out_dtype == "fp16" for p in OP.sweep(ShapeArgs(dtype="fp16", out_dtype="fp16")))


@pytest.mark.parametrize("args,needle", [
    (["bench", "--out-dtype", "fp16"], "--out-dtype is for --op hgemm"),
    (["bench", "--op", "hgemm", "--dtype", "fp16", "--out-dtype", "bf16"], "--out-dtype 'bf16': C is fp32 or the "
                                                                            "input type (fp16)"),
    (["verify", "--op", "hgemm", "--dtype", "bf16", "--out-dtype", "fp8"], "--out-dtype 'fp8'"),
    (["verify", "--op", "hgemm", "--dtype", "tf32", "--out-dtype", "fp16"], "tf32 (fp32 inputs) writes an fp32 C only"),
    (["verify", "--op", "hgemm", "--dtype", "bf16", "--out-dtype", "bf16", "--impl", "mma_sync", "--M", "64", "--N",
      "64", "--K", "64"], "mma_sync writes an fp32 C only; a bf16 C runs on persistent or the baselines"),
])
def test_cli_out_dtype_is_one_line_exit_2(capsys, args, needle):
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and needle in err, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("out", HALF)
def test_inputs_are_16bit_and_poisoned_in_their_own_storage(out):
    A, B, C0 = hv.make_inputs(GemmProblem(7, 5, 3, dtype=out, out_dtype=out), seed=1, xp=np)
    assert C0.dtype == (np.float16 if out == "fp16" else np.uint16) and C0.shape == (7, 5)
    assert np.isnan(hv.decode(C0, out)).all()
    _, _, C1 = hv.make_inputs(GemmProblem(7, 5, 3, 1.0, 0.5, out, out_dtype=out), seed=1, xp=np)
    c1 = hv.decode(C1, out)
    assert np.isfinite(c1).all() and np.array_equal(hv.decode(hv.round_to(c1.astype(np.float32), out), out), c1)


def test_the_bounds_are_stated():
    K = 4096
    assert hv.normwise_tolerance(K, "bf16", "bf16") == K * 2.0 ** -25 * (1 + 2.0 ** -8) + 2.0 ** -8
    assert hv.normwise_tolerance(K, "fp16", "fp16") == K * 2.0 ** -25 * (1 + 2.0 ** -11) + 2.0 ** -11
    assert hv.normwise_tolerance(K, "fp16") == K * 2.0 ** -25, "an fp32 C keeps its bound"
    f = (K + 2) * 2.0 ** -22
    assert hv.elementwise_factor(K, "bf16", "bf16") == f * (1 + 2.0 ** -8) + 2.0 ** -8
    assert hv.elementwise_factor(K, "bf16") == f


def _case(out, M=64, N=48, K=1024, alpha=1.5, beta=-0.75, seed=3):
    p = GemmProblem(M, N, K, alpha, beta, out, out_dtype=out)
    A, B, C0 = hv.make_inputs(p, seed, xp=np)
    return p, A, B, C0, hv.decode(A, out), hv.decode(B, out), (hv.decode(C0, out) if beta else None)


def _kernel(a, b, c0, alpha, beta, out, round_as="rne", drop=None):
    """A model of rung 5 with OUT16: fp32 accumulation of exact products 16 at a time, the fp32
    epilogue, then one rounding of each result to `out` (rne, or truncation to model a wrong mode)."""
    keep = slice(None) if drop is None else np.r_[0:drop, drop + 16:a.shape[1]]
    a, b = a[:, keep], b[keep, :]
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for k in range(0, a.shape[1], 16):
        acc = (acc.astype(np.float64) + a[:, k:k + 16] @ b[k:k + 16, :]).astype(np.float32)
    v = np.float32(alpha) * acc
    if beta:
        v = v + np.float32(beta) * c0.astype(np.float32)
    v = v.astype(np.float32)
    if round_as == "rne":
        return hv.round_to(v, out)
    bits = v.view(np.uint32)  # truncation toward zero, bf16: drop the low 16 bits
    return (bits >> 16).astype(np.uint16)


@pytest.mark.parametrize("out", HALF)
@pytest.mark.parametrize("beta", [0.0, -0.75])
def test_a_correct_16bit_kernel_passes(out, beta):
    p, A, B, C0, a, b, c0 = _case(out, beta=beta)
    v = hv.compare(_kernel(a, b, c0, 1.5, beta, out), A, B, C0, 1.5, beta, out, out)
    assert v.passed, v.reason
    assert v.rel_err < v.tol and v.worst_elem_ratio < 1.0


@pytest.mark.parametrize("out", HALF)
def test_a_dropped_step_an_unwritten_element_and_a_read_poison_fail(out):
    p, A, B, C0, a, b, _ = _case(out, K=4096, beta=0.0)
    assert not hv.compare(_kernel(a, b, None, 1.5, 0.0, out, drop=2048), A, B, C0, 1.5, 0.0, out, out).passed
    good = _kernel(a, b, None, 1.5, 0.0, out)
    unwritten = good.copy()
    unwritten[3, 5] = C0[3, 5]  # the NaN poison left in place
    v = hv.compare(unwritten, A, B, C0, 1.5, 0.0, out, out)
    assert not v.passed and "NaN" in v.reason


def test_a_bf16_result_where_fp16_was_asked_fails():
    p, A, B, C0, a, b, c0 = _case("fp16", K=256)
    coarse = hv.round_to(hv.decode(_kernel(a, b, c0, 1.5, -0.75, "bf16"), "bf16").astype(np.float32), "fp16")
    assert not hv.compare(coarse, A, B, C0, 1.5, -0.75, "fp16", "fp16").passed


def test_truncation_instead_of_rounding_fails_where_the_result_is_exact():
    """K = 1: the fp32 result is the exact product, so only C's rounding is left; truncating
    (a wrong rounding mode) exceeds u on some elements, rounding to nearest never does."""
    p, A, B, C0, a, b, _ = _case("bf16", M=128, N=128, K=1, alpha=1.0, beta=0.0)
    assert hv.compare(_kernel(a, b, None, 1.0, 0.0, "bf16"), A, B, C0, 1.0, 0.0, "bf16", "bf16").passed
    v = hv.compare(_kernel(a, b, None, 1.0, 0.0, "bf16", round_as="rz"), A, B, C0, 1.0, 0.0, "bf16", "bf16")
    assert not v.passed and "elementwise" in v.reason


def test_cublas_writes_the_16bit_c_type(monkeypatch):
    monkeypatch.setattr(cublas, "library", lambda: None)
    monkeypatch.setattr(cublas, "_raw", types.SimpleNamespace(cublasGemmEx=None, cublasSgemm_v2=None))
    for out, code in (("fp32", 0), ("bf16", 14), ("fp16", 2)):
        g = cublas.PreparedGemm("ex", 5, 7, 3, "bf16" if out != "fp16" else "fp16", out_dtype=out)
        assert g._args[15].value == code and g._args[16].value == 7, "Ctype, ldc = N"
    with pytest.raises(ValueError, match="GemmEx kind only"):
        cublas.PreparedGemm("sgemm", 5, 7, 3, out_dtype="fp16")


@pytest.mark.parametrize("params", [{}, {"B_KMAJOR": 1}, {"BN": 128, "CM": 1}, {"BN": 128, "STAGES": 5, "CM": 1, "GROUP_M": 16},
                                    {"BN": 128, "STAGES": 6, "CM": 2, "B_KMAJOR": 1}], ids=str)
@pytest.mark.parametrize("flag", [0, 1], ids=["fp16", "bf16"])
def test_persistent_out16_compiles_without_spills(flag, params):
    ck = cc.compile_kernel(PERSISTENT, {"DTYPE": flag, "OUT16": 1, **params}, arch="sm_90")
    r = ck.resources
    assert r.registers > 0 and r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert r.smem_static == PERSISTENT.smem_bytes(ck.params)
    assert f"hgemm_persistent<{flag}, {params.get('B_KMAJOR', 0)}, 1, " in ck.name_expression


def test_sass_rounds_each_pair_once_to_nearest():
    from gemmlab.profile.sass import disassemble, find_tool

    if find_tool() is None:
        pytest.skip("no cuobjdump or nvdisasm here (pip install nvidia-cuda-cuobjdump)")
    for flag, kind in ((0, "F16"), (1, "BF16")):
        for out16 in (0, 1):
            ck = cc.compile_kernel(PERSISTENT, {"DTYPE": flag, "OUT16": out16}, arch="sm_90")
            packs = [m.group(1) for m in re.finditer(r"\b(F2FP\.[A-Z0-9_.]+)", disassemble(ck.cubin))]
            if not out16:
                assert not packs, "an fp32 C converts nothing"
                continue
            # BN = 256: 128 accumulators a consumer thread, one pack per pair; no .RZ/.RM/.RP mode
            assert packs and set(packs) == {f"F2FP.{kind}.F32.PACK_AB"} and len(packs) == 64, packs[:3]


def test_an_fp16_result_among_the_subnormals_is_judged_by_the_floor():
    """1x1x1, fp16 C: a product below 2^-14 rounds to fp16's subnormal grid (spacing 2^-24), so
    its relative error may exceed u = 2^-11 (the memcheck sweep met 5.6e-4 against 5.1e-4, session
    16); the absolute floor 2^-25 bounds it, normwise as elementwise. One spacing off still fails."""
    A = hv.round_to(np.array([[0.0031]], np.float32), "fp16")
    B = hv.round_to(np.array([[0.0007]], np.float32), "fp16")
    exact = float(hv.decode(A, "fp16")[0, 0] * hv.decode(B, "fp16")[0, 0])
    assert exact < 2.0 ** -14, "the case needs a subnormal fp16 result"
    C = np.array([[exact]], np.float32).astype(np.float16)
    assert abs(float(C[0, 0]) - exact) / exact > 0.01, "rounded correctly, yet 1% off relative"
    C0 = hv.poison((1, 1), "fp16")
    v = hv.compare(C, A, B, C0, 1.0, 0.0, "fp16", "fp16")
    assert v.passed, v.reason
    off = (C.view(np.uint16) + np.uint16(1)).view(np.float16)  # the next subnormal up: 2^-24 away
    assert not hv.compare(off, A, B, C0, 1.0, 0.0, "fp16", "fp16").passed
