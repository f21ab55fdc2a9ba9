"""Tests that could not fail, fifth audit: a helper's mutants of profile/occupancy.py, regfile.py,
sass.py (its parsing), analysis.py and rows.py that the suite let through, each pinned here by
exact values. The occupancy figures follow CUDA's occupancy calculator (cuda_occupancy.h) with the
CUDA C++ Programming Guide's limits: registers allocated per warp in units of 256 in each of 4
sub-partitions of 16K, at most 64K registers a block and 255 a thread; 64 warps and 32 blocks per
SM on sm_80/sm_90 (48 and 24 on sm_89); 164 KiB (sm_80), 100 KiB (sm_89) or 228 KiB (sm_90) of
shared memory per SM, each block's share with its 1 KiB reserve rounded up to 128 bytes."""
import pytest

from gemmlab.errors import BadArgumentError
from gemmlab.profile import sass
from gemmlab.profile.occupancy import occupancy
from gemmlab.profile.regfile import register_report, sources

from .test_profile_regfile import _lines


# -- occupancy: the register file --------------------------------------------------------------

def test_registers_are_allocated_per_warp_in_units_of_256():
    # 36 x 32 = 1152 registers a warp, allocated 1280 (1152 in units of 128): 16384 // 1280 = 12
    # warps per sub-partition -> 48 warps -> 6 blocks of 8 warps (7 with units of 128)
    o = occupancy("sm_90", 256, 36)
    assert o.regs_per_warp == 1280 and o.blocks_by["registers"] == 6
    assert (o.blocks_per_sm, o.active_warps, o.limiter) == (6, 48, "registers") and o.occupancy == 0.75


def test_registers_are_allocated_in_each_of_four_sub_partitions():
    # 200 x 32 = 6400 a warp: 16384 // 6400 = 2 warps per sub-partition -> 8 warps -> 2 blocks of 3
    # warps; the whole file, 65536 // 6400 = 10 warps, would give 3; 2 // 3 x 4 would give 0
    o = occupancy("sm_90", 96, 200)
    assert o.warps_per_block == 3 and o.regs_per_warp == 6400
    assert o.blocks_by == {"registers": 2, "shared memory": 228, "threads": 21, "blocks per SM": 32}
    assert (o.blocks_per_sm, o.active_warps, o.limiter) == (2, 6, "registers")


def test_255_registers_a_thread_launch_and_256_do_not():
    ok = occupancy("sm_90", 32, 255)  # 8160 -> 8192 a warp: 2 per sub-partition -> 8 blocks of 1 warp
    assert ok.blocks_by["registers"] == 8 and ok.blocks_per_sm == 8 and ok.limiter == "registers"
    over = occupancy("sm_90", 32, 256)  # as many registers a warp, but past the 255 a thread may have
    assert over.blocks_by["registers"] == 0 and over.limiter == "cannot launch (registers)"


def test_a_block_of_exactly_64k_registers_launches():
    o = occupancy("sm_90", 1024, 64)  # 2048 a warp x 32 warps = 65536: the per-block limit, not past it
    assert o.blocks_by["registers"] == 1 and o.blocks_per_sm == 1 and o.occupancy == 0.5


# -- occupancy: warps and blocks ---------------------------------------------------------------

def test_a_partial_warp_costs_a_whole_warp():
    o = occupancy("sm_90", 48, 32)  # 48 threads: 2 warps, 64 // 2 = 32 blocks, 64 warps resident
    assert o.warps_per_block == 2 and o.blocks_by["threads"] == 32
    assert (o.blocks_per_sm, o.active_warps, o.occupancy) == (32, 64, 1.0)


@pytest.mark.parametrize("arch,blocks,warps", [("sm_80", 32, 64), ("sm_89", 24, 48), ("sm_90", 32, 64)])
def test_the_block_cap_of_each_architecture(arch, blocks, warps):
    o = occupancy(arch, 32, 16)  # one-warp blocks: only the cap limits
    assert o.blocks_by["blocks per SM"] == blocks and o.blocks_per_sm == blocks and o.limiter == "blocks per SM"
    assert (o.active_warps, o.max_warps) == (blocks, warps)


