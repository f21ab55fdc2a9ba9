"""Every hgemm rung compiles with NVRTC with no GPU - rungs 1-2 for sm_80 and sm_90, the wgmma
rungs 3-6 for sm_90a - for each input type it takes: zero spills, no local memory, static shared
memory as the spec says; the largest and smallest points of each declared space that satisfy
the constraints compile too. (tests/cpu/test_hgemm_hopper.py: the Hopper rungs' own checks.)"""
import pytest

from gemmlab import registry
from gemmlab.cuda import compile as cc
from gemmlab.errors import CompileError, ConstraintError

KERNELS = registry.kernels("hgemm")
PORTABLE = [s for s in KERNELS if s.arch is None]  # rungs 1-2: sm_80 and up
HOPPER = [s for s in KERNELS if s.arch == "sm_90a"]  # rungs 3-6


def _dtype_flags(spec):
    """The DTYPE values a kernel is built with (none for the tf32 rung, which has no flag)."""
    return [0, 1] if any(p.name == "DTYPE" for p in spec.params) else [None]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))


def _check(ck, spec, arch):
    r = ck.resources
    assert r.registers > 0, "the ptxas report was not parsed"
    assert r.spill_stores == 0 and r.spill_loads == 0, f"{spec.name} spills on {arch}: {r}"
    assert r.stack_frame == 0, f"{spec.name} uses local memory on {arch}: {r}"
    assert not r.perf_warnings, f"{spec.name} on {arch}: ptxas: {r.perf_warnings}"  # e.g. wgmma serialised
    assert r.smem_static == spec.smem_bytes(ck.params), "smem_bytes in the spec disagrees with ptxas"
    assert len(ck.cubin) > 0 and ck.mangled.startswith("_Z")


def test_the_ladder_is_registered_in_order():
    assert [s.name for s in KERNELS] == ["wmma", "mma_sync", "tma_wgmma", "warp_specialized", "persistent",
                                         "tf32_wgmma"]
    assert [s.rung for s in KERNELS] == [1, 2, 3, 4, 5, 6]
    assert registry.get("cublas", "hgemm").op == "hgemm"
    for spec in KERNELS:
        if spec.dtypes != ("tf32",):
            assert spec.params[0].name == "DTYPE", "the dtype flag is the first template argument"
        text = spec.source_path.read_text()
        assert text.startswith(f"// Tensor-core rung {spec.rung} - "), "the header convention"
        assert "Idea:" in text and "Should move:" in text and "Output:" in text and "fp32" in text


def _no_mma_h(spec) -> str:
    """Why `spec` cannot compile on this machine ("" when it can): rung 1 includes <mma.h>, which
    only a CUDA toolkit or the nvidia-cuda-runtime wheel provides."""
    if "<mma.h>" in spec.source_path.read_text() and cc.cuda_include_dir() is None:
        return f"{spec.name} includes <mma.h>: no CUDA toolkit or nvidia-cuda-runtime wheel on this machine"
    return ""


def _skip_without_mma_h(spec) -> None:
    if _no_mma_h(spec):
        pytest.skip(_no_mma_h(spec))


