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


# -- fourth audit (mutation testing of registry.py): behaviours no test pinned before -------------

def _spec(params=(("A", 1), ("B", 2)), constraints=(), grid=(1, 1, 1), **hooks):
    """A spec of no real kernel: only what the registry's own checks read."""
    return registry.KernelSpec(
        name="fake", op="sgemm", title="t", idea="i", source="none.cu", entry="ns::fake",
        geometry=lambda problem, values: registry.Launch(grid, (32, 1, 1)),
        params=tuple(p if isinstance(p, registry.Param) else registry.Param(*p) for p in params),
        constraints=tuple(registry.Constraint(why, check) for why, check in constraints), **hooks)


def test_is_pow2_refuses_zero():
    """BLOCK's constraint: 0 & -1 == 0, so without the x > 0 guard 0 would pass as a power of two."""
    assert [n for n in range(-4, 70) if registry.is_pow2(n)] == [1, 2, 4, 8, 16, 32, 64]


def test_resolve_turns_given_values_into_ints_and_names_one_that_is_not():
    """Values come from the command line as text and from numpy as its scalars: resolve gives ints
    (the template arguments and the database's params), and refuses text that is no integer."""
    spec = registry.get("vectorize", "sgemm")
    values = spec.resolve({"BM": "64", "BN": 64.0})
    assert values["BM"] == 64 and type(values["BM"]) is int and type(values["BN"]) is int
    with pytest.raises(BadArgumentError, match=r"vectorize: parameter BM='x' is not an integer"):
        spec.resolve({"BM": "x"})


def test_defaults_that_break_a_constraint_are_refused_without_overrides():
    """resolve() checks the defaults too, not only values a caller gave."""
    spec = _spec(constraints=[("B must be odd", lambda v: v["B"] % 2 == 1)])
    with pytest.raises(ConstraintError, match="B must be odd"):
        spec.resolve()
    assert spec.resolve({"B": 3}) == {"A": 1, "B": 3}


@pytest.mark.parametrize("threads, ok", [(0, False), (1, True), (1024, True), (1025, False)])
def test_threads_per_block_are_checked_at_both_edges(threads, ok):
    """A block of 0 threads or of more than 1024 cannot launch; 1 and 1024 can."""
    spec = _spec(threads=lambda v: v["A"])
    failed = spec.failed_constraints({"A": threads, "B": 2})
    assert failed == ([] if ok else ["threads per block must be in 1..1024"])


@pytest.mark.parametrize("smem, ok", [(registry.MAX_STATIC_SMEM, True), (registry.MAX_STATIC_SMEM + 1, False)])
def test_static_shared_memory_is_checked_at_its_edge(smem, ok):
    """48 KiB of static shared memory is the most a kernel may declare: exactly that passes."""
    spec = _spec(smem_bytes=lambda v: v["A"])
    refused = [f"static shared memory must be <= {registry.MAX_STATIC_SMEM} B"]
    assert spec.failed_constraints({"A": smem, "B": 2}) == ([] if ok else refused)


def test_a_constraint_that_reads_a_missing_parameter_counts_as_broken():
    """A check that raises KeyError (a value left out) is a broken constraint, not a crash."""
    spec = _spec(constraints=[("C must be set", lambda v: v["C"] > 0)])
    assert spec.failed_constraints({"A": 1, "B": 2}) == ["C must be set"]


def test_the_refusal_names_the_given_parameters_own_rule_before_others():
    """Of the broken constraints, the message shows the given parameter's own rule ('B must ...'),
    else one naming it, before the spec's earlier ones (which do not say what was wrong)."""
    spec = _spec(params=(("A", 1), ("B", 1)),
                 constraints=[("the block must fit", lambda v: v["A"] + v["B"] < 5),
                              ("the product of A and B must be small", lambda v: v["A"] * v["B"] < 4),
                              ("B must be 0 or 1", lambda v: v["B"] in (0, 1))])
    with pytest.raises(ConstraintError, match=r"breaks constraint: B must be 0 or 1$"):
        spec.resolve({"B": 5})  # all three broken: B's own rule
    with pytest.raises(ConstraintError, match=r"breaks constraint: the product of A and B must be small$"):
        spec.resolve({"A": 4})  # no rule of A's own: the one that names A, before the block's


def test_name_expression_leaves_out_launch_time_parameters():
    """A parameter with template=False (read by the geometry) is no template argument; a spec whose
    parameters are all such names its entry alone, without '<>'."""
    spec = _spec(params=(registry.Param("A", 1), registry.Param("S", 4, template=False), registry.Param("B", 2)))
    assert spec.name_expression({"A": 1, "S": 4, "B": 2}) == "ns::fake<1, 2>"
    only_launch = _spec(params=(registry.Param("S", 4, template=False),))
    assert only_launch.name_expression({"S": 4}) == "ns::fake"


