"""Layouts nt (B given as its NxK transpose: x @ W.T), tn and tt (A given as its KxM transpose)
without a GPU: the problem type, the spec's B_KMAJOR and A_MNMAJOR flags and TMA rules, which implementations take the layout and the one-line refusals of
the others, the flag set from the problem (never tuned, never from --params), the inputs and
the fp64 check (a kernel that ignored the layout fails), the CLI's --layout, the API's in-place
rule, cuBLAS's arguments, and the persistent kernel compiled for every layout (registers, no
spills; in SASS, wgmma reads an NxK B without the B transpose bit, a KxM A with the A one). GPU: tests/gpu/test_hgemm_layout.py.
"""
import types

import numpy as np
import pytest

from gemmlab import registry
from gemmlab.cli import main
from gemmlab.cuda import compile as cc
from gemmlab.cuda import cublas
from gemmlab.cuda.device import gpu_available
from gemmlab.errors import BadArgumentError, ConstraintError
from gemmlab.kernels.hgemm.specs import b_kmajor, cluster_tiles, kmajor_b_rule, mnmajor_a_rule, tma_boxes
from gemmlab.ops import hgemm_check as hv
from gemmlab.ops.base import ShapeArgs
from gemmlab.ops.hgemm import OP, refusal
from gemmlab.problem import GemmProblem

PERSISTENT = registry.get("persistent", "hgemm")
HAS_GPU = gpu_available()[0]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))


def test_the_problem_carries_its_layout():
    assert GemmProblem(4, 5, 6, dtype="bf16").layout == "nn"
    p = GemmProblem(4, 5, 6, dtype="bf16", layout="nt")
    assert p.b_transposed and not GemmProblem(4, 5, 6).b_transposed
    assert p.shape == "4x5x6", "the shape (tuning and table keys) stays the dimensions alone"
    with pytest.raises(BadArgumentError, match="layout 'tx' must be one of nn, nt, tn, tt"):
        GemmProblem(4, 5, 6, layout="tx")


def test_b_kmajor_is_set_by_the_problem_not_tuned():
    param = next(p for p in PERSISTENT.params if p.name == "B_KMAJOR")
    assert [p.name for p in PERSISTENT.params][:4] == ["DTYPE", "B_KMAJOR", "OUT16", "A_MNMAJOR"]
    assert param.default == 0 and param.space == (), "no search axis"
    with pytest.raises(ConstraintError, match="B_KMAJOR must be 0"):
        PERSISTENT.resolve({"B_KMAJOR": 2})
    with pytest.raises(ConstraintError, match="A_MNMAJOR must be 0"):
        PERSISTENT.resolve({"A_MNMAJOR": 2})
    assert OP.fixed_params(PERSISTENT, "bf16") == {"DTYPE": 1, "B_KMAJOR": 0, "OUT16": 0, "A_MNMAJOR": 0}
    assert OP.fixed_params(PERSISTENT, "fp16", "nt") == {"DTYPE": 0, "B_KMAJOR": 1, "OUT16": 0, "A_MNMAJOR": 0}
    assert OP.fixed_params(PERSISTENT, "fp16", "tn") == {"DTYPE": 0, "B_KMAJOR": 0, "OUT16": 0, "A_MNMAJOR": 1}
    assert OP.fixed_params(PERSISTENT, "bf16", "tt", "bf16") == {"DTYPE": 1, "B_KMAJOR": 1, "OUT16": 1,
                                                                 "A_MNMAJOR": 1}
    assert OP.fixed_params(registry.get("tf32_wgmma", "hgemm"), "tf32", "nt") == {"B_KMAJOR": 1, "A_MNMAJOR": 0}
    assert OP.fixed_params(registry.get("tf32_wgmma", "hgemm"), "tf32") == {"B_KMAJOR": 0, "A_MNMAJOR": 0}
    assert OP.fixed_params(registry.get("tf32_wgmma", "hgemm"), "tf32", "tn") == {"B_KMAJOR": 0, "A_MNMAJOR": 1}
    assert OP.fixed_params(registry.get("mma_sync", "hgemm"), "bf16", "nt") == {"DTYPE": 1}


