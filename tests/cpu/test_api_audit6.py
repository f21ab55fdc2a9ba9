"""Tests that could not fail, sixth audit: hand-made mutants of api/operands.py, interface.py,
plans.py and calls.py that every other CPU test let through, each pinned here by what a user
would see (a wrong array taken, a right one refused, a refusal's words, an executor or a cached
call used for another problem, a copy made or not). No GPU: fake_api_gpu's stand-ins, with CuPy
arrays the CuPy hot path takes (HotArray) and executors that record what each one was made for
and the pointers it ran on (the `made` fixture)."""
from __future__ import annotations

import types

import numpy as np
import pytest

import gemmlab
from gemmlab.api import calls, core, frameworks, interface, operands
from gemmlab.errors import BadArgumentError

from . import fake_api_gpu
from .fake_api_gpu import CAI, FakeCupyArray, ran
from .test_api_layout import Tensor, _op

fake_gpu = fake_api_gpu.fake_gpu  # the fixture (a name bound here, so no unused import)


class HotArray(FakeCupyArray):
    """A CuPy array as the CuPy hot path reads it (ndim and the two flags cupy.ndarray keeps), and
    as the general path reads it (operands._reader_for looks at the module)."""

    __module__ = "cupy._core.fake"

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def _c_contiguous(self):
        return self.flags.c_contiguous

    @property
    def _f_contiguous(self):
        return self.flags.f_contiguous


def hot(*shape, dtype=np.float32, ptr=None, device=0):
    x = HotArray(shape, dtype, ptr)
    x.data.device_id = device
    return x


def hot_t(rows, cols, dtype=np.float32):
    """An F-order CuPy array (W.T of a row-major W): read in place, layout t."""
    x = HotArray((rows, cols), dtype)
    x.flags.c_contiguous, x.flags.f_contiguous = False, True
    return x


class Runs(list):
    owns_workspace, fast, why = False, True, ""


@pytest.fixture
def made(fake_gpu, monkeypatch):
    """fake_gpu with every executor recording what it was made for, ex.made: (op, dtype, dims,
    impl, params, layout, C's type), and each launch in the list returned: (ex.made, the stream
    the executor was made for, the launch stream, then the launch's arguments before the stream,
    an operand as its pointer: A, B, C, alpha, beta, or x, out). Executors own no workspace and
    are fast unless a test sets made.owns_workspace or made.fast (with made.why) first."""
    runs = Runs()
    make = core.new_executor

    def new_executor(op_name, dtype, dims, impl, params, layout=(False, False), out="fp32"):
        ex = make(op_name, dtype, dims, impl, params, layout, out)
        ex.made = (op_name, dtype, dims, impl, dict(params or {}), tuple(layout), out)
        ex.owns_workspace, ex.fast, ex.why = runs.owns_workspace, runs.fast, runs.why

        def run(*args):
            fake_gpu.append(("run", args[-1]))
            launched = tuple(getattr(p, "ptr", p) for p in args[:-1])
            runs.append((ex.made, getattr(ex, "stream", None), args[-1]) + launched)
        ex.run = ex.run_operands = run
        return ex

    monkeypatch.setattr(core, "new_executor", new_executor)
    return runs


@pytest.fixture
def cupy_hot(made, monkeypatch):
    """The CuPy hot path on, over HotArrays; CuPy's current stream is `cupy_hot.stream` (7)."""
    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    cupy_hot.stream = 7
    refs = dict(ndarray=HotArray, f32=f32, stream=lambda: types.SimpleNamespace(ptr=cupy_hot.stream),
                dtypes={"sgemm": {f32: "fp32"}, "hgemm": {f32: "tf32", f16: "fp16"}})
    for key, value in refs.items():
        monkeypatch.setitem(frameworks.cupy_refs, key, value)
    return made


def copies(fake_gpu, monkeypatch):
    """Record each dense copy the general path makes (operands.densify's cupy.array) as an event."""
    def array(v, order="C", copy=True):
        fake_gpu.append(("copy", tuple(v.shape)))
        return FakeCupyArray(v.shape, v.dtype)
    monkeypatch.setattr(operands._cupy, "array", array)


def copies_on_streams(fake_gpu, monkeypatch):
    """copies(), and each stream a copy or a new array is made on (cupy_stream) as ("on", stream)."""
    import contextlib

    import gemmlab.cuda.device as device

    copies(fake_gpu, monkeypatch)
    def on(handle):
        fake_gpu.append(("on", handle))
        return contextlib.nullcontext()
    monkeypatch.setattr(device, "cupy_stream", on)


def hot_calls() -> list:
    return list(core._thread.hot_calls)


def _refused(call, *args, **kwargs) -> str:
    """The one line a call is refused with (the whole message: tests compare it exactly)."""
    with pytest.raises(BadArgumentError) as refused:
        call(*args, **kwargs)
    return str(refused.value)


# -- operands.py ------------------------------------------------------------------------------------

