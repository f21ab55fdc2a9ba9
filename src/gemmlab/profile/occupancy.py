"""Theoretical occupancy: seed 001's hand calculation, done by the tool.

A block is placed on an SM only whole, so four resources each allow some number of resident
blocks; the smallest of the four is the answer, and the resource that gives it is the
limiter. The rules follow CUDA's occupancy calculator (cuda_occupancy.h):

- threads: max warps per SM // warps per block (a block of 1000 threads costs 32 warps);
- blocks: a hard cap of resident blocks per SM;
- registers: registers are allocated per warp, rounded up to 256, and separately in each of
  the SM's 4 sub-partitions: warps = 4 * ((regs per SM / 4) // regs per warp), then
  // warps per block (and a block whose warps, rounded up to 4, need more than the 64K
  registers a block may hold cannot launch at all);
- barriers (Hopper on, a kernel that uses named barriers): 2 x the block cap per SM shared out
  among the barriers a block uses (cuda_occupancy.h, cudaOccMaxBlocksPerSMBlockBarrierLimit):
  rung 5's 16 barriers allow 4 blocks, as ncu's launch__occupancy_limit_barriers says;
- shared memory: (static + dynamic + 1 KiB the runtime reserves per block), rounded up to
  128 bytes, against the SM's shared memory (the largest carve-out). The driver may give a
  kernel a smaller carve-out when that costs no occupancy, so Nsight Compute's per-resource
  shared-memory limit can be lower than this one while the occupancy is the same (checked
  against ncu on an H200: tests/cpu/test_profile_ncu.py).

Occupancy is resident warps / max warps per SM. The limits per architecture are those of
the CUDA C++ Programming Guide's table of compute capabilities.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import BadArgumentError

WARP = 32


@dataclass(frozen=True)
class ArchLimits:
    arch: str
    example: str  # a GPU of this architecture, for the report
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    regs_per_sm: int
    max_regs_per_block: int
    max_regs_per_thread: int
    smem_per_sm: int  # bytes, largest carve-out
    max_smem_per_block: int  # bytes, with the opt-in
    smem_reserved_per_block: int = 1024  # the runtime's own shared memory per block (sm_80+)
    reg_alloc_unit: int = 256  # registers per warp are allocated in these units
    sub_partitions: int = 4  # registers are allocated per SM sub-partition
    smem_alloc_unit: int = 128

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * WARP


KIB = 1024
ARCHS: dict[str, ArchLimits] = {
    "sm_80": ArchLimits("sm_80", "A100", max_warps_per_sm=64, max_blocks_per_sm=32, max_threads_per_block=1024,
                        regs_per_sm=65536, max_regs_per_block=65536, max_regs_per_thread=255,
                        smem_per_sm=164 * KIB, max_smem_per_block=163 * KIB),
    "sm_86": ArchLimits("sm_86", "RTX A6000 / RTX 3090", max_warps_per_sm=48, max_blocks_per_sm=16,
                        max_threads_per_block=1024, regs_per_sm=65536, max_regs_per_block=65536,
                        max_regs_per_thread=255, smem_per_sm=100 * KIB, max_smem_per_block=99 * KIB),
    "sm_89": ArchLimits("sm_89", "L40S / RTX 4090", max_warps_per_sm=48, max_blocks_per_sm=24,
                        max_threads_per_block=1024, regs_per_sm=65536, max_regs_per_block=65536,
                        max_regs_per_thread=255, smem_per_sm=100 * KIB, max_smem_per_block=99 * KIB),
    "sm_90": ArchLimits("sm_90", "H100 / H200", max_warps_per_sm=64, max_blocks_per_sm=32,
                        max_threads_per_block=1024, regs_per_sm=65536, max_regs_per_block=65536,
                        max_regs_per_thread=255, smem_per_sm=228 * KIB, max_smem_per_block=227 * KIB),
}
ARCHS["sm_90a"] = ArchLimits(**{**asdict(ARCHS["sm_90"]), "arch": "sm_90a"})

LIMITERS = ("registers", "shared memory", "threads", "blocks per SM", "barriers")


def limits_for(arch: str) -> ArchLimits:
    try:
        return ARCHS[arch]
    except KeyError:
        raise BadArgumentError(f"no occupancy limits for {arch!r}; known: {', '.join(sorted(ARCHS))}") from None


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@dataclass(frozen=True)
class Occupancy:
    arch: str
    threads_per_block: int
    registers_per_thread: int
    smem_per_block: int  # static + dynamic, as the kernel asks (without the reserve)
    warps_per_block: int
    blocks_by: dict  # resource -> resident blocks it allows
    blocks_per_sm: int
    limiters: tuple[str, ...]  # every resource that gives the minimum
    active_warps: int
    max_warps: int
    regs_per_warp: int  # allocated, after rounding
    smem_allocated_per_block: int  # after the reserve and rounding
    barriers: int = 0  # named barriers a block uses (ptxas), which bound blocks per SM from Hopper on

    @property
    def occupancy(self) -> float:
        """Resident warps / max warps per SM, 0..1."""
        return self.active_warps / self.max_warps

    @property
    def limiter(self) -> str:
        return ", ".join(self.limiters) if self.blocks_per_sm else f"cannot launch ({', '.join(self.limiters)})"

    def explain(self) -> list[str]:
        """The hand calculation, one line per resource (seed 001's kernel 3 layout)."""
        lim = limits_for(self.arch)
        b = self.blocks_by
        reserve = lim.smem_reserved_per_block
        return [
            f"shared memory: {self.smem_per_block} B/block + {reserve} B runtime reserve = "
            f"{self.smem_allocated_per_block} B (rounded to {lim.smem_alloc_unit}); "
            f"{lim.smem_per_sm} B per SM / {self.smem_allocated_per_block} B -> {b['shared memory']} blocks",
            f"threads: {self.threads_per_block} threads = {self.warps_per_block} warps per block, "
            f"{lim.max_warps_per_sm} warps per SM -> {b['threads']} blocks",
            f"registers: {self.registers_per_thread} regs x {WARP} threads = {self.registers_per_thread * WARP} per warp, "
            f"allocated {self.regs_per_warp} (units of {lim.reg_alloc_unit}); "
            f"{lim.regs_per_sm} regs in {lim.sub_partitions} sub-partitions of {lim.regs_per_sm // lim.sub_partitions} "
            f"-> {b['registers']} blocks",
            f"blocks per SM: at most {lim.max_blocks_per_sm}",
            *([f"barriers: 2 x {lim.max_blocks_per_sm} per SM / {self.barriers} per block -> {b['barriers']} blocks"]
              if "barriers" in b else []),
            f"=> {self.blocks_per_sm} blocks x {self.warps_per_block} warps = {self.active_warps} of "
            f"{self.max_warps} warps: {100 * self.occupancy:.1f}% (limited by {self.limiter})",
        ]

    def as_fields(self) -> dict:
        return {"arch": self.arch, "threads_per_block": self.threads_per_block,
                "registers_per_thread": self.registers_per_thread, "smem_per_block": self.smem_per_block,
                "blocks_per_sm": self.blocks_per_sm, "active_warps": self.active_warps,
                "max_warps": self.max_warps, "occupancy_pct": 100 * self.occupancy, "limiter": self.limiter,
                "blocks_by": dict(self.blocks_by)}


def occupancy(arch: str, threads_per_block: int, registers_per_thread: int, smem_static: int = 0,
              smem_dynamic: int = 0, barriers: int = 0) -> Occupancy:
    """Theoretical occupancy of one kernel launch configuration on `arch`."""
    lim = limits_for(arch)
    if not 1 <= threads_per_block <= lim.max_threads_per_block:
        raise BadArgumentError(f"{threads_per_block} threads per block: {arch} allows 1..{lim.max_threads_per_block}")
    if registers_per_thread < 0 or smem_static < 0 or smem_dynamic < 0:
        raise BadArgumentError("registers and shared memory must not be negative")
    warps = -(-threads_per_block // WARP)
    smem = smem_static + smem_dynamic

    by: dict[str, int] = {}
    by["threads"] = lim.max_warps_per_sm // warps
    by["blocks per SM"] = lim.max_blocks_per_sm

    regs = max(registers_per_thread, 1)
    regs_per_warp = _round_up(regs * WARP, lim.reg_alloc_unit)
    if registers_per_thread > lim.max_regs_per_thread or \
            _round_up(warps, lim.sub_partitions) * regs_per_warp > lim.max_regs_per_block:
        by["registers"] = 0
    else:
        per_partition = (lim.regs_per_sm // lim.sub_partitions) // regs_per_warp
        by["registers"] = (per_partition * lim.sub_partitions) // warps

    smem_alloc = _round_up(smem + lim.smem_reserved_per_block, lim.smem_alloc_unit)
    by["shared memory"] = 0 if smem > lim.max_smem_per_block else lim.smem_per_sm // smem_alloc

    if barriers > 0 and arch.startswith("sm_90"):  # the rule starts with Hopper (factor 2 on sm_90)
        by["barriers"] = 2 * lim.max_blocks_per_sm // barriers

    blocks = min(by.values())
    limiters = tuple(name for name in LIMITERS if by.get(name) == blocks)
    return Occupancy(arch=arch, threads_per_block=threads_per_block, registers_per_thread=registers_per_thread,
                     smem_per_block=smem, warps_per_block=warps, blocks_by={k: by[k] for k in LIMITERS if k in by}, barriers=barriers,
                     blocks_per_sm=blocks, limiters=limiters, active_warps=blocks * warps,
                     max_warps=lim.max_warps_per_sm, regs_per_warp=regs_per_warp, smem_allocated_per_block=smem_alloc)
