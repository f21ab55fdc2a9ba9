"""Session 34's sweep of the plans (gemmlab.Matmul, gemmlab.Sum) with bad inputs and odd
semantics, the GPU faked (fake_api_gpu). Each test asserts what the plan should do; on the tree
swept (42990c0) every test here failed: a Sum left x's producer unordered after it, a plan over
__cuda_array_interface__ operands launched on the stream of the A it was made with (not the one
the new A names, nor CuPy's current one), a plan's explain named a database it never read, and
four refusals said the wrong thing or nothing."""
from __future__ import annotations

import decimal
import types

import numpy as np
import pytest

import gemmlab
from gemmlab.api import operands, streams, tuning
from gemmlab.errors import BadArgumentError

from .fake_api_gpu import CAI, FakeCupyArray, fake_gpu  # noqa: F401  (the fixture)


class CupyArray(FakeCupyArray):
    """Read as a CuPy array (operands._reader_for looks at the module)."""
    __module__ = "cupy._core.fake"


def cupy_T(rows, cols):
    """A CuPy F-order array (W.T of a row-major W): what a plan reads in place."""
    x = CupyArray((rows, cols), np.float32)
    x.flags.c_contiguous, x.flags.f_contiguous = False, True
    return x


def cupy_current(monkeypatch, ptr):
    monkeypatch.setattr(operands._cupy.cuda, "get_current_stream", lambda: types.SimpleNamespace(ptr=ptr))


# 1. Sum never makes x's producer stream wait for it --------------------------------------------

def test_sum_plan_orders_xs_producer_after_the_sum_as_matmul_does(fake_gpu):
    s = gemmlab.Sum(CAI(100, stream=11))
    fake_gpu.clear()
    s.execute(stream=5)
    # observed: [('wait', 5, 'for', 11), ('run', 5)]: stream 11 may overwrite x while the sum reads it
    assert fake_gpu == [("wait", 5, "for", 11), ("run", 5), ("wait", 11, "for", 5)]


# 2. a plan over __cuda_array_interface__ operands launches on a stream fixed at construction ------

def test_rebound_operands_naming_another_stream_run_there_as_the_call_does(fake_gpu):
    plan = gemmlab.Matmul(CAI(4, 8, stream=11), CAI(8, 16, stream=11), CAI(4, 16, stream=11))
    fake_gpu.clear()
    plan.execute(A=CAI(4, 8, stream=12), B=CAI(8, 16, stream=12), C=CAI(4, 16, stream=12))
    gemmlab.sgemm(CAI(4, 8, stream=12), CAI(8, 16, stream=12), CAI(4, 16, stream=12))
    # observed: [('wait', 11, 'for', 12), ('run', 11), ('wait', 12, 'for', 11), ('run', 12)]
    assert fake_gpu == [("run", 12), ("run", 12)]


def test_rebound_operands_on_a_captured_stream_are_launched_into_the_capture(fake_gpu):
    plan = gemmlab.Matmul(CAI(4, 8, stream=11), CAI(8, 16, stream=11), CAI(4, 16, stream=11))
    fake_gpu.clear()
    fake_gpu.capturing.add(12)  # the user captures the stream the new operands name
    plan.execute(A=CAI(4, 8, stream=12), B=CAI(8, 16, stream=12), C=CAI(4, 16, stream=12))
    # observed: the launch goes to uncaptured stream 11, forked from and joined to the capture by events
    assert fake_gpu == [("run", 12)]


def test_sum_plan_rebound_x_runs_on_its_stream(fake_gpu):
    s = gemmlab.Sum(CAI(100, stream=11))
    fake_gpu.clear()
    s.execute(CAI(100, stream=12))
    gemmlab.reduce_sum(CAI(100, stream=12))
    assert [e for e in fake_gpu if e[0] == "run"] == [("run", 12), ("run", 12)]  # observed: ('run', 11) first