# -- occupancy: shared memory ------------------------------------------------------------------

@pytest.mark.parametrize("arch,smem,blocks", [
    ("sm_80", 81 * 1024, 2),   # 82 KiB with the reserve: 164 KiB per SM holds 2 (163 KiB would hold 1)
    ("sm_89", 24 * 1024, 4),   # 25 KiB: 100 KiB holds 4 (128 KiB would hold 5)
    ("sm_90", 113 * 1024, 2),  # 114 KiB: 228 KiB holds 2 (227 KiB would hold 1)
])
def test_shared_memory_per_sm_of_each_architecture(arch, smem, blocks):
    o = occupancy(arch, 128, 32, smem_dynamic=smem)
    assert o.smem_allocated_per_block == smem + 1024
    assert o.blocks_by["shared memory"] == blocks and o.blocks_per_sm == blocks and o.limiter == "shared memory"


def test_shared_memory_is_rounded_to_128_bytes():
    # 20096 + 1024 = 21120 = 165 x 128: 233472 // 21120 = 11 blocks (rounded to 256: 21248 -> 10)
    o = occupancy("sm_90", 32, 16, smem_dynamic=20096)
    assert o.smem_allocated_per_block == 21120 and o.blocks_by["shared memory"] == 11 and o.blocks_per_sm == 11


def test_the_largest_block_of_shared_memory_launches():
    edge = occupancy("sm_90", 128, 32, smem_dynamic=227 * 1024)  # the opt-in maximum, reserve on top: 228 KiB
    assert edge.smem_allocated_per_block == 228 * 1024 and edge.blocks_by["shared memory"] == 1
    assert edge.blocks_per_sm == 1 and edge.limiter == "shared memory"
    past = occupancy("sm_90", 128, 32, smem_dynamic=227 * 1024 + 1)
    assert past.blocks_per_sm == 0 and past.limiter == "cannot launch (shared memory)"


# -- occupancy: barriers, sm_90a, limiters, messages -------------------------------------------

def test_sm90a_has_sm90s_limits_and_the_barrier_rule():
    assert occupancy("sm_90a", 1024, 37, smem_static=8192).blocks_by == \
        occupancy("sm_90", 1024, 37, smem_static=8192).blocks_by
    o = occupancy("sm_90a", 128, 32, barriers=16)
    assert o.blocks_by["barriers"] == 4 and o.blocks_per_sm == 4 and o.limiter == "barriers"
    assert "barriers" not in occupancy("sm_80", 128, 32, barriers=16).blocks_by, "no barrier rule before Hopper"


def test_one_barrier_allows_64_blocks():
    o = occupancy("sm_90", 32, 16, barriers=1)  # 2 x 32 barriers per SM / 1 a block
    assert o.blocks_by["barriers"] == 64 and o.blocks_per_sm == 32 and o.limiter == "blocks per SM"


def test_tied_limiters_are_named_in_order():
    # 64 registers: 2048 a warp, 8 per sub-partition -> 32 warps -> 4 blocks of 8; 48 KiB -> 4 blocks
    o = occupancy("sm_90", 256, 64, smem_static=48 * 1024)
    assert o.limiters == ("registers", "shared memory") and o.limiter == "registers, shared memory"


def test_a_block_that_cannot_launch_says_why():
    assert occupancy("sm_90", 1024, 255).limiter == "cannot launch (registers)"
    assert occupancy("sm_90", 128, 0, smem_static=228 * 1024).limiter == "cannot launch (shared memory)"


@pytest.mark.parametrize("kw", [{"smem_static": -1}, {"smem_dynamic": -1}])
def test_negative_shared_memory_is_refused(kw):
    with pytest.raises(BadArgumentError, match="^registers and shared memory must not be negative$"):
        occupancy("sm_90", 256, 32, **kw)


def test_an_unknown_arch_names_the_known_ones():
    with pytest.raises(BadArgumentError) as e:
        occupancy("sm_70", 256, 32)
    assert str(e.value) == "no occupancy limits for 'sm_70'; known: sm_80, sm_86, sm_89, sm_90, sm_90a"


