"""Where a kernel's warps stall, instruction by instruction: ncu's warp-state sampling
(the SourceCounters section) read from its source page, attributed to the kernel's main loop or
to the code outside it (prologue, epilogue, the producer's waits) with the loop that `analyze`
finds in the same cubin's SASS (sass.py).

    ncu --section SourceCounters ... ; ncu --import R --csv --page source --print-source sass

The page is one block per profiled kernel: a "Kernel Name" row, a header row whose first cell is
"Address", then one row per SASS instruction with its sample counts, in total and per stall
reason. Column names differ between ncu versions (per-reason columns "stall_barrier" or
"smsp__pcsamp_warps_issue_stalled_barrier"; the total "Warp Stall Sampling (All Samples)" or "#
Samples"), so they are found by pattern, not by a fixed list.
"""
from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass, field

from .ncu import to_number

TOTAL_COLUMNS = ("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (All)", "# Samples")
_REASON = re.compile(r"^(?:smsp__pcsamp_warps_issue_stalled_|stall_)(?P<name>\w+?)$")
_PRED = re.compile(r"^@!?\w+\s+")
TOP_REASONS = 4
HOTTEST = 10
MIN_ALIGNED = 0.9  # share of sampled instructions whose opcode must agree with our SASS at their offset


@dataclass
class SourceRow:
    address: str
    sass: str
    samples: float
    reasons: dict[str, float]

    @property
    def opcode(self) -> str:
        """The opcode without predicate or modifiers ("HGMMA", "BAR", "STS")."""
        body = _PRED.sub("", self.sass.strip())
        return body.split(None, 1)[0].split(".", 1)[0] if body else ""


@dataclass
class SourceKernel:
    name: str
    rows: list[SourceRow] = field(default_factory=list)

    @property
    def samples(self) -> float:
        return sum(r.samples for r in self.rows)


def _reason_columns(header: list[str]) -> dict[int, str]:
    out = {}
    for i, h in enumerate(header):
        m = _REASON.match(h.strip())
        # "selected": the warp was issuing - not a stall reason, however often it is sampled
        if m and not m.group("name").endswith("_not_issued") and m.group("name") != "selected":
            out[i] = m.group("name")
    return out


def parse_source_csv(text: str) -> list[SourceKernel]:
    """ncu's source page (CSV) -> one SourceKernel per kernel block, its rows in program order.
    A block without a sample column (no SourceCounters section collected) has no rows."""
    kernels: list[SourceKernel] = []
    header: list[str] | None = None
    total_at: int | None = None
    reasons: dict[int, str] = {}
    current: SourceKernel | None = None
    for row in csv.reader(io.StringIO(text)):
        if not row or not any(cell.strip() for cell in row):
            continue
        first = row[0].strip()
        if first == "Kernel Name":
            current = SourceKernel(row[1].strip() if len(row) > 1 else "")
            kernels.append(current)
            header = None
            continue
        if first == "Address":
            header = [h.strip() for h in row]
            total_at = next((header.index(c) for c in TOTAL_COLUMNS if c in header), None)
            reasons = _reason_columns(header)
            if current is None or current.rows:  # a page printed without kernel-name rows: one block per header
                current = SourceKernel("")
                kernels.append(current)
            continue
        if header is None or current is None or len(row) != len(header) or "Source" not in header:
            continue
        by_reason = {name: to_number(row[i]) or 0.0 for i, name in reasons.items()}
        if total_at is not None:
            total = to_number(row[total_at]) or 0.0
        elif by_reason:
            total = sum(by_reason.values())
        else:
            continue
        current.rows.append(SourceRow(row[0].strip(), row[header.index("Source")].strip(), total, by_reason))
    return kernels


def _offsets(rows: list[SourceRow]) -> list[int] | None:
    """Each row's offset from the function's first instruction, from ncu's addresses; None when
    they are not all hexadecimal numbers."""
    try:
        addrs = [int(r.address, 16) for r in rows]
    except ValueError:
        return None
    return [a - addrs[0] for a in addrs] if addrs else []