def test_a_contiguous_but_misaligned_operand_is_copied_by_a_call_and_refused_by_a_plan(fake_gpu, monkeypatch):
    """Operand.dense is contiguous AND 16-byte aligned: a kernel's vector loads fault on an
    address 4 bytes off, so a call copies such an A, and a plan (which never copies) refuses it."""
    copies(fake_gpu, monkeypatch)
    A = CAI(4, 8, ptr=(1 << 40) + 4)
    gemmlab.sgemm(A, CAI(8, 16))
    assert fake_gpu == [("new", (4, 16)), ("copy", (4, 8)), ("run", 7)]
    assert _refused(gemmlab.Matmul, A, CAI(8, 16)) == ("A must be contiguous and 16-byte aligned for a plan (pass a "
                                                       "contiguous copy once, e.g. A.contiguous())")


def test_strides_a_producer_spells_out_for_c_order_are_contiguous(fake_gpu):
    """A dict may give the strides of a dense array (and any stride for a dimension of one): it
    is contiguous, read in place by a call and taken by a plan, not copied or refused."""
    for x in (CAI(4, 8, strides=(32, 4)), CAI(1, 8, strides=(4096, 4)), CAI(4, 1, strides=(4, 12))):
        assert operands.read(x, "A", "gemmlab.sgemm").contiguous
    plan = gemmlab.Matmul(CAI(4, 8, strides=(32, 4)), CAI(8, 16, strides=(64, 4)), CAI(4, 16, strides=(64, 4)))
    assert plan.layout == (False, False)


def test_a_producers_array_is_on_the_gpu_its_pointer_is_on(fake_gpu, monkeypatch):
    """The device is asked of the pointer (cudaPointerGetAttributes), not taken as the current
    one: an array on GPU 1 is refused when gemmlab runs on GPU 0, whatever GPU is current."""
    monkeypatch.setattr(operands._cupy.cuda.runtime, "pointerGetAttributes",
                        lambda ptr: types.SimpleNamespace(device=1))
    assert _refused(gemmlab.sgemm, CAI(4, 8), CAI(8, 16)) == "A is on GPU 1, gemmlab runs on GPU 0"
    assert not ran(fake_gpu)


def test_an_unknown_object_is_refused_with_its_type_named():
    assert _refused(operands.read, object(), "B", "gemmlab.sgemm") == (
        "B must be a CUDA array (CuPy, torch, or a DLPack/__cuda_array_interface__ producer), got object")


class CaiAndDlpack(CAI):
    """A producer with both protocols (as Numba's arrays): read through its dict, which names its stream."""

    def __dlpack__(self, stream=None):
        raise AssertionError("read through DLPack: the stream the dict names is lost")


def test_a_producer_with_both_protocols_is_read_through_its_dict(fake_gpu):
    gemmlab.sgemm(CaiAndDlpack(4, 8, stream=11), CAI(8, 16))
    assert fake_gpu == [("new", (4, 16)), ("run", 11)]


def test_a_torch_view_is_transposed_only_with_strides_1_and_its_row_count():
    """(1, rows) is W.T of a contiguous W; (1, 8) for 4 rows is a column slice of a wider W.T,
    whose columns are 8 apart: read in place as W.T it would read the wrong elements."""
    assert operands.transposed(_op(Tensor((4, 5), (1, 4)), "torch", (4, 5), False, ptr=64))
    assert not operands.transposed(_op(Tensor((4, 5), (1, 8)), "torch", (4, 5), False, ptr=64))


def test_a_strided_cupy_cs_refusal_gives_its_strides_in_elements(fake_gpu):
    """CuPy keeps strides in bytes; the refusal says elements, as it says for any producer."""
    C = HotArray((4, 16), np.float32, strides=(0, 4))  # every row the same memory: a broadcast view
    C.flags.c_contiguous = False
    assert _refused(gemmlab.sgemm, CAI(4, 8), CAI(8, 16), C) == (
        "gemmlab.sgemm: C has strides (0, 1) (elements), which may let two of its elements share memory (a broadcast "
        "or overlapping view); C is written: pass an array whose elements are apart")
    assert not ran(fake_gpu)


def test_a_strided_bs_copy_is_made_on_the_calls_stream(fake_gpu, monkeypatch):
    """Made on B's producer's stream, the copy would race the kernel on the call's stream (and be
    freed on another stream than the one reading it)."""
    copies_on_streams(fake_gpu, monkeypatch)
    gemmlab.sgemm(CAI(4, 8, stream=11), CAI(8, 16, stream=12, strides=(128, 4)), CAI(4, 16, stream=11))
    assert fake_gpu == [("wait", 11, "for", 12), ("on", 11), ("copy", (8, 16)), ("run", 11), ("wait", 12, "for", 11)]


def test_a_strided_cs_working_copy_is_made_and_copied_back_on_the_calls_stream(fake_gpu, monkeypatch):
    """beta == 0: a new dense C (C's values unread) made on the call's stream, the result copied
    back into C there; C's producer waits for the call."""
    copies_on_streams(fake_gpu, monkeypatch)
    gemmlab.sgemm(CAI(4, 8, stream=11), CAI(8, 16, stream=11), CAI(4, 16, stream=12, strides=(128, 4)))
    assert fake_gpu == [("wait", 11, "for", 12), ("on", 11), ("new", (4, 16)), ("run", 11), ("on", 11),
                        ("wait", 12, "for", 11)]


def test_new_output_is_made_on_the_stream_it_is_given(fake_gpu, monkeypatch):
    copies_on_streams(fake_gpu, monkeypatch)
    like = operands.read(CAI(4, 8, stream=11), "A", "gemmlab.sgemm")
    out = operands.new_output(like, (4, 16), stream=9)
    assert (out.stream, out.shape, out.dtype, out.family) == (9, (4, 16), "fp32", "cai")
    assert fake_gpu == [("on", 9), ("new", (4, 16))]