def test_tma_boxes_follow_the_b_layout():
    v = PERSISTENT.defaults  # BN 256, CM 2
    assert tma_boxes(PERSISTENT, v)["B"] == (64, 64), "KxN: 64 K rows x 64 N columns"
    assert tma_boxes(PERSISTENT, {**v, "B_KMAJOR": 1})["B"] == (128, 64), "NxK: BN/CM rows x one K tile"
    assert tma_boxes(PERSISTENT, {**v, "B_KMAJOR": 1, "BN": 128, "CM": 1})["B"] == (128, 64)
    assert not b_kmajor(PERSISTENT, v) and b_kmajor(PERSISTENT, {**v, "B_KMAJOR": 1})
    assert tma_boxes(PERSISTENT, v)["A"] == (128, 64), "MxK: 128 M rows x one K tile"
    assert tma_boxes(PERSISTENT, {**v, "A_MNMAJOR": 1})["A"] == (64, 64), "KxM: one K tile x 64 M columns"


def test_tf32_reads_a_kxn_b_in_place_through_the_transposed_product():
    """Rung 6 with B_KMAJOR = 0: tiles of BN rows x 128 columns (wgmma's N runs along M), A boxes
    of BN rows (half each with CN = 2), B in 32 x 32 N-major chunks; with B_KMAJOR = 1 (nt) the
    16-bit rung's 128 x BN tiles and K-major B boxes."""
    tf32 = registry.get("tf32_wgmma", "hgemm")
    v = {**tf32.defaults, "B_KMAJOR": 0, "BN": 192, "CM": 1, "CN": 1}
    assert tf32.block_tile(v) == (192, 128) and not b_kmajor(tf32, v)
    assert tma_boxes(tf32, v) == {"A": (192, 32), "B": (32, 32), "C": (64, 32)}
    assert tma_boxes(tf32, {**v, "CN": 2, "BN": 64})["A"] == (32, 32)
    nt = {**v, "B_KMAJOR": 1}
    assert tf32.block_tile(nt) == (128, 192) and b_kmajor(tf32, nt)
    assert tma_boxes(tf32, nt) == {"A": (128, 32), "B": (192, 32), "C": (64, 32)}
    # 4096 x 1000: 16 x 8 tiles of 256 x 128 (nn) against 32 x 4 of 128 x 256 (nt)
    assert cluster_tiles(GemmProblem(4096, 1000, 64, dtype="tf32"), {**v, "BN": 256}) == 16 * 8
    assert cluster_tiles(GemmProblem(4096, 1000, 64, dtype="tf32", layout="nt"), {**nt, "BN": 256}) == 32 * 4


def test_tf32_reads_a_kxm_a_through_registers():
    """Rung 6 with A_MNMAJOR = 1 (tn, tt): the plain product (128 x BN tiles), A in 32 x 32
    M-major chunks; in tn B lands N-major and the consumers transpose it in place, holding the
    blocks in registers, so tn takes BN <= 128 with a
    default of its own where rung 6's (BN = 256) does not fit."""
    from gemmlab.kernels.hgemm.specs import layout_defaults, persistent_smem, transposes_b

    tf32 = registry.get("tf32_wgmma", "hgemm")
    tt = {**tf32.defaults, "A_MNMAJOR": 1, "B_KMAJOR": 1, "BN": 192}
    tn = {**tt, "B_KMAJOR": 0, "STAGES": 3}
    assert tf32.block_tile(tt) == (128, 192) == tf32.block_tile(tn)
    assert tma_boxes(tf32, tt) == {"A": (32, 32), "B": (192, 32), "C": (64, 32)}
    assert tma_boxes(tf32, tn) == {"A": (32, 32), "B": (32, 32), "C": (64, 32)}
    assert transposes_b(True, tn) and not transposes_b(True, tt) and not transposes_b(False, tn)
    assert persistent_smem(tn) == persistent_smem({**tt, "STAGES": 3}), "B is transposed in place"
    assert tf32.failed_constraints({**tn, "BN": 128, "STAGES": 4}) == []
    assert "layout tn (B transposed in shared memory) needs BN <= 128" in tf32.failed_constraints(tn)
    assert tf32.failed_constraints({**tn, "BN": 256, "STAGES": 4, "B_KMAJOR": 1}) == [], "tt keeps rung 6's default"
    assert layout_defaults("tf32", "tn") == {"BN": 128, "STAGES": 6} and layout_defaults("tf32", "tt") == {}
    assert layout_defaults("bf16", "tn") == {}
    # the runner takes tn's default only where the kernel's own breaks a constraint
    assert OP.layout_defaults(tf32, "tf32", "tn") == {"BN": 128, "STAGES": 6}
    assert OP.layout_defaults(tf32, "tf32", "tt") == {} and OP.layout_defaults(tf32, "tf32", "nn") == {}
    narrow = tf32.variant("tf32_bn64", "t", "i", BN=64, STAGES=6)
    assert OP.layout_defaults(narrow, "tf32", "tn") == {}, "a variant whose defaults fit keeps them"


