"""Which torch operands the plain call reads in place (calls._transposed / torch_layout), without
a GPU or torch: a stand-in module with a Tensor class that has torch's stride rules."""
import sys
import types

from gemmlab.api import calls


class Tensor:
    def __init__(self, shape, strides):
        self.shape, self._strides = shape, strides

    def dim(self):
        return len(self.shape)

    def stride(self):
        return self._strides

    def is_contiguous(self):
        return self._strides == (self.shape[1], 1)


class Parameter(Tensor):
    pass


def test_transposed_views_and_other_strides():
    assert calls._transposed(Tensor((6, 4), (4, 1))) is False  # row-major
    assert calls._transposed(Tensor((6, 4), (1, 6))) is True  # W.T of a contiguous 4 x 6 W
    assert calls._transposed(Tensor((6, 4), (8, 1))) is None  # a slice: copied


def test_torch_layout_follows_the_hot_path(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(Tensor=Tensor))
    x, w_t = Tensor((6, 4), (4, 1)), Tensor((4, 5), (1, 4))
    assert calls.torch_layout(x, w_t) == (False, True)
    assert calls.torch_layout(Tensor((6, 4), (1, 6)), w_t) == (True, True)
    assert calls.torch_layout(x, Tensor((4, 5), (10, 1))) == (False, False), "a copied operand: no in-place path"
    assert calls.torch_layout(x, Parameter((4, 5), (1, 4))) == (False, False), "subclasses take the general path"
