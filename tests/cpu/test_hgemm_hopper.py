"""The Hopper tensor-core rungs (3-6) without a GPU: built for sm_90a only (and refused, in one
line, for other architectures), their SASS multiplies with HGMMA (wgmma) and never HMMA, the
generated wgmma wrappers are current, shapes are refused or taken as each rung's rule says,
and the persistent launch geometry."""

import pytest

from gemmlab import registry
from gemmlab.cuda import compile as cc
from gemmlab.errors import BadArgumentError
from gemmlab.ops.hgemm import refusal
from gemmlab.kernels.hgemm.specs import persistent_launch, persistent_smem, tma_boxes
from gemmlab.problem import GemmProblem

from .scripts_loader import load

HOPPER = [s for s in registry.kernels("hgemm") if s.arch == "sm_90a"]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))


def test_the_hopper_rungs():
    assert [s.name for s in HOPPER] == ["tma_wgmma", "warp_specialized", "persistent", "tf32_wgmma"]


@pytest.mark.parametrize("spec", HOPPER, ids=lambda s: s.name)
def test_other_architectures_are_refused_in_one_line(spec):
    with pytest.raises(BadArgumentError, match=rf"^{spec.name} needs sm_90a \(Hopper\), this GPU is sm_80$"):
        cc.compile_kernel(spec, arch="sm_80")


@pytest.mark.parametrize("spec", HOPPER, ids=lambda s: s.name)
def test_sass_multiplies_with_hgmma(spec):
    from gemmlab.profile.sass import disassemble, find_tool, function_for, parse_sass

    if find_tool() is None:
        pytest.skip("no cuobjdump or nvdisasm here (pip install nvidia-cuda-cuobjdump)")
    ck = cc.compile_kernel(spec, arch="sm_90")
    fn = function_for(parse_sass(disassemble(ck.cubin)), ck.mangled)
    mix = fn.mix()
    assert mix.get("HGMMA", 0) >= 4, f"{spec.name}: no wgmma in SASS ({mix})"
    assert mix.get("HMMA", 0) == 0, f"{spec.name}: mma.sync in SASS, the slower path"


def test_generated_wgmma_wrappers_are_current(tmp_path, monkeypatch):
    gen = load("gen_wgmma_ops.py")
    current = gen.OUT.read_text()
    monkeypatch.setattr(gen, "OUT", tmp_path / "wgmma_ops.cuh")
    gen.main()
    assert (tmp_path / "wgmma_ops.cuh").read_text() == current, "run scripts/gen_wgmma_ops.py"


def test_shape_rules():
    tma, ws, pers, tf32 = HOPPER
    odd = GemmProblem(127, 129, 131, dtype="bf16")
    assert "needs K % 8 == 0 and N % 8 == 0" in refusal(tma, odd)
    assert "needs K % 8 == 0 and N % 8 == 0" in refusal(ws, odd)
    assert refusal(pers, odd) == "", "rung 5 takes any shape (TMA edges, padded rows)"
    assert refusal(tf32, GemmProblem(1, 1, 1, dtype="tf32")) == ""
    assert refusal(tf32, odd) == "tf32_wgmma takes tf32 inputs, not bf16"
    assert refusal(pers, GemmProblem(64, 64, 64, dtype="tf32")) == "persistent takes fp16 or bf16 inputs, not tf32"


@pytest.mark.parametrize("cm", [1, 2])
def test_persistent_geometry(cm):
    spec = registry.get("persistent", "hgemm")
    v = spec.resolve({"CM": cm})
    big = persistent_launch(GemmProblem(8192, 8192, 8192, dtype="bf16"), v)
    assert big.cluster == (cm, 1, 1) and big.block == (384, 1, 1)
    assert big.grid[0] % cm == 0 and big.grid[0] <= 132, "one CTA per SM at most"
    small = persistent_launch(GemmProblem(100, 300, 64, dtype="bf16"), v)
    assert small.grid[0] == cm * 2, "never more clusters than cluster tiles (1 x 2 here)"
    assert big.shmem == persistent_smem(v) <= 227 * 1024


