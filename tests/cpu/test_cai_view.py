"""interface.cupy_view without a GPU: the CuPy view of a __cuda_array_interface__ producer is made
from its dict, never through cupy.asarray (which waits on the host for the stream the dict names),
and spans exactly the bytes the strides reach, negative strides included. CuPy is stood in for by a
recorder; the GPU test (tests/gpu/test_api_cai_streams.py) shows that the call no longer waits."""
from types import SimpleNamespace

import numpy as np
import pytest

from gemmlab.api import interface


class Recorder:
    """The parts of the cupy module cupy_view uses; asarray fails the test."""

    def __init__(self):
        self.memory = None
        self.cuda = SimpleNamespace(UnownedMemory=self._unowned, MemoryPointer=lambda mem, offset: (mem, offset))
        self.dtype = np.dtype

    def _unowned(self, ptr, size, owner, device):
        self.memory = dict(ptr=ptr, size=size, owner=owner, device=device)
        return "memory"

    @staticmethod
    def ndarray(shape, dtype, memptr=None, strides=None):
        return SimpleNamespace(shape=shape, dtype=dtype, memptr=memptr, strides=strides)

    def asarray(self, x):
        raise AssertionError("cupy.asarray synchronises with the producer's stream")


class Producer:
    def __init__(self, **cai):
        self.__cuda_array_interface__ = dict(version=3, data=(1 << 20, False), stream=7, **cai)


def test_a_dense_array_is_viewed_whole_at_its_pointer():
    cp, x = Recorder(), Producer(shape=(3, 5), typestr="<f4")
    view = interface.cupy_view(x, 1, cp)
    assert cp.memory == dict(ptr=1 << 20, size=60, owner=x, device=1)
    assert view.shape == (3, 5) and view.dtype == np.float32 and view.memptr == ("memory", 0)
    assert view.strides == (20, 4)


def test_a_strided_view_spans_from_its_first_to_its_last_element():
    # every other column of a 4 x 10 fp16 matrix: 4 x 5, strides (20, 4) bytes
    cp, x = Recorder(), Producer(shape=(4, 5), typestr="<f2", strides=(20, 4))
    view = interface.cupy_view(x, 0, cp)
    assert cp.memory["size"] == (3 * 10 + 4 * 2 + 1) * 2 and view.strides == (20, 4)


def test_a_negative_stride_starts_the_memory_below_the_pointer():
    # a reversed row order: element (0, 0) at the pointer, row 2 two rows below it
    cp, x = Recorder(), Producer(shape=(3, 4), typestr="<f4", strides=(-16, 4))
    view = interface.cupy_view(x, 0, cp)
    assert cp.memory["ptr"] == (1 << 20) - 2 * 16 and cp.memory["size"] == 3 * 16
    assert view.memptr == ("memory", 32) and view.strides == (-16, 4)


def test_an_empty_array_needs_no_memory():
    cp = Recorder()
    view = interface.cupy_view(Producer(shape=(0, 4), typestr="<f4"), 0, cp)
    assert view.shape == (0, 4) and view.memptr is None and cp.memory is None


def test_a_malformed_dict_is_still_refused_in_one_line():
    with pytest.raises(ValueError, match="strides"):
        interface.cupy_view(Producer(shape=(2, 2), typestr="<f4", strides=(8,)), 0, Recorder())
