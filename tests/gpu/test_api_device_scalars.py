"""alpha and beta given as 0-d GPU arrays (a CUDA tensor, a CuPy array) are refused in one line:
reading one copies it to the host and waits for the GPU, a synchronisation hidden in every call
(session 36's audit). A 0-d host array is still read."""
import numpy as np
import pytest

import gemmlab

cp = pytest.importorskip("cupy")


def _scalars():
    out = [cp.asarray(np.float32(2.0))]
    try:
        import torch
    except ImportError:
        return out
    return out + [torch.tensor(2.0, device="cuda")]


@pytest.mark.parametrize("which", ["alpha", "beta"])
def test_gpu_scalars_are_refused_by_calls_and_plans(which):
    A, B = (cp.ones((64, 64), dtype=cp.float32) for _ in range(2))
    C = cp.zeros((64, 64), dtype=cp.float32)
    plan = gemmlab.Matmul(A, B, C)
    for value in _scalars():
        message = rf"{which} is a GPU array; reading it would make the call wait for the GPU"
        with pytest.raises(ValueError, match=message):
            gemmlab.sgemm(A, B, C, **{which: value})
        with pytest.raises(ValueError, match=message):
            gemmlab.Matmul(A, B, C, **{which: value})
        with pytest.raises(ValueError, match=message):
            plan.execute(**{which: value})
    got = gemmlab.sgemm(A, B, C, alpha=np.array(0.5))  # a host 0-d array: read as before
    cp.cuda.Device().synchronize()
    assert float(got[0, 0]) == 32.0
    torch = pytest.importorskip("torch")
    got = gemmlab.sgemm(A, B, C, alpha=torch.tensor(0.25))  # a CPU tensor too (its class has the interface)
    cp.cuda.Device().synchronize()
    assert float(got[0, 0]) == 16.0
