"""Session 33's bad-input sweep of the Python API: each case here was accepted (and ran on a wrong
reading of the array, or wrote where it must not), dropped an argument without a word, or raised
something other than one BadArgumentError line. The GPU is faked (fake_api_gpu): the checks run
as on a GPU, and what reached the device side is recorded."""
from __future__ import annotations

import ctypes
import io

import numpy as np
import pytest

import gemmlab
from gemmlab.api import checks, interface, streams
from gemmlab.errors import BadArgumentError

from .fake_api_gpu import CAI, fake_gpu, ran as _ran  # noqa: F401  (the fixture)

H100 = "NVIDIA H100 80GB HBM3"


# -- the __cuda_array_interface__ dict ------------------------------------------------------------

@pytest.mark.parametrize("fields, says", [
    (dict(strides=(33, 4)), "not multiples of its 4-byte element"),       # was floored to 8 and read as dense
    (dict(strides=(34, 5)), "not multiples"),
    (dict(strides=(32,)), r"strides \(32,\) for a 2-D shape"),               # zip cut it short
    (dict(mask=object()), "masked array"),
    (dict(version=99), "version 99"),
    (dict(stream=0), "not a stream handle"),                              # version 3 forbids 0
    (dict(stream="abc"), "not a stream handle"),
    (dict(stream=True), "not a stream handle"),
    (dict(ptr=0), "data pointer 0x0 for 32 elements"),
    (dict(ptr=(1 << 40) + 1), "not a multiple of its 4-byte element"),
])
def test_a_malformed_interface_is_refused_before_any_launch(fake_gpu, fields, says):
    with pytest.raises(BadArgumentError, match=says):
        gemmlab.sgemm(CAI(4, 8, **fields), CAI(8, 16))
    assert not _ran(fake_gpu)


@pytest.mark.parametrize("missing", ["shape", "typestr", "data"])
def test_an_interface_without_a_field_is_one_line(fake_gpu, missing):
    x = CAI(4, 8)
    del x.cai[missing]
    with pytest.raises(BadArgumentError, match=f"has no {missing}"):
        gemmlab.sgemm(x, CAI(8, 16))


def test_dimensions_are_whole_and_not_negative(fake_gpu):
    with pytest.raises(BadArgumentError, match="negative dimension"):
        gemmlab.reduce_sum(CAI(-4, -8))  # the two negatives cancelled: 32 elements were summed
    with pytest.raises(BadArgumentError, match="tuple of integers"):
        gemmlab.sgemm(CAI(4.0, 8), CAI(8, 16))
    gemmlab.sgemm(CAI(np.int64(4), np.int64(8)), CAI(8, 16))  # NumPy integers are integers
    assert _ran(fake_gpu)


def test_empty_arrays_and_byte_orders_are_read_as_they_are():
    empty = interface.parse(dict(shape=(0, 3), typestr="<f4", data=(64, False), strides=(12, 3)), "C")
    assert empty.shape == (0, 3) and not interface.may_share((0, 16), (16, 0))  # no elements, none shared
    assert interface.parse(dict(shape=(2,), typestr="=f4", data=(64, False)), "A").dtype == "fp32"
    assert interface.parse(dict(shape=(2,), typestr=">f4", data=(64, False)), "A").dtype == ">f4"
    with pytest.raises(BadArgumentError, match="typestr None is not a type"):
        interface.parse(dict(shape=(2,), typestr=None, data=(64, False)), "A")


def test_an_empty_c_with_any_strides_is_returned_untouched(fake_gpu):
    C = CAI(0, 16, strides=(64, 0))
    assert gemmlab.sgemm(CAI(0, 8), CAI(8, 16), C) is C and not _ran(fake_gpu)


