"""The static register-file check (profile/regfile.py): FFMA share, operand reuse and bank
conflicts under the Volta/Turing model, on hand-made loops and on a real disassembly, both read
by sass.parse_sass (the one parse of the SASS text)."""
import gzip
from pathlib import Path

from gemmlab.profile import sass
from gemmlab.profile.regfile import register_report, sources

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sass"
VEC = "_ZN7gemmlab15sgemm_vectorizeILi128ELi128ELi8ELi8ELi8EEEviiifPKfS2_fPf"


def _lines(*texts):
    """The instructions of a hand-made listing, one text a line, 16 bytes apart."""
    listing = "\n".join(["Function : f"] + [f"/*{16 * i:04x}*/ {t} ;" for i, t in enumerate(texts)])
    return sass.parse_sass(listing)[0].instructions


def test_operands_are_parsed_with_slots_and_flags():
    ins, plain = _lines("@!P0 FFMA R1, R2.reuse, -R5, RZ", "FFMA R1, R2, 0.5, c[0x0][0x160]")
    assert ins.opcode == "FFMA" and ins.operands == ["R1", "R2.reuse", "-R5", "RZ"]
    assert [(s.slot, s.reg, s.reuse) for s in sources(ins.operands)] == [(0, 2, True), (1, 5, False), (2, None, False)]
    assert [s.reg for s in sources(plain.operands)] == [2, None, None]
    assert _lines("NOP", "EXIT")[1].operands == [], "no operands"


def test_three_reads_in_one_bank_conflict_and_reuse_removes_one():
    r = register_report(_lines("FFMA R1, R2, R4, R6", "FFMA R3, R2, R5, R7"))
    assert r.ffma == 2 and r.ffma_conflicts == 1, "R2, R4, R6 share bank 0; R2, R5, R7 do not"
    assert "R2, R4, R6" in r.examples[0]
    r = register_report(_lines("FFMA R1, R2.reuse, R5, R7", "FFMA R3, R2, R4, R6"))
    assert r.ffma_conflicts == 0 and r.ffma_from_reuse == 1 and r.reuse_flags == 1, \
        "R2 comes from slot 0's reuse cache: only R4 and R6 are read from bank 0"


def test_reuse_serves_only_the_same_register_in_the_same_slot():
    r = register_report(_lines("FFMA R1, R2.reuse, R5, R7", "FFMA R3, R9, R2, R6", "FFMA R3, R2, R4, R6"))
    assert r.ffma_from_reuse == 0, "slot 1 reads R2 (not slot 0), then slot 0's cache was consumed by R9"
    r = register_report(_lines("FFMA R1, R2.reuse, R5, R7", "LDS.128 R8, [R10]", "FFMA R3, R2, R4, R6"))
    assert r.ffma_from_reuse == 1 and r.ffma_share == 2 / 3, "an instruction without slot-0 register keeps it"


def test_a_register_read_twice_is_read_once():
    r = register_report(_lines("FFMA R1, R2, R2, R4"))
    assert r.ffma_conflicts == 0


def test_real_loop_of_rung6():
    text = gzip.decompress((FIX / "vectorize.sm_90.nvdisasm.txt.gz").read_bytes()).decode()
    mix = sass.sass_mix(text, VEC, "nvdisasm")
    r = mix.registers
    fn = sass.function_for(sass.parse_sass(text), VEC)
    lo, hi = mix.loop_range
    body = [i.text for i in fn.instructions if lo <= i.addr <= hi]
    assert r.ffma == 512 == mix.loop["FFMA"] and r.instructions == mix.loop["total"]
    assert r.reuse_flags == sum(t.count(".reuse") for t in body) > 0
    assert r.ffma_reads == 3 * 512 and 0 < r.ffma_from_reuse <= r.reuse_flags
    assert (r.reuse_flags, r.ffma_from_reuse, r.ffma_conflicts) == (432, 387, 0), "as counted before the one parse"
    assert 0.8 < r.ffma_share < 0.9
    assert mix.as_fields()["registers"]["ffma_bank_conflicts"] == r.ffma_conflicts
