"""TMA's 16-byte row rule (kernels/hgemm/tma_rows.py), written once and asked by the specs'
in-place rules, the launch's padded copies (ops/hgemm_tma.py, here on NumPy arrays through a
stand-in for CuPy) and the API's fast path (api/tma_executors.py), without a GPU."""
import contextlib
import sys
import types

import numpy as np
import pytest

from gemmlab import registry
from gemmlab.api.tma_executors import in_place_refusal, tma_fast
from gemmlab.cuda import device
from gemmlab.kernels.hgemm.tma_rows import padded_row, row_rule, tma_row
from gemmlab.ops.hgemm_tma import TmaOperands
from gemmlab.problem import GemmProblem

PERSISTENT = registry.get("persistent", "hgemm")


def test_a_row_is_described_when_its_pitch_is_a_16_byte_multiple():
    assert tma_row(8, 2) and tma_row(4, 4) and tma_row(4096, 2)
    assert not tma_row(12, 2) and not tma_row(6, 4) and not tma_row(1, 2)
    assert [padded_row(n, 2) for n in (1, 8, 9, 12, 16)] == [8, 8, 16, 16, 16]
    assert [padded_row(n, 4) for n in (1, 4, 5, 6)] == [4, 4, 8, 8]


def test_the_reason_names_the_rule_and_the_shape():
    p = GemmProblem(64, 37, 12, dtype="bf16")
    assert row_rule(p, "M", 2) == ""
    assert row_rule(p, "N", 2) == ("N % 8 == 0 (TMA: its row pitch, 2 * N bytes, must be a multiple of 16); "
                                   "64x37x12 has N = 37")
    assert row_rule(p, "K", 4) == ""
    assert row_rule(p, "K", 2).startswith("K % 8 == 0") and row_rule(p, "N", 4).startswith("N % 4 == 0")


def test_the_api_pads_what_tma_cannot_describe():
    assert in_place_refusal(PERSISTENT, GemmProblem(64, 37, 64, dtype="bf16", layout="nt"), (False, True)) == (
        "persistent: rows of the fp32 C need N % 4 == 0 (TMA: its row pitch, 4 * N bytes, must be a multiple of "
        "16); 64x37x64 has N = 37; C is padded - the transposed operands are copied to row-major instead")
    nn = GemmProblem(64, 36, 64, dtype="bf16")
    assert not tma_fast(PERSISTENT, nn)
    assert in_place_refusal(PERSISTENT, nn, (False, False)).startswith(
        "persistent: rows of B need N % 8 == 0 (TMA: its row pitch, 2 * N bytes")
    odd_k = GemmProblem(64, 64, 36, dtype="fp16")
    assert in_place_refusal(PERSISTENT, odd_k, (False, False)).startswith("persistent: rows of A need K % 8 == 0")
    assert tma_fast(PERSISTENT, GemmProblem(64, 64, 36, dtype="fp16", layout="tn")), "A is KxM: rows of M"
    assert tma_fast(PERSISTENT, GemmProblem(64, 64, 64, dtype="bf16", out_dtype="bf16"))
    assert not tma_fast(PERSISTENT, GemmProblem(64, 68, 64, dtype="bf16", layout="nt", out_dtype="bf16")), \
        "a 16-bit C of N = 68: 136-byte rows"


@pytest.fixture
def host_operands(monkeypatch):
    """TmaOperands on NumPy arrays: CuPy's zeros are NumPy's, the launch stream a no-op."""
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(zeros=np.zeros))
    monkeypatch.setattr(device, "cupy_stream", lambda handle: contextlib.nullcontext())
    return TmaOperands()


def _arrays(p: GemmProblem, dtype=np.uint16):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1000, (p.K, p.M) if p.a_transposed else (p.M, p.K)).astype(dtype)
    b = rng.integers(0, 1000, (p.N, p.K) if p.b_transposed else (p.K, p.N)).astype(dtype)
    return a, b, np.zeros((p.M, p.N), dtype=np.float32)


def test_aligned_operands_are_used_as_given(host_operands):
    for layout in ("nn", "nt", "tn", "tt"):
        p = GemmProblem(16, 8, 24, dtype="bf16", layout=layout)
        A, B, C = _arrays(p)
        a, b, c, copy_back = host_operands.prepare(p, A, B, C, True, p.b_transposed, 0)
        assert a is A and b is B and c is C and copy_back is None, layout


def test_unaligned_rows_are_copied_into_padded_rows(host_operands):
    p = GemmProblem(12, 6, 20, beta=1.0, dtype="bf16", layout="tt")  # M, N, K: 24, 12 and 40-byte rows
    A, B, C = _arrays(p)
    a, b, c, copy_back = host_operands.prepare(p, A, B, C, True, True, 0)
    assert a.shape == (20, 12) and a.strides == (16 * 2, 2) and (a == A).all(), "A^T's rows: M = 12 -> 16"
    assert b.shape == (6, 20) and b.strides == (24 * 2, 2) and (b == B).all(), "B^T's rows: K = 20 -> 24"
    assert c.shape == (12, 6) and c.strides == (8 * 4, 4), "C's fp32 rows: N = 6 -> 8"
    c[...] = 7.0
    copy_back()
    assert (C == 7.0).all()


def test_a_reused_single_row_buffer_is_zero_past_the_narrower_row(host_operands):
    """One row of A is described whole (its padded tail included): after K = 7 (a tail of one), K = 5
    reuses the 8-wide buffer and must not find K = 7's values in columns 5 and 6 - an inf there
    would meet TMA's zeros of B and make the row NaN (the review of session 26)."""
    wide, narrow = GemmProblem(1, 8, 7, dtype="fp16"), GemmProblem(1, 8, 5, dtype="fp16")
    A, B, C = _arrays(wide, np.float16)
    A[0, 5:] = np.inf
    host_operands.prepare(wide, A, B, C, True, False, 0)
    A, B, C = _arrays(narrow, np.float16)
    a, _, _, _ = host_operands.prepare(narrow, A, B, C, True, False, 0)
    assert a.shape == (1, 8) and (a[0, :5] == A[0]).all() and (a[0, 5:] == 0).all()


def test_a_kxn_b_is_read_as_it_lies_and_a_layout_mismatch_is_refused(host_operands):
    from gemmlab.errors import BadArgumentError

    p = GemmProblem(8, 8, 12, dtype="tf32")  # fp32 inputs, rows of 8 and 12 elements: 16-byte multiples
    A, B, C = _arrays(p, np.float32)
    a, b, c, copy_back = host_operands.prepare(p, A, B, C, True, False, 0)
    assert a is A and b is B and c is C and copy_back is None, "no transposing copy of B (tf32 reads it N-major)"
    with pytest.raises(BadArgumentError, match="reads B as NxK; this problem gives it as KxN"):
        host_operands.prepare(p, A, B, C, True, True, 0)


def test_without_pads_unaligned_rows_are_refused(host_operands):
    from gemmlab.errors import BadArgumentError

    p = GemmProblem(16, 16, 12, dtype="fp16")
    with pytest.raises(BadArgumentError, match=r"^tma_wgmma: rows of A need K % 8 == 0 \(TMA"):
        host_operands.prepare(p, *_arrays(p), False, False, 0, "tma_wgmma")
