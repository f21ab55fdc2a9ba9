"""The reduce ladder's specs: registry, headers, constraints mirrored by static_asserts, launch
geometry at the edges of N, and the pass plan that takes N elements to one value."""
import dataclasses

import re

import pytest

from gemmlab import registry
from gemmlab.errors import BadArgumentError, CompileError, ConstraintError
from gemmlab.kernels.reduce import specs
from gemmlab.problem import ReduceProblem
from gemmlab.ops.reduce_passes import plan

KERNELS = registry.kernels("reduce")
EDGE_N = (1, 2, 3, 4, 5, 7, 31, 32, 33, 63, 64, 65, 255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 1025,
          2047, 2048, 2049, 4095, 4096, 4097, 65535, 65536, 65537, (1 << 20) - 1, 1 << 20, (1 << 20) + 7,
          (1 << 24) + 1, 1 << 28, (1 << 31) - 1, (1 << 31) + 5)


def test_ladder_is_rungs_1_to_10_in_order():
    assert [k.rung for k in KERNELS] == list(range(1, 11))
    assert [k.name for k in KERNELS] == ["interleaved", "no_divergence", "sequential", "add_during_load",
                                         "unroll_last_warp", "shuffle", "complete_unroll", "grid_stride_vec4",
                                         "single_pass", "tile_queue"]
    assert all(k.op == "reduce" for k in KERNELS)


def test_baselines_and_ceiling_are_registered_for_reduce():
    names = [i.name for i in registry.all_impls("reduce")]
    assert names[-3:] == ["cub", "torch", "copy"]
    assert registry.get("torch", "reduce").op == "reduce"
    assert registry.get("torch", "sgemm").op == "sgemm"
    assert registry.get("torch").op == "sgemm", "a bare name still means the sgemm one"
    assert [i.name for i in registry.select("shuffle,torch", op="reduce")] == ["shuffle", "torch"]
    assert registry.select("torch")[0].op == "sgemm"
    with pytest.raises(BadArgumentError, match="not sgemm"):
        registry.select("shuffle")
    with pytest.raises(BadArgumentError, match="not reduce"):
        registry.select("naive", op="reduce")


def test_duplicate_in_one_op_is_refused():
    with pytest.raises(ValueError, match="duplicate"):
        registry.register(specs.SHUFFLE)


@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
def test_source_has_header_and_template_parameters(spec):
    text = spec.source_path.read_text()
    assert text.lstrip().startswith("//")
    head = text[:2500].lower()
    assert "idea" in head and "should move" in head
    assert spec.entry.split("::")[-1] in text
    template = [p.name for p in spec.params if p.template]
    assert f"template <int {template[0]}" in text
    for name in template:
        assert name in text and "static_assert" in text


@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
def test_defaults_satisfy_constraints(spec):
    assert spec.failed_constraints(spec.defaults) == []
    assert spec.resolve() == spec.defaults
    assert set(spec.defaults) >= {"THREADS"}


def test_seed_rungs_take_threads_and_elems_as_template_parameters():
    for spec in KERNELS[:7]:
        assert [p.name for p in spec.params] == ["THREADS", "ELEMS"]
        assert spec.name_expression(spec.defaults).endswith(f"<{spec.defaults['THREADS']}, {spec.defaults['ELEMS']}>")
    assert KERNELS[0].defaults == {"THREADS": 256, "ELEMS": 1}  # seed 004: one element per thread
    assert KERNELS[3].defaults["ELEMS"] == 2  # seed 004: L = 2


@pytest.mark.parametrize("name,bad,needle", [
    ("interleaved", {"THREADS": 100}, "power of two"),
    ("sequential", {"THREADS": 2048}, "power of two"),
    ("unroll_last_warp", {"THREADS": 32}, "64..1024"),
    ("shuffle", {"ELEMS": 0}, "ELEMS must be in 1..64"),
    ("complete_unroll", {"ELEMS": 65}, "ELEMS must be in 1..64"),
    ("grid_stride_vec4", {"UNROLL": 17}, "UNROLL must be in 1..16"),
    ("single_pass", {"THREADS": 1024, "BLOCKS_PER_SM": 4}, "fit one SM"),
    ("tile_queue", {"THREADS": 16}, "power of two"),
])
def test_constraints_refuse(name, bad, needle):
    with pytest.raises(ConstraintError, match="breaks constraint: .*" + re.escape(needle)):
        registry.get(name, "reduce").resolve(bad)


