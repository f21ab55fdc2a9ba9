"""Rungs 7, 8, 9 and 11 without a GPU: their specs, tuning spaces and shared-memory layouts.

The layout tests replay each kernel's shared-memory index formulas for one warp and count
the bank wavefronts they need (32 banks of 4 bytes; a request needs at least one wavefront
per 128 distinct bytes, and as many as the most distinct words any one bank holds). They
pin down what each rung claims to fix and that the permuted layouts are bijections.
"""
from __future__ import annotations

import itertools

import pytest

from gemmlab import registry
from gemmlab.cuda import compile as cc

SEED000_GRID = {"BK": (8, 16, 32, 64), "TM": (4, 8, 16, 32), "TN": (4, 8, 16, 32), "BM": (64, 128, 256),
                "BN": (64, 128, 256), "NUM_THREADS": (256,)}


@pytest.fixture()
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))


def test_rungs_are_registered_in_order():
    rungs = {k.rung: k.name for k in registry.kernels("sgemm") if k.rung is not None}
    assert rungs[7] == "bank_linearize" and rungs[8] == "bank_padding"
    assert rungs[9] == "autotuned" and rungs[11] == "double_buffering"


@pytest.mark.parametrize("name", ["autotuned", "double_buffering"])
def test_tuning_space_is_seed_000_grid(name):
    spec = registry.get(name)
    assert {p.name: p.space for p in spec.params} == SEED000_GRID
    valid = [v for v in _grid_points(spec) if not spec.failed_constraints(v)]
    assert len(valid) > 40, "the constraints leave the tuner a real space"
    assert spec.defaults in valid


def _grid_points(spec):
    names = [p.name for p in spec.params]
    return [dict(zip(names, vals)) for vals in itertools.product(*(p.space for p in spec.params))]


def test_autotuned_constraints_are_the_seeds():
    spec = registry.get("autotuned")
    ok = spec.defaults
    assert spec.failed_constraints({**ok, "TM": 16})  # BM % (16*TM)
    assert spec.failed_constraints({**ok, "BN": 64})  # BN % (16*TN)
    assert spec.failed_constraints({**ok, "BM": 64, "BK": 8, "TM": 4})  # BM*BK % (4*256)
    assert spec.failed_constraints({**ok, "BK": 64})  # 64*(132+128)*4 B > 48 KiB
    assert not spec.failed_constraints({**ok, "TM": 4, "TN": 4})  # 2x2 sub-tiles per thread


