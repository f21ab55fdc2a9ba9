"""Rung 14's stream-K mode as data (no GPU): its launch is one wave, never more blocks than
K-iterations; its workspace holds the tile flags and two partial tiles a block; it compiles
without spills in the configurations the dispatch tables use."""
import pytest

from gemmlab import registry
from gemmlab.cuda import compile as cc
from gemmlab.errors import ConstraintError
from gemmlab.kernels.sgemm import specs
from gemmlab.problem import GemmProblem

SPEC = registry.get("bigtile")
FOUR_WARPS = {"BM": 128, "BN": 128, "WM": 64, "WN": 64, "TM": 8, "TN": 16, "NT": 128, "MINB": 2}


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    monkeypatch.setattr(specs, "sm_count", lambda: 132)


@pytest.mark.parametrize("mode", [1, 2])
def test_grid_is_one_wave(mode):
    v = SPEC.resolve({"STREAMK": mode})
    launch = SPEC.launch(GemmProblem(3072, 3072, 3072, 1.0, 0.0), v)
    assert launch.grid == (132, 1, 1) and launch.block == (256, 1, 1)
    v2 = SPEC.resolve({**FOUR_WARPS, "STREAMK": mode})
    assert SPEC.launch(GemmProblem(3072, 3072, 3072, 1.0, 0.0), v2).grid == (264, 1, 1)  # 2 blocks an SM


def test_grid_never_exceeds_the_iterations():
    """5x7x9: one tile, two K-tiles of 8: two blocks, each with a non-empty range (the fix-up
    counts every block between a tile's first and last owner as a contributor)."""
    v = SPEC.resolve({"STREAMK": 1})
    assert SPEC.launch(GemmProblem(5, 7, 9, 1.0, 0.0), v).grid == (2, 1, 1)


def test_workspace_holds_flags_and_two_slots_a_block():
    p = GemmProblem(3072, 3072, 3072, 1.0, 0.0)
    v = SPEC.resolve({"STREAMK": 2})
    tiles = 24 * 12
    assert SPEC.workspace_floats(p, v) == tiles + 2 * 132 * 128 * 256  # 288 flags: a multiple of 32 already
    # split-K keeps its planes, a plain launch needs none
    assert SPEC.workspace_floats(p, SPEC.resolve({"SPLITK": 2})) == 2 * 3072 * 3072
    assert SPEC.workspace_floats(p, SPEC.resolve({})) == 0


def test_only_the_flags_must_be_zero_before_a_launch():
    """What an executor sharing the workspace clears when another used it since
    (api/shared_workspaces.py): stream-K's flags, one a tile rounded to 32; the split-K planes
    are written before they are read."""
    v = SPEC.resolve({"STREAMK": 1})
    assert SPEC.workspace_flag_floats(GemmProblem(3072, 3072, 3072, 1.0, 0.0), v) == 288
    assert SPEC.workspace_flag_floats(GemmProblem(1000, 4096, 4096, 1.0, 0.0), v) == 128  # 8 x 16 tiles
    assert SPEC.workspace_flag_floats(GemmProblem(3072, 3072, 3072, 1.0, 0.0), SPEC.resolve({"SPLITK": 2})) == 0


def test_stream_k_takes_only_its_modes():
    with pytest.raises(ConstraintError, match="breaks constraint: STREAMK must be 0, 1 or 2"):
        SPEC.resolve({"STREAMK": 3})


@pytest.mark.parametrize("params", [{"STREAMK": 1}, {"STREAMK": 2}, {**FOUR_WARPS, "STREAMK": 2}],
                         ids=["sk1", "sk2", "sk2-4warps"])
def test_stream_k_compiles_without_spills(params, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    r = cc.compile_kernel(SPEC, params, arch="sm_90").resources
    assert r.registers <= 255 and r.spill_stores == 0 and r.spill_loads == 0, r