def test_a_bf16_output_of_a_cupy_family_operand_is_refused_not_made_as_fp16(fake_gpu):
    like = operands.read(CAI(4, 8), "A", "gemmlab.hgemm")
    assert _refused(operands.new_output, like, (4, 16), dtype="bf16") == (
        "CuPy has no bfloat16 array: a bf16 C needs torch tensors")
    assert fake_gpu == []


def test_an_empty_sum_is_a_zeroed_result_not_an_uninitialised_one(fake_gpu):
    gemmlab.reduce_sum(CAI(0))
    assert fake_gpu == [("zeros", ())]


@pytest.mark.parametrize("beta, writes", [(0.0, [("fill", 0)]), (2.5, [("scale", 2.5)])])
def test_k_0_writes_beta_times_c_and_zeros_for_beta_0(fake_gpu, beta, writes):
    """torch's rule for K == 0: C = beta * C, and beta == 0 writes zeros (0 * NaN would keep a NaN)."""
    C = hot(4, 16)
    assert gemmlab.sgemm(hot(4, 0), hot(0, 16), C, beta=beta) is C
    assert C.writes == writes and not ran(fake_gpu)


def test_cupy_dtypes_are_read_by_their_own_names(monkeypatch):
    """_cupy_setup's table, set when CuPy is first needed: fp16 arrays are fp16 (read as fp32 an
    fp16 array would be read as half as many floats)."""
    import sys

    fake = types.ModuleType("cupy")
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(operands, "_cupy", None)
    monkeypatch.setattr(operands, "_cupy_names", {})
    operands._cupy_setup()
    assert operands._cupy is fake
    assert operands._cupy_names == {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16",
                                    np.dtype(np.float64): "fp64"}


# -- interface.py -----------------------------------------------------------------------------------

def _parse(**fields):
    cai = dict(shape=(2, 3), typestr="<f4", data=(64, False), version=3) | fields
    return interface.parse(cai, "A")


def _refusal(**fields) -> str:
    return _refused(_parse, **fields)


def test_a_pointer_or_stream_handle_below_2_to_the_64_is_taken_and_2_to_the_64_refused():
    assert _parse(data=(2**64 - 16, False), stream=2**64 - 1)[3:] == (2**64 - 16, False, 2**64 - 1)
    assert _refusal(data=(2**64, False)) == ("A: __cuda_array_interface__ data pointer 0x10000000000000000 for 6 "
                                             "elements")
    assert _refusal(stream=2**64) == ("A: __cuda_array_interface__ stream 18446744073709551616 is not a stream handle "
                                      "(an integer from 1; 0 is not allowed)")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_versions_0_to_3_are_read(version):
    assert _parse(version=version).shape == (2, 3)


@pytest.mark.parametrize("version, shown", [(True, "True"), (3.0, "3.0"), (4, "4"), (-1, "-1")])
def test_a_version_that_is_not_an_int_up_to_3_is_refused(version, shown):
    assert _refusal(version=version) == (f"A: __cuda_array_interface__ version {shown}; gemmlab reads versions "
                                         "up to 3")


@pytest.mark.parametrize("data", [(64, False, 0), "ab", (64,)])
def test_data_must_be_a_pointer_and_a_flag(data):
    assert _refusal(data=data) == f"A: __cuda_array_interface__ data must be (pointer, read-only), not {data!r}"


def test_an_empty_arrays_pointer_need_not_be_aligned():
    """An empty array reads nothing: its pointer (any value, or None) is not checked."""
    assert _parse(shape=(0, 3), data=(66, False)).ptr == 66


def test_strides_are_divided_by_the_element_size_of_the_type():
    assert _parse(typestr="<f2", strides=(6, 2)).strides == (3, 1)
    assert _parse(typestr="<f8", strides=(48, 8)).strides == (6, 1)
    assert _parse(typestr="=f2", strides=(6, 2)).strides == (3, 1)  # NumPy's spelling: its item size too
    assert _parse(typestr="<i2", strides=(6, 2)).strides == (3, 1)
    assert _refusal(strides=(6, 4)) == "A: strides (6, 4) (bytes) are not multiples of its 4-byte element"


def test_a_read_only_flag_is_read_by_its_truth():
    """NumPy's bool_ (what a producer that builds its dict from NumPy gives) is true, not `is True`."""
    assert _parse(data=(64, np.True_)).readonly is True and _parse(data=(64, 1)).readonly is True
    assert _parse(data=(64, np.False_)).readonly is False


def test_a_mask_array_is_refused_whatever_its_truth_value():
    """bool() of a mask of several elements raises (NumPy's 'ambiguous'): any mask but None is refused."""
    assert _refusal(mask=np.ones(4, bool)) == ("A: a masked array (__cuda_array_interface__ mask); gemmlab reads "
                                               "every element")


def test_refusals_of_a_dict_of_the_wrong_kind_say_what_they_got():
    assert _refused(interface.parse, [], "A") == "A: __cuda_array_interface__ must be a dict, not list"
    assert _refused(interface.parse, {"version": 3}, "B") == "B: __cuda_array_interface__ has no shape, typestr, data"
    assert _refusal(shape="48") == "A: __cuda_array_interface__ shape must be a tuple of integers, not '48'"


