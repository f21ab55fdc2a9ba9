"""The operand checks the API entry points share (api/checks.py), each pinned where a mutant of
it passed every other CPU test (the fourth audit): alpha and beta read as the docstrings say,
the rank, dtype, device and bound of A and B, the GEMM op an array implies, C's shape and type
(a given C and a new one), and x's type for a sum. No GPU: the API runs on fake_api_gpu's
stand-ins, or the check is called directly."""
from __future__ import annotations

import math

import numpy as np
import pytest

import gemmlab
from gemmlab.api import checks, core, operands
from gemmlab.api.operands import Operand
from gemmlab.errors import BadArgumentError
from gemmlab.problem import MAX_DIM

from . import fake_api_gpu
from .fake_api_gpu import CAI, ran as _ran

fake_gpu = fake_api_gpu.fake_gpu  # the fixture (a name bound here, so no unused import)


# -- alpha and beta (checks.real) -----------------------------------------------------------------

@pytest.mark.parametrize("value", [np.float64("inf"), np.float32("-inf"), np.longdouble("inf")])
def test_an_infinity_given_as_one_is_taken_whatever_its_type(value):
    """Only a finite value that reads as inf (a long double or Decimal past a double's range) is
    refused; an infinity the caller gave is theirs, as a Python float('inf') is."""
    got = checks.real(value, "alpha", "gemmlab.sgemm")
    assert type(got) is float and math.isinf(got) and (got > 0) == (value > 0)


class _ManyElements:
    """As a torch tensor of several elements: float() raises RuntimeError, not TypeError."""

    def __float__(self):
        raise RuntimeError("a Tensor with 2 elements cannot be converted to Scalar")


def test_a_scalar_whose_float_raises_runtimeerror_is_refused_in_one_line():
    """torch's many-element tensor raises RuntimeError from float(): it is one BadArgumentError
    line as any other non-real is, not a RuntimeError out of the call."""
    with pytest.raises(BadArgumentError, match=r"^gemmlab.sgemm: alpha must be a real number, not _ManyElements$"):
        checks.real(_ManyElements(), "alpha", "gemmlab.sgemm")


class _Dlpack:
    def __init__(self, device):
        self.device = device

    def __dlpack_device__(self):
        if isinstance(self.device, Exception):
            raise self.device
        return self.device, 0

    def __float__(self):
        return 0.75


def test_a_rocm_dlpack_scalar_is_refused_as_a_gpu_array():
    """DLPack's device type 10 (ROCm) is GPU memory as 2 (CUDA) and 13 (CUDA managed) are:
    reading it would wait for the device at every call."""
    with pytest.raises(BadArgumentError, match=r"^gemmlab.sgemm: beta is a GPU array"):
        checks.real(_Dlpack(10), "beta", "gemmlab.sgemm")


def test_a_dlpack_producer_that_cannot_say_its_device_is_read_as_float_reads_it():
    """A __dlpack_device__ that raises is no sign of GPU memory: the value is read by float()."""
    assert checks.real(_Dlpack(RuntimeError("no device")), "alpha", "gemmlab.sgemm") == 0.75


def test_reals_names_beta_in_betas_refusal(fake_gpu):
    """reals() reads (alpha, beta): a bad beta is named beta, not alpha, in the call's one line."""
    with pytest.raises(BadArgumentError, match=r"^gemmlab.sgemm: beta must be a real number, not str$"):
        checks.reals(1.0, "0.5", "gemmlab.sgemm")
    with pytest.raises(BadArgumentError, match=r"^gemmlab.sgemm: beta must be a real number"):
        gemmlab.sgemm(CAI(4, 8), CAI(8, 16), C=CAI(4, 16), beta="0.5")
    assert not _ran(fake_gpu)


# -- A and B: the op, rank, dtype, device, bound --------------------------------------------------