@pytest.mark.parametrize("name,bad", [("interleaved", {"THREADS": 96}), ("unroll_last_warp", {"THREADS": 32}),
                                      ("complete_unroll", {"ELEMS": 65}),
                                      ("single_pass", {"THREADS": 1024, "BLOCKS_PER_SM": 4}),
                                      ("tile_queue", {"UNROLL": 17})])
def test_static_asserts_mirror_the_constraints(name, bad, tmp_path, monkeypatch):
    """With the Python constraints removed, NVRTC itself refuses the same configuration."""
    from gemmlab.cuda.compile import compile_kernel

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    spec = dataclasses.replace(registry.get(name, "reduce"), constraints=(), threads=None, smem_bytes=None)
    with pytest.raises(CompileError) as info:
        compile_kernel(spec, bad, arch="sm_90")
    assert "static assertion" in info.value.log or "static_assert" in info.value.log


def _covers_contiguous(spec, n):
    v = spec.defaults
    launch = spec.launch(ReduceProblem(n), v)
    blocks = launch.grid[0]
    assert launch.block == (v["THREADS"], 1, 1) and launch.grid[1:] == (1, 1)
    assert blocks * specs.section(v) >= n, "some elements have no block"
    assert (blocks - 1) * specs.section(v) < n, "a block with no element"


@pytest.mark.parametrize("n", EDGE_N)
def test_contiguous_geometry_covers_every_element_once(n):
    for spec in KERNELS[:7]:
        _covers_contiguous(spec, n)
        _covers_contiguous(spec, n)
    assert n  # parametrized


@pytest.mark.parametrize("n", EDGE_N)
@pytest.mark.parametrize("sms", [1, 108, 132])
def test_grid_stride_geometry(n, sms):
    for spec in KERNELS[7:9]:
        v = spec.defaults
        blocks = specs.grid_stride_blocks(n, v, sms)
        assert 1 <= blocks <= v["BLOCKS_PER_SM"] * sms, "more blocks than one resident wave"
        assert (blocks - 1) * v["THREADS"] * 4 < n, "a block with no float4 to read"
        assert blocks < 2 ** 31
    v = specs.TILE_QUEUE.defaults
    blocks = specs.tile_queue_blocks(n, v, sms)
    assert 1 <= blocks <= v["BLOCKS_PER_SM"] * sms
    assert (blocks - 1) * v["THREADS"] * v["UNROLL"] * 4 < n, "a block with no tile of its own"


def test_grid_stride_geometry_without_gpu_uses_an_h100():
    spec = registry.get("grid_stride_vec4", "reduce")
    assert specs.SM_COUNT_WITHOUT_GPU == 132
    big = spec.launch(ReduceProblem(1 << 28), spec.defaults)
    assert big.grid[0] == spec.defaults["BLOCKS_PER_SM"] * specs.sm_count()


@pytest.mark.parametrize("n", EDGE_N)
@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
def test_plan_ends_in_one_value(spec, n):
    passes = plan(spec, spec.defaults, n)
    assert passes[0][0] == n
    assert passes[-1][1].grid[0] == 1 or specs.SINGLE_PASS in spec.tags
    for (m, launch), (m_next, _) in zip(passes, passes[1:]):
        assert m_next == launch.grid[0] < m, "each pass must shrink the problem"
    if specs.SINGLE_PASS in spec.tags:
        assert len(passes) == 1
    assert len(passes) <= 8


def test_plan_lengths():
    assert len(plan(specs.INTERLEAVED, specs.INTERLEAVED.defaults, 1 << 28)) == 4  # 2^28 -> 2^20 -> 2^12 -> 16 -> 1
    assert len(plan(specs.GRID_STRIDE_VEC4, specs.GRID_STRIDE_VEC4.defaults, 1 << 28)) == 2
    assert len(plan(specs.GRID_STRIDE_VEC4, specs.GRID_STRIDE_VEC4.defaults, 1000)) == 1
    assert len(plan(specs.SINGLE_PASS_RUNG, specs.SINGLE_PASS_RUNG.defaults, 1 << 28)) == 1
    assert len(plan(specs.TILE_QUEUE, specs.TILE_QUEUE.defaults, 1 << 28)) == 1


def test_plan_refuses_a_pass_that_does_not_shrink():
    spec = dataclasses.replace(specs.SHUFFLE, geometry=lambda p, v: specs.Launch((p.n, 1, 1), (32, 1, 1)))
    with pytest.raises(ValueError, match="partials"):
        plan(spec, spec.defaults, 10)


def test_problem_refuses_bad_n():
    with pytest.raises(BadArgumentError):
        ReduceProblem(0)
    with pytest.raises(BadArgumentError):
        ReduceProblem(True)
    assert ReduceProblem(1 << 20).bytes_read == 4 << 20
