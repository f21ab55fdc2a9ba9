"""bgemm rung 1 (batched_pipeline) with no GPU: registered under op bgemm with rung 12's parameters,
its source's signature is BGEMM_SIGNATURE, NVRTC builds the defaults for sm_80 and sm_90 with zero
spills, the grid puts the batch on z (capped at 65535), and a bad configuration is refused with
ConstraintError before anything is compiled."""
import re

import pytest

from gemmlab import registry
from gemmlab.cuda import compile as cc
from gemmlab.errors import ConstraintError
from gemmlab.kernels.bgemm.specs import BGEMM_SIGNATURE
from gemmlab.problem import BatchedGemmProblem


def _nvrtc_reason() -> str:
    """"" when NVRTC (the cuda.core / cuda.bindings wheels) can compile here, else why not."""
    try:
        import cuda.core  # noqa: F401

        cc.nvrtc_version()
    except Exception as exc:  # ImportError, or a broken NVRTC library
        return f"NVRTC is not usable here: {exc}"
    return ""


needs_nvrtc = pytest.mark.skipif(bool(_nvrtc_reason()), reason=_nvrtc_reason() or "NVRTC available")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def spec():
    return registry.get("batched_pipeline", "bgemm")


def test_registered_as_bgemm_rung_1_with_rung_12s_parameters(spec):
    assert spec.op == "bgemm" and spec.rung == 1 and spec.kind == "kernel" and spec.same_as is None
    assert spec.name in [k.name for k in registry.kernels("bgemm")]
    assert spec.entry == "gemmlab::bgemm_batched_pipeline" and spec.source_path.is_file()
    assert spec.title and spec.idea
    rung12 = registry.get("async_pipeline", "sgemm")
    assert [(p.name, p.default, p.space) for p in spec.params] == [(p.name, p.default, p.space) for p in rung12.params]
    assert spec.name_expression(spec.resolve()) == "gemmlab::bgemm_batched_pipeline<128, 256, 8, 64, 64, 2, 4, 4, 256, 2, 4>"


def _types(params: str) -> list[str]:
    """'(int M, const float* __restrict__ A0, ...)' -> ['int', 'const float*', ...] (names dropped)."""
    out = []
    for p in params.strip().strip("()").split(","):
        words = p.replace("__restrict__", "").replace("*", "* ").split()
        out.append(" ".join(words[:-1]).replace(" *", "*"))
    return out


def test_source_signature_is_bgemm_signature(spec):
    src = spec.source_path.read_text()
    m = re.search(r"bgemm_batched_pipeline\s*(\([^)]*\))", src)
    assert m, "the kernel's parameter list was not found"
    assert _types(m.group(1)) == _types(BGEMM_SIGNATURE)
    assert _types(BGEMM_SIGNATURE) == ["int", "int", "int", "float", "const float*", "long long", "const float*",
                                       "long long", "float", "float*", "long long", "int"]
    assert "template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, int STAGES, int PADA>" in src
    assert '#include "sgemm/warptile.cuh"' in src  # the shared warptile pieces, not a copy of them


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_defaults_compile_without_spills(spec, arch):
    ck = cc.compile_kernel(spec, arch=arch)
    r = ck.resources
    assert r.registers > 0, "the ptxas report was not parsed"
    assert r.registers <= 255
    assert r.spill_stores == 0 and r.spill_loads == 0, f"spills on {arch}: {r}"
    assert r.stack_frame == 0, f"local memory on {arch}: {r}"
    assert r.smem_static == 0  # all of its shared memory is dynamic (Launch.shmem)
    assert ck.mangled.startswith("_Z") and len(ck.cubin) > 0
    assert ck.name_expression.startswith("gemmlab::bgemm_batched_pipeline<")


@pytest.mark.parametrize("batch,M,N,K,z", [
    (1, 128, 256, 8, 1),          # one matrix, exactly one tile
    (3, 300, 513, 7, 3),          # M, N not multiples of BM, BN
    (70000, 8, 8, 8, 65535),      # past gridDim.z's limit: the kernel loops over the rest
    (65535, 1, 1, 1, 65535),
    (65536, 129, 257, 1, 65535),
])
def test_geometry_puts_the_batch_on_z(spec, batch, M, N, K, z):
    v = spec.resolve()
    g = spec.launch(BatchedGemmProblem(M, N, K, 1.0, 0.0, batch=batch), v)
    assert g.grid == (-(-N // v["BN"]), -(-M // v["BM"]), z)
    assert g.block == (v["NT"], 1, 1) and g.threads == v["NT"] and g.cluster == (1, 1, 1)
    assert g.shmem == 4 * v["STAGES"] * v["BK"] * (v["BM"] + v["PADA"] + v["BN"])


def test_geometry_follows_the_parameters(spec):
    v = spec.resolve({"BM": 64, "BN": 128, "WM": 32, "NT": 128, "STAGES": 3})
    g = spec.launch(BatchedGemmProblem(65, 129, 33, batch=5), v)
    assert g.grid == (2, 2, 5) and g.block == (128, 1, 1) and g.shmem == 4 * 3 * 8 * (64 + 4 + 128)


@pytest.mark.parametrize("overrides,why", [
    ({"STAGES": 1}, "STAGES must be >= 2"),
    ({"PADA": 2}, "PADA must be a multiple of 4"),
    ({"NT": 128}, "warp count"),
    ({"STAGES": 8, "BK": 32}, "dynamic shared memory"),
])
def test_bad_configuration_is_refused_before_compiling(spec, monkeypatch, overrides, why):
    def must_not_run(*args, **kwargs):
        raise AssertionError("compilation started for a configuration that breaks a constraint")

    monkeypatch.setattr(cc, "base_options", must_not_run)
    monkeypatch.setattr(cc, "cache_key", must_not_run)
    with pytest.raises(ConstraintError, match=why):
        cc.compile_kernel(spec, overrides, arch="sm_90")
