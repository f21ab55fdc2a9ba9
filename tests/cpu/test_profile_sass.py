"""SASS mix counting on real disassemblies (tests/fixtures/sass, made from gemmlab's sm_90
cubins by cuobjdump -sass and nvdisasm -c), and `gemmlab analyze` without a GPU."""
import gzip
from pathlib import Path

import pytest

from gemmlab.cli import main
from gemmlab.profile import sass

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sass"
SMEM = "_ZN7gemmlab19sgemm_smem_blockingILi32EEEviiifPKfS2_fPf"
VEC = "_ZN7gemmlab15sgemm_vectorizeILi128ELi128ELi8ELi8ELi8EEEviiifPKfS2_fPf"


def cuobjdump_text():
    return (FIX / "smem_blocking.sm_90.cuobjdump.txt").read_text()


def nvdisasm_text():
    return gzip.decompress((FIX / "vectorize.sm_90.nvdisasm.txt.gz").read_bytes()).decode()


@pytest.mark.parametrize("opcode,cols", [
    ("FFMA", ["FFMA"]), ("FFMA.FTZ", ["FFMA"]), ("LDS", ["LDS"]), ("LDS.U8", ["LDS"]), ("LDS.64", ["LDS.64"]),
    ("LDS.128", ["LDS.128"]), ("LDG.E", ["LDG"]), ("LDG.E.CONSTANT", ["LDG"]), ("LDG.E.128", ["LDG.128"]),
    ("LDG.E.128.CONSTANT", ["LDG.128"]), ("LDGSTS.E.BYPASS.LTC128B.128", ["LDGSTS"]), ("STS.128", ["STS", "STS.128"]),
    ("STS", ["STS"]), ("STG.E.128", ["STG"]), ("BAR.SYNC.DEFER_BLOCKING", ["BAR"]), ("HMMA.16816.F32", ["HMMA"]),
    ("HGMMA.64x128x16.F32", ["HGMMA"]), ("FMUL", []), ("LDSM.16.M88.4", ["LDSM"]),
])
def test_classify(opcode, cols):
    assert sass.classify(opcode) == cols


def test_cuobjdump_dump_of_rung3():
    fns = sass.parse_sass(cuobjdump_text())
    assert [f.name for f in fns] == [SMEM]
    mix = sass.sass_mix(cuobjdump_text(), SMEM, "cuobjdump")
    # whole kernel, counted by grep on the fixture: 33 FFMA, 32 LDS, 8 LDS.128, 161 non-NOP instructions
    assert mix.whole["FFMA"] == 33 and mix.whole["LDS"] == 32 and mix.whole["LDS.128"] == 8
    assert mix.whole["BAR"] == 2 and mix.whole["STS"] == 2 and mix.whole["total"] == 161
    # the K loop: 0x260..0x8d0 (the backward BRA at 0x8d0), one 32-term dot product per tile
    assert mix.loop_range == (0x260, 0x8D0)
    assert mix.loop["FFMA"] == 32 and mix.loop["LDS"] + mix.loop["LDS.128"] == 40 and mix.loop["BAR"] == 2
    assert mix.loop["LDG"] == 2 and mix.loop["STS"] == 2  # one A and one B element per thread per tile


def test_nvdisasm_dump_of_rung6():
    text = nvdisasm_text()
    mix = sass.sass_mix(text, VEC, "nvdisasm")
    assert mix.whole["FFMA"] == 688 and mix.whole["LDS.128"] == 32 and mix.whole["LDS"] == 0
    assert mix.whole["LDG.128"] == 18 and mix.whole["LDG"] == 120 and mix.whole["STG"] == 248
    # nvdisasm names branch targets .L_x_N: the loop is still found
    assert mix.loop is not None
    assert mix.loop["FFMA"] == 512 and mix.loop["LDS.128"] == 32 and mix.loop["LDS"] == 0
    assert mix.loop["LDG.128"] == 2 and mix.loop["STS.128"] == 1 and mix.loop["BAR"] == 2
    # 8x8 outer product from 2 x 8 floats: 64 FFMA per 4 LDS.128 -> 16 per shared load
    assert mix.loop["FFMA"] / mix.loop["LDS.128"] == 16