def test_explain_line_by_line():
    o = occupancy("sm_90", 1024, 37, smem_static=8192)
    assert o.explain() == [
        "shared memory: 8192 B/block + 1024 B runtime reserve = 9216 B (rounded to 128); "
        "233472 B per SM / 9216 B -> 25 blocks",
        "threads: 1024 threads = 32 warps per block, 64 warps per SM -> 2 blocks",
        "registers: 37 regs x 32 threads = 1184 per warp, allocated 1280 (units of 256); "
        "65536 regs in 4 sub-partitions of 16384 -> 1 blocks",
        "blocks per SM: at most 32",
        "=> 1 blocks x 32 warps = 32 of 64 warps: 50.0% (limited by registers)",
    ]


def test_as_fields_exactly():
    assert occupancy("sm_90", 256, 64, smem_static=48 * 1024).as_fields() == {
        "arch": "sm_90", "threads_per_block": 256, "registers_per_thread": 64, "smem_per_block": 49152,
        "blocks_per_sm": 4, "active_warps": 32, "max_warps": 64, "occupancy_pct": 50.0,
        "limiter": "registers, shared memory",
        "blocks_by": {"registers": 4, "shared memory": 4, "threads": 8, "blocks per SM": 32}}


# -- regfile -----------------------------------------------------------------------------------

def test_absolute_and_negated_absolute_registers_are_read():
    got = [(s.slot, s.reg, s.reuse) for s in sources(["R0", "|R4|", "-|R5|", "R6.reuse"])]
    assert got == [(0, 4, False), (1, 5, False), (2, 6, True)]


def test_an_ffma_with_modifiers_is_an_ffma_and_nops_are_not_counted():
    r = register_report(_lines("FFMA.FTZ R1, R2, R4, R6", "NOP", "FFMA.RZ R3, R2, R5, R8"))
    assert (r.instructions, r.ffma, r.ffma_reads, r.ffma_conflicts) == (2, 2, 6, 1) and r.ffma_share == 1.0


def test_a_reuse_cache_serves_only_its_own_slot():
    # R2 is cached in slot 1; slot 0 reading R2 next reads it from the register file: R2, R4, R6 conflict
    r = register_report(_lines("FFMA R1, R5, R2.reuse, R7", "FFMA R3, R2, R4, R6"))
    assert (r.ffma_from_reuse, r.ffma_conflicts) == (0, 1)


def test_conflict_examples_keep_five_with_their_addresses():
    r = register_report(_lines(*["FFMA R1, R2, R4, R6"] * 6))
    assert r.ffma_conflicts == 6 and len(r.examples) == 5
    assert r.examples[0] == "/*0000*/ FFMA R1, R2, R4, R6" and r.examples[4] == "/*0040*/ FFMA R1, R2, R4, R6"
    assert r.as_fields()["ffma_bank_conflicts"] == 6


# -- sass parsing ------------------------------------------------------------------------------

def _fn(*texts, start=0):
    """One function from instruction texts, 16 bytes apart from `start`."""
    listing = "\n".join(["Function : k"] + [f"/*{start + 16 * i:04x}*/ {t} ;" for i, t in enumerate(texts)])
    (fn,) = sass.parse_sass(listing)
    return fn


def test_five_digit_addresses_are_read():
    fn = _fn("FFMA R1, R2, R3, R1", "@P0 BRA 0x10000", start=0x10000)
    assert [i.addr for i in fn.instructions] == [0x10000, 0x10010] and fn.loops() == [(0x10000, 0x10010)]


@pytest.mark.parametrize("pred", ["@UP0", "@!UP1", "@!PT"])
def test_uniform_and_constant_predicates_are_stripped(pred):
    fn = _fn("FFMA R1, R2, R3, R1", f"{pred} BRA 0x0")
    assert fn.instructions[1].opcode == "BRA" and fn.loops() == [(0, 0x10)]


@pytest.mark.parametrize("opcode,cols", [
    ("LDG.E.LTC128B.CONSTANT", ["LDG"]), ("LDG.E.LTC128B.128", ["LDG.128"]), ("LDS.U.LTC128B", ["LDS"]),
    ("SHFL.BFLY", ["SHFL"]), ("FADD.FTZ", ["FADD"]),
])
def test_classify_more(opcode, cols):
    assert sass.classify(opcode) == cols