@pytest.mark.parametrize("grid, ok", [((2**31 - 1, 1, 1), True), ((2**31, 1, 1), False),
                                      ((1, 1, 65535), True), ((1, 1, 65536), False)])
def test_a_grid_past_cudas_limits_is_refused_on_every_axis(grid, ok):
    """grid.x holds at most 2^31-1 blocks, grid.y and grid.z 65535 each (z: split-K slices)."""
    spec = _spec(grid=grid)
    if ok:
        assert spec.launch(GemmProblem(8, 8, 8), spec.defaults).grid == grid
    else:
        with pytest.raises(BadArgumentError, match="past"):
            spec.launch(GemmProblem(8, 8, 8), spec.defaults)


def test_workspace_of_a_spec_with_its_own_workspace_hook():
    """A spec with a workspace hook (stream-K) takes the W pointer and needs what the hook says, even
    0, over any split-K planes; its flags are the whole of it unless a flags hook says fewer; a spec
    with neither needs none and clears none."""
    reduce = _spec()
    p = GemmProblem(64, 32, 8)
    own = _spec(grid=(1, 1, 4), workspace=lambda problem, v: v["A"], splitk_reduce=reduce)
    assert own.takes_workspace
    assert own.workspace_floats(p, {"A": 0, "B": 2}) == 0, "the hook's 0, not 4 planes of 64x32"
    assert own.workspace_floats(p, {"A": 100, "B": 2}) == 100
    assert own.workspace_flag_floats(p, {"A": 100, "B": 2}) == 100
    flagged = _spec(workspace=lambda problem, v: 100, workspace_flags=lambda problem, v: 8)
    assert flagged.takes_workspace and flagged.workspace_flag_floats(p, {}) == 8
    assert _spec(workspace=lambda problem, v: 0, workspace_flags=lambda problem, v: 8).workspace_flag_floats(p, {}) == 0
    plain = _spec()
    assert not plain.takes_workspace
    assert plain.workspace_floats(p, plain.defaults) == 0 and plain.workspace_flag_floats(p, plain.defaults) == 0


def test_a_variant_is_its_kernel_with_other_defaults():
    """variant() keeps the kernel (same_as names it, no rung of its own) and refuses a parameter the
    kernel does not have rather than dropping it."""
    base = registry.get("vectorize", "sgemm")
    v = base.variant("vec_small", "t", "i", BM=64)
    assert v.same_as == "vectorize" and v.rung is None and v.defaults == {**base.defaults, "BM": 64}
    with pytest.raises(ValueError, match=r"vectorize has no parameters \['XX'\]"):
        base.variant("v2", "t", "i", XX=1)


def _fake_registry(monkeypatch, *impls):
    registry.all_impls()  # the real package loaded first: _load() does not run again under the stand-in
    monkeypatch.setattr(registry, "_REGISTRY", {})
    registry.register(*impls)


def _impl(name, op="sgemm", kind="kernel", rung=None):
    from types import SimpleNamespace

    return SimpleNamespace(name=name, op=op, kind=kind, rung=rung, seed="")


def test_all_impls_orders_rungs_by_number_then_variants_then_baselines(monkeypatch):
    """Ladder order does not depend on registration order: rungs by number, variants as registered,
    baselines last even where one was registered before a kernel."""
    _fake_registry(monkeypatch, _impl("cublas", kind="baseline"), _impl("var1"), _impl("r2", rung=2),
                   _impl("torch", kind="baseline"), _impl("r1", rung=1), _impl("var2"))
    assert [i.name for i in registry.all_impls("sgemm")] == ["r1", "r2", "var1", "var2", "cublas", "torch"]


def test_family_is_the_ladder_or_the_seeds_first_word():
    """A rung climbs the ladder; a seed's variant belongs to its seed's first word ('002 tiled' is
    seed 002's sequence), a baseline to the baselines."""
    assert registry.family(registry.get("naive", "sgemm")) == "ladder"
    assert registry.family(registry.get("tiled", "sgemm")) == "002"
    assert registry.family(registry.get("cublas", "sgemm")) == "baseline"


def test_get_prefers_the_ops_own_then_sgemms_then_any(monkeypatch):
    """A name in several ops is the asked op's, else sgemm's whatever was registered first; a name
    of one op is found without naming it."""
    _fake_registry(monkeypatch, _impl("torch", op="reduce"), _impl("only_h", op="hgemm"), _impl("torch"))
    assert registry.get("torch").op == "sgemm"
    assert registry.get("torch", "reduce").op == "reduce"
    assert registry.get("torch", "hgemm").op == "sgemm"
    assert registry.get("only_h").op == "hgemm"