def test_a_typestr_numpy_cannot_parse_is_one_line():
    """NumPy raises SyntaxError for some strings (an unclosed bracket): still one BadArgumentError."""
    assert _refusal(typestr="i4,(") == "A: __cuda_array_interface__ typestr 'i4,(' is not a type"


def test_a_float64_array_is_fp64_and_refused_by_sgemm(fake_gpu):
    assert _refused(gemmlab.sgemm, CAI(4, 8, typestr="<f8"), CAI(8, 16)) == (
        "A has dtype float64; gemmlab.sgemm needs float32")


@pytest.mark.parametrize("shape, strides, shares", [
    ((16, 0), (0, 16), False),  # no elements in the second dimension: nothing to share
    ((2, 2, 2), (1, 2, 3), True),  # the third step lands inside the first two's reach (1 + 2)
    ((2, 2, 2), (1, 2, 4), False),
])
def test_may_share_counts_every_dimensions_reach(shape, strides, shares):
    assert interface.may_share(shape, strides) is shares


def test_the_view_of_an_empty_producer_array_needs_no_memory_whichever_dimension_is_0():
    from .test_cai_view import Producer, Recorder

    cp = Recorder()
    view = interface.cupy_view(Producer(shape=(4, 0), typestr="<f4"), 0, cp)
    assert view.shape == (4, 0) and view.memptr is None and cp.memory is None


# -- plans.py -----------------------------------------------------------------------------------------

def test_a_plan_on_unnamed_streams_runs_on_stream_given_without_ordering_anything(fake_gpu):
    """CuPy's current stream (7) is no producer's: a plan run on stream 5 waits for nothing."""
    plan = gemmlab.Matmul(CAI(4, 8), CAI(8, 16), CAI(4, 16))
    fake_gpu.clear()
    plan.execute(stream=5)
    plan.execute(stream=0)  # the legacy default stream is a stream, not "none given"
    assert fake_gpu == [("run", 5), ("run", 0)]


def test_rebound_operands_must_match_the_plans_shape_type_gpu_and_layout(fake_gpu, monkeypatch):
    plan = gemmlab.Matmul(CAI(4, 8, typestr="<f2"), CAI(8, 16, typestr="<f2"))
    assert _refused(plan.execute, A=CAI(4, 8)) == "A is 4x8 fp32; this plan was made for 4x8 fp16"
    assert _refused(plan.execute, B=CAI(8, 8, typestr="<f2")) == "B is 8x8 fp16; this plan was made for 8x16 fp16"
    assert _refused(plan.execute, A=CAI(4, 8, typestr="<f2", strides=(32, 2))) == (
        "A must be contiguous and 16-byte aligned for a plan (pass a contiguous copy once, e.g. A.contiguous())")
    monkeypatch.setattr(operands._cupy.cuda.runtime, "pointerGetAttributes",
                        lambda ptr: types.SimpleNamespace(device=1))
    assert _refused(plan.execute, A=CAI(4, 8, typestr="<f2")) == "A is on GPU 1, gemmlab runs on GPU 0"
    assert not ran(fake_gpu)


@pytest.mark.parametrize("A, B, says", [
    (CAI(0, 4, 8), CAI(0, 8, 16), "empty problem 4x16x8x0: plans need M, N, K (and batch) >= 1"),
    (CAI(4, 0), CAI(0, 16), "empty problem 4x16x0: plans need M, N, K (and batch) >= 1"),
])
def test_a_plan_of_an_empty_problem_is_refused_with_its_dimensions(fake_gpu, A, B, says):
    assert _refused(gemmlab.Matmul, A, B) == says


@pytest.mark.parametrize("which", ["A", "B", "C"])
def test_a_plan_refuses_a_strided_operand_it_would_have_to_copy(fake_gpu, which):
    ops = dict(A=CAI(4, 8), B=CAI(8, 16), C=CAI(4, 16))
    ops[which] = CAI(*ops[which].cai["shape"], strides=(128, 4))
    assert _refused(gemmlab.Matmul, ops["A"], ops["B"], ops["C"]) == (
        f"{which} must be contiguous and 16-byte aligned for a plan (pass a contiguous copy once, e.g. "
        f"{which}.contiguous())")


@pytest.mark.parametrize("which", ["A", "B"])
def test_a_plans_c_overlapping_a_or_b_is_refused_when_made(fake_gpu, which):
    A, B = CAI(16, 16, ptr=1 << 40), CAI(16, 16, ptr=(1 << 40) + 4096)
    C = CAI(16, 16, ptr=(A if which == "A" else B).cai["data"][0] + 64)
    assert _refused(gemmlab.Matmul, A, B, C) == (f"gemmlab.Matmul (sgemm): C overlaps {which} in memory; a plan "
                                                 f"writes C in place while it reads {which}: pass a separate C")


def test_a_plans_own_result_passed_back_as_a_is_refused_with_the_fix(fake_gpu, monkeypatch):
    monkeypatch.setattr(operands._cupy, "empty", lambda shape, dtype: hot(*shape, dtype=dtype))
    plan = gemmlab.Matmul(CAI(8, 8), CAI(8, 8))
    assert _refused(plan.execute, A=plan.result) == (
        "gemmlab.Matmul (sgemm): C (the plan's own result) overlaps A in memory; a plan writes C in place while "
        "it reads A: pass a copy of it as A")


