"""Rung 15 (tma_ffma) without a GPU: its launch (a tile a block, 384 threads, split-K as rungs
13-14), Hopper only (refused in one line elsewhere), every configuration of its space compiled
with no spills, and the SASS of its K loop: FFMA and shared loads only, no global load, shared
store or block barrier (the copies belong to the producer warpgroup); the loop finder sees
through the mbarrier wait's spin loop nested inside it."""
import pytest

from gemmlab import registry
from gemmlab.cuda import compile as cc
from gemmlab.errors import BadArgumentError
from gemmlab.kernels.sgemm import specs
from gemmlab.problem import GemmProblem
from gemmlab.profile import sass

SPEC = registry.get("tma_ffma")


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch, tmp_path):
    monkeypatch.setattr(specs, "sm_count", lambda: 132)
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))


def test_launch_is_a_tile_a_block_with_split_k():
    v = SPEC.resolve({})
    launch = SPEC.launch(GemmProblem(4096, 4096, 4096, 1.0, 0.0), v)
    assert launch.grid == (16 * 32, 1, 1) and launch.block == (384, 1, 1)
    assert launch.shmem == 4 * 4 * (256 * 16 + 16 * 128) + 1024, "the stages and 1024 bytes of alignment slack"
    assert SPEC.launch(GemmProblem(1024, 128, 4096, 1.0, 0.0), v).grid[2] > 1, "4 tiles: split K"
    assert SPEC.workspace_floats(GemmProblem(130, 128, 1000, 1.0, 0.0), SPEC.resolve({"SPLITK": 4})) == 4 * 130 * 128


def test_the_space_keeps_eight_math_warps():
    assert SPEC.failed_constraints({**SPEC.defaults, "BM": 128, "BN": 128})
    assert not SPEC.failed_constraints({**SPEC.defaults, "BM": 128, "BN": 256})
    assert SPEC.failed_constraints({**SPEC.defaults, "BK": 32, "STAGES": 6}), "over the shared memory limit"


def test_hopper_only():
    with pytest.raises(BadArgumentError, match="tma_ffma needs sm_90a"):
        cc.compile_kernel(SPEC, arch="sm_80")


@pytest.mark.parametrize("params", [{}, {"BM": 128, "BN": 256}, {"BK": 8, "STAGES": 6}, {"BK": 32, "STAGES": 3},
                                    {"ORDER": 0}, {"ORDER": 1}, {"ORDER": 2}, {"STAGES": 2}],
                         ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
def test_compiles_without_spills(params):
    ck = cc.compile_kernel(SPEC, params, arch="sm_90")
    r = ck.resources
    assert ck.arch == "sm_90a"
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert r.smem_static == SPEC.smem_bytes(ck.params)


@pytest.mark.skipif(sass.find_tool() is None, reason="no cuobjdump or nvdisasm on this machine")
def test_the_k_loop_is_ffma_and_shared_loads_only():
    ck = cc.compile_kernel(SPEC, arch="sm_90")
    mix = sass.sass_mix(sass.disassemble(ck.cubin), ck.mangled)
    loop = mix.loop
    assert loop["FFMA"] == 16 * 8 * 16, "one stage: BK = 16 steps of 8 x 16 FFMA"
    assert loop["LDS.128"] == 96, "32 for A (ptxas merges the K pairs), 64 for B"
    assert loop["LDG"] + loop["LDG.128"] + loop["STS"] + loop["STS.128"] + loop["LDGSTS"] + loop["BAR"] == 0
    assert loop["FFMA"] / loop["total"] > 0.93
