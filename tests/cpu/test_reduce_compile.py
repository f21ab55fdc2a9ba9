"""Every reduce rung compiles with NVRTC for sm_80 and sm_90 with no GPU: zero spills, no
local memory, shared memory as the spec says, 16-byte loads where the rung promises them."""
import pytest

from gemmlab import registry
from gemmlab.cuda import compile as cc

KERNELS = registry.kernels("reduce")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))


def _check(ck, spec, arch):
    r = ck.resources
    assert r.registers > 0, "the ptxas report was not parsed"
    assert r.spill_stores == 0 and r.spill_loads == 0, f"{spec.name} spills on {arch}: {r}"
    assert r.stack_frame == 0, f"{spec.name} uses local memory on {arch}: {r}"
    assert r.smem_static == spec.smem_bytes(ck.params), "smem_bytes in the spec disagrees with ptxas"
    assert len(ck.cubin) > 0 and ck.mangled.startswith("_Z")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
def test_every_rung_compiles_without_spills(spec, arch):
    _check(cc.compile_kernel(spec, arch=arch), spec, arch)


@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
def test_extreme_configurations_compile_without_spills(spec):
    """The largest and smallest points of each declared space."""
    space = {p.name: p.space for p in spec.params}
    for pick in (min, max):
        values = {name: pick(s) for name, s in space.items()}
        if spec.failed_constraints(values):  # e.g. THREADS 1024 x BLOCKS_PER_SM 8 does not fit
            values = {**spec.defaults, **{k: v for k, v in values.items() if k != "BLOCKS_PER_SM"}}
        if spec.failed_constraints(values):
            continue
        _check(cc.compile_kernel(spec, values, arch="sm_90"), spec, "sm_90")


def test_grid_stride_rungs_fit_their_resident_wave():
    """__launch_bounds__(THREADS, BLOCKS_PER_SM) must leave room for BLOCKS_PER_SM blocks."""
    for name in ("grid_stride_vec4", "single_pass", "tile_queue"):
        spec = registry.get(name, "reduce")
        ck = cc.compile_kernel(spec, arch="sm_90")
        v = ck.params
        assert ck.resources.registers * v["THREADS"] * v["BLOCKS_PER_SM"] <= 65536


def test_sass_has_16_byte_loads():
    from gemmlab.profile import sass as S

    tool = S.find_tool()
    if tool is None:
        pytest.skip(S.NO_TOOL)
    for name, wide in (("grid_stride_vec4", True), ("single_pass", True), ("tile_queue", True),
                       ("complete_unroll", False)):
        ck = cc.compile_kernel(registry.get(name, "reduce"), arch="sm_90")
        sass = S.disassemble(ck.cubin, tool)
        assert ("LDG.E.NA.128" in sass or "LDG.E.128" in sass) == wide, name
        assert "STL" not in sass and "LDL" not in sass