def test_a_plan_with_one_transposed_operand_and_a_copying_executor_is_refused(made):
    made.fast, made.why = False, "cuBLAS is not available"
    assert _refused(gemmlab.Matmul, hot(8, 8), hot_t(8, 8)) == (
        "cuBLAS is not available; a plan never copies: pass contiguous operands instead")


def test_alpha_and_beta_given_one_at_a_time_are_kept_and_launched(made):
    plan = gemmlab.Matmul(CAI(4, 8), CAI(8, 16), C := CAI(4, 16), alpha=2.0, beta=0.5)
    ptrs = (plan._a.ptr, plan._b.ptr, C.cai["data"][0])
    plan.execute(alpha=3.0)
    plan.execute(beta=0.25)
    plan.execute()
    assert (plan.alpha, plan.beta) == (3.0, 0.25)
    assert [r[3:] for r in made] == [ptrs + (3.0, 0.5), ptrs + (3.0, 0.25), ptrs + (3.0, 0.25)]


def test_a_plan_without_c_takes_beta_once_a_c_is_given(made):
    plan = gemmlab.Matmul(CAI(4, 8), CAI(8, 16))
    says = ("gemmlab.Matmul (sgemm): beta != 0 reads C, and this plan was made without one: pass C "
            "(C=plan.result adds to its last result)")
    assert _refused(plan.execute, beta=1.0) == says
    C = CAI(4, 16)
    plan.execute(C=C, beta=1.0)  # beta with the C given in the same execute
    plan.execute(beta=2.0)  # and later: that C is the plan's now
    assert plan.result is C and [r[-1] for r in made] == [1.0, 2.0]
    assert _refused(gemmlab.Matmul(CAI(4, 8), CAI(8, 16)).execute, beta="2") == (
        "gemmlab.Matmul (sgemm): beta must be a real number, not str")


def test_a_plans_result_is_its_c(fake_gpu):
    C = CAI(4, 16)
    plan = gemmlab.Matmul(CAI(4, 8), CAI(8, 16), C)
    assert plan.result is C and plan.execute() is C


def test_an_op_that_is_no_gemm_is_refused_in_one_line(fake_gpu):
    assert _refused(gemmlab.Matmul, CAI(4, 8), CAI(8, 16), op="xgemm") == (
        "op must be sgemm, hgemm or bgemm, not 'xgemm'")


def test_a_sum_plan_refuses_an_empty_or_strided_x(fake_gpu):
    assert _refused(gemmlab.Sum, CAI(0)) == ("x is empty: a Sum plan needs at least one element (reduce_sum(x) "
                                             "gives 0)")
    assert _refused(gemmlab.Sum, CAI(8, strides=(8,))) == ("x must be contiguous and 16-byte aligned for a plan "
                                                           "(pass a contiguous copy once, e.g. x.contiguous())")


def test_a_sum_plan_keeps_a_rebound_x_and_reads_it_into_its_own_result(made):
    plan = gemmlab.Sum(CAI(100))
    out = plan._out.ptr
    x2 = CAI(100)
    plan.execute(x2)
    plan.execute()
    assert [r[3:] for r in made] == [(x2.cai["data"][0], out)] * 2


def test_a_plans_explain_names_its_problem(fake_gpu):
    text = gemmlab.Matmul(CAI(4, 8, typestr="<f2"), CAI(8, 16, typestr="<f2"), CAI(4, 16, typestr="<f2")).explain()
    assert text.splitlines()[0] == "gemmlab.Matmul (hgemm) 4x16x8 fp16, C fp16 on NVIDIA H100 80GB HBM3 (sm_90)"
    text = gemmlab.Matmul(CAI(3, 4, 8), CAI(3, 8, 16)).explain()
    assert text.splitlines()[0] == "gemmlab.Matmul (bgemm) 4x16x8 x3 batches fp32 on NVIDIA H100 80GB HBM3 (sm_90)"
    text = gemmlab.Matmul(hot(8, 8), hot_t(8, 8)).explain()
    assert text.splitlines()[0] == ("gemmlab.Matmul (sgemm) 8x8x8 fp32, layout nt (read in place) on NVIDIA H100 "
                                    "80GB HBM3 (sm_90)")


def test_a_plans_cublas_replay_keeps_its_graphs_past_the_plain_calls_bound(made, monkeypatch):
    from gemmlab.cuda.graph_replay import GraphReplay

    make = core.new_executor

    def with_replay(*args):
        ex = make(*args)
        ex.call = GraphReplay(lambda *a: None)
        return ex
    monkeypatch.setattr(core, "new_executor", with_replay)
    plan = gemmlab.Matmul(CAI(4, 8), CAI(8, 16))
    assert plan._executor.call.bounded is False


# -- calls.py: the CuPy hot path and its cache ------------------------------------------------------

def _went_general(fake_gpu) -> bool:
    """The hot path makes a new C with cupy_refs' ndarray (no event) and keeps the call; the
    general path makes it with cupy.empty (a "new" event) and keeps nothing in the hot cache."""
    return ("new", (4, 16)) in fake_gpu and hot_calls() == []