def test_interface_fields_read_as_the_protocol_says():
    f = interface.parse(dict(shape=(2, 3), typestr="<f4", data=(64, True), strides=(24, 4), stream=1), "A")
    assert (f.shape, f.dtype, f.strides, f.ptr, f.readonly, f.stream) == ((2, 3), "fp32", (6, 1), 64, True, 1)
    assert interface.parse(dict(shape=(0, 3), typestr="<f2", data=(None, False)), "A").ptr == 0  # empty: no pointer
    assert interface.parse(dict(shape=(1, 3), typestr="<f4", data=(64, False), strides=(7, 4)), "A").strides[1] == 1
    assert interface.parse(dict(shape=(2,), typestr="<i4", data=(64, False)), "A").dtype == "int32"
    assert interface.parse(dict(shape=(2,), typestr="<f4", data=[64, False]), "A").ptr == 64  # a list, as the old reader took


@pytest.mark.parametrize("shape, strides, shares", [
    ((4, 16), (16, 1), False), ((4, 16), (1, 4), False), ((4, 16), (-16, 1), False), ((4, 16), (32, 1), False),
    ((4, 16), (0, 1), True), ((4, 16), (8, 1), True), ((4, 1), (1, 0), False), ((3, 2), (3, 2), False), ((3, 3), (2, 1), True),
])
def test_may_share_is_sure_only_where_no_two_elements_meet(shape, strides, shares):
    assert interface.may_share(shape, strides) is shares


def test_an_interface_set_on_the_instance_is_read_and_a_raising_one_refused(fake_gpu):
    class Instance:
        pass

    a = Instance()
    a.__cuda_array_interface__ = CAI(4, 8).cai
    gemmlab.sgemm(a, CAI(8, 16))
    assert _ran(fake_gpu)

    class HostResident:
        @property
        def __cuda_array_interface__(self):
            raise AttributeError("the array lives on the host")

    with pytest.raises(BadArgumentError, match="A is not a CUDA array .the array lives on the host"):
        gemmlab.sgemm(HostResident(), CAI(8, 16))


# -- outputs gemmlab must not write ---------------------------------------------------------------

def test_a_read_only_c_is_refused_by_calls_and_plans(fake_gpu):
    with pytest.raises(BadArgumentError, match="C is read-only"):
        gemmlab.sgemm(CAI(4, 8), CAI(8, 16), CAI(4, 16, readonly=True))
    with pytest.raises(BadArgumentError, match="C is read-only"):  # K = 0 wrote beta * C into it
        gemmlab.sgemm(CAI(4, 0), CAI(0, 16), CAI(4, 16, readonly=True), beta=2.0)
    with pytest.raises(BadArgumentError, match="C is read-only"):
        gemmlab.Matmul(CAI(4, 8), CAI(8, 16), CAI(4, 16, readonly=True))
    plan = gemmlab.Matmul(CAI(4, 8), CAI(8, 16), CAI(4, 16))
    with pytest.raises(BadArgumentError, match="C is read-only"):
        plan.execute(C=CAI(4, 16, readonly=True))
    gemmlab.sgemm(CAI(4, 8, readonly=True), CAI(8, 16, readonly=True))  # read-only inputs are fine
    assert _ran(fake_gpu)


def test_a_c_whose_elements_share_memory_is_refused(fake_gpu):
    with pytest.raises(BadArgumentError, match=r"strides \(0, 1\).*share memory"):
        gemmlab.sgemm(CAI(4, 8), CAI(8, 16), CAI(4, 16, strides=(0, 4)))
    with pytest.raises(BadArgumentError, match="share memory"):  # each element was scaled once per alias
        gemmlab.sgemm(CAI(4, 0), CAI(0, 16), CAI(4, 16, strides=(0, 4)), beta=2.0)
    assert not _ran(fake_gpu)
    gemmlab.sgemm(CAI(4, 8), CAI(8, 16), CAI(4, 16, strides=(128, 4)))  # strided, apart: a copy, then back
    assert _ran(fake_gpu)


# -- streams ----------------------------------------------------------------------------------------

