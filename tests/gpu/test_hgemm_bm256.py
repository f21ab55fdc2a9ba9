"""Rung 5 with 256-row tiles (BM = 256): two consumer warpgroups of two 64-row blocks each at
BN = 128 (cuBLAS's 256x128 tile at 4096^3, in 1x2 clusters that share A along N), alone and in
2x1 and 1x2 clusters, both C types, the four layouts, split-K and the tail split. Every result
against the fp64 product of the same rounded inputs, C NaN-poisoned when beta == 0; the edge
shapes leave the last tile row partly or wholly past M (M = 264: a second tile of 8 rows; 1000 =
3 x 256 + 232; 300 rows in a 1x2 cluster tile of 256)."""
from gemmlab import registry

from .hgemm_sweeps import configuration_tests

PERSISTENT = registry.get("persistent", "hgemm")
ROWS256 = {"BM": 256, "CONSUMERS": 2, "BN": 128}
CONFIGS = {
    "256x128": {**ROWS256, "CM": 1, "CN": 1},
    "256x128 1x2": {**ROWS256, "CM": 1, "CN": 2},
    "256x128 2x1": {**ROWS256, "CM": 2, "CN": 1},
}
EDGE_SHAPES = ((264, 200, 264), (300, 520, 130), (1024, 1024, 1024), (1000, 3000, 200))


test_sweeps, test_every_layout_and_c_type, test_with_k_slices = configuration_tests(
    PERSISTENT, CONFIGS, EDGE_SHAPES)