def test_the_cupy_hot_path_runs_a_plain_call_and_serves_the_next_from_its_cache(cupy_hot):
    first = gemmlab.sgemm(A := hot(4, 8), B := hot(8, 16))
    second = gemmlab.sgemm(A, B)
    assert type(first) is HotArray and (first.shape, first.dtype) == ((4, 16), np.float32)
    assert type(second) is HotArray and (second.shape, second.dtype) == ((4, 16), np.float32)
    assert first is not second and len(hot_calls()) == 1
    made = ("sgemm", "fp32", (4, 16, 8), None, {}, (False, False), "fp32")
    assert cupy_hot == [(made, 7, 7, A.data.ptr, B.data.ptr, first.data.ptr, 1.0, 0.0),
                        (made, 7, 7, A.data.ptr, B.data.ptr, second.data.ptr, 1.0, 0.0)]


@pytest.mark.parametrize("A, B, says", [
    (hot(4, 8), hot(9, 16), "A is 4x8 but B is 9x16: inner dimensions differ"),
    (hot(4, 8), hot(8, 16, device=1), "B is on GPU 1, gemmlab runs on GPU 0"),
])
def test_the_cupy_hot_path_leaves_refusals_to_the_general_path(cupy_hot, fake_gpu, A, B, says):
    assert _refused(gemmlab.sgemm, A, B) == says
    assert not ran(fake_gpu) and hot_calls() == []


def test_the_cupy_hot_path_leaves_k_0_to_the_general_path(cupy_hot, fake_gpu):
    C = gemmlab.sgemm(hot(4, 0), hot(0, 16))
    assert fake_gpu == [("new", (4, 16))] and C.writes == [("fill", 0)]  # zeros: no kernel for K == 0


def test_the_cupy_hot_path_leaves_an_8_byte_aligned_a_to_the_general_paths_copy(cupy_hot, fake_gpu, monkeypatch):
    copies(fake_gpu, monkeypatch)
    gemmlab.sgemm(hot(4, 8, ptr=(1 << 40) + 8), hot(8, 16))
    assert fake_gpu == [("new", (4, 16)), ("copy", (4, 8)), ("run", 7)] and hot_calls() == []


def test_the_cupy_hot_path_leaves_a_c_of_another_shape_to_the_general_paths_refusal(cupy_hot, fake_gpu):
    assert _refused(gemmlab.sgemm, hot(4, 8), hot(8, 16), hot(4, 15)) == "C is 4x15, expected 4x16"
    assert not ran(fake_gpu)


def test_the_cupy_hot_path_leaves_a_strided_c_to_the_general_paths_working_copy(cupy_hot, fake_gpu):
    C = HotArray((4, 16), np.float32, strides=(128, 4))
    C.flags.c_contiguous = False
    assert gemmlab.sgemm(hot(4, 8), hot(8, 16), C) is C
    assert fake_gpu == [("new", (4, 16)), ("run", 7)] and C.writes == [("copy", (4, 16))] and hot_calls() == []


def test_the_cupy_hot_path_leaves_a_c_type_out_dtype_contradicts_to_the_general_paths_refusal(cupy_hot, fake_gpu):
    A, B = hot(4, 8, dtype=np.float16), hot(8, 16, dtype=np.float16)
    assert _refused(gemmlab.hgemm, A, B, hot(4, 16), out_dtype="float16") == "C is float32 but out_dtype is float16"
    assert not ran(fake_gpu)


def test_the_cupy_hot_path_never_launches_an_executor_of_the_runner_path(cupy_hot, fake_gpu):
    cupy_hot.fast = False
    gemmlab.sgemm(hot(4, 8), hot(8, 16))
    assert _went_general(fake_gpu)


def _made_for(runs) -> list:
    return [(r[0][2], r[0][3], r[0][4], r[0][5], r[0][6]) for r in runs]  # dims, impl, params, layout, C type


def test_the_cupy_hot_caches_key_holds_cs_type(cupy_hot):
    A, B = hot(4, 8, dtype=np.float16), hot(8, 16, dtype=np.float16)
    gemmlab.hgemm(A, B, hot(4, 16))
    gemmlab.hgemm(A, B, hot(4, 16, dtype=np.float16))
    assert [m[4] for m in _made_for(cupy_hot)] == ["fp32", "fp16"]


def test_the_cupy_hot_caches_key_holds_out_dtype(cupy_hot):
    A, B = hot(4, 8, dtype=np.float16), hot(8, 16, dtype=np.float16)
    first, second = gemmlab.hgemm(A, B), gemmlab.hgemm(A, B, out_dtype="float16")
    assert (first.dtype, second.dtype) == (np.float32, np.float16)
    assert [m[4] for m in _made_for(cupy_hot)] == ["fp32", "fp16"]


def test_the_cupy_hot_caches_key_holds_the_layout(cupy_hot):
    gemmlab.sgemm(hot(8, 8), hot(8, 8))
    gemmlab.sgemm(hot(8, 8), hot_t(8, 8))
    gemmlab.sgemm(hot_t(8, 8), hot(8, 8))
    assert [m[3] for m in _made_for(cupy_hot)] == [(False, False), (False, True), (True, False)]