# (tt at BN 192 in a 1x2 cluster spills 8 bytes, as rung 6's nn build does in 2x1 and 1x2 clusters)
TF32_TN_TT_BUILDS = [(layout, params) for layout in ("tn", "tt")
                     for params in ({}, {"BN": 64, "STAGES": 6, "CM": 2, "CN": 2}, {"BN": 128, "CM": 2},
                                    {"BN": 128, "CN": 2, "STAGES": 3})] + [("tt", {"BN": 192, "STAGES": 3})]


@pytest.mark.parametrize("layout,params", TF32_TN_TT_BUILDS, ids=str)
def test_tf32_tn_tt_compile_for_sm_90a_without_spills(layout, params):
    tf32 = registry.get("tf32_wgmma", "hgemm")
    values = {**OP.layout_defaults(tf32, "tf32", layout), **params, **OP.fixed_params(tf32, "tf32", layout)}
    ck = cc.compile_kernel(tf32, values, arch="sm_90")
    r = ck.resources
    b_flag = int(layout == "tt")
    assert ck.name_expression.startswith(f"gemmlab::hgemm_tf32_wgmma<{b_flag}, 1, ")
    assert r.registers > 0 and r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert r.smem_static == tf32.smem_bytes(ck.params)


def test_sass_feeds_a_kxm_tf32_a_from_registers():
    """tn and tt: every wgmma takes A from registers (RSA), none reads it from shared memory."""
    from gemmlab.profile.sass import disassemble, find_tool

    if find_tool() is None:
        pytest.skip("no cuobjdump or nvdisasm here (pip install nvidia-cuda-cuobjdump)")
    tf32 = registry.get("tf32_wgmma", "hgemm")
    for layout in ("tn", "tt"):
        values = {**OP.layout_defaults(tf32, "tf32", layout), **OP.fixed_params(tf32, "tf32", layout)}
        hgmma = [line for line in disassemble(cc.compile_kernel(tf32, values, arch="sm_90").cubin).splitlines()
                 if "HGMMA" in line]
        assert hgmma and all(".TF32 R" in line and "gdesc" in line and ", R" in line.split("gdesc")[0]
                             for line in hgmma), hgmma[:2]
        assert sum(1 for line in hgmma if "gdesc[UR" in line and line.split("HGMMA")[1].split(",")[1].strip()
                   .startswith("gdesc")) == 0, "no shared-memory A"


def test_the_tma_rule_for_an_in_place_nxk_b():
    assert kmajor_b_rule(GemmProblem(64, 64, 4096, dtype="bf16", layout="nt")) == ""
    why = kmajor_b_rule(GemmProblem(64, 64, 4097, dtype="bf16", layout="nt"))
    assert why == ("reads a K-major B (given as NxK) in place only when K % 8 == 0 (TMA: its row pitch, 2 * K "
                   "bytes, must be a multiple of 16); 64x64x4097 has K = 4097")
    assert kmajor_b_rule(GemmProblem(64, 64, 12, dtype="tf32", layout="nt")) == ""
    assert mnmajor_a_rule(GemmProblem(4096, 64, 60, dtype="bf16", layout="tn")) == ""
    assert "M % 8 == 0" in mnmajor_a_rule(GemmProblem(4097, 64, 64, dtype="fp16", layout="tt"))
    assert "K % 4 == 0" in kmajor_b_rule(GemmProblem(64, 64, 13, dtype="tf32", layout="nt"))


def test_which_implementations_take_layout_nt():
    nt = GemmProblem(64, 64, 12, dtype="bf16", layout="nt")
    takers = {i.name for i in registry.all_impls("hgemm") if not refusal(i, nt)}
    assert takers == {"persistent", "cublas", "torch"}, "any shape: K % 8 != 0 is padded, not refused"
    assert refusal(registry.get("tf32_wgmma", "hgemm"), GemmProblem(7, 9, 5, dtype="tf32", layout="nt")) == ""
    for name in ("wmma", "mma_sync", "tma_wgmma", "warp_specialized"):
        assert refusal(registry.get(name, "hgemm"), nt) == (
            f"{name} reads B as a row-major KxN array only; layout nt (B given as NxK) runs on persistent, "
            "tf32_wgmma or the baselines"), "the layout is the reason, not K % 8"
    assert refusal(PERSISTENT, GemmProblem(64, 64, 64, dtype="tf32", layout="nt")) == \
        "persistent takes fp16 or bf16 inputs, not tf32"