def test_double_buffering_loads_with_half_the_threads():
    spec = registry.get("double_buffering")
    v = spec.defaults
    assert not spec.failed_constraints(v)
    # a 64x8 tile has 128 float4s: one each for the 128 loaders of a half, too few for 256
    small = {**v, "BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}
    assert not spec.failed_constraints(small)
    assert registry.get("autotuned").failed_constraints(small)
    assert spec.smem_bytes(v) == 2 * registry.get("autotuned").smem_bytes(v)
    assert spec.failed_constraints({**v, "NUM_THREADS": 96})  # halves must be whole warps


def test_padding_must_keep_float4_alignment():
    spec = registry.get("bank_padding")
    assert spec.failed_constraints({**spec.defaults, "PAD": 5})  # the seed's +5
    assert not spec.failed_constraints({**spec.defaults, "PAD": 12})


@pytest.mark.parametrize("name,params", [
    ("autotuned", {"TM": 4, "TN": 4}),
    ("autotuned", {"BM": 64, "BN": 256, "BK": 32, "TM": 4, "TN": 8}),
    ("double_buffering", {"BK": 8}),
    ("double_buffering", {"BM": 256, "BN": 64, "BK": 16, "TM": 16, "TN": 4}),
    ("bank_linearize", {"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 16}),
    ("bank_padding", {"BK": 16, "PAD": 12}),
])
def test_other_points_compile_with_the_specs_smem(private_cache, name, params):
    spec = registry.get(name)
    ck = cc.compile_kernel(spec, params, arch="sm_90")
    assert ck.resources.smem_static == spec.smem_bytes(ck.params)


# ---- bank model --------------------------------------------------------------------------

def wavefronts(word_addrs: list[int], width: int) -> int:
    """Shared wavefronts for one warp request; word_addrs are float indices of each lane's
    access, `width` floats wide (1 or 4)."""
    words = {a + j for a in word_addrs for j in range(width)}
    per_bank: dict[int, set[int]] = {}
    for w in words:
        per_bank.setdefault(w % 32, set()).add(w)
    return max(-(-len(words) // 32), max(len(s) for s in per_bank.values()))


def lin7(c: int, BN: int, TN: int) -> int:  # rung 7: column c of a Bs row
    TC = BN // TN
    return ((c % TN) // 4) * (4 * TC) + (c // TN) * 4 + c % 4


def pad8(c: int, PAD: int) -> int:  # rung 8: column c of a Bs row
    return c + (c // 32) * PAD


def lin9(c: int, TN: int) -> int:  # rungs 9 and 11: column c of a Bs row (16 thread columns)
    WN = 16 * TN
    w = c % WN
    return (c - w) + ((w % TN) // 4) * 64 + (w // TN) * 4 + c % 4


@pytest.mark.parametrize("BN,TN", [(128, 8), (128, 4), (128, 16), (64, 8), (256, 8)])
def test_linearised_layouts_are_permutations(BN, TN):
    assert sorted(lin7(c, BN, TN) for c in range(BN)) == list(range(BN))
    if BN % (16 * TN) == 0:
        assert sorted(lin9(c, TN) for c in range(BN)) == list(range(BN))
    for c in range(0, BN, 4):  # a float4 of B stays one aligned float4 in shared memory
        assert lin7(c, BN, TN) % 4 == 0 and [lin7(c + j, BN, TN) for j in range(4)] == [lin7(c, BN, TN) + j for j in range(4)]


def _b_fragment_reads(layout, BN=128, TN=8):
    """Wavefronts of each LDS.128 of B by warp 0 of a 16-thread-column block (rungs 6-9)."""
    TC = BN // TN
    lanes = range(32)
    return [wavefronts([layout(((lane % TC) * TN) + h) for lane in lanes], 4) for h in range(0, TN, 4)]


def test_b_fragment_reads_conflict_in_rung_6_and_not_after():
    assert _b_fragment_reads(lambda c: c) == [4, 4]  # rung 6: 2-way conflict (2 is the minimum)
    assert _b_fragment_reads(lambda c: lin7(c, 128, 8)) == [2, 2]
    assert _b_fragment_reads(lambda c: pad8(c, 4)) == [2, 2]
    assert _b_fragment_reads(lambda c: lin9(c, 8)) == [2, 2]
    assert _b_fragment_reads(lambda c: pad8(c, 8)) == [4, 4]  # why PAD % 8 == 4


def _a_stores_rung6(BM, BK, PAD, lanes=range(32)):
    """Wavefronts of the 4 transposed scalar STS of warp 0 (rungs 6 and 8 mapping)."""
    out = []
    for j in range(4):
        addrs = []
        for i in lanes:
            m, k = i // (BK // 4), (i % (BK // 4)) * 4
            addrs.append((k + j) * (BM + PAD) + m)
        out.append(wavefronts(addrs, 1))
    return out


def _a_stores_rung9(BM, BK, lanes=range(32)):
    KQ = BK // 4
    KL = 2 if KQ % 2 == 0 else 1
    out = []
    for j in range(4):
        addrs = []
        for i in lanes:
            m = (i // KL) % BM
            k = ((i // (KL * BM)) * KL + i % KL) * 4
            addrs.append((k + j) * (BM + 4) + m)
        out.append(wavefronts(addrs, 1))
    return out


def test_a_transposed_stores():
    assert _a_stores_rung6(128, 8, 0) == [2] * 4  # rung 6: 2-way
    assert _a_stores_rung6(128, 8, 4) == [1] * 4  # rung 8 at its defaults
    assert _a_stores_rung6(128, 8, 8) == [2] * 4  # PAD = 8 shifts row k+4 by 32 banks
    assert _a_stores_rung6(128, 16, 4) == [2] * 4  # rung 8's mapping at BK = 16: 2-way left
    for BK in (8, 16, 32, 64):
        assert _a_stores_rung9(128, BK) == [1] * 4  # rungs 9/11: conflict-free for every BK


def test_a_fragment_reads_are_broadcasts():
    # 16 thread columns: a warp has 2 thread rows, i.e. 2 distinct float4 addresses
    for TM in (4, 8, 16):
        addrs = [(lane // 16) * TM for lane in range(32)]
        assert wavefronts(addrs, 4) == 1
