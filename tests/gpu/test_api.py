"""gemmlab.sgemm on CuPy arrays and torch tensors."""
import numpy as np
import pytest

import gemmlab
from gemmlab.errors import BadArgumentError

cp = pytest.importorskip("cupy")


def _ref(A, B, C0=None, alpha=1.0, beta=0.0):
    a, b = (cp.asnumpy(x).astype(np.float64) for x in (A, B))
    out = alpha * a @ b
    if beta:
        out += beta * cp.asnumpy(C0).astype(np.float64)
    return out


def _close(C, ref):
    return np.linalg.norm(cp.asnumpy(C) - ref) / np.linalg.norm(ref) < 1e-5


def test_cupy_new_output():
    rng = cp.random.default_rng(1)
    A = rng.uniform(-1, 1, (200, 77), dtype=cp.float32)
    B = rng.uniform(-1, 1, (77, 301), dtype=cp.float32)
    C = gemmlab.sgemm(A, B)
    assert isinstance(C, cp.ndarray) and C.shape == (200, 301) and C.dtype == cp.float32
    assert _close(C, _ref(A, B))


def test_empty_params_mean_the_defaults():
    """params={} (no overrides) was an unhashable executor-cache key: a TypeError on first use."""
    rng = cp.random.default_rng(2)
    A = rng.uniform(-1, 1, (130, 70), dtype=cp.float32)
    B = rng.uniform(-1, 1, (70, 90), dtype=cp.float32)
    for impl in ("vectorize", "bigtile", None):
        assert _close(gemmlab.sgemm(A, B, impl=impl, params={}), _ref(A, B))


def test_cupy_in_place_with_alpha_beta_and_non_contiguous_inputs():
    rng = cp.random.default_rng(2)
    A = rng.uniform(-1, 1, (90, 130), dtype=cp.float32).T  # 130x90, transposed view
    B = rng.uniform(-1, 1, (90, 66), dtype=cp.float32)[:, ::2]  # 90x33, strided view
    C = rng.uniform(-1, 1, (130, 33), dtype=cp.float32)
    C0 = C.copy()
    out = gemmlab.sgemm(A, B, C, alpha=0.5, beta=-2.0, impl="blocktiling_2d")
    assert out is C
    assert _close(C, _ref(A, B, C0, 0.5, -2.0))


def test_non_contiguous_output_is_written_back():
    rng = cp.random.default_rng(3)
    A = rng.uniform(-1, 1, (40, 20), dtype=cp.float32)
    B = rng.uniform(-1, 1, (20, 30), dtype=cp.float32)
    big = cp.zeros((40, 60), dtype=cp.float32)
    C = big[:, ::2]
    gemmlab.sgemm(A, B, C)
    assert _close(C, _ref(A, B))
    assert float(cp.abs(big[:, 1::2]).max()) == 0.0, "only C's own elements may change"


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    A = torch.rand(65, 129, device="cuda") - 0.5
    B = torch.rand(129, 33, device="cuda") - 0.5
    C = gemmlab.sgemm(A, B, impl="vectorize")
    assert isinstance(C, torch.Tensor) and C.is_cuda and C.shape == (65, 33)
    ref = A.double() @ B.double()
    assert float(torch.linalg.norm(C.double() - ref) / torch.linalg.norm(ref)) < 1e-5
    C2 = torch.rand(65, 33, device="cuda")
    C0 = C2.clone()
    gemmlab.sgemm(A, B, C2, alpha=2.0, beta=0.5)
    ref2 = 2.0 * ref + 0.5 * C0.double()
    assert float(torch.linalg.norm(C2.double() - ref2) / torch.linalg.norm(ref2)) < 1e-5


@pytest.mark.parametrize("case,needle", [
    ("dtype", "float32"), ("rank", "2-D"), ("inner", "inner dimensions"), ("cshape", "expected"),
    ("host", "CUDA array"), ("beta", "needs C"),
])
def test_bad_arguments_raise_value_error(case, needle):
    A = cp.ones((4, 5), dtype=cp.float32)
    B = cp.ones((5, 6), dtype=cp.float32)
    calls = {
        "dtype": lambda: gemmlab.sgemm(A.astype(cp.float64), B),
        "rank": lambda: gemmlab.sgemm(cp.ones((4, 5, 1), cp.float32), B),
        "inner": lambda: gemmlab.sgemm(A, cp.ones((4, 6), cp.float32)),
        "cshape": lambda: gemmlab.sgemm(A, B, cp.ones((4, 5), cp.float32)),
        "host": lambda: gemmlab.sgemm(np.ones((4, 5), np.float32), B),
        "beta": lambda: gemmlab.sgemm(A, B, beta=1.0),
    }
    with pytest.raises(ValueError, match=needle):
        calls[case]()
    assert issubclass(BadArgumentError, ValueError)
