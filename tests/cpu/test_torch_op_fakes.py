"""The torch custom ops' fake implementations (what torch.compile traces) refuse what the eager
call refuses, in its words, and give the result's shape and dtype. They checked only beta != 0
without C: a compiled graph took fp16 inputs to sgemm, mismatched dimensions, a C of the wrong
shape or type, an out_dtype of float64, and, the ops being pure, dropped such a call whose result
went unused instead of failing. Fake CUDA tensors need no GPU; the test needs torch (a CPU build
serves: `pip install torch`), and skips without it."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the torch custom ops need torch (a CPU build serves for their fakes)")

import gemmlab  # noqa: E402
from gemmlab.errors import BadArgumentError  # noqa: E402


@pytest.fixture(scope="module")
def ops():
    gemmlab.register_torch_ops()
    return torch.ops.gemmlab


def cuda(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="cuda", dtype=dtype)


@pytest.fixture
def fake():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        yield


F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


@pytest.mark.parametrize("call, says", [
    (lambda o: o.sgemm(cuda(4, 3, dtype=F16), cuda(3, 5, dtype=F16)), "A has dtype float16; torch.ops.gemmlab.sgemm needs float32"),
    (lambda o: o.sgemm(cuda(4, 3), cuda(7, 5)), "A is 4x3 but B is 7x5: inner dimensions differ"),
    (lambda o: o.sgemm(cuda(2, 4, 3), cuda(2, 3, 5)), "A must be 2-D, got 3-D"),
    (lambda o: o.bgemm(cuda(4, 3), cuda(3, 5)), "A must be 3-D, got 2-D"),
    (lambda o: o.bgemm(cuda(2, 4, 3), cuda(3, 3, 5)), "batch sizes differ"),
    (lambda o: o.hgemm(cuda(4, 3), cuda(3, 5), out_dtype=F16), "a float16 C with tf32 inputs: .* writes C in float32"),
    (lambda o: o.hgemm(cuda(4, 3, dtype=F16), cuda(3, 5, dtype=F16), out_dtype=torch.float64), "out_dtype must be"),
    (lambda o: o.hgemm(cuda(4, 3, dtype=F16), cuda(3, 5, dtype=BF16)), "A is fp16 but B is bf16"),
    (lambda o: o.sgemm(cuda(4, 3), cuda(3, 5), cuda(4, 6), 1.0, 1.0), "C is 4x6, expected 4x5"),
    (lambda o: o.sgemm(cuda(4, 3), cuda(3, 5), cuda(4, 5, dtype=torch.float64), 1.0, 0.0), "C has dtype float64"),
    (lambda o: o.hgemm(cuda(4, 3, dtype=F16), cuda(3, 5, dtype=F16), cuda(4, 5), 1.0, 0.0, F16), "C is float32 but out_dtype is float16"),
    (lambda o: o.sgemm(cuda(4, 3), torch.empty(3, 5)), "B is on cpu; .* needs CUDA tensors"),
    (lambda o: o.sgemm(cuda(4, 3), cuda(3, 5), None, 1.0, 1.0), "beta != 0 needs C"),
    (lambda o: o.reduce_sum(cuda(8, dtype=F16)), "x has dtype float16; .* needs float32"),
    (lambda o: o.reduce_sum(torch.empty(8)), "x is on cpu; .* needs a CUDA tensor"),
])
def test_a_fake_refuses_what_the_call_refuses(ops, fake, call, says):
    with pytest.raises(BadArgumentError, match=says):
        call(ops)


@pytest.mark.parametrize("call, shape, dtype", [
    (lambda o: o.sgemm(cuda(4, 3), cuda(3, 5)), (4, 5), F32),
    (lambda o: o.sgemm(cuda(4, 3), cuda(5, 3).t()), (4, 5), F32),  # x @ W.T
    (lambda o: o.hgemm(cuda(4, 3, dtype=BF16), cuda(3, 5, dtype=BF16)), (4, 5), F32),
    (lambda o: o.hgemm(cuda(4, 3, dtype=BF16), cuda(3, 5, dtype=BF16), out_dtype=BF16), (4, 5), BF16),
    (lambda o: o.hgemm(cuda(4, 3, dtype=F16), cuda(3, 5, dtype=F16), cuda(4, 5, dtype=F16), 1.0, 0.0), (4, 5), F16),
    (lambda o: o.hgemm(cuda(4, 3), cuda(3, 5)), (4, 5), F32),  # fp32 read as tf32
    (lambda o: o.bgemm(cuda(2, 4, 3), cuda(2, 3, 5), cuda(2, 4, 5), 0.5, 2.0), (2, 4, 5), F32),
    (lambda o: o.sgemm(cuda(0, 3), cuda(3, 5)), (0, 5), F32),
    (lambda o: o.reduce_sum(cuda(3, 7)), (), F32),
])
def test_a_fake_gives_the_results_shape_and_dtype(ops, fake, call, shape, dtype):
    out = call(ops)
    assert tuple(out.shape) == shape and out.dtype == dtype and out.device.type == "cuda" and out.is_contiguous()


def test_a_torch_without_custom_ops_is_refused_in_one_line(monkeypatch):
    """torch.library.custom_op and register_fake came in torch 2.4: an older torch raised
    AttributeError from inside the registration."""
    from gemmlab.errors import GemmlabError

    monkeypatch.delattr(torch.library, "register_fake")
    with pytest.raises(GemmlabError, match="needs torch 2.4 or newer"):
        gemmlab.register_torch_ops()