class _Array:
    """An array read through a reader registered for its type (operands._readers): any dtype,
    bf16 included, which a __cuda_array_interface__ typestr cannot name."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


@pytest.mark.parametrize("shape, dtype, op", [((4, 8), "bf16", "hgemm"), ((4, 8), "fp16", "hgemm"),
                                              ((4, 8), "fp32", "sgemm"), ((2, 4, 8), "bf16", "bgemm")])
def test_the_gemm_op_of_an_array_is_bgemm_for_3d_then_hgemm_for_16_bits(monkeypatch, shape, dtype, op):
    """explain and Matmul pick the op from A alone: a bf16 A is hgemm as an fp16 one is (read as
    sgemm, it would be refused for its dtype, or explained as another op)."""
    monkeypatch.setitem(operands._readers, _Array,
                        lambda x, what, caller: Operand(x, 1 << 20, x.shape, x.dtype, 0, 0, "cai", True))
    assert checks.gemm_op_of(_Array(shape, dtype), "gemmlab.explain") == op


def test_an_operand_on_another_gpu_is_refused_with_both_gpus_named(fake_gpu, monkeypatch):
    """The arrays are on GPU 0 (the fake's pointerGetAttributes); gemmlab set up on GPU 1 must not
    launch on them."""
    monkeypatch.setitem(core._state, "device", 1)
    with pytest.raises(BadArgumentError, match=r"^A is on GPU 0, gemmlab runs on GPU 1$"):
        gemmlab.sgemm(CAI(4, 8), CAI(8, 16))
    assert not _ran(fake_gpu)


@pytest.mark.parametrize("call, A, B, says", [
    (gemmlab.sgemm, CAI(8), CAI(8, 16), "A must be 2-D, got 1-D"),
    (gemmlab.sgemm, CAI(2, 4, 8), CAI(8, 16), "A must be 2-D, got 3-D"),
    (gemmlab.sgemm, CAI(4, 8), CAI(1, 8, 16), "B must be 2-D, got 3-D"),
    (gemmlab.bgemm, CAI(4, 8), CAI(4, 8, 16), "A must be 3-D, got 2-D"),
])
def test_an_operand_of_another_rank_is_refused_in_one_line(fake_gpu, call, A, B, says):
    """A 1-D A would reach shape[-2] (an IndexError), a 3-D one in sgemm be read as a batch: each
    is one line naming the rank the op takes."""
    with pytest.raises(BadArgumentError, match=f"^{says}$"):
        call(A, B)
    assert not _ran(fake_gpu)


def test_a_and_b_of_two_dtypes_are_refused(fake_gpu):
    """hgemm takes fp16 and fp32 (TF32) inputs, but both of one type: an fp16 A with an fp32 B
    would be read by a kernel for one of them."""
    with pytest.raises(BadArgumentError, match=r"^A is fp16 but B is fp32: both must have one dtype$"):
        gemmlab.hgemm(CAI(4, 8, typestr="<f2"), CAI(8, 16))
    assert not _ran(fake_gpu)


def test_dimensions_up_to_the_bound_are_taken_and_one_past_it_refused():
    """MAX_DIM itself is a size the problems take (problem.py's bound); one more is refused,
    for M, N, K and a bgemm's batch alike."""
    big = MAX_DIM
    assert checks.gemm_dims("sgemm", "gemmlab.sgemm", "fp32", (big, 1), "fp32", (1, big))[0] == (big, big, 1)
    assert checks.gemm_dims("bgemm", "gemmlab.bgemm", "fp32", (big, 1, 1), "fp32", (big, 1, 1))[0] == (1, 1, 1, big)
    for sa, sb in [((big + 1, 1), (1, 1)), ((1, big + 1), (big + 1, 1)), ((1, 1), (1, big + 1))]:
        with pytest.raises(BadArgumentError, match="gemmlab.sgemm takes dimensions up to"):
            checks.gemm_dims("sgemm", "gemmlab.sgemm", "fp32", sa, "fp32", sb)
    with pytest.raises(BadArgumentError, match="gemmlab.bgemm takes dimensions up to"):
        checks.gemm_dims("bgemm", "gemmlab.bgemm", "fp32", (big + 1, 1, 1), "fp32", (big + 1, 1, 1))


def test_hgemm_reads_transposed_views_in_place_as_sgemm_does_and_bgemm_none():
    """layout_of: an F-order (transposed) operand is read in place by sgemm and hgemm (cuBLAS, the
    nt TMA rungs); bgemm copies it."""
    import types

    f_order = types.SimpleNamespace(flags=types.SimpleNamespace(f_contiguous=True))
    a = Operand(object(), 0, (4, 8), "fp16", 0, 0, "cupy", True)
    b = Operand(f_order, 0, (8, 16), "fp16", 0, 0, "cupy", False)
    assert checks.layout_of("hgemm", a, b) == (False, True)
    assert checks.layout_of("sgemm", b, a) == (True, False)
    assert checks.layout_of("bgemm", a, b) == (False, False)


# -- C: given or new ------------------------------------------------------------------------------

def test_beta_without_c_is_refused(fake_gpu):
    """beta * C needs a C: without one the call would drop beta without a word."""
    with pytest.raises(BadArgumentError, match=r"^beta != 0 needs C$"):
        gemmlab.sgemm(CAI(4, 8), CAI(8, 16), beta=0.5)
    assert not _ran(fake_gpu)
    gemmlab.sgemm(CAI(4, 8), CAI(8, 16), beta=0.0)  # beta == 0: C is not read
    assert _ran(fake_gpu)


@pytest.mark.parametrize("C, says", [
    (CAI(4, 15), r"^C is 4x15, expected 4x16$"),
    (CAI(16, 4), r"^C is 16x4, expected 4x16$"),
    (CAI(1, 4, 16), r"^C must be 2-D, got 3-D$"),
])
def test_a_given_c_of_another_shape_or_rank_is_refused_before_any_launch(fake_gpu, C, says):
    """The kernel writes M x N elements from C's pointer: a C of another shape would be written
    past its end (or read as another matrix)."""
    with pytest.raises(BadArgumentError, match=says):
        gemmlab.sgemm(CAI(4, 8), CAI(8, 16), C=C)
    assert not _ran(fake_gpu)


def test_a_given_c_of_another_type_than_out_dtype_is_refused(fake_gpu):
    """out_dtype names C's type; a given C of another (allowed) type contradicts it: one line,
    not a C written in the other type."""
    A, B = CAI(4, 8, typestr="<f2"), CAI(8, 16, typestr="<f2")
    with pytest.raises(BadArgumentError, match=r"^C is float32 but out_dtype is float16$"):
        gemmlab.hgemm(A, B, C=CAI(4, 16), out_dtype="float16")
    with pytest.raises(BadArgumentError, match=r"^C is float16 but out_dtype is float32$"):
        gemmlab.hgemm(A, B, C=CAI(4, 16, typestr="<f2"), out_dtype="float32")
    assert not _ran(fake_gpu)
    gemmlab.hgemm(A, B, C=CAI(4, 16, typestr="<f2"), out_dtype="float16")
    assert _ran(fake_gpu)


def test_a_bgemm_c_is_batch_by_m_by_n():
    """torch.bmm's layout: C is batch x M x N for dims (M, N, K, batch)."""
    assert checks.c_shape("bgemm", (4, 16, 8, 3)) == (3, 4, 16)
    assert checks.c_shape("sgemm", (4, 16, 8)) == (4, 16)


def test_bgemm_takes_a_batch_by_m_by_n_c_and_refuses_m_by_n_by_batch(fake_gpu):
    gemmlab.bgemm(CAI(3, 4, 8), CAI(3, 8, 16), C=CAI(3, 4, 16))
    assert _ran(fake_gpu)
    with pytest.raises(BadArgumentError, match=r"^C is 4x16x3, expected 3x4x16$"):
        gemmlab.bgemm(CAI(3, 4, 8), CAI(3, 8, 16), C=CAI(4, 16, 3))


@pytest.mark.parametrize("out_dtype, dtype", [(None, np.float32), ("float32", np.float32), ("float16", np.float16)])
def test_a_new_c_is_made_in_the_type_out_dtype_names(fake_gpu, out_dtype, dtype):
    """hgemm with fp16 inputs writes a new C in fp16 when out_dtype says so (torch.mm's output),
    fp32 otherwise: the array made is of that type, as the executor was chosen for."""
    C = gemmlab.hgemm(CAI(4, 8, typestr="<f2"), CAI(8, 16, typestr="<f2"), out_dtype=out_dtype)
    assert C.dtype == np.dtype(dtype) and C.shape == (4, 16)


class _TorchDtype:
    """str() as torch's dtypes print: "torch.float16"."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


@pytest.mark.parametrize("name, named", [("float16", "fp16"), ("bfloat16", "bf16"), ("float32", "fp32"), ("half", "fp16")])
def test_a_torch_dtype_names_an_out_dtype_through_its_name(name, named):
    """torch is not needed to read torch.float16: its str() less the 'torch.' prefix is the name."""
    assert checks.out_name(_TorchDtype(name)) == named


def test_a_sum_of_a_16bit_array_is_refused(fake_gpu):
    """reduce_sum's kernels read float32 only: an fp16 x would be read as half as many floats."""
    with pytest.raises(BadArgumentError, match=r"^x has dtype float16; reduce_sum needs float32$"):
        gemmlab.reduce_sum(CAI(64, typestr="<f2"))
    assert not _ran(fake_gpu)