def test_a_call_waits_for_the_streams_b_and_c_name_and_they_wait_for_it(fake_gpu):
    gemmlab.sgemm(CAI(4, 8, stream=11), CAI(8, 16, stream=12), CAI(4, 16, stream=13))
    run = fake_gpu.index(("run", 11))
    assert set(fake_gpu[:run]) == {("wait", 11, "for", 12), ("wait", 11, "for", 13)}
    assert set(fake_gpu[run + 1:]) == {("wait", 13, "for", 11), ("wait", 12, "for", 11)}


def test_a_strided_b_is_copied_on_the_calls_stream_and_its_producer_waits(fake_gpu):
    # the copy is made and freed on the call's stream; B's producer must not overwrite B meanwhile
    gemmlab.sgemm(CAI(4, 8, stream=11), CAI(8, 16, stream=12, strides=(128, 4)), CAI(4, 16, stream=11))
    assert fake_gpu == [("wait", 11, "for", 12), ("run", 11), ("wait", 12, "for", 11)]


@pytest.mark.parametrize("named", [dict(), dict(stream=11)])
def test_only_streams_a_producer_named_are_ordered(fake_gpu, named):
    # no stream in the dict: the protocol's "no synchronisation needed" (was ordered with CuPy's current)
    gemmlab.sgemm(CAI(4, 8, stream=11), CAI(8, 16, **named), CAI(4, 16, **named))
    assert fake_gpu == [("run", 11)]


def test_nothing_is_ordered_under_a_capture_of_the_calls_stream(fake_gpu):
    # an event from outside a capture, or a producer's stream forked into it, would break the graph
    fake_gpu.capturing.add(11)
    gemmlab.sgemm(CAI(4, 8, stream=11), CAI(8, 16, stream=12), CAI(4, 16, stream=13))
    plan = gemmlab.Matmul(CAI(4, 8, stream=11), CAI(8, 16, stream=12), CAI(4, 16, stream=13))
    plan.execute()
    assert fake_gpu == [("run", 11), ("run", 11)]


def test_a_plan_waits_for_its_operands_streams_at_each_execute(fake_gpu):
    plan = gemmlab.Matmul(CAI(4, 8, stream=11), CAI(8, 16, stream=12), CAI(4, 16, stream=13))
    plan.execute()
    plan.execute()
    for wait in (("wait", 11, "for", 12), ("wait", 11, "for", 13), ("wait", 13, "for", 11), ("wait", 12, "for", 11)):
        assert fake_gpu.count(wait) == 2


@pytest.mark.parametrize("stream", [True, -1, 2**70, "abc", object()])
def test_a_stream_that_is_no_handle_is_refused(stream):
    with pytest.raises(BadArgumentError, match="stream"):
        streams.handle(stream)


def test_stream_handles_are_read_from_ints_and_stream_objects():
    class Protocol:
        def __cuda_stream__(self):
            return (0, 9)

    class BadPtr:
        ptr = "not a number"

    class Numba:  # numba.cuda's Stream: .handle is a ctypes c_void_p, None for the null stream
        def __init__(self, value):
            self.handle = ctypes.c_void_p(value)

    assert streams.handle(0) == 0 and streams.handle(5) == 5 and streams.handle(Protocol()) == 9
    assert streams.handle(np.int64(7)) == 7 and streams.handle(Numba(12)) == 12 and streams.handle(Numba(None)) == 0
    with pytest.raises(BadArgumentError, match="gives no stream handle"):
        streams.handle(BadPtr())


def test_a_refused_execute_changes_nothing_in_the_plan(fake_gpu):
    a = CAI(4, 8)
    plan = gemmlab.Matmul(a, CAI(8, 16), CAI(4, 16), alpha=2.0)
    with pytest.raises(BadArgumentError, match="stream"):
        plan.execute(A=CAI(4, 8), alpha=3.0, stream="bad")
    assert plan.alpha == 2.0 and plan._a.obj is a
    x = CAI(100)
    total = gemmlab.Sum(x)
    with pytest.raises(BadArgumentError, match="stream"):
        total.execute(CAI(100), stream=True)
    assert total._x.obj is x


# -- params, scalars, explain, use_tuning -------------------------------------------------------------