@pytest.mark.parametrize("layout", ["tn", "tt"])
def test_which_implementations_take_a_transposed_a(layout):
    p = GemmProblem(13, 64, 12, dtype="bf16", layout=layout)
    takers = {i.name for i in registry.all_impls("hgemm") if not refusal(i, p)}
    assert takers == {"persistent", "cublas", "torch"}, "any shape: M % 8 != 0 is padded, not refused"
    for name in ("wmma", "mma_sync", "tma_wgmma", "warp_specialized"):
        assert refusal(registry.get(name, "hgemm"), p) == (
            f"{name} reads A as a row-major MxK array only; layout {layout} (A given as KxM) runs on persistent, "
            "tf32_wgmma or the baselines")
    tf32 = GemmProblem(13, 64, 5, dtype="tf32", layout=layout)
    assert refusal(registry.get("tf32_wgmma", "hgemm"), tf32) == "", "tf32 reads a KxM A in place too, any shape"


def test_problems_labels_rows_and_runner_keys():
    args = ShapeArgs(sizes="256,100x30x20", dtype="fp16", layout="nt")
    problems = OP.problems(args)
    assert [p.layout for p in problems] == ["nt", "nt"]
    assert [OP.label(p) for p in problems] == ["256x256x256 nt", "100x30x20 nt"]
    assert OP.label(GemmProblem(8, 8, 8, dtype="fp16")) == "8x8x8"
    assert OP.runner_key(problems[0]) == ("fp16", "nt", "fp32") != OP.runner_key(GemmProblem(8, 8, 8, dtype="fp16"))
    sweep = OP.sweep(ShapeArgs(dtype="bf16", layout="nt"))
    assert sweep and all(p.layout == "nt" for p in sweep)
    point = types.SimpleNamespace(problem=problems[1])
    assert OP.row_fields(point)["extra"] == {"layout": "nt", "out_dtype": "fp32"}
    assert [p.layout for p in OP.problems(ShapeArgs(sizes="64", layout="tt"))] == ["tt"]
    with pytest.raises(BadArgumentError, match="choose nn .* tn .* or tt"):
        OP.problems(ShapeArgs(sizes="64", layout="ta"))


def _kernel(a, b_kn, c0, alpha, beta):
    """A correct kernel's result, fp32 accumulation of exact products (fp64 is close enough here)."""
    out = np.float32(alpha) * (a @ b_kn).astype(np.float32)
    return (out + np.float32(beta) * c0).astype(np.float32) if beta else out.astype(np.float32)


@pytest.mark.parametrize("dtype", hv.DTYPES)
def test_nt_inputs_and_a_kernel_that_ignores_the_layout(dtype):
    for (M, N, K) in ((48, 40, 64), (64, 64, 64)):  # the square one: B read as KxN has the right shape
        p = GemmProblem(M, N, K, 1.5, -0.75, dtype, "nt")
        A, Bt, C0 = hv.make_inputs(p, seed=7, xp=np)
        assert A.shape == (M, K) and Bt.shape == (N, K), "B is given as NxK"
        a, bt = hv.decode(A, dtype), hv.decode(Bt, dtype)
        good = _kernel(a, bt.T, C0, 1.5, -0.75)
        v = OP.check(good, A, Bt, C0, p)
        assert v.passed, v.reason
        if M == N == K:
            ignored = _kernel(a, bt, C0, 1.5, -0.75)  # the NxK array multiplied as if it were KxN
            assert not OP.check(ignored, A, Bt, C0, p).passed


@pytest.mark.parametrize("dtype", ("fp16", "bf16"))
@pytest.mark.parametrize("layout", ("tn", "tt"))
def test_tn_inputs_and_a_kernel_that_ignores_the_layout(dtype, layout):
    M = N = K = 64  # square: every misreading has the right shape
    p = GemmProblem(M, N, K, 1.5, -0.75, dtype, layout)
    At, B, C0 = hv.make_inputs(p, seed=8, xp=np)
    assert At.shape == (K, M), "A is given as KxM"
    at, b = hv.decode(At, dtype), hv.decode(B, dtype)
    b_kn = b.T if layout == "tt" else b
    good = _kernel(at.T, b_kn, C0, 1.5, -0.75)
    v = OP.check(good, At, B, C0, p)
    assert v.passed, v.reason
    assert not OP.check(_kernel(at, b_kn, C0, 1.5, -0.75), At, B, C0, p).passed, "the KxM array read as MxK"