def test_a_plan_without_named_streams_follows_cupys_current_stream_at_execute(fake_gpu, monkeypatch):
    plan = gemmlab.Matmul(CAI(4, 8), CAI(8, 16), CAI(4, 16))  # made while CuPy's current stream is 7
    cupy_current(monkeypatch, 9)
    fake_gpu.clear()
    plan.execute()
    gemmlab.sgemm(CAI(4, 8), CAI(8, 16), CAI(4, 16))
    assert fake_gpu == [("run", 9), ("run", 9)]  # observed: the plan on 7, the call on 9


def test_a_cupy_array_rebound_into_a_cai_plan_is_ordered_with_cupys_stream(fake_gpu, monkeypatch):
    plan = gemmlab.Matmul(CAI(4, 8), CAI(8, 16), CAI(4, 16))
    cupy_current(monkeypatch, 9)  # the new A is written on CuPy's stream 9
    fake_gpu.clear()
    plan.execute(A=CupyArray((4, 8), np.float32))
    # observed: [('run', 7)]: nothing orders the launch after A's writes on stream 9
    assert fake_gpu in ([("run", 9)], [("wait", 7, "for", 9), ("run", 7), ("wait", 9, "for", 7)])


# 3. use_tuning after a plan was made -------------------------------------------------------------

def test_a_plans_explain_names_the_tuning_its_choice_was_made_with(fake_gpu, monkeypatch, tmp_path):
    from gemmlab.store import ResultStore

    monkeypatch.delenv("GEMMLAB_DB", raising=False)
    db = tmp_path / "tuned.db"
    ResultStore(db)
    plan = gemmlab.Matmul(CAI(64, 64), CAI(64, 64), impl="vectorize")  # no database named yet
    monkeypatch.setattr(tuning, "tuned_params", lambda spec, problem, gpu: {"BN": 64})  # what db holds
    gemmlab.use_tuning(db)
    try:
        fresh = gemmlab.Matmul(CAI(64, 64), CAI(64, 64), impl="vectorize")
        assert "parameters from the tuning database" in fresh.explain()  # a new plan takes them
        text = plan.explain()
        # observed: "tuning:  .../tuned.db (use_tuning)" although this plan never looked at it
        assert str(db) not in text and "no database named" in text
    finally:
        gemmlab.use_tuning(None)


# 4. refusals that are not one clear line --------------------------------------------------------

def test_a_0d_sum_plan_names_its_shape_in_a_refusal(fake_gpu):
    s = gemmlab.Sum(CAI())
    # observed: "x is 1 fp32; this plan was made for  fp32"
    with pytest.raises(BadArgumentError, match="x is 1 fp32; this plan was made for 0-d fp32"):
        s.execute(CAI(1))


def test_a_misaligned_transposed_view_is_refused_for_its_alignment(fake_gpu):
    plan = gemmlab.Matmul(CupyArray((64, 64), np.float32), cupy_T(64, 64))
    assert plan.layout == (False, True)
    B = cupy_T(64, 64)
    B.data.ptr += 4
    # observed: "B: this plan was made for a transposed view (W.T); pass one again" (it was one)
    with pytest.raises(BadArgumentError, match="and this B is not one, and its address is not 16-byte aligned"):
        plan.execute(B=B)


def test_a_stream_object_that_fails_is_one_line():
    class Raising:
        def __cuda_stream__(self):
            raise AttributeError("stream destroyed")

    with pytest.raises(BadArgumentError, match="gives no stream handle .AttributeError: stream destroyed"):
        streams.handle(Raising())  # observed: the AttributeError itself


def test_a_stream_handle_that_is_not_an_integer_is_refused():
    class FloatHandle:
        cuda_stream = 3.7

    with pytest.raises(BadArgumentError, match="gives no stream handle"):  # observed: handle 3 (int() truncated)
        streams.handle(FloatHandle())


@pytest.mark.parametrize("alpha", [np.longdouble("1e400"), decimal.Decimal("1e400")])
def test_a_scalar_past_a_double_is_refused_whatever_its_type(fake_gpu, alpha):
    with pytest.raises(BadArgumentError, match="past the range"):  # observed: alpha == inf, as 10**400 is refused
        gemmlab.Matmul(CAI(4, 8), CAI(8, 16), alpha=alpha)


