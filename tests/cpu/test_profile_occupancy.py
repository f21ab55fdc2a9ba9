"""The occupancy calculator against cases worked by hand (seed 001's kernel 3 first)."""
import pytest

from gemmlab.errors import BadArgumentError
from gemmlab.profile.occupancy import ARCHS, occupancy


def test_seed_kernel3_on_the_seeds_gpu_sm86():
    # Seed 001, 3.1: 32x32 tiles, 1024 threads, 37 registers, 8 KiB of shared memory on an A6000.
    # smem: 8192 + 1024 = 9216 B, 102400 / 9216 = 11 blocks; threads: 1536 / 1024 = 1 block;
    # registers: 37 * 32 = 1184 -> 1280 per warp, 32 warps = 40960 > 65536 / 2 -> 1 block.
    o = occupancy("sm_86", threads_per_block=1024, registers_per_thread=37, smem_static=8192)
    assert o.blocks_by == {"registers": 1, "shared memory": 11, "threads": 1, "blocks per SM": 16}
    assert o.blocks_per_sm == 1 and o.active_warps == 32 and o.max_warps == 48
    assert o.occupancy == pytest.approx(2 / 3)
    assert o.limiters == ("registers", "threads")
    assert o.regs_per_warp == 1280 and o.smem_allocated_per_block == 9216


def test_seed_kernel3_adapted_to_sm90():
    # Same kernel on Hopper: 228 KiB of shared memory -> 233472 / 9216 = 25 blocks; 64 warps per
    # SM -> 2 blocks by threads; registers: 16384 per sub-partition / 1280 = 12 warps, x4 = 48
    # warps -> 1 block of 32 warps. The register file, not the thread count, now limits: 50%.
    o = occupancy("sm_90", 1024, 37, smem_static=8192)
    assert o.blocks_by == {"registers": 1, "shared memory": 25, "threads": 2, "blocks per SM": 32}
    assert o.blocks_per_sm == 1 and o.occupancy == pytest.approx(0.5)
    assert o.limiter == "registers"
    text = "\n".join(o.explain())
    assert "9216 B" in text and "-> 25 blocks" in text and "50.0%" in text and "limited by registers" in text


def test_gemmlab_smem_blocking_on_sm90_is_full():
    # Our rung 3 compiles to 32 registers: 1024 per warp, 16 warps per sub-partition -> 64 warps.
    o = occupancy("sm_90", 1024, 32, smem_static=8192)
    assert o.blocks_per_sm == 2 and o.occupancy == 1.0 and o.limiters == ("registers", "threads")


def test_shared_memory_limits():
    # 48 KiB static: (49152 + 1024) = 50176 B -> 233472 // 50176 = 4 blocks of 8 warps = 50%.
    o = occupancy("sm_90", 256, 32, smem_static=48 * 1024)
    assert o.blocks_by["shared memory"] == 4 and o.blocks_by["registers"] == 8 and o.blocks_by["threads"] == 8
    assert o.limiter == "shared memory" and o.occupancy == pytest.approx(0.5)
    # dynamic shared memory counts the same; rounding to 128 B: 1000 + 1024 -> 2048
    assert occupancy("sm_90", 256, 32, smem_dynamic=1000).smem_allocated_per_block == 2048


def test_block_cap_limits_small_blocks():
    o = occupancy("sm_90", 32, 16)
    assert o.blocks_by["threads"] == 64 and o.blocks_per_sm == 32 and o.limiter == "blocks per SM"
    assert o.occupancy == pytest.approx(0.5)
    assert occupancy("sm_86", 32, 16).blocks_per_sm == 16  # Ampere consumer parts cap at 16


def test_hopper_simt_like_kernel():
    # 256 threads, 233 registers: 7456 -> 7680 per warp; 16384 // 7680 = 2 warps per
    # sub-partition -> 8 warps -> 1 block. 99328 B dynamic smem -> 2 blocks by shared memory.
    o = occupancy("sm_90", 256, 233, smem_dynamic=99328)
    assert o.blocks_by["registers"] == 1 and o.blocks_by["shared memory"] == 2
    assert o.blocks_per_sm == 1 and o.occupancy == pytest.approx(8 / 64) and o.limiter == "registers"


def test_a_block_that_cannot_launch():
    # 1024 threads x 255 registers: 8192 registers per warp x 32 warps > 65536 per block.
    o = occupancy("sm_90", 1024, 255)
    assert o.blocks_per_sm == 0 and o.occupancy == 0 and "cannot launch" in o.limiter
    assert occupancy("sm_90", 128, 0, smem_static=228 * 1024).blocks_per_sm == 0  # over 227 KiB per block


def test_sm80_and_sm89_limits():
    assert occupancy("sm_80", 1024, 32).occupancy == 1.0
    a100 = occupancy("sm_80", 256, 32, smem_static=100 * 1024)  # 164 KiB per SM: one 101 KiB block
    assert a100.blocks_per_sm == 1 and a100.limiter == "shared memory"
    ada = occupancy("sm_89", 256, 64)  # 2048 regs/warp: 8 warps per sub-partition -> 32 warps -> 4 blocks
    assert ada.blocks_by["registers"] == 4 and ada.blocks_by["threads"] == 6 and ada.blocks_per_sm == 4
    assert ada.occupancy == pytest.approx(32 / 48)


def test_every_arch_has_consistent_limits():
    for arch, lim in ARCHS.items():
        assert lim.max_smem_per_block < lim.smem_per_sm
        assert lim.max_threads_per_sm >= lim.max_threads_per_block
        assert lim.regs_per_sm == 65536


@pytest.mark.parametrize("args", [("sm_70", 256, 32), ("sm_90", 2048, 32), ("sm_90", 0, 32), ("sm_90", 256, -1)])
def test_bad_input(args):
    with pytest.raises(BadArgumentError):
        occupancy(*args)
