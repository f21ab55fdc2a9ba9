"""Rungs 5 and 6 with 128x64 tiles (BN = 64: one m64n64 wgmma per consumer and K step, two
64-column C chunks, or one of a 16-bit C), for problems with too few 128x128 tiles (issue 14:
1024^3 has 64 of them for 132 SMs, 128 of 128x64). Every result against the fp64 product of the
same rounded inputs, C NaN-poisoned when beta == 0: odd and aligned shapes, the four layouts and
both C types, split-K and the tail split on top, tf32."""
import pytest

from gemmlab import registry
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops import hgemm_check as hv

from .hgemm_sweeps import assert_all_pass, skip_unavailable

PERSISTENT = registry.get("persistent", "hgemm")
TF32 = registry.get("tf32_wgmma", "hgemm")
HALF = ("fp16", "bf16")
BN64 = {"BN": 64, "CM": 1}


@pytest.fixture(autouse=True)
def _hopper():
    skip_unavailable(PERSISTENT)


@pytest.mark.parametrize("dtype", HALF)
def test_sweeps(dtype):
    problems = hv.sweep_problems(dtype, hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES)
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": BN64}))


@pytest.mark.parametrize("layout", ("nt", "tn", "tt"))
@pytest.mark.parametrize("out", ("fp32", "c16"))
def test_every_layout_and_c_type(layout, out):
    # 1000x3000x200: three tiles a CTA back to back, each a single 16-bit C chunk, so the staging
    # buffers must alternate across tiles (they once alternated within a tile only)
    problems = [p for d in HALF for p in hv.sweep_problems(d, ((136, 264, 1000), (129, 257, 650), (1024, 1024, 1024),
                                                               (1000, 3000, 200)),
                                                           layout=layout, out=d if out == "c16" else "fp32")]
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": BN64}))


@pytest.mark.parametrize("extra", [{"SPLITK": 4}, {"SPLITK": 0}, {"TAILK": 2, "STAGES": 6}], ids=str)
def test_with_k_slices(extra):
    problems = [p for d in HALF for p in hv.sweep_problems(d, ((512, 512, 8192), (1024, 1024, 1024), (1409, 1665, 203)))]
    assert_all_pass(verify_sweep([PERSISTENT], problems, {"persistent": {**BN64, **extra}}))


def test_tf32():
    skip_unavailable(TF32)
    problems = hv.sweep_problems("tf32", hv.SWEEP_SHAPES + ((1024, 1024, 1024),))
    assert_all_pass(verify_sweep([TF32], problems, {"tf32_wgmma": BN64}))