# a review of the fixes above ----------------------------------------------------------------------

def _cuda_fork_rule(fake_gpu, monkeypatch):
    """As CUDA does: a stream that waits on an event recorded in a capture joins that capture."""
    def order(first, then):
        fake_gpu.append(("wait", then, "for", first))
        if first in fake_gpu.capturing:
            fake_gpu.capturing.add(then)
    monkeypatch.setattr(streams, "_order", order)


@pytest.mark.parametrize("run", ["sum plan", "matmul plan", "call"])
def test_a_producers_stream_under_capture_is_refused_not_forked_into(fake_gpu, monkeypatch, run):
    """The wait pulled the launch stream into the producer's capture, where the call was captured
    and never joined back (the capture then failed to end, cudaErrorStreamCaptureUnjoined)."""
    _cuda_fork_rule(fake_gpu, monkeypatch)
    if run == "sum plan":
        plan = gemmlab.Sum(CAI(100, stream=12))
        go = lambda: plan.execute(stream=11)  # noqa: E731
    elif run == "matmul plan":
        plan = gemmlab.Matmul(CAI(4, 8, stream=11), CAI(8, 16, stream=12))
        go = plan.execute
    else:
        go = lambda: gemmlab.sgemm(CAI(4, 8, stream=11), CAI(8, 16, stream=12))  # noqa: E731
    fake_gpu.clear()
    fake_gpu.capturing.add(12)
    with pytest.raises(BadArgumentError, match="names stream 0xc, which is being captured, but the call runs on stream 0xb"):
        go()
    assert [e for e in fake_gpu if e[0] in ("run", "wait")] == []


def test_a_refused_rebind_onto_a_captured_producers_stream_keeps_the_plan_as_it_was(fake_gpu):
    plan = gemmlab.Matmul(CAI(4, 8, stream=11), CAI(8, 16, stream=11))
    old_b = plan._b
    fake_gpu.capturing.add(12)
    with pytest.raises(BadArgumentError, match="being captured"):
        plan.execute(B=CAI(8, 16, stream=12))
    assert plan._b is old_b and plan._producers == (11,)
    fake_gpu.clear()
    plan.execute()
    assert fake_gpu == [("run", 11)]


def test_a_sum_over_x_on_the_launch_stream_orders_nothing(fake_gpu):
    plan = gemmlab.Sum(CAI(100, stream=11))
    fake_gpu.clear()
    plan.execute()
    plan.execute(stream=11)
    assert fake_gpu == [("run", 11), ("run", 11)]


def test_a_misaligned_row_major_b_is_not_called_a_transposed_view(fake_gpu):
    plan = gemmlab.Matmul(CupyArray((64, 64), np.float32), cupy_T(64, 64))
    B = CupyArray((64, 64), np.float32)  # row-major: no transposed view at all
    B.data.ptr += 4
    with pytest.raises(BadArgumentError, match=r"and this B is not one, and its address is not 16-byte aligned"):
        plan.execute(B=B)
    with pytest.raises(BadArgumentError, match=r"and this B is not one$"):
        plan.execute(B=CupyArray((64, 64), np.float32))


def test_numpys_type_codes_name_an_out_dtype_as_numpys_dtypes_do(fake_gpu):
    from gemmlab.api import checks

    assert [checks.out_name(code) for code in ("f2", "<f2", "e", np.dtype("f2"))] == ["fp16"] * 4
    assert [checks.out_name(code) for code in ("f4", "<f4", "f")] == ["fp32"] * 3
    with pytest.raises(BadArgumentError, match="out_dtype must be"):
        checks.out_name(">f2")  # big-endian: not what the kernels write


def test_a_raw_c_void_p_handle_is_a_stream():
    import ctypes

    assert streams.handle(ctypes.c_void_p(0x1234)) == 0x1234
    assert streams.handle(ctypes.c_void_p(None)) == 0