def test_tma_boxes():
    pers, tf32 = registry.get("persistent", "hgemm"), registry.get("tf32_wgmma", "hgemm")
    assert tma_boxes(pers, pers.defaults) == {"A": (128, 64), "B": (64, 64), "C": (64, 32)}
    # tf32, a KxN B (nn): the transposed product's BN-row A boxes and 32 x 32 N-major B chunks
    assert tma_boxes(tf32, {**tf32.defaults, "CM": 2}) == {"A": (256, 32), "B": (32, 32), "C": (64, 32)}
    # tf32, B given as NxK (nt): read K-major, BN/CM rows a CTA
    assert tma_boxes(tf32, {**tf32.defaults, "CM": 2, "B_KMAJOR": 1}) == {"A": (128, 32), "B": (128, 32),
                                                                          "C": (64, 32)}
    tma = registry.get("tma_wgmma", "hgemm")
    assert tma_boxes(tma, tma.defaults) == {"A": (128, 64), "B": (64, 64)}


def test_one_consumer_geometry():
    """CONSUMERS = 1: a producer and one consumer warpgroup (256 threads), one C staging pair;
    BM = 64: 64-row tiles, stages of 64 A rows, A boxes of 64 rows (32 in a 1x2 cluster)."""
    spec = registry.get("persistent", "hgemm")
    problem = GemmProblem(1024, 1024, 1024, dtype="bf16")
    two = spec.resolve({"BN": 64, "CM": 1, "STAGES": 8})
    one = spec.resolve({"BN": 64, "CM": 1, "STAGES": 8, "CONSUMERS": 1})
    launch = persistent_launch(problem, one)
    assert launch.block == (256, 1, 1) and launch.grid == (128, 1, 1), "128 tiles of 128x64"
    assert persistent_smem(two) - persistent_smem(one) == 2 * 64 * 128, "one consumer's two staging buffers fewer"
    rows64 = spec.resolve({"BN": 128, "CM": 1, "BM": 64, "CONSUMERS": 1})
    assert persistent_launch(problem, rows64).grid == (128, 1, 1), "128 tiles of 64x128"
    assert persistent_smem(rows64) == 4 * (64 + 128) * 128 + 1024 + 2 * 64 * 128
    assert spec.block_tile(rows64) == (64, 128)
    assert tma_boxes(spec, rows64)["A"] == (64, 64)
    assert tma_boxes(spec, {**rows64, "CN": 2})["A"] == (32, 64), "a 1x2 cluster multicasts 32-row halves"
    # split-K partials: a BM x BN slot per sliced CTA tile and slice
    sliced = spec.resolve({"BN": 128, "CM": 1, "BM": 64, "CONSUMERS": 1, "SPLITK": 4})
    assert spec.workspace(GemmProblem(64, 128, 8192, dtype="bf16"), sliced) == 32 + 4 * 64 * 128


def test_one_consumer_refusals():
    """The spec refuses what the kernel cannot build, with the rule in the message."""
    spec = registry.get("persistent", "hgemm")
    one, row64 = {"BM": 128, "CONSUMERS": 1}, {"BM": 64, "CONSUMERS": 1}
    for bad, rule in (({"BM": 64, "CONSUMERS": 2}, "one consumer warpgroup"), ({**one, "BN": 256}, "at most 128 accumulators"),
                      ({**row64, "CN": 2, "A_MNMAJOR": 1}, "M-major A")):
        with pytest.raises(BadArgumentError, match=rule):
            spec.resolve(bad)


