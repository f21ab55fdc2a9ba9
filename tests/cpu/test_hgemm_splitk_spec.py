"""Split-K in the persistent tensor-core rungs (5 and 6) as data, no GPU: how many K slices a
shape gets (as given, clamped to its K tiles and to the workspace cap; automatic only when the
tiles leave SMs idle), the launch (never more clusters than work units), the workspace (flags,
then one BM x BN partial per CTA tile and slice), and the kernel's walk over work units,
modelled here step for step as persistent.cuh writes it: every K tile of every output tile is
multiplied exactly once, each half-tile flag counts exactly `splits` arrivals, and every slot
lies inside the workspace the host allocates."""
import pytest

from gemmlab import registry
from gemmlab.kernels.hgemm import specs
from gemmlab.problem import GemmProblem

PERSISTENT = registry.get("persistent", "hgemm")
TF32 = registry.get("tf32_wgmma", "hgemm")


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    monkeypatch.setattr(specs, "cluster_slots", lambda cm: 132 // cm)


def _p(M, N, K, dtype="bf16"):
    return GemmProblem(M, N, K, 1.0, 0.0, dtype)


def test_splitk_is_a_launch_parameter_automatic_by_default():
    param = next(p for p in PERSISTENT.params if p.name == "SPLITK")
    assert not param.template and param.default == 0 and {0, 1} <= set(param.space)
    assert "SPLITK" in TF32.defaults
    v = PERSISTENT.resolve({})
    assert specs.persistent_splits(_p(512, 512, 8192), v) == 8, "4 cluster tiles for 66 cluster slots"
    assert PERSISTENT.workspace_floats(_p(512, 512, 8192), v) > 0
    assert specs.persistent_splits(_p(4096, 4096, 4096), v) == 1
    whole = PERSISTENT.resolve({"SPLITK": 1})
    assert PERSISTENT.workspace_floats(_p(512, 512, 8192), whole) == 0, "whole tiles need no workspace"


def test_given_splits_are_clamped_to_the_k_tiles():
    v = PERSISTENT.resolve({"SPLITK": 8})
    assert specs.persistent_splits(_p(512, 512, 8192), v) == 8
    assert specs.persistent_splits(_p(512, 512, 200), v) == 4, "K = 200 is 4 K tiles of 64"
    assert specs.persistent_splits(_p(512, 512, 64), v) == 1
    assert specs.persistent_splits(_p(512, 512, 200, "tf32"), TF32.resolve({"SPLITK": 8})) == 7, "tf32 K tiles are 32"


def test_splits_are_capped_by_the_workspace():
    v = PERSISTENT.resolve({"SPLITK": 16, "BN": 256, "CM": 1})
    p = _p(4096, 4096, 65536)  # one partial plane: 4096^2 floats, a quarter of the cap
    assert specs.persistent_splits(p, v) == 4
    assert specs.persistent_splits(_p(16384, 16384, 65536), v) == 1, "one plane alone passes the cap: whole tiles"
    assert PERSISTENT.workspace_floats(p, v) <= specs.SPLITK_WORKSPACE_CAP + 32 * 1024


def test_automatic_splits_fill_idle_sms_only():
    auto = PERSISTENT.resolve({"SPLITK": 0, "BN": 128, "CM": 1})
    assert specs.persistent_splits(_p(512, 512, 8192), auto) == 8, "16 tiles for 132 SMs: 8 slices (the cap)"
    assert specs.persistent_splits(_p(1024, 1024, 1024), auto) == 1, "16 K tiles: slices of 16 K tiles at least"
    assert specs.persistent_splits(_p(1024, 1024, 4096), auto) == 2, "64 tiles: two slices fill 128 SMs"
    assert specs.persistent_splits(_p(4096, 4096, 4096), auto) == 1, "1024 tiles keep every SM busy"


def test_launch_never_exceeds_the_work_units():
    v = PERSISTENT.resolve({"SPLITK": 4, "BN": 128, "CM": 2})
    launch = PERSISTENT.launch(_p(512, 512, 8192), v)  # 2 x 4 cluster tiles x 4 slices
    assert launch.grid == (64, 1, 1) and launch.cluster == (2, 1, 1)
    # 512 cluster tiles x 4 slices: 32 rounds on 66 slots, so 64 clusters of 32 units each
    assert PERSISTENT.launch(_p(4096, 4096, 8192), v).grid == (128, 1, 1)


def test_clusters_along_n_pair_tiles_side_by_side_and_halve_the_a_box():
    v = PERSISTENT.resolve({"BN": 64, "CM": 1, "CN": 2, "STAGES": 8})
    p = _p(1024, 1024, 1024)
    assert specs.cluster_tiles(p, v) == 8 * 8, "128 x 128 cluster tiles: two 128x64 CTA tiles side by side"
    launch = PERSISTENT.launch(p, v)
    assert launch.cluster == (2, 1, 1) and launch.grid == (128, 1, 1), "64 clusters of 2: one CTA per tile"
    boxes = specs.tma_boxes(PERSISTENT, v)
    assert boxes["A"] == (64, 64), "each CTA of a cluster row loads one 64-row half of A"
    assert boxes["B"] == (64, 64)
    assert specs.tma_boxes(PERSISTENT, {**v, "A_MNMAJOR": 1})["A"] == (64, 64), "A^T: already one box per half"
    quad = PERSISTENT.resolve({"BN": 256, "CM": 2, "CN": 2})
    assert PERSISTENT.launch(_p(4096, 4096, 4096), quad).cluster == (4, 1, 1)
    assert PERSISTENT.launch(_p(4096, 4096, 4096), quad).grid == (128, 1, 1), \
        "128 cluster tiles: 4 rounds on 33 slots of 4 CTAs, or on 32 clusters"
    assert specs.tma_boxes(PERSISTENT, {**quad, "B_KMAJOR": 1})["B"] == (128, 64), "B^T: BN / CM rows each"
    assert not PERSISTENT.failed_constraints({**quad}) and PERSISTENT.failed_constraints({**quad, "CN": 4})


def test_192_wide_tiles_fill_the_waves_that_256_leaves_partial():
    v = PERSISTENT.resolve({"BN": 192, "CM": 1})
    assert specs.cluster_tiles(_p(1000, 3000, 2000), v) == 8 * 16, "one wave, 128 of 132 SMs"
    assert specs.cluster_tiles(_p(3072, 3072, 3072), v) == 24 * 16
    assert specs.persistent_schedule(_p(3072, 3072, 3072), v) == (384, 1), "the last wave is 91% full: whole"
    assert specs.tma_boxes(PERSISTENT, {**v, "B_KMAJOR": 1})["B"] == (192, 64)
    assert not PERSISTENT.failed_constraints({**v, "CM": 2}), "B's three 64-column chunks shared unevenly"
    assert specs.tma_boxes(PERSISTENT, {**v, "CM": 2, "B_KMAJOR": 1})["B"] == (96, 64), "B^T: 96 rows each"
    assert PERSISTENT.failed_constraints({**v, "STAGES": 5}), "40 KB stages: four fit"


# The lines of persistent.cuh that _walk models (next_unit, slice_range, the flag count, locate),
# verbatim: an edit to any of them fails test_the_walk_model_follows_the_kernel until _walk is
# checked against it again.
WALK_LINES = (
    "if (tile < whole) return true;", "tile -= whole;", "slice = 0;", "if (tail <= 0) return false;",
    "while (tile >= tail) {", "tile -= tail;", "++slice;", "return slice < splits;",
    "k0 = slice * ktiles / splits;  // 32-bit: splits <= 16 and ktiles = K / 64 (K / 32 for tf32) keep it in range",
    "k1 = (slice + 1) * ktiles / splits;",
    "__host__ __device__ __forceinline__ int splitk_flag_floats(int cta_tiles) { return (2 * cta_tiles + 31) / 32 * 32; }",
    "tile_coords(slice < 0 ? tile : whole + tile, tiles_m, tiles_n, GROUP_M, tm, tn);",
)


def test_the_walk_model_follows_the_kernel():
    source = {line.strip() for line in PERSISTENT.source_path.with_name("persistent.cuh").read_text().splitlines()}
    missing = [line for line in WALK_LINES if line not in source]
    assert not missing, f"persistent.cuh changed where _walk models it: {missing}"


def _walk(p, v):
    """persistent.cuh's unit walk for every cluster and rank: the K tiles each (CTA tile) gets,
    the arrivals on each half-tile flag and the workspace floats each slot touches."""
    BM, BN, CM, CS = specs.BM, v["BN"], v["CM"], specs.cluster_size(v)
    tiles_m, tiles_n = -(-p.M // (BM * CM)), -(-p.N // (BN * v["CN"]))
    tiles, ktiles = tiles_m * tiles_n, specs.k_tiles(p)
    whole, splits = specs.persistent_schedule(p, v)
    tail = tiles - whole
    clusters = PERSISTENT.launch(p, v).grid[0] // CS
    flags_end = -(-2 * tail * CS // 32) * 32
    covered, arrivals, slots, per_cluster = {}, {}, set(), {}
    for cluster in range(clusters):
        tile, slice_ = cluster, -1
        while True:
            if slice_ < 0:  # next_unit
                if tile >= whole:
                    tile -= whole
                    slice_ = 0
            if slice_ >= 0:
                if tail <= 0:
                    break
                while tile >= tail:
                    tile -= tail
                    slice_ += 1
                if slice_ >= splits:
                    break
            k0, k1 = 0, ktiles
            if slice_ >= 0:
                k0, k1 = slice_ * ktiles // splits, (slice_ + 1) * ktiles // splits
            assert k1 > k0, "no slice is empty"
            absolute = tile if slice_ < 0 else whole + tile
            per_cluster[cluster] = per_cluster.get(cluster, 0) + (k1 - k0)
            for rank in range(CS):
                cta_tile = absolute * CS + rank
                covered.setdefault(cta_tile, []).extend(range(k0, k1))
                for half in (0, 1):
                    arrivals[2 * cta_tile + half] = arrivals.get(2 * cta_tile + half, 0) + 1
                    if slice_ >= 0 and splits > 1:
                        first = flags_end + (((tile * CS + rank) * splits + slice_) * 2 + half) * 64 * BN
                        slots.add((first, first + 64 * BN))
            tile += clusters
    return tiles * CS, ktiles, whole * CS, splits, covered, arrivals, slots, per_cluster


@pytest.mark.parametrize("shape, params", [
    ((512, 512, 8192), {"SPLITK": 8, "BN": 128, "CM": 1}),
    ((512, 512, 8192), {"SPLITK": 3, "BN": 256, "CM": 2}),
    ((1000, 3000, 2000), {"SPLITK": 2, "BN": 256, "CM": 2}),
    ((127, 259, 1000), {"SPLITK": 6, "BN": 128, "CM": 2}),
    ((4097, 4097, 4097), {"SPLITK": 2, "BN": 256, "CM": 2}),  # more units than clusters: several rounds
    ((64, 64, 100), {"SPLITK": 8, "BN": 128, "CM": 1}),       # 2 K tiles: 2 slices
    ((3072, 3072, 3072), {"BN": 256, "CM": 2}),                # tail split, automatic: 132 whole + 12 sliced
    ((3001, 2999, 1001), {"BN": 256, "CM": 2, "TAILK": 4}),
    ((1409, 1665, 203), {"BN": 128, "CM": 1, "SPLITK": 1, "TAILK": 3}),
    ((1000, 3000, 2000), {"BN": 128, "CM": 2, "TAILK": 2}),    # 96 cluster tiles: 66 whole + 30 in 2 slices
    ((4097, 4097, 4097), {"BN": 128, "CM": 1}),                # several full waves, then the tail
    ((1024, 1024, 1024), {"BN": 64, "CM": 1, "CN": 2}),        # 1x2 clusters of 128x64: 64 cluster tiles, whole
    ((512, 512, 8192), {"BN": 64, "CM": 1, "CN": 2}),          # split-K, automatic, in 1x2 clusters
    ((3072, 3072, 3072), {"BN": 128, "CM": 2, "CN": 2}),       # 2x2 clusters: 144 cluster tiles on 33 slots
    ((1001, 2999, 503), {"BN": 256, "CM": 2, "CN": 2, "SPLITK": 3}),
    ((1409, 1665, 203), {"BN": 128, "CM": 1, "CN": 2, "TAILK": 3}),
    ((3072, 3072, 3072), {"BN": 192, "CM": 1}),                # 384 tiles of 128x192: 2 waves + 120, whole
    ((1000, 3000, 2000), {"BN": 192, "CM": 1, "CN": 2, "SPLITK": 2}),
])
def test_the_unit_walk_covers_every_k_tile_once_and_stays_in_the_workspace(shape, params):
    p = _p(*shape)
    v = PERSISTENT.resolve(params)
    cta_tiles, ktiles, whole_ctas, splits, covered, arrivals, slots, _ = _walk(p, v)
    assert len(covered) == cta_tiles
    assert all(sorted(ks) == list(range(ktiles)) for ks in covered.values()), "each K tile exactly once"
    sliced = {f for f in arrivals if f // 2 >= whole_ctas}
    assert {arrivals[f] for f in sliced} <= {splits}, "each sliced half-tile flag counts `splits` arrivals"
    assert all(arrivals[f] == 1 for f in arrivals if f not in sliced), "whole tiles arrive once"
    if splits > 1:
        assert len(slots) == (cta_tiles - whole_ctas) * 2 * splits, "one slot per sliced CTA tile, half and slice"
        assert max(end for _, end in slots) <= PERSISTENT.workspace_floats(p, v)
        ordered = sorted(slots)
        assert all(a[1] <= b[0] for a, b in zip(ordered, ordered[1:])), "slots do not overlap"


def test_the_tail_split_slices_only_the_partial_last_wave():
    v = PERSISTENT.resolve({"BN": 256, "CM": 2})  # the defaults, automatic
    p = _p(3072, 3072, 3072)  # 12 x 12 cluster tiles on 66 slots: 2 full waves and 12 tiles
    whole, splits = specs.persistent_schedule(p, v)
    assert (whole, splits) == (132, 5), "66 // 12 = 5 slices of 9-10 K tiles (>= TAIL_MIN_KTILES)"
    assert PERSISTENT.launch(p, v).grid == (132, 1, 1)
    assert specs.persistent_flag_floats(p, v) == 64, "two flags per sliced CTA tile: 12 x 2 x 2, rounded to 32"
    assert PERSISTENT.workspace_floats(p, v) == 64 + 12 * 2 * 5 * 128 * 256
    assert PERSISTENT.workspace_flag_floats(p, v) == 64, "what a shared workspace's handover clears"
    # every cluster gets the same K work but the tail's: at most one slice beyond two whole tiles
    per_cluster = _walk(p, v)[-1]
    assert max(per_cluster.values()) - 2 * 48 <= 10 and min(per_cluster.values()) == 2 * 48


def test_the_tail_split_stays_off_where_it_cannot_pay():
    auto = PERSISTENT.resolve({"BN": 256, "CM": 2})
    assert specs.persistent_schedule(_p(4096, 4096, 4096), auto) == (256, 1), "256 tiles: 3 waves and 58 tiles"
    assert specs.persistent_schedule(_p(8192, 8192, 8192), auto) == (1024, 1), "the last wave more than half full"
    assert specs.persistent_schedule(_p(2048, 2048, 2048), auto) == (64, 1), "one wave, not full: nothing to slice"
    assert specs.persistent_schedule(_p(3072, 3072, 3072), PERSISTENT.resolve({"TAILK": 1})) == (144, 1)
    assert specs.persistent_schedule(_p(3072, 3072, 3072), PERSISTENT.resolve({"SPLITK": 1})) == (144, 1), \
        "SPLITK = 1 keeps every tile whole unless TAILK is given"
    assert specs.persistent_schedule(_p(3072, 3072, 3072), PERSISTENT.resolve({"SPLITK": 1, "TAILK": 2})) == (132, 2)
    assert specs.persistent_schedule(_p(3072, 3072, 256), auto) == (144, 1), "4 K tiles: slices would be too thin"
    assert specs.persistent_schedule(_p(512, 512, 8192), auto) == (0, 8), "few tiles: uniform split-K as before"


def test_clusters_are_balanced_over_their_rounds():
    """Units of one size get the fewest clusters that keep their rounds: every cluster then works
    to the end (4096^3: 256 cluster tiles, 4 rounds on 66 slots or on 64 clusters)."""
    auto = PERSISTENT.resolve({"BN": 256, "CM": 2})
    assert specs.persistent_clusters(_p(4096, 4096, 4096), auto, 66) == 64, "4 rounds of 64, not 58 left over"
    assert PERSISTENT.launch(_p(4096, 4096, 4096), auto).grid == (128, 1, 1)
    assert PERSISTENT.launch(_p(4096, 4096, 4096), {**auto, "BALANCE": 0}).grid == (132, 1, 1), "every slot"
    assert not next(p for p in PERSISTENT.params if p.name == "BALANCE").template, "a launch argument"
    assert specs.persistent_clusters(_p(8192, 8192, 8192), auto, 66) == 64, "1024 tiles: 16 rounds of 64"
    assert specs.persistent_clusters(_p(8448, 2048, 4096), auto, 66) == 66, "264 tiles fill 4 rounds of 66"
    assert specs.persistent_clusters(_p(2048, 2048, 2048), auto, 66) == 64, "one round: one cluster per tile"
    assert specs.persistent_clusters(_p(4096, 4096, 4096), auto, 60) == 52, "5 rounds on 60 slots: 52 clusters"
    # uniform split-K: units of one size too; the tail split keeps every slot for its slices
    assert specs.persistent_clusters(_p(512, 512, 8192), auto, 66) == 32, "4 tiles x 8 slices"
    # short units (4 K tiles) are latency-bound, not round-bound: every slot
    short = PERSISTENT.resolve({"BN": 128, "CM": 1})
    assert specs.persistent_clusters(_p(4096, 8192, 256), short, 132) == 132, "2048 tiles of 4 K tiles"
    assert specs.persistent_clusters(_p(4096, 8192, 1024), short, 132) == 128, "16 K tiles a tile: 16 rounds"
    tail = _p(3072, 3072, 3072)
    assert specs.persistent_schedule(tail, auto) == (132, 5)
    assert specs.persistent_clusters(tail, auto, 66) == 66, "132 whole tiles and 60 slices on every slot"
    for shape in [(4096, 4096, 4096), (4097, 4097, 4097), (1000, 3000, 2000), (3072, 3072, 3072)]:
        p = _p(*shape)
        whole, splits = specs.persistent_schedule(p, auto)
        units = whole + (specs.cluster_tiles(p, auto) - whole) * splits
        for slots in (1, 7, 60, 66):
            n = specs.persistent_clusters(p, auto, slots)
            assert 1 <= n <= min(units, slots)
            assert -(-units // n) == -(-units // min(units, slots)), "the same rounds as on every slot"


class _FakeArray:
    def __init__(self, log, n):
        self.log, self.size = log, n
        self.data = type("D", (), {"ptr": 4096 * (len(log) + 1)})()

    def __getitem__(self, s):
        log = self.log

        class View:
            def fill(self, value):
                log.append(("fill", s.stop, value))
        return View()


def test_the_bench_workspace_clears_flags_only_where_another_shape_put_partials(monkeypatch):
    """Flags of one shape lie, in a reused buffer, where a shape with fewer flags wrote partial
    tiles: those floats are cleared first; a shape with as many flags or fewer needs nothing."""
    import contextlib
    import sys
    import types

    from gemmlab.cuda import device
    from gemmlab.ops.hgemm_tma import TmaOperands

    log = []
    fake = types.SimpleNamespace(float32="float32",
                                 zeros=lambda n, dtype: log.append(("zeros", n)) or _FakeArray(log, n))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(device, "cupy_stream", lambda handle: contextlib.nullcontext())
    v = PERSISTENT.resolve({"SPLITK": 8, "BN": 128, "CM": 1})
    few, many = _p(2048, 128, 8192), _p(2176, 128, 128)  # 16 tiles: flags 0-31; 17 tiles of 2 K tiles: 0-63
    sizes = {p: (PERSISTENT.workspace_floats(p, v), specs.persistent_flag_floats(p, v)) for p in (few, many)}
    assert sizes[few][1] == 32 and sizes[many][1] == 64 and sizes[many][0] < sizes[few][0]
    ops = TmaOperands()
    ops.splitk_workspace(*sizes[few], 7)
    ops.splitk_workspace(*sizes[few], 7)
    assert log == [("zeros", sizes[few][0])], "allocated zeroed; its own shape again needs nothing"
    ops.splitk_workspace(*sizes[many], 7)
    assert log[1:] == [("fill", 64, 0)], "floats 32-63 held the last shape's partials"
    ops.splitk_workspace(*sizes[many], 7)
    ops.splitk_workspace(*sizes[few], 7)
    assert len(log) == 2, "as many flags or fewer: already zero"
    ops.splitk_workspace(*sizes[many], 7)
    assert log[2:] == [("fill", 64, 0)]
    assert ops.splitk_workspace(0, 0, 7) == 0


@pytest.mark.parametrize("slots, balance, clusters", [(66, 1, 64), (66, 0, 66), (60, 1, 52)])
def test_the_runners_launch_is_balanced_on_the_slots_the_driver_reports(monkeypatch, slots, balance, clusters):
    """tma_geometry (the bench runner's and the API's launch) caps the grid at the clusters the
    driver says run at once, then balances the rounds on that many: 256 cluster tiles at 4096^3."""
    from types import SimpleNamespace

    from gemmlab.ops import hgemm_tma

    monkeypatch.setattr(hgemm_tma, "max_active_clusters", lambda compiled, geometry: slots)
    runner = SimpleNamespace(impl=PERSISTENT, params=PERSISTENT.resolve({"BALANCE": balance}), compiled=None)
    launch = hgemm_tma.tma_geometry(runner, _p(4096, 4096, 4096))
    assert launch.cluster == (2, 1, 1) and launch.grid == (2 * clusters, 1, 1)


def test_the_schedule_plans_on_the_drivers_cluster_count_once_a_launch_has_asked(monkeypatch):
    """An H100 runs 30 clusters of 4 CTAs at once, not 132 / 4 = 33 (cuOccupancyMaxActiveClusters,
    session 31): a GPC's SMs are not all a multiple of 4. 4096^3 in 2x2 clusters of 128x256 tiles is
    128 cluster tiles: on 33 slots 3 rounds and 29 tiles, no tail split; on the 30 that run, 4
    rounds and 8 tiles, which the tail split cuts into 3 slices each. The schedule, its workspace
    and the launch must agree on the 30."""
    from gemmlab.ops import hgemm_tma

    monkeypatch.undo()  # the real cluster_slots, on a 132-SM GPU with nothing learnt yet
    monkeypatch.setattr(specs, "sm_count", lambda: 132)
    monkeypatch.setattr(specs, "_driver_slots", {})
    v = PERSISTENT.resolve({"CM": 2, "CN": 2})
    p = _p(4096, 4096, 4096)
    assert specs.cluster_slots(4) == 33 and specs.persistent_schedule(p, v) == (128, 1)
    specs.note_cluster_slots(4, 30)
    specs.note_cluster_slots(2, 66)  # as counted: nothing to learn
    specs.note_cluster_slots(1, 264)  # two blocks an SM (a small kernel): not a slot count
    specs.note_cluster_slots(4, 31)  # the first count stays: it cannot change under a launch
    assert (specs.cluster_slots(4), specs.cluster_slots(2), specs.cluster_slots(1)) == (30, 66, 132)
    assert specs.persistent_schedule(p, v) == (120, 3)
    assert specs.persistent_workspace(p, v) == specs._flag_floats(32) + 32 * 3 * 128 * 256
    from types import SimpleNamespace

    monkeypatch.setattr(hgemm_tma, "max_active_clusters", lambda compiled, geometry: 30)
    runner = SimpleNamespace(impl=PERSISTENT, params=v, compiled=None)
    assert hgemm_tma.tma_geometry(runner, p).grid == (4 * 30, 1, 1), "8 x 3 slices after 120 whole tiles fill 30"


def test_max_active_clusters_notes_the_drivers_count_before_it_caches_it(monkeypatch):
    """ops/hgemm_tma.max_active_clusters passes the driver's answer to note_cluster_slots, and only
    then caches it on the kernel: another API thread that finds the kernel's count cached must also
    find the schedule's count (cluster_slots) already set, or its workspace and its schedule could
    be planned on different counts. No estimate is cached while the driver is asked."""
    import sys
    from types import ModuleType, SimpleNamespace

    from gemmlab.ops import hgemm_tma

    ck = SimpleNamespace(kernel=lambda: SimpleNamespace(handle=1))
    key = ((4, 1, 1), 230400, (384, 1, 1))
    seen = []

    def asked(handle, config):
        seen.append(("asked", dict(ck.__dict__.get("_cluster_slots", {}))))
        return 0, 30

    def noted(cs, count):
        seen.append(("noted", cs, count, key in ck.__dict__.get("_cluster_slots", {})))

    driver = SimpleNamespace(CUkernel=type("CUkernel", (), {}), CUlaunchConfig=SimpleNamespace,
                             CUlaunchAttribute=lambda: SimpleNamespace(value=SimpleNamespace(clusterDim=SimpleNamespace())),
                             CUlaunchAttributeID=SimpleNamespace(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION=4),
                             CUresult=SimpleNamespace(CUDA_SUCCESS=0), cuOccupancyMaxActiveClusters=asked)
    cuda, bindings = ModuleType("cuda"), ModuleType("cuda.bindings")  # no driver library needed
    cuda.bindings, bindings.driver = bindings, driver
    for name, module in (("cuda", cuda), ("cuda.bindings", bindings), ("cuda.bindings.driver", driver)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(specs, "note_cluster_slots", noted)
    monkeypatch.setattr("gemmlab.cuda.launch.allow_dynamic_smem", lambda ck, shmem: None)
    geometry = SimpleNamespace(cluster=(4, 1, 1), shmem=230400, block=(384, 1, 1))
    assert hgemm_tma.max_active_clusters(ck, geometry) == 30
    assert seen == [("asked", {}), ("noted", 4, 30, False)], "noted before cached, no estimate cached meanwhile"
    assert ck._cluster_slots == {key: 30}