@pytest.mark.parametrize("flag", [0, 1], ids=["fp16", "bf16"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("spec", PORTABLE, ids=lambda s: s.name)
def test_every_rung_compiles_without_spills(spec, arch, flag):
    _skip_without_mma_h(spec)
    ck = cc.compile_kernel(spec, {"DTYPE": flag}, arch=arch)
    _check(ck, spec, arch)
    assert ck.name_expression.startswith(f"{spec.entry}<{flag}, ")


@pytest.mark.parametrize("spec", HOPPER, ids=lambda s: s.name)
def test_every_hopper_rung_compiles_for_sm_90a_without_spills(spec):
    for flag in _dtype_flags(spec):
        ck = cc.compile_kernel(spec, {} if flag is None else {"DTYPE": flag}, arch="sm_90")
        assert ck.arch == "sm_90a", "asked for sm_90, a wgmma kernel is built for sm_90a"
        _check(ck, spec, "sm_90a")


@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
def test_extreme_configurations_compile_without_spills(spec):
    _skip_without_mma_h(spec)
    # the tunables: DTYPE and parameters without a space (B_KMAJOR) are set by the problem
    space = {p.name: p.space for p in spec.params if p.name != "DTYPE" and p.space}
    tried = 0
    for pick in (min, max):
        values = {**spec.defaults, **{name: pick(s) for name, s in space.items()}}
        if spec.failed_constraints(values):
            continue
        _check(cc.compile_kernel(spec, values, arch="sm_90"), spec, "sm_90")
        tried += 1
    assert tried, f"{spec.name}: neither extreme of its space is valid"
    if spec.arch is not None:
        return
    small = {**spec.defaults, "BM": 64, "BN": 64, "WM": 32, "WN": 32}
    assert not spec.failed_constraints(small)
    _check(cc.compile_kernel(spec, small, arch="sm_90"), spec, "sm_90")


def test_constraints_mirror_the_static_asserts():
    mma = registry.get("mma_sync", "hgemm")
    with pytest.raises(ConstraintError, match="B swizzle"):
        mma.resolve({"BN": 96, "WN": 32})
    with pytest.raises(ConstraintError, match="A swizzle"):
        mma.resolve({"BK": 48})
    with pytest.raises(ConstraintError, match="breaks constraint: STAGES must be >= 2"):
        mma.resolve({"STAGES": 1})
    with pytest.raises(ConstraintError, match=r"breaks constraint: DTYPE must be 0 \(fp16\) or 1 \(bf16\)"):
        mma.resolve({"DTYPE": 2})
    wmma = registry.get("wmma", "hgemm")
    with pytest.raises(ConstraintError, match="multiple of 16"):
        wmma.resolve({"BK": 24})
    with pytest.raises(ConstraintError, match="divide the block tile"):
        wmma.resolve({"WM": 48})


@pytest.mark.parametrize("name,bad,message", [
    ("wmma", {"WM": 48}, "warp tiles must divide the block tile"),
    ("wmma", {"BK": 24}, "wmma works on 16x16x16 fragments"),
    ("mma_sync", {"BK": 48}, "the A swizzle is written for 2, 4 or 8 chunks per row"),
    ("mma_sync", {"BN": 96, "WN": 32}, "the B swizzle XORs the low 3 bits"),
    ("mma_sync", {"STAGES": 1}, "a pipeline needs at least two stages"),
    ("persistent", {"BN": 96}, "BN is 64, 128, 192 or 256"),
    ("persistent", {"CM": 3}, "clusters of 1 or 2 CTAs along M"),
    ("persistent", {"BM": 96}, "BM is 64, 128 or 256 rows"),
    ("persistent", {"PINGPONG": 1, "CONSUMERS": 1, "BM": 64, "BN": 128}, "ping-pong: two consumer warpgroups"),
    ("tf32_wgmma", {"STAGES": 1}, "a pipeline needs at least two stages"),
], ids=lambda v: v if isinstance(v, str) else ",".join(f"{k}={x}" for k, x in v.items()))
def test_static_asserts_mirror_the_constraints(name, bad, message, tmp_path, monkeypatch):
    """With the Python constraints removed, NVRTC itself refuses the same configuration, with the
    kernel's own static_assert: neither side can drop a rule alone."""
    import dataclasses

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    spec = registry.get(name, "hgemm")
    with pytest.raises(ConstraintError):
        spec.resolve(bad)
    _skip_without_mma_h(spec)  # NVRTC would stop at the missing header, not at the static_assert
    bare = dataclasses.replace(spec, constraints=(), threads=None, smem_bytes=None)
    with pytest.raises(CompileError) as info:
        cc.compile_kernel(bare, bad, arch="sm_90")
    assert message in info.value.log, info.value.log[-2000:]


def test_geometry_and_shared_memory():
    from gemmlab.problem import GemmProblem

    mma = registry.get("mma_sync", "hgemm")
    v = mma.defaults
    launch = mma.launch(GemmProblem(1000, 520, 64, dtype="bf16"), v)
    assert launch.grid == (-(-520 // v["BN"]), -(-1000 // v["BM"]), 1)
    assert launch.threads == (v["BM"] // v["WM"]) * (v["BN"] // v["WN"]) * 32
    assert launch.shmem == 2 * v["STAGES"] * v["BK"] * (v["BM"] + v["BN"])


def test_the_gpu_tests_other_parameters_are_valid_and_compile():
    from pathlib import Path

    from .scripts_loader import load

    mod = load(Path(__file__).resolve().parents[1] / "gpu" / "test_hgemm_kernels.py", "hgemm_gpu_tests")
    missing = []
    for name, params in mod.OTHER_PARAMS:
        spec = registry.get(name, "hgemm")
        if _no_mma_h(spec):
            missing.append(f"{name} {params}")
            continue
        _check(cc.compile_kernel(spec, params, arch="sm_90"), spec, "sm_90")
    if missing:  # every other set compiled above
        pytest.skip(f"not compiled, <mma.h> missing on this machine: {'; '.join(missing)}")