def align(rows: list[SourceRow], instructions) -> list[int] | None:
    """Each row's offset in our disassembly (sass.Instruction list of the same cubin), or None
    when ncu's listing and ours do not agree: by address where ncu prints them, else by order;
    the opcodes of MIN_ALIGNED of the sampled rows must match."""
    ours = {ins.addr: ins.opcode.split(".", 1)[0] for ins in instructions}
    candidates = []
    by_address = _offsets(rows)
    if by_address is not None:
        candidates.append(by_address)
    candidates.append([ins.addr for ins in instructions[:len(rows)]] if len(instructions) >= len(rows) else None)
    sampled = [i for i, r in enumerate(rows) if r.samples > 0] or list(range(len(rows)))
    for offsets in candidates:
        if offsets is None or len(offsets) != len(rows):
            continue
        agree = sum(ours.get(offsets[i]) == rows[i].opcode for i in sampled)
        if sampled and agree >= MIN_ALIGNED * len(sampled):
            return offsets
    return None


def _top(counter: Counter, total: float, n: int) -> list[tuple[str, float]]:
    return [(name, 100.0 * v / total) for name, v in counter.most_common(n) if v > 0] if total else []


def summarize(kernel: SourceKernel, instructions=None, loop: tuple[int, int] | None = None) -> dict:
    """Share of the samples in the main loop and outside it, each region's leading stall reasons,
    and the hottest instructions. Without an aligned loop, one region: the whole kernel."""
    total = kernel.samples
    offsets = align(kernel.rows, instructions) if instructions is not None else None
    regions: dict[str, dict] = {}
    if offsets is not None and loop is not None:
        where = ["main loop" if loop[0] <= off <= loop[1] else "outside the main loop" for off in offsets]
        note = f"main loop {loop[0]:#06x}..{loop[1]:#06x} (the K loop `gemmlab analyze` finds)"
    else:
        where = ["whole kernel"] * len(kernel.rows)
        note = ("ncu's listing did not line up with the disassembly" if instructions is not None and offsets is None
                else "no main loop to split at")
    for name in dict.fromkeys(where):
        rows = [r for r, w in zip(kernel.rows, where) if w == name]
        samples = sum(r.samples for r in rows)
        reasons: Counter = Counter()
        for r in rows:
            reasons.update(r.reasons)
        regions[name] = {"samples_pct": 100.0 * samples / total if total else 0.0,
                         "reasons": _top(reasons, sum(reasons.values()), TOP_REASONS)}
    order = sorted(range(len(kernel.rows)), key=lambda i: -kernel.rows[i].samples)[:HOTTEST]
    hottest = []
    for i in order:
        r = kernel.rows[i]
        if r.samples <= 0:
            break
        reason = max(r.reasons.items(), key=lambda kv: kv[1])[0] if r.reasons and max(r.reasons.values()) > 0 else ""
        hottest.append({"offset": offsets[i] if offsets is not None else None, "region": where[i], "sass": r.sass,
                        "samples_pct": 100.0 * r.samples / total if total else 0.0, "reason": reason})
    return {"kernel": kernel.name, "samples": total, "aligned": offsets is not None, "note": note,
            "regions": regions, "hottest": hottest}


def summary_lines(label: str, s: dict) -> list[str]:
    """A summary as the lines `gemmlab profile --source` prints (or why there is none)."""
    if "error" in s:
        return [f"{label}: no warp samples: {s['error']}"]
    lines = [f"{label}: {s['samples']:,.0f} warp samples; {s['note']}"]
    for name, region in s["regions"].items():
        reasons = ", ".join(f"{r} {pct:.0f}%" for r, pct in region["reasons"]) or "-"
        lines.append(f"  {name}: {region['samples_pct']:.1f}% of samples; stalled on {reasons}")
    for h in s["hottest"]:
        where = f"{h['offset']:#06x}" if h["offset"] is not None else "?"
        lines.append(f"    {h['samples_pct']:5.1f}%  {where}  {h['sass'][:64]:64s}  {h['reason']}")
    return lines