def test_pingpong_geometry_and_refusals():
    """PINGPONG = 1: two consumer warpgroups on alternate tiles of BM x BN each, so a warpgroup holds
    a whole tile's accumulators (BN <= 128 at BM = 128; 64-row tiles up to 256); the launch, the
    staging buffers and the split-K workspace are the cooperative kernel's."""
    spec = registry.get("persistent", "hgemm")
    pp = spec.resolve({"BN": 128, "PINGPONG": 1, "STAGES": 6})
    coop = spec.resolve({"BN": 128, "STAGES": 6})
    problem = GemmProblem(4096, 4096, 4096, dtype="bf16")
    assert persistent_launch(problem, pp) == persistent_launch(problem, coop)
    assert persistent_launch(problem, pp).block == (384, 1, 1)
    assert persistent_smem(pp) == 6 * 256 * 128 + 1024 + 2 * 2 * 64 * 128 <= 227 * 1024
    sliced = GemmProblem(512, 512, 8192, dtype="bf16")
    assert spec.workspace(sliced, {**pp, "SPLITK": 4}) == spec.workspace(sliced, {**coop, "SPLITK": 4})
    assert not spec.failed_constraints({**spec.defaults, "PINGPONG": 1, "BM": 64, "BN": 256})
    for bad, rule in (({"PINGPONG": 1, "BN": 256}, "at most 128 accumulators"),
                      ({"PINGPONG": 1, "BN": 128, "CONSUMERS": 1}, "two consumer warpgroups"),
                      ({"PINGPONG": 2, "BN": 128}, "PINGPONG must be 0 or 1")):
        with pytest.raises(BadArgumentError, match=rule):
            spec.resolve(bad)


@pytest.mark.parametrize("extra", [{}, {"CM": 1}, {"OUT16": 1}, {"A_MNMAJOR": 1, "B_KMAJOR": 1}, {"CN": 2}], ids=str)
def test_pingpong_compiles_without_spills(extra):
    spec = registry.get("persistent", "hgemm")
    ck = cc.compile_kernel(spec, {"BN": 128, "PINGPONG": 1, "STAGES": 6, **extra}, arch="sm_90a")
    r = ck.resources
    assert r.registers > 0 and r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r


def test_256_row_tiles_two_blocks_per_consumer():
    """BM = 256 (cuBLAS's 256x128 tile at 4096^3 bf16, in 1x2 clusters with A shared along N):
    each of the two consumers computes two 64-row blocks at BN = 128, 128 accumulators a thread,
    the stage as large as 128x256's; wider tiles, a lone consumer or ping-pong would need more."""
    spec = registry.get("persistent", "hgemm")
    v = spec.resolve({"BM": 256, "BN": 128, "CM": 1, "CN": 2})
    default = spec.resolve({})
    assert persistent_smem(v) == persistent_smem(default) <= 227 * 1024
    assert tma_boxes(spec, v)["A"][0] == 128  # each CTA of the pair loads half the 256 rows
    problem = GemmProblem(4096, 4096, 4096, dtype="bf16")
    assert persistent_launch(problem, v).block == (384, 1, 1)
    for bad in ({"BM": 256, "BN": 256, "STAGES": 2}, {"BM": 256, "BN": 128, "CONSUMERS": 1},
                {"BM": 256, "BN": 128, "PINGPONG": 1}):
        with pytest.raises(BadArgumentError, match="at most 128 accumulators"):
            spec.resolve(bad)


@pytest.mark.parametrize("extra", [{"CM": 1, "CN": 2}, {"CM": 2, "CN": 1}, {"CM": 1, "CN": 2, "OUT16": 1},
                                   {"CM": 1, "CN": 2, "A_MNMAJOR": 1, "B_KMAJOR": 1}], ids=str)
def test_256_row_tiles_compile_without_spills(extra):
    spec = registry.get("persistent", "hgemm")
    ck = cc.compile_kernel(spec, {"BM": 256, "BN": 128, **extra}, arch="sm_90a")
    r = ck.resources
    assert r.registers > 0 and r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert not r.perf_warnings, r.perf_warnings