def test_a_library_call_takes_no_params(fake_gpu):
    with pytest.raises(BadArgumentError, match="cublas is a library baseline, not a gemmlab kernel, and takes no params"):
        gemmlab.sgemm(CAI(4, 8), CAI(8, 16), impl="cublas", params={"NOPE": 1})
    with pytest.raises(BadArgumentError, match="takes no params"):
        gemmlab.explain(op="sgemm", shape=(64, 64, 64), impl="cublas", params={"BN": 64}, gpu=H100)


@pytest.mark.parametrize("params, says", [({"NOPE": 1}, "has no parameter 'NOPE'"), ({"GROUP": -1}, "negative")])
def test_explain_refuses_the_params_the_call_refuses(params, says):
    with pytest.raises(BadArgumentError, match=says):
        gemmlab.explain(op="sgemm", shape=(64, 64, 64), impl="hopper_simt", params=params, gpu=H100, arch="sm_90")


def test_an_int_past_a_double_is_one_line(fake_gpu):
    with pytest.raises(BadArgumentError, match="alpha is past the range of a float"):
        gemmlab.sgemm(CAI(4, 8), CAI(8, 16), alpha=10**400)
    with pytest.raises(BadArgumentError, match="beta is past the range"):
        checks.real(-10**400, "beta", "gemmlab.sgemm")


def test_explain_refuses_what_it_would_drop(fake_gpu):
    with pytest.raises(BadArgumentError, match="not both"):
        gemmlab.explain(CAI(4, 8), CAI(8, 16), dtype="bf16")  # answered for fp32
    with pytest.raises(BadArgumentError, match="takes no C and no out_dtype"):
        gemmlab.explain(CAI(100), out_dtype="fp16")
    with pytest.raises(BadArgumentError, match="C is 3x3, expected 4x16"):
        gemmlab.explain(CAI(4, 8), CAI(8, 16), CAI(3, 3))


def test_explain_needs_the_arch_of_a_gpu_no_table_names():
    with pytest.raises(BadArgumentError, match="needs arch="):
        gemmlab.explain(op="sgemm", shape=(64, 64, 64), gpu="NVIDIA A100-SXM4-80GB")  # was taken as sm_90
    text = gemmlab.explain(op="sgemm", shape=(64, 64, 64), gpu="NVIDIA A100-SXM4-80GB", arch="sm_80", file=io.StringIO())
    assert "(sm_80)" in text
    text = gemmlab.explain(op="sgemm", shape=(64, 64, 64), gpu="NVIDIA H200", file=io.StringIO())  # the table's arch
    assert "on NVIDIA H200 (sm_90)" in text


@pytest.mark.parametrize("kwargs, says", [
    (dict(arch=90), "arch must look like"), (dict(arch="sm_xx"), "arch must look like"), (dict(gpu=3), "gpu must be"),
    (dict(file="out.txt"), "file must be a writable"), (dict(op=["sgemm"]), "op must be"),
])
def test_explain_refuses_arguments_of_the_wrong_kind(kwargs, says):
    args = dict(op="sgemm", shape=(64, 64, 64), gpu=H100) | kwargs
    with pytest.raises(BadArgumentError, match=says):
        gemmlab.explain(**args)


def test_a_plan_refuses_an_op_that_is_not_a_name(fake_gpu):
    with pytest.raises(BadArgumentError, match="op must be sgemm, hgemm or bgemm"):
        gemmlab.Matmul(CAI(4, 8), CAI(8, 16), op=["sgemm"])


def test_batches_of_two_sizes_say_so(fake_gpu):
    with pytest.raises(BadArgumentError, match="batch sizes differ"):
        gemmlab.bgemm(CAI(2, 4, 8), CAI(3, 8, 16))


def test_use_tuning_leaves_an_empty_file_alone(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(BadArgumentError, match="is empty"):
        gemmlab.use_tuning(empty)
    assert empty.stat().st_size == 0  # the store wrote a 24 KiB schema into it
    with pytest.raises(BadArgumentError, match="path must be a file path"):
        gemmlab.use_tuning(123)
