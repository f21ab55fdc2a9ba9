"""`gemmlab profile --source` without a GPU: ncu's source page parsed (the two column-name styles
of ncu versions), its samples lined up with our own disassembly of the same kernel and split at
the main loop, and what does not line up reported as such. The pages here are built in the layout
ncu prints (a "Kernel Name" row, an "Address" header, a row per instruction); no page captured on
a GPU is in tests/fixtures yet (tests/gpu/test_profile.py checks a real one)."""
import csv
import io
from pathlib import Path

import pytest

from gemmlab.profile import ncu as N
from gemmlab.profile import sass
from gemmlab.profile.source import parse_source_csv, summarize, summary_lines

BASE = 0x7F3A00001000  # where ncu prints the function's first instruction


def page(kernel: str, rows: list[tuple], style: str = "new") -> str:
    """A source page: rows of (offset, sass, barrier samples, long-scoreboard samples)."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["Kernel Name", kernel])
    if style == "new":
        w.writerow(["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
                    "stall_barrier", "stall_long_sb", "stall_barrier_not_issued"])
        for off, text, bar, lsb in rows:
            w.writerow([f"{BASE + off:#x}", text, f"{bar + lsb:,}", "0", str(bar), str(lsb), "0"])
    else:
        w.writerow(["Address", "Source", "# Samples", "smsp__pcsamp_warps_issue_stalled_barrier",
                    "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
                    "smsp__pcsamp_warps_issue_stalled_barrier_not_issued"])
        for off, text, bar, lsb in rows:
            w.writerow([f"{BASE + off:#x}", text, str(bar + lsb), str(bar), str(lsb), "0"])
    return out.getvalue()


TOY = [(0x00, "MOV R1, c[0x0][0x28] ;", 0, 0), (0x10, "@P0 BAR.SYNC.DEFER_BLOCKING 0x1, 0x100 ;", 30, 0),
       (0x20, "LDG.E R2, desc[UR4][R4.64] ;", 0, 50), (0x30, "FFMA R3, R2, R2, R3 ;", 15, 5),
       (0x40, "@!P1 BRA 0x20 ;", 0, 0), (0x50, "EXIT ;", 0, 0)]


@pytest.mark.parametrize("style", ["new", "old"])
def test_the_page_is_read_in_either_column_style(style):
    (k,) = parse_source_csv(page("void toy<1>(int)", TOY, style))
    assert k.name == "void toy<1>(int)" and len(k.rows) == 6 and k.samples == 100
    bar = k.rows[1]
    assert bar.opcode == "BAR" and bar.samples == 30
    reasons = set(bar.reasons)
    assert reasons in ({"barrier", "long_sb"}, {"barrier", "long_scoreboard"}), "not-issued columns are not reasons"
    assert k.rows[2].opcode == "LDG" and k.rows[4].opcode == "BRA"


def test_two_kernels_and_a_page_without_samples():
    text = page("void a()", TOY) + page("void b()", TOY[:2])
    a, b = parse_source_csv(text)
    assert (a.name, len(a.rows), b.name, len(b.rows)) == ("void a()", 6, "void b()", 2)
    bare = "Kernel Name,void c()\nAddress,Source\n0x10,EXIT ;\n"
    (c,) = parse_source_csv(bare)
    assert c.rows == [], "no sample column (SourceCounters not collected): nothing to attribute"
    assert parse_source_csv("") == [] and parse_source_csv("==ERROR== no report\n") == []


def toy_instructions():
    return [sass.Instruction(off, text.replace("@P0 ", "").replace("@!P1 ", "").split()[0], text)
            for off, text, _, _ in TOY]


def test_samples_split_at_the_main_loop():
    (k,) = parse_source_csv(page("void toy()", TOY))
    s = summarize(k, toy_instructions(), (0x20, 0x40))
    assert s["aligned"] and s["samples"] == 100
    assert s["regions"]["main loop"]["samples_pct"] == pytest.approx(70.0)
    assert s["regions"]["outside the main loop"]["samples_pct"] == pytest.approx(30.0)
    assert s["regions"]["main loop"]["reasons"][0] == ("long_sb", pytest.approx(100 * 55 / 70))
    assert s["regions"]["outside the main loop"]["reasons"] == [("barrier", pytest.approx(100.0))]
    hot = s["hottest"]
    assert [h["offset"] for h in hot] == [0x20, 0x10, 0x30], "samples > 0 only, most first"
    assert hot[0]["reason"] == "long_sb" and hot[1]["region"] == "outside the main loop"
    lines = summary_lines("toy", s)
    assert lines[0].startswith("toy: 100 warp samples; main loop 0x0020..0x0040")
    assert any("outside the main loop: 30.0% of samples; stalled on barrier 100%" in ln for ln in lines)


def test_a_listing_that_does_not_line_up_is_not_split():
    (k,) = parse_source_csv(page("void toy()", TOY))
    other = [sass.Instruction(i.addr, "NOP", "NOP ;") for i in toy_instructions()]
    s = summarize(k, other, (0x20, 0x40))
    assert not s["aligned"] and list(s["regions"]) == ["whole kernel"]
    assert "did not line up" in s["note"] and s["regions"]["whole kernel"]["samples_pct"] == 100.0
    assert summarize(k)["note"] == "no main loop to split at", "a library kernel: no SASS of ours"


def test_rows_without_addresses_line_up_by_order():
    text = page("void toy()", TOY).replace(f"{BASE:#x}", "?")
    (k,) = parse_source_csv(text)
    s = summarize(k, toy_instructions(), (0x20, 0x40))
    assert s["aligned"] and s["regions"]["main loop"]["samples_pct"] == pytest.approx(70.0)


@pytest.mark.skipif(sass.find_tool() is None, reason="no cuobjdump or nvdisasm on this machine")
def test_rung5_samples_line_up_with_its_own_sass(tmp_path, monkeypatch):
    """A page in ncu's layout made from rung 5's real SASS (bf16, 128x256): samples put on its
    HGMMAs and on the BAR.SYNCs of its epilogue land in the regions analyze's K loop gives."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    from gemmlab import registry
    from gemmlab.cuda.compile import compile_kernel
    from gemmlab.ops.hgemm import OP

    spec = registry.get("persistent", "hgemm")
    ck = compile_kernel(spec, OP.build_params(spec, {}, "bf16"), arch="sm_90")
    fn = sass.function_for(sass.parse_sass(sass.disassemble(ck.cubin)), ck.mangled)
    lo, hi = fn.main_loop()
    rows = [(i.addr, i.text, 10 if i.opcode.startswith("BAR") and not lo <= i.addr <= hi else 0,
             7 if i.opcode.startswith("HGMMA") else 0) for i in fn.instructions]
    (k,) = parse_source_csv(page(fn.name, rows))
    s = summarize(k, fn.instructions, (lo, hi))
    hgmma = sum(7 for i in fn.instructions if i.opcode.startswith("HGMMA") and lo <= i.addr <= hi)
    assert s["aligned"] and hgmma > 0
    assert s["regions"]["main loop"]["samples_pct"] == pytest.approx(100 * hgmma / k.samples)
    assert s["regions"]["outside the main loop"]["reasons"][0][0] == "barrier"


