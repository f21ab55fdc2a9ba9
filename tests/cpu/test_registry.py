"""The registry and the specs: names, sources, headers, defaults, constraints, geometry."""
import pytest

from gemmlab import registry
from gemmlab.errors import BadArgumentError, ConstraintError, UnknownKernelError
from gemmlab.problem import GemmProblem

KERNELS = registry.kernels("sgemm")


def test_ladder_has_rungs_1_to_6_in_order():
    rungs = [k.rung for k in KERNELS if k.rung is not None]
    assert rungs[:6] == [1, 2, 3, 4, 5, 6]


def test_seed_variants_are_registered():
    names = {k.name for k in KERNELS}
    for name in ("tiled", "tiled_rb1x4", "tiled_rb2x4", "s4_baseline", "s4_shared_memory", "s4_work_per_thread",
                 "s4_float4", "s4_outer_product", "s4_smem_transpose"):
        assert name in names


def test_baselines_are_registered_like_kernels():
    names = [i.name for i in registry.all_impls("sgemm")]
    assert "cublas" in names and "torch" in names
    assert names.index("cublas") > max(names.index(k.name) for k in KERNELS)


@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
def test_source_exists_with_header(spec):
    text = spec.source_path.read_text()
    head = text.lstrip().splitlines()[0]
    assert head.startswith("//"), f"{spec.source} must open with its header comment"
    assert "idea" in text[:1500].lower(), f"{spec.source} header must say the idea it adds"
    assert "should move" in text[:1500].lower(), f"{spec.source} header must say what should move"
    assert spec.entry.split("::")[-1] in text


@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
def test_defaults_satisfy_constraints(spec):
    assert spec.failed_constraints(spec.defaults) == []
    assert spec.resolve() == spec.defaults


@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
@pytest.mark.parametrize("shape", [(1, 1, 1), (127, 129, 1), (4097, 33, 5), (1000, 3000, 2000)])
def test_geometry_covers_the_output(spec, shape):
    """Enough blocks that every element of C has a thread (the kernels predicate the rest)."""
    problem = GemmProblem(*shape)
    launch = spec.launch(problem, spec.defaults)
    assert all(g >= 1 for g in launch.grid) and launch.grid[1] <= 65535
    assert 1 <= launch.threads <= 1024
    if spec.threads is not None:
        assert launch.threads == spec.threads(spec.defaults)
    tm, tn = spec.tile(spec.defaults)
    gx, gy, _ = launch.grid
    tiles_m, tiles_n = -(-problem.M // tm), -(-problem.N // tn)
    if spec.name == "naive":  # rung 1 deliberately puts rows on x
        assert (gx, gy) == (tiles_m, tiles_n)
    elif gy == 1 and gx == tiles_m * tiles_n and gx > tiles_n:  # a 1-D grid the kernel swizzles
        pass
    else:  # x walks column tiles, y row tiles: exactly one block per tile
        assert (gx, gy) == (tiles_n, tiles_m)


def test_constraint_refusal_names_the_constraint():
    spec = registry.get("vectorize")
    with pytest.raises(ConstraintError, match="TM must divide BM"):
        spec.resolve({"BM": 64, "TM": 3})
    with pytest.raises(ConstraintError, match="multiples of 4"):
        spec.resolve({"TN": 2, "TM": 2, "BM": 64, "BN": 64})


def test_bigtile_refuses_more_a_float4s_a_thread_than_its_row_mask_holds():
    """Rung 14 keeps one bit per A float4 of a thread in 32 bits: BM = 256, BK = 32 over 32 threads
    would bring 64 and lose rows 128-255 of every A tile (the review of session 26)."""
    spec = registry.get("bigtile", "sgemm")
    params = {**spec.defaults, "BM": 256, "BN": 16, "BK": 32, "WM": 256, "WN": 16, "TM": 16, "TN": 8, "NT": 32,
              "STAGES": 2}
    assert any("32 float4s of A" in c for c in spec.failed_constraints(params))
    assert not any("32 float4s of A" in c for c in spec.failed_constraints({**params, "BK": 16}))


def test_constraint_check_survives_division_by_zero():
    spec = registry.get("vectorize")
    assert spec.failed_constraints({**spec.defaults, "BM": 3})  # BM // TM == 0 threads
    with pytest.raises(ConstraintError):
        spec.resolve({"TM": 0})


def test_unknown_parameter_and_kernel():
    with pytest.raises(BadArgumentError, match="no parameter 'XX'"):
        registry.get("vectorize").resolve({"XX": 1})
    with pytest.raises(UnknownKernelError, match="unknown kernel 'nope'"):
        registry.get("nope")


def test_select():
    assert [i.name for i in registry.select("naive,cublas")] == ["naive", "cublas"]
    assert all(i.kind == "kernel" for i in registry.select("all", with_baselines=False))
    with pytest.raises(BadArgumentError):
        registry.select("naive,,cublas")


def test_variants_share_the_source_of_what_they_repeat():
    for spec in KERNELS:
        if spec.same_as:
            base = registry.get(spec.same_as)
            assert base.source == spec.source and base.entry == spec.entry


def test_name_expression():
    spec = registry.get("blocktiling_2d")
    assert spec.name_expression(spec.defaults) == "gemmlab::sgemm_blocktiling_2d<128, 128, 8, 8, 8>"


def test_a_problem_too_tall_for_the_grid_is_refused_in_one_line():
    """Rung 6 puts rows of 128-row tiles on grid.y (at most 65535): past 65535 * 128 rows it is
    refused with the grid named, not launched into a CUDA configuration error (session 26's review)."""
    spec = registry.get("vectorize", "sgemm")
    values = spec.resolve({})
    rows = 65535 * 128
    assert spec.launch(GemmProblem(rows, 64, 64), values).grid[1] == 65535
    with pytest.raises(BadArgumentError, match=r"vectorize cannot run .* grid \(1, 65536, 1\) past") as info:
        spec.launch(GemmProblem(rows + 1, 64, 64), values)
    assert "\n" not in str(info.value)