def test_the_main_loop_of_two_equal_ffma_loops_is_the_shorter():
    fn = _fn("FFMA R1, R2, R3, R1", "IADD3 R4, R4, 0x1, RZ", "@P0 BRA 0x0",
             "FFMA R1, R2, R3, R1", "@P1 BRA 0x30")
    assert fn.loops() == [(0, 0x20), (0x30, 0x40)] and fn.main_loop() == (0x30, 0x40)


def test_the_main_loop_of_a_reduction_counts_its_loads():
    # no FFMA: the loop with the most FADDs and loads; shared and global loads count alike
    fn = _fn("FADD R1, R1, R2", "LDS R2, [R3]", "@P0 BRA 0x0",
             "FADD R1, R1, R2", "LDG.E R2, [R4]", "LDG.E R5, [R4]", "@P1 BRA 0x30")
    assert fn.main_loop() == (0x30, 0x60)
    fn = _fn("FADD R1, R1, R2", "LDG.E R2, [R3]", "@P0 BRA 0x0",
             "FADD R1, R1, R2", "LDS R2, [R4]", "LDS R5, [R4]", "@P1 BRA 0x30")
    assert fn.main_loop() == (0x30, 0x60)


def test_the_main_loop_of_a_reduction_ties_to_the_shorter_and_skips_loops_without_work():
    fn = _fn("FADD R1, R1, R2", "IADD3 R4, R4, 0x1, RZ", "@P0 BRA 0x0",
             "FADD R1, R1, R2", "@P1 BRA 0x30", "IADD3 R4, R4, 0x1, RZ", "@P2 BRA 0x50")
    assert fn.main_loop() == (0x30, 0x40)
    assert _fn("IADD3 R4, R4, 0x1, RZ", "@P0 BRA 0x0").main_loop() is None


def test_a_loop_around_a_reduction_loop_is_not_the_main_loop():
    fn = _fn("FADD R1, R1, R2", "LDG.E R2, [R3]", "@P0 BRA 0x10", "FADD R6, R6, R1", "@P1 BRA 0x0")
    assert fn.loops() == [(0x10, 0x20), (0, 0x40)] and fn.main_loop() == (0x10, 0x20)


def test_the_main_loop_of_two_equal_mma_loops_is_the_shorter():
    fn = _fn("HMMA.16816.F32 R8, R12, R14, R8", "IADD3 R4, R4, 0x1, RZ", "@P0 BRA 0x0",
             "HMMA.16816.F32 R8, R12, R14, R8", "@P1 BRA 0x30")
    assert fn.main_loop() == (0x30, 0x40)


def test_empty_functions_are_dropped_and_one_function_answers_any_name():
    text = "Function : empty\n        .headerflags @\"EF_CUDA_SM90\"\nFunction : k\n/*0000*/ FFMA R1, R2, R3, R1 ;\n"
    fns = sass.parse_sass(text)
    assert [f.name for f in fns] == ["k"] and sass.function_for(fns, "_Zother").name == "k"


def test_a_missing_function_names_those_found():
    fns = [sass.SassFunction("a", [sass.Instruction(0, "NOP", "NOP")]),
           sass.SassFunction("b", [sass.Instruction(0, "NOP", "NOP")])]
    with pytest.raises(sass.GemmlabError) as e:
        sass.function_for(fns, "_Znope")
    assert str(e.value) == "no SASS function _Znope in the disassembly (found a, b)"


def test_the_loop_text_ends_with_its_branch():
    fn = _fn("MOV R1, R2", "FFMA R1, R2, R3, R1", "@P0 BRA 0x10", "EXIT")
    assert fn.text_between(0x10, 0x20) == "/*0010*/ FFMA R1, R2, R3, R1\n/*0020*/ @P0 BRA 0x10"


# -- analysis ----------------------------------------------------------------------------------

