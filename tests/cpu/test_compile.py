"""NVRTC compilation with no GPU: every kernel, both architectures, zero spills; the cache."""
from dataclasses import replace

import pytest

from gemmlab import registry
from gemmlab.cuda import compile as cc
from gemmlab.errors import BadArgumentError, CompileError
from gemmlab.registry import KernelSpec, Launch

KERNELS = registry.kernels("sgemm") + registry.kernels("bgemm")  # the fp32 ladders


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: s.name)
def test_every_kernel_compiles_without_spills(spec, arch):
    if spec.arch is not None and spec.arch.rstrip("a") != arch:  # rung 15: Hopper only, refused in one line
        with pytest.raises(BadArgumentError, match=f"{spec.name} needs {spec.arch}"):
            cc.compile_kernel(spec, arch=arch)
        return
    ck = cc.compile_kernel(spec, arch=arch)
    r = ck.resources
    assert r.registers > 0, "the ptxas report was not parsed"
    assert r.spill_stores == 0 and r.spill_loads == 0, f"{spec.name} spills on {arch}: {r}"
    assert r.stack_frame == 0, f"{spec.name} uses local memory on {arch}: {r}"
    assert r.registers <= 255
    assert len(ck.cubin) > 0 and ck.mangled.startswith("_Z")
    if spec.smem_bytes is not None:
        assert r.smem_static == spec.smem_bytes(ck.params), "smem_bytes in the spec disagrees with ptxas"


def test_second_compile_hits_the_cache():
    spec = registry.get("blocktiling_1d")
    first = cc.compile_kernel(spec, arch="sm_90")
    second = cc.compile_kernel(spec, arch="sm_90")
    assert not first.cached and second.cached
    assert second.cubin == first.cubin and second.resources == first.resources
    other = cc.compile_kernel(spec, {"TM": 4, "BK": 16}, arch="sm_90")
    assert not other.cached, "other template arguments must not hit the same entry"
    assert not cc.compile_kernel(spec, arch="sm_80").cached, "another arch must not hit the same entry"


def test_header_change_changes_the_key(monkeypatch, tmp_path):
    """An edited header (any .cuh under the kernel folder, in a subfolder too) makes a new key, so
    no cubin built from the old one is reused; the same bytes keep the key."""
    header = tmp_path / "sub" / "x.cuh"
    header.parent.mkdir()
    header.write_text("#define X 1\n")
    monkeypatch.setattr(cc, "KERNEL_DIR", tmp_path)
    src = registry.get("naive").source_path.read_text()

    def key():
        return cc.cache_key(src, "k", "sm_90", cc.base_options("sm_90"))

    before = key()
    assert key() == before
    header.write_text("#define X 2\n")
    assert key() != before
    header.write_text("#define X 1\n")
    assert key() == before


def test_compile_error_carries_the_log(tmp_path, monkeypatch):
    bad = tmp_path / "bad.cu"
    # a plain kernel, so the only error is the bad statement (a template with no parameter to
    # instantiate it would fail on the name instead, and pass this test for the wrong reason)
    bad.write_text("namespace gemmlab { __global__ void k() { int x = undeclared_name_42; (void)x; } }\n")
    monkeypatch.setattr(cc, "KERNEL_DIR", tmp_path)
    spec = KernelSpec(name="bad", op="test", title="", idea="", source="bad.cu", entry="gemmlab::k",
                      geometry=lambda p, v: Launch((1, 1, 1), (1, 1, 1)))
    import gemmlab.registry as reg
    monkeypatch.setattr(reg, "KERNEL_DIR", tmp_path)
    with pytest.raises(CompileError, match="failed to compile") as info:
        cc.compile_kernel(spec, arch="sm_90")
    assert "undeclared_name_42" in info.value.log and "undefined" in info.value.log
    assert "undeclared_name_42" in str(info.value), "the one line names the compiler's first error"


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'
ptxas info    : Function properties for _Z3fooPf
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function '_Z3barv' for 'sm_90'
ptxas info    : Function properties for _Z3barv
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, 352 bytes cmem[0]
"""


def test_parse_ptxas_log():
    res = cc.parse_ptxas_log(PTXAS_LOG)
    assert res["_Z3fooPf"] == cc.Resources(registers=255, smem_static=8192, stack_frame=16, spill_stores=8,
                                           spill_loads=12, barriers=1)
    assert res["_Z3barv"] == cc.Resources(registers=10)


# ptxas's words for a wgmma kernel that lost its pipeline (the OVERLAP branch's rung 5, session 17):
# the note names its function and may come before that function's properties
PTXAS_SERIALIZED = """ptxas info    : Compiling entry function '_Z4gemmv' for 'sm_90a'
ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to \
insufficient register resources for the wgmma pipeline in the function '_Z4gemmv'
ptxas info    : Function properties for _Z4gemmv
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers, 80 bytes smem, 480 bytes cmem[0]
"""


def test_ptxas_performance_warnings_are_kept():
    (r,) = cc.parse_ptxas_log(PTXAS_SERIALIZED).values()
    assert r.registers == 168 and r.spill_stores == 0, "no spill: only the note tells"
    assert r.perf_warnings == ("C7511: wgmma.mma_async instructions are serialized due to insufficient register "
                               "resources for the wgmma pipeline",)
    assert cc.parse_ptxas_log(PTXAS_LOG)["_Z3barv"].perf_warnings == ()


def test_a_cached_kernel_keeps_its_ptxas_warnings(tmp_path, monkeypatch):
    """The cache stores resources as JSON; a warning read back is the same tuple, not a list."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    real = cc.parse_ptxas_log
    monkeypatch.setattr(cc, "parse_ptxas_log",
                        lambda log: {k: replace(r, perf_warnings=("C1: x",)) for k, r in real(log).items()})
    spec = registry.get("naive")
    first = cc.compile_kernel(spec, arch="sm_80")
    again = cc.compile_kernel(spec, arch="sm_80")
    assert (first.cached, again.cached) == (False, True)
    assert again.resources == first.resources and again.resources.perf_warnings == ("C1: x",)
