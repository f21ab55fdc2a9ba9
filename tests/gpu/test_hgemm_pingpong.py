"""Rung 5 in ping-pong (PINGPONG = 1): the two consumer warpgroups take alternate work units of the
CTA, each a whole BM x BN tile, so one's epilogue runs under the other's wgmmas, and the second
waits for its unit's first stage only after the first has waited for its last (named barriers 4
and 5). The edge shapes give a CTA one unit (the second warpgroup idle), two, and several in turn
(2048x4096x256: 512 tiles of 128x128 on at most 132 CTAs), alone and in clusters; split-K and the
tail split hand slices of one tile to both warpgroups. Every result against the fp64 product of
the same rounded inputs, C NaN-poisoned when beta == 0."""
from gemmlab import registry

from .hgemm_sweeps import configuration_tests

PERSISTENT = registry.get("persistent", "hgemm")
PP = {"PINGPONG": 1}
CONFIGS = {
    "128x128": {**PP, "BN": 128, "CM": 1, "STAGES": 6},
    "128x128 2x1": {**PP, "BN": 128, "CM": 2, "STAGES": 6},
    "128x64 1x2": {**PP, "BN": 64, "CM": 1, "CN": 2, "STAGES": 8},
    "64x256 2x1": {**PP, "BM": 64, "BN": 256, "CM": 2, "STAGES": 4},
    "64x192": {**PP, "BM": 64, "BN": 192, "CM": 1, "STAGES": 5},
}
EDGE_SHAPES = ((72, 70, 264), (136, 200, 130), (1000, 3000, 200), (2048, 4096, 256))


test_sweeps, test_every_layout_and_c_type, test_with_k_slices = configuration_tests(
    PERSISTENT, CONFIGS, EDGE_SHAPES, sliced=["128x128", "128x128 2x1", "64x256 2x1"])