def test_the_cupy_hot_caches_key_holds_impl(cupy_hot):
    gemmlab.sgemm(A := hot(64, 64), B := hot(64, 64))
    gemmlab.sgemm(A, B, impl="vectorize")
    assert [m[1] for m in _made_for(cupy_hot)] == [None, "vectorize"]


def test_a_call_with_params_is_neither_served_from_nor_kept_in_the_hot_cache(cupy_hot):
    A, B = hot(64, 64), hot(64, 64)
    gemmlab.sgemm(A, B, impl="vectorize", params={"BN": 64})
    gemmlab.sgemm(A, B, impl="vectorize")
    gemmlab.sgemm(A, B, impl="vectorize", params={"BN": 64})
    assert [m[2] for m in _made_for(cupy_hot)] == [{"BN": 64}, {}, {"BN": 64}]


def test_an_executor_owning_a_workspace_is_not_used_on_another_stream(cupy_hot):
    cupy_hot.owns_workspace = True
    A, B = hot(4, 8), hot(8, 16)
    gemmlab.sgemm(A, B)
    cupy_hot_stream(9)
    gemmlab.sgemm(A, B)
    assert [(r[1], r[2]) for r in cupy_hot] == [(7, 7), (9, 9)]  # each made for the stream it runs on


def cupy_hot_stream(ptr):
    frameworks.cupy_refs["stream"] = lambda: types.SimpleNamespace(ptr=ptr)  # restored by monkeypatch.setitem


@pytest.mark.parametrize("cached", [False, True])
def test_a_hot_c_overlapping_b_is_written_through_a_working_copy(cupy_hot, fake_gpu, cached):
    A, B = hot(4, 8), hot(8, 16, ptr=1 << 40)
    if cached:
        gemmlab.sgemm(A, B, hot(4, 16))
        fake_gpu.clear()
    C = hot(4, 16, ptr=(1 << 40) + 64)
    assert gemmlab.sgemm(A, B, C) is C
    assert fake_gpu == [("new", (4, 16)), ("run", 7)] and C.writes == [("copy", (4, 16))]


def test_a_hot_fp32_c_is_apart_from_fp16_inputs_only_past_its_own_4_byte_elements(cupy_hot, fake_gpu):
    """C's bytes are M * N * 4 (its own type), not M * N * 2 (the inputs'): a C ending 64 bytes
    into A overlaps it."""
    A = hot(4, 8, dtype=np.float16, ptr=1 << 40)
    C = hot(4, 16, ptr=(1 << 40) - 192)
    assert gemmlab.hgemm(A, hot(8, 16, dtype=np.float16), C) is C
    assert fake_gpu == [("new", (4, 16)), ("run", 7)] and C.writes == [("copy", (4, 16))]


# -- calls.py: the general path -----------------------------------------------------------------------

def test_an_empty_batch_runs_nothing_and_returns_an_empty_c(fake_gpu):
    C = gemmlab.bgemm(CAI(0, 4, 8), CAI(0, 8, 16))
    assert C.shape == (0, 4, 16) and fake_gpu == [("new", (0, 4, 16))]


def test_a_transposed_view_is_copied_row_major_where_the_executor_cannot_read_it_in_place(made, fake_gpu, monkeypatch):
    copies(fake_gpu, monkeypatch)
    made.fast = False
    gemmlab.sgemm(A := hot(8, 8), hot_t(8, 8))
    assert fake_gpu == [("new", (8, 8)), ("copy", (8, 8)), ("run", 7)]
    assert [m[3] for m in _made_for(made)] == [(False, False)] and made[0][3] == A.data.ptr


@pytest.mark.parametrize("a_t, b_t", [(True, False), (False, True), (True, True)])
def test_transposed_views_are_read_in_place_by_the_general_path(made, fake_gpu, monkeypatch, a_t, b_t):
    copies(fake_gpu, monkeypatch)
    A = hot_t(8, 8) if a_t else hot(8, 8)
    B = hot_t(8, 8) if b_t else hot(8, 8)
    gemmlab.sgemm(A, B)
    assert fake_gpu == [("new", (8, 8)), ("run", 7)]
    assert [m[3] for m in _made_for(made)] == [(a_t, b_t)] and made[0][3:5] == (A.data.ptr, B.data.ptr)


@pytest.mark.parametrize("beta, first", [(0.5, ("copy", (4, 16))), (0.0, ("new", (4, 16)))])
def test_a_strided_cs_working_copy_holds_its_values_where_beta_reads_them(fake_gpu, monkeypatch, beta, first):
    copies(fake_gpu, monkeypatch)
    C = HotArray((4, 16), np.float32, strides=(128, 4))
    C.flags.c_contiguous = False
    assert gemmlab.sgemm(hot(4, 8), hot(8, 16), C, beta=beta) is C
    assert fake_gpu == [first, ("run", 7)] and C.writes == [("copy", (4, 16))]


def test_a_c_overlapping_b_is_written_through_a_working_copy_by_the_general_path(fake_gpu):
    B = hot(8, 16, ptr=1 << 40)
    C = hot(4, 16, ptr=(1 << 40) + 64)
    assert gemmlab.sgemm(hot(4, 8), B, C) is C
    assert fake_gpu == [("new", (4, 16)), ("run", 7)] and C.writes == [("copy", (4, 16))]


def test_the_general_path_returns_the_c_given_itself(fake_gpu):
    C = CAI(4, 16)
    assert gemmlab.sgemm(CAI(4, 8), CAI(8, 16), C) is C