def test_main_loop_prefers_the_loop_with_the_fma():
    text = """
        Function : k
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0020*/              @P0  BRA 0x10 ;
        /*0030*/                   FFMA R3, R4, R5, R3 ;
        /*0040*/                   LDS.128 R8, [R2] ;
        /*0050*/                   FFMA R3, R4, R5, R3 ;
        /*0060*/              @!P1 BRA 0x30 ;
        /*0070*/                   EXIT ;
        /*0080*/                   BRA 0x80;
    """
    fn = sass.parse_sass(text)[0]
    assert fn.loops() == [(0x10, 0x20), (0x30, 0x60), (0x80, 0x80)]
    assert fn.main_loop() == (0x30, 0x60)
    assert fn.mix(0x30, 0x60)["FFMA"] == 2 and fn.mix(0x30, 0x60)["total"] == 4


def test_missing_function_is_a_clear_error():
    with pytest.raises(Exception, match="no SASS function"):
        sass.function_for(sass.parse_sass(cuobjdump_text()) * 2, "_Znope")


def test_analyze_without_gpu(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    db = tmp_path / "r.db"
    code = main(["analyze", "--impl", "smem_blocking,vectorize,hopper_simt", "--arch", "sm_90", "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "theoretical occupancy on sm_90" in out.out and "limited by" in out.out
    assert "hopper_simt" in out.out and "12.5%" in out.out  # 1 block of 8 warps: registers
    if sass.find_tool() is None:
        assert "neither cuobjdump nor nvdisasm" in out.out
    else:
        assert "SASS instruction mix" in out.out and "main loop register traffic" in out.out
    from gemmlab.profile import rows

    stored = rows.select(rows.connect(db), "analyses")
    assert [r["impl"] for r in stored] == ["smem_blocking", "vectorize", "hopper_simt"]
    assert stored[0]["occupancy_pct"] == 100.0 and stored[2]["limiter"] == "registers"


def test_analyze_describes_a_shape_too_tall_for_a_launch(capsys, tmp_path, monkeypatch):
    """Occupancy and SASS do not depend on the grid: a shape whose grid a GPU cannot launch
    (3,000,000 columns: 93,750 rows of tiles on grid.y for naive) is still analyzed; since the
    launch geometry refuses it (session 26), analyze took the refusal and printed no table."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    code = main(["analyze", "--impl", "naive,vectorize", "--arch", "sm_90", "--no-store", "--M", "64", "--N",
                 "3000000", "--K", "64"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "naive" in out.out and "vectorize" in out.out and "theoretical occupancy on sm_90" in out.out


def test_analyze_says_clearly_when_no_disassembler(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sass, "find_tool", lambda preferred=None: None)
    code = main(["analyze", "--impl", "smem_blocking", "--no-store"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "no SASS: neither cuobjdump nor nvdisasm was found" in out.out
    assert "2 blocks x 32 warps = 64 of 64 warps: 100.0%" in out.out  # one kernel: the calculation is shown


def test_analyze_bad_arch_is_one_line(capsys):
    code = main(["analyze", "--impl", "naive", "--arch", "sm_70", "--no-store"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: no occupancy limits for 'sm_70'") and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(sass.find_tool() is None, reason="no cuobjdump or nvdisasm on this machine")
def test_live_disassembly_matches_the_fixture_counts(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    from gemmlab import registry
    from gemmlab.cuda.compile import compile_kernel

    ck = compile_kernel(registry.get("vectorize"), arch="sm_90")
    mix = sass.sass_mix(sass.disassemble(ck.cubin), ck.mangled)
    assert mix.loop["FFMA"] == 512 and mix.loop["LDS.128"] == 32


def test_main_loop_is_an_innermost_loop():
    """Stream-K wraps the K loop in a loop over segments: that outer loop holds the K loop's
    FFMAs and more, but the hot loop is the inner one."""
    text = """
        Function : k
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   FFMA R3, R4, R5, R3 ;
        /*0020*/                   FFMA R3, R4, R5, R3 ;
        /*0030*/                   LDS.128 R8, [R2] ;
        /*0040*/              @P0  BRA 0x20 ;
        /*0050*/                   FFMA R6, R4, R5, R6 ;
        /*0060*/              @P1  BRA 0x10 ;
        /*0070*/                   EXIT ;
    """
    fn = sass.parse_sass(text)[0]
    assert fn.loops() == [(0x20, 0x40), (0x10, 0x60)]
    assert fn.main_loop() == (0x20, 0x40)


def test_main_loop_of_a_wgmma_kernel_is_its_k_loop_not_a_retry_branch():
    """A wgmma K loop holds an mbarrier spin loop; the waits' out-of-line retry blocks at the
    function's end branch back into the K loop. Such a branch spans the epilogue (FFMAs, stores)
    and a second copy of the K step, so it 'holds' more HGMMAs, but it crosses the K loop rather
    than nesting around it: not the main loop."""
    text = """
        Function : k
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R2], R3 ;
        /*0020*/              @!P0 BRA 0x10 ;
        /*0030*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24 ;
        /*0040*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24, gsb0 ;
        /*0050*/              @P1  BRA 0x10 ;
        /*0060*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24 ;
        /*0070*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24 ;
        /*0080*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24, gsb0 ;
        /*0090*/                   FFMA R3, R4, R5, R3 ;
        /*00a0*/                   STS.64 [R2], R4 ;
        /*00b0*/                   EXIT ;
        /*00c0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R2], R3 ;
        /*00d0*/              @!P0 BRA 0x40 ;
    """
    fn = sass.parse_sass(text)[0]
    assert (0x40, 0xd0) in fn.loops()
    assert fn.mix(0x40, 0xd0)["HGMMA"] > fn.mix(0x10, 0x50)["HGMMA"]
    assert fn.main_loop() == (0x10, 0x50)


def test_main_loop_of_a_wmma_kernel_holds_its_copy_loops():
    """wmma's K loop holds loops that copy the next tiles (global loads, shared stores): the loop
    with the tensor MMAs is the main loop all the same, not one of those or the epilogue's."""
    text = """
        Function : k
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E R4, [R2] ;
        /*0020*/                   STS [R5], R4 ;
        /*0030*/              @P0  BRA 0x10 ;
        /*0040*/                   HMMA.16816.F32 R8, R12, R14, R8 ;
        /*0050*/                   HMMA.16816.F32 R8, R12, R14, R8 ;
        /*0060*/              @P1  BRA 0x10 ;
        /*0070*/                   FFMA R3, R4, R5, R3 ;
        /*0080*/                   STG.E [R2], R3 ;
        /*0090*/              @P2  BRA 0x70 ;
        /*00a0*/                   EXIT ;
    """
    fn = sass.parse_sass(text)[0]
    assert fn.main_loop() == (0x10, 0x60)


def test_analyze_a_tensor_core_rung_as_bench_builds_it(capsys, tmp_path, monkeypatch):
    """--op hgemm: the kernel built for the --dtype, --layout and --out-dtype given (the flags the
    problem sets, as bench sets them), with no GPU."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    db = tmp_path / "r.db"
    code = main(["analyze", "--op", "hgemm", "--impl", "persistent", "--dtype", "bf16", "--layout", "nt",
                 "--out-dtype", "bf16", "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "theoretical occupancy on sm_90" in out.out and "1 blocks x 12 warps = 12 of 64 warps" in out.out
    from gemmlab.profile import rows

    (row,) = rows.select(rows.connect(db), "analyses")
    assert row["op"] == "hgemm" and row["impl"] == "persistent" and row["threads"] == 384
    params = row["params"]
    assert (params["DTYPE"], params["B_KMAJOR"], params["OUT16"], params["A_MNMAJOR"]) == (1, 1, 1, 0)
    assert row["spill_stores"] == 0 and row["blocks_per_sm"] == 1
    if sass.find_tool() is not None:
        assert row["sass_reason"] is None, f"the disassembler failed: {row['sass_reason']}"
        assert row["sass"]["loop"]["HGMMA"] == 4  # one m64n256k16 per 16 of a 64-wide K tile


def test_analyze_skips_the_wgmma_rungs_on_an_older_arch(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    code = main(["analyze", "--op", "hgemm", "--impl", "wmma,persistent", "--arch", "sm_80", "--no-store"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "persistent: not built for sm_80 (needs sm_90a)" in out.out
    assert "wmma" in out.out and "theoretical occupancy on sm_80" in out.out


def test_analyze_with_nothing_to_build_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    for args, needle in ((["--op", "hgemm", "--impl", "persistent", "--arch", "sm_80"], "needs sm_90a"),
                         (["--op", "hgemm", "--impl", "tf32_wgmma", "--dtype", "bf16"], "takes tf32 inputs, not bf16")):
        code = main(["analyze", *args, "--db", str(tmp_path / "r.db")])
        err = capsys.readouterr().err
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.db").exists(), "nothing is recorded when nothing was built"


def test_analyze_builds_each_rung_only_for_the_inputs_it_takes(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    code = main(["analyze", "--op", "hgemm", "--impl", "persistent,tf32_wgmma", "--dtype", "tf32", "--no-store"])
    out = capsys.readouterr().out
    assert code == 0
    assert "persistent: not built: persistent takes fp16 or bf16 inputs, not tf32" in out


@pytest.mark.skipif(sass.find_tool() is None, reason="no cuobjdump or nvdisasm on this machine")
@pytest.mark.parametrize("name,dtype", [("wmma", "fp16"), ("mma_sync", "bf16"), ("tma_wgmma", "bf16"),
                                        ("warp_specialized", "fp16"), ("persistent", "bf16"), ("tf32_wgmma", "tf32")])
def test_each_tensor_rung_s_main_loop_is_its_k_loop(name, dtype, tmp_path, monkeypatch):
    """On the real SASS of every tensor-core rung: the loop found holds the tensor MMAs and none
    of the epilogue (no FFMA scaling C, no global store), and is short - the K loop, not a wait's
    retry branch spanning the kernel."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    from gemmlab import ops, registry
    from gemmlab.cuda.compile import compile_kernel
    from gemmlab.problem import GemmProblem

    op, spec = ops.get("hgemm"), registry.get(name, "hgemm")
    ck = compile_kernel(spec, op.kernel_params(spec, None, GemmProblem(4096, 4096, 4096, dtype=dtype)), arch="sm_90")
    mix = sass.sass_mix(sass.disassemble(ck.cubin), ck.mangled)
    loop = mix.loop
    assert loop is not None
    mma = loop["HGMMA"] if spec.arch == "sm_90a" else loop["HMMA"]
    assert mma >= 4 and loop["FFMA"] == 0 and loop["STG"] == 0, loop
    assert loop["total"] < mix.whole["total"] // 2, (mix.loop_range, loop["total"], mix.whole["total"])


def test_analyze_shows_the_barrier_limit_and_the_cluster(capsys, tmp_path, monkeypatch):
    """Rung 5: 16 named barriers allow 4 blocks per SM (Hopper's barrier rule, as ncu reports it),
    and it runs in 2x1 clusters; rung 2 has neither."""
    from gemmlab.profile.analysis import analyze
    from gemmlab.problem import GemmProblem
    from gemmlab import registry

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    p = GemmProblem(4096, 4096, 4096, dtype="bf16")
    a = analyze(registry.get("persistent", "hgemm"), {}, "sm_90", p, with_sass=False)
    assert a.resources.barriers == 16 and a.occupancy.blocks_by["barriers"] == 4 and a.cluster == (2, 1, 1)
    assert any(line.startswith("barriers: 2 x 32 per SM / 16 per block -> 4 blocks") for line in a.occupancy.explain())
    b = analyze(registry.get("mma_sync", "hgemm"), {}, "sm_80", p, with_sass=False)
    assert "barriers" not in b.occupancy.blocks_by and b.cluster == (1, 1, 1), "no barrier rule before Hopper"
