"""The API's argument checks run on a machine with no GPU: the process state a GPU's setup()
leaves, a CuPy stand-in that allocates nothing, executors that record their launches instead of
making them, and stream ordering recorded, not done. Everything gemmlab decides and checks runs
as it does on a GPU; `events` lists what reached the device side, in order."""
from __future__ import annotations

import contextlib
import itertools
import types

import numpy as np
import pytest

_addresses = itertools.count(1 << 32, 1 << 20)


class FakeCupyArray:
    def __init__(self, shape, dtype, ptr=None, strides=None):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.itemsize = self.dtype.itemsize
        self.strides = tuple(strides or (int(s) * self.itemsize for s in _dense(self.shape)))
        self.data = types.SimpleNamespace(ptr=next(_addresses) if ptr is None else ptr, device_id=0)
        self.flags = types.SimpleNamespace(c_contiguous=True, f_contiguous=False)
        self.writes: list = []  # what the call wrote through a view of it (copies back, K = 0's beta * C)

    def fill(self, value):
        self.writes.append(("fill", value))

    def __imul__(self, value):
        self.writes.append(("scale", value))
        return self

    def __setitem__(self, key, value):
        self.writes.append(("copy", value.shape))


def _dense(shape):
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


class CAI:
    """A __cuda_array_interface__ producer whose dict a test sets freely (a class-level property,
    as Numba's arrays have)."""

    def __init__(self, *shape, typestr="<f4", ptr=None, strides=None, readonly=False, **fields):
        self.cai = dict(shape=shape, typestr=typestr, data=(next(_addresses) if ptr is None else ptr, readonly),
                        strides=strides, version=3)
        self.cai.update(fields)

    @property
    def __cuda_array_interface__(self):
        return self.cai


class Events(list):
    """What reached the device side, in order; `capturing`: the streams a test says are captured."""

    capturing: set


def ran(events) -> bool:
    """Whether a kernel was launched: a refusal must come before any."""
    return any(e[0] == "run" for e in events)


@pytest.fixture
def fake_gpu(monkeypatch):
    """The API as on one H100, with no GPU: returns the list of events (launches, copies, stream waits)."""
    from gemmlab.api import core, frameworks, operands, streams
    import gemmlab.cuda.device as device

    events = Events()

    def make(kind):
        def new(shape, dtype=np.float32):
            events.append((kind, tuple(shape)))
            return FakeCupyArray(shape, dtype)
        return new

    def asarray(obj):  # waits on the host for the stream a producer's dict names: views are made from the dict
        raise AssertionError("cupy.asarray of a producer's array")

    cupy = types.SimpleNamespace(
        float32=np.float32, float16=np.float16, dtype=np.dtype, ndarray=FakeCupyArray, empty=make("new"),
        zeros=make("zeros"), asarray=asarray, array=lambda v, order="C", copy=True: FakeCupyArray(v.shape, v.dtype),
        cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=7),
                                   UnownedMemory=lambda ptr, size, owner, device: ptr,
                                   MemoryPointer=lambda memory, offset: memory + offset,
                                   runtime=types.SimpleNamespace(pointerGetAttributes=lambda p: types.SimpleNamespace(device=0)),
                                   Device=lambda *a: types.SimpleNamespace(id=0)))

    class Executor:
        fast, owns_workspace, path = True, False, "kernel"

        def __init__(self, choice):
            self.choice = choice

        def run(self, *args):
            events.append(("run",) + args[-1:])  # the stream it launched on

        def run_operands(self, *args):
            events.append(("run",) + args[-1:])

    def new_executor(op_name, dtype, dims, impl, params, layout=(False, False), out="fp32"):
        problem = core.make_problem(op_name, dtype, dims, layout, out)
        choice, spec, chosen = core.decide(op_name, problem, dims, impl, params)
        return Executor(choice)

    for key, value in dict(context=1, device=0, gpu="NVIDIA H100 80GB HBM3", arch="sm_90").items():
        monkeypatch.setitem(core._state, key, value)
    for name, value in dict(context=1, executors=core.ThreadCache(), hot_calls=core.ThreadCache()).items():
        monkeypatch.setattr(core._thread, name, value, raising=False)
    monkeypatch.setattr(operands, "_cupy", cupy)
    for t, name in ((np.float32, "fp32"), (np.float16, "fp16"), (np.float64, "fp64")):
        monkeypatch.setitem(operands._cupy_names, np.dtype(t), name)
    monkeypatch.setitem(frameworks.cupy_refs, "ndarray", None)  # no CuPy hot path: the general one
    monkeypatch.setattr(device, "cupy_stream", lambda handle: contextlib.nullcontext())
    monkeypatch.setattr(core, "new_executor", new_executor)
    monkeypatch.setattr(streams, "_order", lambda first, then: events.append(("wait", then, "for", first)))
    monkeypatch.setattr(streams, "_capturing", lambda launch: launch in capturing)
    events.capturing = capturing = set()  # launch streams a test marks as being captured
    return events