@pytest.mark.parametrize("args,needle", [
    (["bench", "--layout", "nt"], "--layout is for --op hgemm"),
    (["verify", "--op", "bgemm", "--layout", "nt"], "--layout is for --op hgemm"),
    (["bench", "--op", "hgemm", "--layout", "tx"], "--layout 'tx': choose nn (A is MxK, B is KxN), nt"),
    (["verify", "--op", "hgemm", "--layout", "NT"], "--layout 'NT': choose nn"),
    (["verify", "--op", "hgemm", "--impl", "wmma", "--layout", "nt", "--M", "64", "--N", "64", "--K", "64"],
     "wmma reads B as a row-major KxN array only; layout nt (B given as NxK) runs on persistent"),
    (["verify", "--op", "hgemm", "--impl", "mma_sync", "--layout", "nt", "--M", "64", "--N", "64", "--K", "12"],
     "mma_sync reads B as a row-major KxN array only"),
])
def test_cli_layout_is_one_line_exit_2(capsys, args, needle):
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and needle in err, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU message")
def test_cli_layout_nt_reaches_the_gpu_check(capsys):
    code = main(["bench", "--op", "hgemm", "--dtype", "bf16", "--layout", "nt", "--impl", "persistent,cublas"])
    err = capsys.readouterr().err
    assert code == 2 and "no GPU" in err and len(err.strip().splitlines()) == 1


def test_api_in_place_rule():
    from gemmlab.api.core import layout_letters, layout_note
    from gemmlab.api.tma_executors import in_place_refusal, tma_fast

    assert layout_letters((False, True)) == "nt" and layout_letters((True, False)) == "tn"
    nt = GemmProblem(256, 264, 1032, dtype="bf16", layout="nt")
    assert in_place_refusal(PERSISTENT, nt, (False, True)) == "" and tma_fast(PERSISTENT, nt)
    assert "read in place as NxK" in layout_note(PERSISTENT, nt, (False, True))
    tn = GemmProblem(256, 264, 1030, dtype="bf16", layout="tn")
    assert in_place_refusal(PERSISTENT, tn, (True, False)) == "" and tma_fast(PERSISTENT, tn), "K % 8: A is KxM"
    assert "read in place as KxM" in layout_note(PERSISTENT, tn, (True, False))
    assert in_place_refusal(PERSISTENT, GemmProblem(250, 264, 1032, dtype="bf16", layout="tn"),
                            (True, False)).startswith("persistent reads an M-major A (given as KxM) in place only")
    tt = GemmProblem(256, 264, 1032, dtype="fp16", layout="tt")
    assert in_place_refusal(PERSISTENT, tt, (True, True)) == "" and tma_fast(PERSISTENT, tt)
    odd_k = GemmProblem(256, 264, 1030, dtype="bf16", layout="nt")
    assert in_place_refusal(PERSISTENT, odd_k, (False, True)).startswith(
        "persistent reads a K-major B (given as NxK) in place only when K % 8 == 0")
    assert "C is padded" in in_place_refusal(PERSISTENT, GemmProblem(64, 37, 64, dtype="bf16", layout="nt"),
                                             (False, True))
    assert "reads A row-major only" in in_place_refusal(registry.get("tma_wgmma", "hgemm"), nt, (True, False))
    assert "reads row-major operands only" in in_place_refusal(registry.get("mma_sync", "hgemm"), nt, (False, True))
    tf32 = registry.get("tf32_wgmma", "hgemm")
    assert in_place_refusal(tf32, GemmProblem(300, 136, 72, dtype="tf32", layout="nt"), (False, True)) == ""
    assert tma_fast(tf32, GemmProblem(300, 136, 72, dtype="tf32")), "a KxN B: read in place"
    assert not tma_fast(tf32, GemmProblem(300, 138, 72, dtype="tf32")), "rows of N = 138 fp32: padded"
    assert tma_fast(PERSISTENT, GemmProblem(256, 264, 1032, dtype="bf16"))
    assert "transpose flags" in layout_note(registry.get("cublas", "hgemm"), nt, (False, True))


