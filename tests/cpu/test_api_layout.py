"""Which operands the API reads in place as transposed views (calls._transposed on the torch hot
path, operands.transposed on the general path, plans and explain), without a GPU, torch or CuPy:
stand-ins with torch's stride rules and CuPy's flags."""
import types

from gemmlab.api import calls
from gemmlab.api.operands import Operand, transposed


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


def _op(obj, family, shape, contiguous, ptr=0):
    return Operand(obj, ptr, shape, "fp16", 0, 0, family, contiguous)


def test_transposed_operands_of_torch_and_cupy():
    w_t = Tensor((4, 5), (1, 4))  # W.T of a contiguous 5 x 4 W
    assert transposed(_op(w_t, "torch", (4, 5), False))
    assert transposed(_op(Parameter((4, 5), (1, 4)), "torch", (4, 5), False)), "nn.Parameter: the general path"
    assert not transposed(_op(Tensor((4, 5), (10, 1)), "torch", (4, 5), False)), "a slice: copied"
    assert not transposed(_op(Tensor((4, 5), (5, 1)), "torch", (4, 5), True)), "row-major: dense, not transposed"
    assert not transposed(_op(w_t, "torch", (4, 5), False, ptr=8)), "misaligned: copied"
    f_order = types.SimpleNamespace(flags=types.SimpleNamespace(f_contiguous=True))
    strided = types.SimpleNamespace(flags=types.SimpleNamespace(f_contiguous=False))
    assert transposed(_op(f_order, "cupy", (4, 5), False))
    assert not transposed(_op(strided, "cupy", (4, 5), False))
    assert not transposed(_op(f_order, "cupy", (3, 4, 5), False)), "2-D only"
    assert not transposed(_op(object(), "cai", (4, 5), False)), "other producers: copied"


class CupyLike:
    """The two flags the CuPy hot path reads (cupy.ndarray._c_contiguous / _f_contiguous)."""

    def __init__(self, c: bool, f: bool):
        self._c_contiguous, self._f_contiguous = c, f


def test_cupy_transposed_views_and_other_strides():
    assert calls._cupy_transposed(CupyLike(True, False)) is False  # C order
    assert calls._cupy_transposed(CupyLike(True, True)) is False  # a row or a column: both flags
    assert calls._cupy_transposed(CupyLike(False, True)) is True  # F order: W.T, read in place
    assert calls._cupy_transposed(CupyLike(False, False)) is None  # a slice: copied


def test_new_c_type_of_the_hot_paths():
    f32, bf16 = object(), object()
    assert calls._new_c_type("bf16", None, 0.0, f32, bf16) == (f32, "fp32")
    assert calls._new_c_type("bf16", "fp32", 0.0, f32, bf16) == (f32, "fp32")
    assert calls._new_c_type("bf16", "bf16", 0.0, f32, bf16) == (bf16, "bf16")
    assert calls._new_c_type("bf16", "fp16", 0.0, f32, bf16) == (None, None)  # refused by the general path
    assert calls._new_c_type("tf32", "fp16", 0.0, f32, bf16) == (None, None)
    assert calls._new_c_type("bf16", None, 0.5, f32, bf16) == (None, None)  # beta needs a C
