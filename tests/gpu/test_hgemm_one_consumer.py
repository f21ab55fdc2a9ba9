"""Rung 5 with one consumer warpgroup (CONSUMERS = 1): 128-row tiles whose two 64-row wgmma blocks
one warpgroup issues (two accumulator sets, cuBLAS's arrangement at 1024^3), and 64-row tiles
(BM = 64: one block, the full BN a K step). Alone and in clusters (a 1x2 cluster of 64-row tiles
multicasts 32-row halves of A), both C types, the four layouts, split-K and the tail split (a lone
consumer parks and sums both blocks' partials). Every result against the fp64 product of the same
rounded inputs, C NaN-poisoned when beta == 0; the edge shapes leave the last tile row partly or
wholly past M (M = 72 and 136 at BM = 64: a second tile of 8 rows; 1000 = 15 x 64 + 40)."""
from gemmlab import registry

from .hgemm_sweeps import configuration_tests

PERSISTENT = registry.get("persistent", "hgemm")
ONE = {"BM": 128, "CONSUMERS": 1}
ROW64 = {"BM": 64, "CONSUMERS": 1}
CONFIGS = {
    "128x64": {**ONE, "BN": 64, "CM": 1, "STAGES": 8},
    "128x128 2x1": {**ONE, "BN": 128, "CM": 2},
    "128x64 2x2": {**ONE, "BN": 64, "CM": 2, "CN": 2, "STAGES": 6},
    "64x128": {**ROW64, "BN": 128, "CM": 1, "STAGES": 8},
    "64x256 2x1": {**ROW64, "BN": 256, "CM": 2, "STAGES": 4},
    "64x192": {**ROW64, "BN": 192, "CM": 1, "STAGES": 5},
    "64x64 1x2": {**ROW64, "BN": 64, "CM": 1, "CN": 2, "STAGES": 8},
}
EDGE_SHAPES = ((72, 70, 264), (136, 200, 130), (1024, 1024, 1024), (1000, 3000, 200))


test_sweeps, test_every_layout_and_c_type, test_with_k_slices = configuration_tests(
    PERSISTENT, CONFIGS, EDGE_SHAPES)