def test_cublas_reads_an_nxk_b_with_its_transpose_flag(monkeypatch):
    monkeypatch.setattr(cublas, "library", lambda: None)
    monkeypatch.setattr(cublas, "_raw", types.SimpleNamespace(cublasGemmEx=None, cublasSgemm_v2=None))
    M, N, K = 5, 7, 3

    def args(trans_b, trans_a=False):
        g = cublas.PreparedGemm("ex", M, N, K, "bf16", trans_b=trans_b, trans_a=trans_a)
        return [getattr(x, "value", x) for x in g._args[1:6]] + [g._args[9].value, g._args[12].value]

    # (transa, transb, m, n, k, lda (gemmlab's B), ldb (gemmlab's A))
    assert args(False) == [cublas.OP_N, cublas.OP_N, N, M, K, N, K]
    assert args(True) == [cublas.OP_T, cublas.OP_N, N, M, K, K, K], "the NxK array: OP_T, leading dimension K"
    assert args(False, True) == [cublas.OP_N, cublas.OP_T, N, M, K, N, M], "the KxM array: OP_T, leading dimension M"
    assert args(True, True) == [cublas.OP_T, cublas.OP_T, N, M, K, K, M]
    with pytest.raises(ValueError, match="GemmEx kind only"):
        cublas.PreparedGemm("sgemm", M, N, K, trans_b=True)


@pytest.mark.parametrize("params", [{}, {"CM": 1}, {"BN": 128, "STAGES": 6, "CM": 2, "GROUP_M": 1},
                                    {"BN": 128, "CM": 1}], ids=str)
@pytest.mark.parametrize("flag", [0, 1], ids=["fp16", "bf16"])
def test_persistent_nt_compiles_for_sm_90a_without_spills(flag, params):
    ck = cc.compile_kernel(PERSISTENT, {"DTYPE": flag, "B_KMAJOR": 1, **params}, arch="sm_90")
    r = ck.resources
    assert ck.arch == "sm_90a" and ck.name_expression.startswith(f"gemmlab::hgemm_persistent<{flag}, 1, 0, ")
    assert r.registers > 0 and r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert r.smem_static == PERSISTENT.smem_bytes(ck.params)


@pytest.mark.parametrize("params", [{}, {"CM": 1}, {"BN": 128, "STAGES": 6, "CM": 2, "GROUP_M": 1}], ids=str)
@pytest.mark.parametrize("layout", ["tn", "tt"])
@pytest.mark.parametrize("out16", [0, 1], ids=["c_fp32", "c_16bit"])
@pytest.mark.parametrize("flag", [0, 1], ids=["fp16", "bf16"])
def test_persistent_tn_compiles_for_sm_90a_without_spills(flag, out16, layout, params):
    b_flag = int(layout == "tt")
    ck = cc.compile_kernel(PERSISTENT, {"DTYPE": flag, "B_KMAJOR": b_flag, "OUT16": out16, "A_MNMAJOR": 1, **params},
                           arch="sm_90")
    r = ck.resources
    assert ck.name_expression.startswith(f"gemmlab::hgemm_persistent<{flag}, {b_flag}, {out16}, 1, ")
    assert r.registers > 0 and r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r


def test_sass_reads_a_kxm_a_with_the_a_transpose_bit():
    from gemmlab.profile.sass import disassemble, find_tool

    if find_tool() is None:
        pytest.skip("no cuobjdump or nvdisasm here (pip install nvidia-cuda-cuobjdump)")
    for a_flag, b_flag in ((0, 0), (1, 0), (1, 1)):
        ck = cc.compile_kernel(PERSISTENT, {"DTYPE": 0, "B_KMAJOR": b_flag, "A_MNMAJOR": a_flag}, arch="sm_90")
        hgmma = [line for line in disassemble(ck.cubin).splitlines() if "HGMMA" in line]
        assert hgmma, "no wgmma in SASS"
        assert all((".tnspA" in line) == bool(a_flag) for line in hgmma), (a_flag, hgmma[:2])
        assert all((".tnspB" in line) == (not b_flag) for line in hgmma), (b_flag, hgmma[:2])


def test_sass_reads_an_nxk_b_without_the_transpose_bit():
    from gemmlab.profile.sass import disassemble, find_tool

    if find_tool() is None:
        pytest.skip("no cuobjdump or nvdisasm here (pip install nvidia-cuda-cuobjdump)")
    for flag, transposed in ((0, True), (1, False)):
        ck = cc.compile_kernel(PERSISTENT, {"DTYPE": 1, "B_KMAJOR": flag}, arch="sm_90")
        hgmma = [line for line in disassemble(ck.cubin).splitlines() if "HGMMA" in line]
        assert hgmma, "no wgmma in SASS"
        assert all((".tnspB" in line) == transposed for line in hgmma), (flag, hgmma[:2])