def test_the_source_section_and_page_on_ncu_command_lines(tmp_path):
    cmd = N.profile_command("ncu", ["t"], tmp_path / "r", kernels=["_Zk"], skip=3, count=1, sections=(N.SOURCE_SECTION,))
    assert cmd[cmd.index("--section") + 1] == "SourceCounters" and cmd.index("--section") < cmd.index("--")
    assert "--section" not in N.profile_command("ncu", ["t"], tmp_path / "r", kernels=["_Zk"], skip=3, count=1)
    src = N.source_command("ncu", tmp_path / "r.ncu-rep")
    assert src[src.index("--page") + 1] == "source" and src[src.index("--print-source") + 1] == "sass"


def test_each_profiled_kernel_takes_its_own_block_in_order(monkeypatch, tmp_path):
    """A sum's passes (and a library's repeated kernel) are one kernel name several times: each
    launch gets the next block of that name, not the first one again; where ncu prints no names,
    blocks go by position; a page without samples gives each kernel ncu's reason."""
    import subprocess
    import types

    from gemmlab.profile import profiler

    heavy, light = [(0x0, "FADD R1, R1, R2 ;", 0, 90), (0x10, "EXIT ;", 0, 0)], [(0x0, "FADD R1, R1, R2 ;", 0, 3)]
    text = page("reduce_k", heavy) + page("reduce_k", light) + page("reduce_k", [(0x0, "EXIT ;", 1, 0)])
    monkeypatch.setattr(profiler.subprocess, "run", lambda *a, **k: types.SimpleNamespace(stdout=text, stderr=""))
    plan = profiler.Plan(None, 0, 3, {})
    results = [types.SimpleNamespace(kernel="reduce_k")] * 3
    got = profiler.source_summaries("ncu", tmp_path / "r", None, plan, "sm_90", results)
    assert [s["samples"] for s in got] == [90, 3, 1]
    unnamed = [types.SimpleNamespace(kernel="other")] * 2
    assert [s["samples"] for s in profiler.source_summaries("ncu", tmp_path / "r", None, plan, "sm_90", unnamed)] == [90, 3]
    four = profiler.source_summaries("ncu", tmp_path / "r", None, plan, "sm_90", results + results[:1])
    assert "no block" in four[3]["error"]

    monkeypatch.setattr(profiler.subprocess, "run", lambda *a, **k: types.SimpleNamespace(
        stdout="", stderr="==ERROR== Failed to profile kernel: the report has no source data\n"))
    (bad,) = profiler.source_summaries("ncu", tmp_path / "r", None, plan, "sm_90", results[:1])
    assert bad["error"].startswith("ncu failed to profile the kernel")
    assert summary_lines("reduce_k", bad) == [f"reduce_k: no warp samples: {bad['error']}"]

    def slow(*a, **k):
        raise subprocess.TimeoutExpired("ncu", 300)

    monkeypatch.setattr(profiler.subprocess, "run", slow)
    assert "within 300 s" in profiler.source_summaries("ncu", tmp_path / "r", None, plan, "sm_90", results[:1])[0]["error"]


def test_a_page_without_kernel_name_rows_is_one_block_per_header():
    text = "\n".join(ln for ln in (page("a", TOY) + page("b", TOY[:2])).splitlines() if not ln.startswith("Kernel Name"))
    a, b = parse_source_csv(text)
    assert (len(a.rows), len(b.rows)) == (6, 2)


REAL_PAGE = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "source-hgemm-persistent.csv"


@pytest.mark.skipif(not REAL_PAGE.exists(), reason="no source page captured yet (tests/fixtures/ncu/capture.sh on a GPU "
                                                   "writes source-hgemm-persistent.csv)")
def test_a_source_page_captured_on_a_gpu_parses():
    (k,) = [b for b in parse_source_csv(REAL_PAGE.read_text()) if b.rows]
    assert "hgemm_persistent" in k.name and k.samples > 0
    assert any(r.reasons for r in k.rows), "per-reason columns found"
    assert any(r.opcode == "HGMMA" for r in k.rows) and summarize(k)["hottest"]