def test_an_analysis_row_takes_each_figure_from_its_own_field():
    from gemmlab.cuda.compile import Resources
    from gemmlab.profile.analysis import Analysis

    res = Resources(registers=64, smem_static=16384, stack_frame=40, spill_stores=8, spill_loads=12)
    occ = occupancy("sm_90", 256, 64, smem_static=16384, smem_dynamic=32768)  # 48 KiB: registers and smem tie at 4
    row = Analysis("k", "sm_90", {"BM": 64}, "_Zk", res, 32768, 256, occ, None, "no SASS: why").row()
    assert row == {
        "op": "sgemm", "impl": "k", "arch": "sm_90", "params": {"BM": 64}, "mangled": "_Zk", "registers": 64,
        "smem_static": 16384, "smem_dynamic": 32768, "stack_frame": 40, "spill_stores": 8, "spill_loads": 12,
        "threads": 256, "blocks_per_sm": 4, "occupancy_pct": 50.0, "limiter": "registers, shared memory",
        "occupancy": occ.as_fields(), "sass_tool": None, "sass_reason": "no SASS: why", "sass": None}


def test_analyze_counts_dynamic_shared_memory_and_keeps_a_failed_disassembly_s_words(tmp_path, monkeypatch):
    """hopper_simt's 99328 B of dynamic shared memory allow 2 blocks; a disassembler that fails
    leaves its first line as the reason."""
    from gemmlab import registry
    from gemmlab.problem import GemmProblem
    from gemmlab.profile.analysis import analyze

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    tool = tmp_path / "nvdisasm"
    tool.write_text("#!/bin/sh\necho 'bad cubin' >&2\nexit 3\n")
    tool.chmod(0o755)
    a = analyze(registry.get("hopper_simt"), {}, "sm_90", GemmProblem(1024, 1024, 1024), tool=("nvdisasm", str(tool)))
    assert a.smem_dynamic == 99328 and a.occupancy.smem_per_block == a.resources.smem_static + 99328
    assert a.occupancy.blocks_by["shared memory"] == 2
    assert a.sass is None and a.sass_reason == "no SASS: nvdisasm failed: bad cubin"
    assert a.row()["sass_reason"] == "no SASS: nvdisasm failed: bad cubin"


# -- rows --------------------------------------------------------------------------------------

def test_rows_are_selected_by_run_in_order_and_json_is_stored_sorted(tmp_path):
    from gemmlab.profile import rows

    db = rows.connect(tmp_path / "r.db")
    assert rows.select(db, "analyses") == []
    for run, impl in ((1, "a"), (2, "b"), (1, "c")):
        rows.insert(db, "analyses", run, impl=impl, params={"TN": 8, "BM": 64})
    assert [r["impl"] for r in rows.select(db, "analyses", 1)] == ["a", "c"]
    assert [r["impl"] for r in rows.select(db, "analyses")] == ["a", "b", "c"]
    assert db.execute("SELECT params FROM analyses WHERE impl = 'a'").fetchone()[0] == '{"BM": 64, "TN": 8}'


def test_an_unknown_field_is_refused(tmp_path):
    from gemmlab.profile import rows

    db = rows.connect(tmp_path / "r.db")
    with pytest.raises(ValueError, match=r"^unknown analyses field\(s\): bogus, zeta$"):
        rows.insert(db, "analyses", 1, impl="a", zeta=1, bogus=2)


def test_an_older_table_gets_the_missing_columns(tmp_path):
    import sqlite3

    from gemmlab.profile import rows

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:
        old.execute("CREATE TABLE analyses (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER NOT NULL, "
                    "created TEXT NOT NULL, impl TEXT)")
    db = rows.connect(path)
    rows.insert(db, "analyses", 1, impl="a", limiter="registers", sass={"tool": "nvdisasm"})
    (row,) = rows.select(db, "analyses")
    assert row["limiter"] == "registers" and row["sass"] == {"tool": "nvdisasm"}


def test_csv_export_writes_json_columns_as_json(tmp_path):
    import csv

    from gemmlab.profile import rows

    out = rows.export_csv([{"id": 1, "impl": "a", "params": {"TN": 8, "BM": 64}, "occupancy": None}],
                          tmp_path / "a.csv", table="analyses")
    (row,) = list(csv.DictReader(out.open(newline="")))
    assert row["params"] == '{"BM": 64, "TN": 8}' and row["occupancy"] == "" and row["impl"] == "a"