def test_params_without_impl_are_refused_by_a_call(fake_gpu):
    assert _refused(gemmlab.sgemm, CAI(64, 64), CAI(64, 64), params={"BN": 64}) == (
        "gemmlab.sgemm: params {'BN': 64} need impl=, the implementation they belong to (gemmlab.explain names "
        "the one a call without them runs)")
    assert not ran(fake_gpu)


# -- calls.py: the torch hot path, over stand-ins for torch's tensors --------------------------------

class TorchDtype:
    def __init__(self, name: str, itemsize: int):
        self.name, self.itemsize = name, itemsize

    def __str__(self):
        return f"torch.{self.name}"


F32, F16 = TorchDtype("float32", 4), TorchDtype("float16", 2)
_torch_addresses = iter(range(1 << 44, 1 << 45, 1 << 20))


class CudaTensor:
    """What the torch hot path and operands._read_torch read of a CUDA tensor; new outputs and
    copies into it are recorded in `events` (the test's fake_gpu)."""

    __module__ = "torch"
    is_cuda = True
    events: list = []

    def __init__(self, *shape, dtype=F32, ptr=None, device=0):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device
        self.ptr = next(_torch_addresses) if ptr is None else ptr
        self.copied = None

    def data_ptr(self):
        return self.ptr

    def get_device(self):
        return self.device

    def is_contiguous(self):
        return True

    def element_size(self):
        return self.dtype.itemsize

    def new_empty(self, shape, dtype):
        self.events.append(("new", tuple(shape)))
        return CudaTensor(*shape, dtype=dtype)

    def copy_(self, src):
        self.copied = src


@pytest.fixture
def torch_hot(made, fake_gpu, monkeypatch):
    """The torch hot path on, over CudaTensors, torch's current stream 7; the general path reads
    them as torch tensors (operands._read_torch) without torch."""
    refs = dict(tensor=CudaTensor, f32=F32, stream=lambda device: 7,
                empty_like=lambda t: CudaTensor(*t.shape, dtype=t.dtype),
                dtypes={"sgemm": {F32: "fp32"}, "hgemm": {F32: "tf32", F16: "fp16"}})
    for key, value in refs.items():
        monkeypatch.setitem(frameworks.torch_refs, key, value)

    def new_torch_output(key, shape, dtype, like):
        calls.torch_outputs[key] = CudaTensor(*shape, dtype=dtype)
        return CudaTensor(*shape, dtype=dtype)
    monkeypatch.setattr(calls, "torch_outputs", {})
    monkeypatch.setattr(calls, "new_torch_output", new_torch_output)
    monkeypatch.setattr(operands, "_torch_stream", lambda device: 7)
    monkeypatch.setattr(operands, "_torch_names", {F32: "fp32", F16: "fp16"})
    monkeypatch.setattr(operands, "_TORCH_DTYPES", {})
    monkeypatch.setattr(CudaTensor, "events", fake_gpu)
    return made


@pytest.mark.parametrize("A, B, C, says", [
    (CudaTensor(4, 8), CudaTensor(9, 16), None, "A is 4x8 but B is 9x16: inner dimensions differ"),
    (CudaTensor(4, 8), CudaTensor(8, 16, device=1), None, "B is on GPU 1, gemmlab runs on GPU 0"),
    (CudaTensor(4, 8), CudaTensor(8, 16), CudaTensor(4, 15), "C is 4x15, expected 4x16"),
    (CudaTensor(4, 8, dtype=F16), CudaTensor(8, 16), None, "A is fp16 but B is fp32: both must have one dtype"),
])
def test_the_torch_hot_path_leaves_refusals_to_the_general_path(torch_hot, fake_gpu, A, B, C, says):
    assert _refused(gemmlab.hgemm, A, B, C) == says
    assert not ran(fake_gpu) and hot_calls() == []


def test_the_torch_hot_caches_key_holds_cs_type(torch_hot):
    A, B = CudaTensor(4, 8, dtype=F16), CudaTensor(8, 16, dtype=F16)
    gemmlab.hgemm(A, B, CudaTensor(4, 16))
    gemmlab.hgemm(A, B, CudaTensor(4, 16, dtype=F16))
    assert [m[4] for m in _made_for(torch_hot)] == ["fp32", "fp16"]
    assert len(hot_calls()) == 2  # both served by the hot path (a general path's call is not kept)


def test_a_torch_call_with_params_is_not_served_from_the_hot_cache(torch_hot):
    A, B, C = CudaTensor(64, 64), CudaTensor(64, 64), CudaTensor(64, 64)
    gemmlab.sgemm(A, B, C, impl="vectorize")
    gemmlab.sgemm(A, B, C, impl="vectorize", params={"BN": 64})
    assert [m[2] for m in _made_for(torch_hot)] == [{}, {"BN": 64}]


def test_a_torch_c_overlapping_b_is_written_through_a_working_copy(torch_hot, fake_gpu):
    B = CudaTensor(8, 16, ptr=1 << 40)
    C = CudaTensor(4, 16, ptr=(1 << 40) + 64)
    assert gemmlab.sgemm(CudaTensor(4, 8), B, C) is C
    assert fake_gpu == [("new", (4, 16)), ("run", 7)] and C.copied is not None and hot_calls() == []
