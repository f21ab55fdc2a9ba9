"""SASS of a compiled kernel and its instruction mix (what seed 001 reads by hand).

The cubin comes from the compile cache (no GPU needed); cuobjdump or nvdisasm turn it into
SASS. The mix counts the instructions that tell a GEMM's story: FFMA (the work), shared
loads by width (LDS vs LDS.128: what vectorising buys), global loads by width (LDG.E vs
LDG.E.128), LDGSTS (cp.async), shared stores, barriers and tensor-core MMAs. Counts are
static (instructions in the code, not executed ones), for the whole kernel and for its
main loop: the backward branch whose body holds the most FFMAs (or tensor-core MMAs).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import GemmlabError
from .regfile import RegisterReport, register_report

TOOLS = ("cuobjdump", "nvdisasm")

# /*0170*/   @!P3 BRA 0x400 ;      (cuobjdump and nvdisasm both print this shape)
_INSTR = re.compile(r"^\s*/\*(?P<addr>[0-9a-fA-F]{4,})\*/\s+(?P<text>[^;]*?)\s*;")
_FUNC = re.compile(r"(?:Function\s*:\s*(\S+))|(?:^\.text\.(\S+?):\s*$)")
_PRED = re.compile(r"^@!?U?P[T0-9]+\s+")
_TARGET = re.compile(r"(?:\b0x([0-9a-fA-F]+)|`\(\.L_x_(\d+)\))")
_LABEL = re.compile(r"^\.L_x_(\d+):")

# Columns of the mix, in report order: name -> predicate on the full opcode (with modifiers).
MIX_COLUMNS: tuple[tuple[str, str], ...] = (
    ("FFMA", "fused multiply-adds (FP32)"),
    ("FADD", "adds (FP32; a reduction's work)"),
    ("LDS", "shared loads, 32-bit"),
    ("LDS.64", "shared loads, 64-bit"),
    ("LDS.128", "shared loads, 128-bit"),
    ("LDSM", "shared matrix loads (ldmatrix)"),
    ("LDG", "global loads, 32/64-bit"),
    ("LDG.128", "global loads, 128-bit (LDG.E.128)"),
    ("LDGSTS", "global->shared async copies (cp.async)"),
    ("STS", "shared stores, all widths"),
    ("STS.128", "shared stores, 128-bit"),
    ("STG", "global stores, all widths"),
    ("BAR", "barriers (BAR.SYNC)"),
    ("HMMA", "tensor-core MMA (mma.sync)"),
    ("HGMMA", "Hopper warpgroup MMA (wgmma)"),
    ("SHFL", "warp shuffles"),
    ("total", "all instructions"),
)


def classify(opcode: str) -> list[str]:
    """The mix columns one instruction counts in (its full opcode, e.g. 'LDG.E.128.CONSTANT')."""
    parts = opcode.split(".")
    base, mods = parts[0], set(parts[1:])
    width128 = "128" in mods
    out = []
    if base == "FFMA":
        out.append("FFMA")
    elif base == "FADD":
        out.append("FADD")
    elif base == "SHFL":
        out.append("SHFL")
    elif base == "LDS":
        out.append("LDS.128" if width128 else "LDS.64" if "64" in mods else "LDS")
    elif base == "LDSM":
        out.append("LDSM")
    elif base == "LDG":
        out.append("LDG.128" if width128 else "LDG")
    elif base == "LDGSTS":
        out.append("LDGSTS")
    elif base == "STS":
        out.append("STS")
        if width128:
            out.append("STS.128")
    elif base == "STG":
        out.append("STG")
    elif base == "BAR":
        out.append("BAR")
    elif base == "HMMA":
        out.append("HMMA")
    elif base == "HGMMA":
        out.append("HGMMA")
    return out


@dataclass
class Instruction:
    addr: int
    opcode: str  # with modifiers, without predicate
    text: str
    target: int | None = None  # branch target address
    operands: list[str] = field(default_factory=list)  # as printed, the destination first


@dataclass
class SassFunction:
    name: str
    instructions: list[Instruction] = field(default_factory=list)

    def mix(self, lo: int | None = None, hi: int | None = None) -> dict[str, int]:
        counts: Counter = Counter()
        for ins in self.instructions:
            if (lo is not None and ins.addr < lo) or (hi is not None and ins.addr > hi):
                continue
            if ins.opcode in ("NOP",):
                continue
            counts["total"] += 1
            for col in classify(ins.opcode):
                counts[col] += 1
        return {name: counts.get(name, 0) for name, _ in MIX_COLUMNS}

    def loops(self) -> list[tuple[int, int]]:
        """(start, end) address ranges of backward branches: the loops of the kernel."""
        return [(ins.target, ins.addr) for ins in self.instructions
                if ins.target is not None and ins.target <= ins.addr and ins.opcode.startswith("BRA")]

    def main_loop(self) -> tuple[int, int] | None:
        """In a tensor-core kernel (HMMA or HGMMA in some loop), the loop holding the most of
        them, the innermost that does and, of equals, the shortest: its K loop, which may hold
        loops of its own that copy tiles (wmma) or wait on mbarriers (wgmma). A branch back from
        the function's end into the K loop (an mbarrier wait's out-of-line retry) spans the
        epilogue too and crosses the K loop rather than nesting in or around it: not a loop.
        Otherwise the loop whose body holds the most FFMAs (a GEMM's K loop; of two copies with
        as many FFMAs, e.g. a kernel's straight-line loop and its general one, the shorter: the
        fast path); without FFMA, the most FADDs and loads (a reduction's grid-stride loop); ties:
        the shortest. Only innermost working loops count: a loop around the K loop (stream-K's walk
        over tiles, a persistent kernel's tile loop) holds its FFMAs too but is not the hot loop;
        a loop whose only inner loop does no work (an mbarrier wait's spin, as in rung 15's K
        loop) still counts."""
        def work(m) -> int:
            return m["FADD"] + m["LDG"] + m["LDG.128"] + m["LDS"] + m["LDS.128"]

        def tensor(m) -> int:
            return m["HMMA"] + m["HGMMA"]

        loops = self.loops()
        mixes = {loop: self.mix(*loop) for loop in loops}

        def inside(lo, hi):
            return [mixes[(a, b)] for a, b in loops if lo <= a and b <= hi and (a, b) != (lo, hi)]

        def retry(r, other) -> bool:  # r starts inside `other` and ends past it: a branch back from later code
            return other[0] < r[0] <= other[1] < r[1]

        with_mma = [r for r in loops if tensor(mixes[r])]
        mma = [r for r in with_mma if not any(tensor(m) for m in inside(*r))
               and not any(retry(r, other) for other in with_mma)]
        if mma:
            return max(mma, key=lambda r: (tensor(mixes[r]), -mixes[r]["total"], -(r[1] - r[0])))

        best, key = None, None
        for lo, hi in loops:
            if any(m["FFMA"] or work(m) for m in inside(lo, hi)):
                continue
            m = mixes[(lo, hi)]
            work_here = work(m)
            k = (m["FFMA"], -m["total"], work_here, -(hi - lo)) if m["FFMA"] else (0, 0, work_here, -(hi - lo))
            if (m["FFMA"] or work_here) and (key is None or k > key):
                best, key = (lo, hi), k
        return best

    def text_between(self, lo: int, hi: int) -> str:
        return "\n".join(f"/*{i.addr:04x}*/ {i.text}" for i in self.instructions if lo <= i.addr <= hi)


def parse_sass(text: str) -> list[SassFunction]:
    """cuobjdump -sass or nvdisasm output -> the functions and their instructions."""
    functions: list[SassFunction] = []
    labels: dict[str, int] = {}
    pending_label: list[str] = []
    current: SassFunction | None = None
    unresolved: list[tuple[Instruction, str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        m = _FUNC.search(stripped)
        if m and not _INSTR.match(line):
            name = m.group(1) or m.group(2)
            if current is None or current.name != name:
                current = SassFunction(name)
                functions.append(current)
            continue
        lab = _LABEL.match(stripped)
        if lab:
            pending_label.append(lab.group(1))
            continue
        m = _INSTR.match(line)
        if not m or current is None:
            continue
        addr = int(m.group("addr"), 16)
        body = _PRED.sub("", m.group("text").strip())
        parts = body.split(None, 1)  # the opcode, then its operands
        opcode = parts[0] if parts else ""
        ins = Instruction(addr, opcode, m.group("text").strip(),
                          operands=[o.strip() for o in parts[1].split(",")] if len(parts) > 1 else [])
        for name in pending_label:
            labels[name] = addr
        pending_label.clear()
        if opcode.startswith(("BRA", "BRX", "JMP")):
            t = _TARGET.search(body)
            if t and t.group(1):
                ins.target = int(t.group(1), 16)
            elif t and t.group(2):
                unresolved.append((ins, t.group(2)))
        current.instructions.append(ins)
    for ins, label in unresolved:  # nvdisasm names targets .L_x_N
        ins.target = labels.get(label)
    return [f for f in functions if f.instructions]


# -- finding and running the disassembler ----------------------------------------------

def _candidate_dirs() -> list[Path]:
    dirs = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "bin")
    dirs += sorted(Path("/usr/local").glob("cuda*/bin"), reverse=True)
    try:  # the nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels
        import nvidia  # type: ignore[import-not-found]

        for root in getattr(nvidia, "__path__", []):
            dirs += sorted(Path(root).glob("*/bin"))
    except ImportError:
        pass
    return dirs


def find_tool(preferred: str | None = None) -> tuple[str, str] | None:
    """(tool name, path) of cuobjdump or nvdisasm, or None. GEMMLAB_CUOBJDUMP may name one."""
    env = os.environ.get("GEMMLAB_CUOBJDUMP")
    if env:  # named: used, or said to be missing (not passed over for another found on PATH)
        return (Path(env).name, env) if Path(env).is_file() else None
    order = (preferred,) + tuple(t for t in TOOLS if t != preferred) if preferred else TOOLS
    for tool in order:
        path = shutil.which(tool)
        if path:
            return tool, path
        for d in _candidate_dirs():
            if (d / tool).exists():
                return tool, str(d / tool)
    return None


NO_TOOL = ("no SASS: neither cuobjdump nor nvdisasm was found (install the CUDA toolkit, or "
           "`pip install nvidia-cuda-cuobjdump`, or set GEMMLAB_CUOBJDUMP)")


def no_tool() -> str:
    """NO_TOOL, or GEMMLAB_CUOBJDUMP's value where that names no file."""
    env = os.environ.get("GEMMLAB_CUOBJDUMP")
    return f"no SASS: GEMMLAB_CUOBJDUMP={env!r} names no file" if env else NO_TOOL


def disassemble(cubin: bytes, tool: tuple[str, str] | None = None) -> str:
    """SASS text of a cubin; GemmlabError with one clear line when no disassembler works."""
    tool = tool or find_tool()
    if tool is None:
        raise GemmlabError(no_tool())
    name, path = tool
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "kernel.cubin"
        f.write_bytes(cubin)
        args = [path, "-sass", str(f)] if name == "cuobjdump" else [path, "-c", str(f)]
        try:
            out = subprocess.run(args, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            raise GemmlabError(f"no SASS: {name} could not run ({exc})") from None
    if out.returncode != 0:
        first = (out.stderr.strip() or out.stdout.strip() or f"exit {out.returncode}").splitlines()[0]
        raise GemmlabError(f"no SASS: {name} failed: {first}")
    return out.stdout


def function_for(functions: list[SassFunction], mangled: str) -> SassFunction:
    for f in functions:
        if f.name == mangled:
            return f
    if len(functions) == 1:
        return functions[0]
    raise GemmlabError(f"no SASS function {mangled} in the disassembly "
                       f"(found {', '.join(f.name for f in functions) or 'none'})")


@dataclass
class SassMix:
    function: str
    tool: str
    whole: dict[str, int]
    loop: dict[str, int] | None
    loop_range: tuple[int, int] | None
    registers: RegisterReport | None = None  # the main loop's register-file traffic (regfile.py)

    def as_fields(self) -> dict:
        return {"function": self.function, "tool": self.tool, "whole": self.whole, "loop": self.loop,
                "loop_range": list(self.loop_range) if self.loop_range else None,
                "registers": self.registers.as_fields() if self.registers else None}


def sass_mix(text: str, mangled: str, tool: str = "") -> SassMix:
    fn = function_for(parse_sass(text), mangled)
    loop = fn.main_loop()
    registers = register_report(fn.instructions, *loop) if loop else None
    return SassMix(fn.name, tool, fn.mix(), fn.mix(*loop) if loop else None, loop, registers)
