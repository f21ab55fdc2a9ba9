"""Register-file traffic of a SASS loop: the FFMA share, operand reuse and register bank conflicts.

A static check over the disassembly, with no GPU. It gives evidence on the two things an FP32
GEMM's inner loop must get right besides its memory traffic:
- The loop should be almost all FFMA. Every other instruction takes an issue slot from the
  math.
- An FFMA's three source operands are read from a banked register file. Reads that fall in one
  bank in the same cycle are serialised (a bank conflict). The operand reuse caches avoid
  reads: a source flagged `.reuse` is kept in its slot's cache, and the next instruction that
  reads the same register in the same slot takes it from there.

The bank model is the one microbenchmarks found on Volta and Turing (Jia et al., "Dissecting
the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018, and the Turing T4 report,
2019). There are two banks, and register Rn sits in bank n % 2. An instruction conflicts when
it reads three distinct registers of one bank from the register file. NVIDIA documents none
of this. For sm_80 and sm_90 the model is assumed, not measured, and the report says so. The
counts are static: instructions in the code, not executed ones.

The reuse cache model: a slot's cache holds the register last flagged `.reuse` in that slot.
It serves the next instruction that reads a register in that slot, if the register is the
same, and is then emptied unless that instruction flags it again.

It reads the instructions as sass.parse_sass gives them (address, opcode, operands).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

BANKS = 2
MODEL = "2 banks (Rn in bank n % 2), conflict = 3 register-file reads in one bank (Volta/Turing model)"

_REG = re.compile(r"^-?\|?R(\d+|Z)(\.reuse)?\|?$")  # R12, R12.reuse, -R3, |R4|, RZ


@dataclass
class Source:
    slot: int
    reg: int | None  # None: RZ, an immediate or a constant (no register-file read)
    reuse: bool


def sources(operands: list[str]) -> list[Source]:
    """The source operands of one instruction's operands as printed (['R1', 'R2.reuse', 'R3', 'R1'])."""
    out = []
    for slot, op in enumerate(operands[1:]):  # operands[0] is the destination
        m = _REG.match(op)
        if not m:
            out.append(Source(slot, None, False))
            continue
        reg = None if m.group(1) == "Z" else int(m.group(1))
        out.append(Source(slot, reg, bool(m.group(2))))
    return out


@dataclass
class RegisterReport:
    instructions: int = 0  # in the range
    ffma: int = 0
    reuse_flags: int = 0  # operands flagged .reuse, every instruction
    ffma_reads: int = 0  # register source operands of the FFMAs
    ffma_from_reuse: int = 0  # of those, served by a reuse cache
    ffma_conflicts: int = 0  # FFMAs with 3 register-file reads in one bank
    examples: list[str] = field(default_factory=list)  # the first conflicting instructions
    model: str = MODEL

    @property
    def ffma_share(self) -> float:
        return self.ffma / self.instructions if self.instructions else 0.0

    @property
    def reuse_share(self) -> float:
        return self.ffma_from_reuse / self.ffma_reads if self.ffma_reads else 0.0

    def as_fields(self) -> dict:
        return {"instructions": self.instructions, "ffma": self.ffma, "ffma_share": round(self.ffma_share, 4),
                "reuse_flags": self.reuse_flags, "ffma_reads": self.ffma_reads,
                "ffma_from_reuse": self.ffma_from_reuse, "reuse_share": round(self.reuse_share, 4),
                "ffma_bank_conflicts": self.ffma_conflicts, "examples": self.examples, "bank_model": self.model}


def register_report(instructions, lo: int | None = None, hi: int | None = None) -> RegisterReport:
    """The report over the instructions of sass.parse_sass with lo <= address <= hi, in program order."""
    report = RegisterReport()
    cache: dict[int, int | None] = {}
    for ins in instructions:
        addr = ins.addr
        if (lo is not None and addr < lo) or (hi is not None and addr > hi):
            continue
        srcs = sources(ins.operands)
        base = ins.opcode.split(".")[0]
        if base == "NOP":
            continue
        report.instructions += 1
        rf_reads: set[int] = set()
        for s in srcs:
            if s.reg is None:
                continue
            cached = cache.get(s.slot) == s.reg
            cache[s.slot] = s.reg if s.reuse else None  # the slot's cache is consumed or refilled
            if s.reuse:
                report.reuse_flags += 1
            if base == "FFMA":
                report.ffma_reads += 1
                report.ffma_from_reuse += cached
            if not cached:
                rf_reads.add(s.reg)
        if base != "FFMA":
            continue
        report.ffma += 1
        banks = [r % BANKS for r in rf_reads]
        if any(banks.count(b) >= 3 for b in range(BANKS)):
            report.ffma_conflicts += 1
            if len(report.examples) < 5:
                report.examples.append(f"/*{addr:04x}*/ {ins.text}")
    return report
