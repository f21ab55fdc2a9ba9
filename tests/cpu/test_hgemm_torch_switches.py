"""The torch baseline's matmul switches (ops/hgemm_libraries.py) on a stand-in for torch, without a
GPU: TF32 for the tf32 rows and no 16-bit reductions for a 16-bit C, each for the call only."""
import sys
import types

import pytest

from gemmlab.ops.hgemm_libraries import FULL_REDUCTION, _matmul_switches, _tf32


class Switches:
    """torch.backends.cuda.matmul: its switches, and every write to them."""

    def __init__(self, **switches):
        self.__dict__["writes"] = []
        self.__dict__.update(switches)

    def __setattr__(self, name, value):
        self.writes.append((name, value))
        self.__dict__[name] = value


@pytest.fixture
def torch_with(monkeypatch):
    def make(**switches):
        matmul = Switches(**switches)
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
            backends=types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=matmul))))
        return matmul
    return make


def test_switches_are_set_for_the_block_and_put_back(torch_with):
    matmul = torch_with(allow_fp16_reduced_precision_reduction=True, allow_bf16_reduced_precision_reduction=True)
    with _matmul_switches(**FULL_REDUCTION):
        assert not matmul.allow_fp16_reduced_precision_reduction and not matmul.allow_bf16_reduced_precision_reduction
    assert matmul.allow_fp16_reduced_precision_reduction and matmul.allow_bf16_reduced_precision_reduction
    with pytest.raises(RuntimeError), _matmul_switches(**FULL_REDUCTION):
        raise RuntimeError("a failed call")
    assert matmul.allow_fp16_reduced_precision_reduction and matmul.allow_bf16_reduced_precision_reduction, \
        "put back when the call fails too"
    with _matmul_switches(allow_tf32=False):
        pass
    assert not hasattr(matmul, "allow_tf32"), "a switch this torch lacks is left alone"
    assert len(matmul.writes) == 8


def test_a_switch_already_so_is_never_written(torch_with):
    matmul = torch_with(allow_fp16_reduced_precision_reduction=False, allow_bf16_reduced_precision_reduction=True)
    with _matmul_switches(**FULL_REDUCTION):
        pass
    assert matmul.writes == [("allow_bf16_reduced_precision_reduction", False),
                             ("allow_bf16_reduced_precision_reduction", True)]


def test_tf32_uses_the_newer_switch_where_torch_has_it(torch_with):
    torch_with(fp32_precision="ieee", allow_tf32=False)
    assert _tf32(True) == {"fp32_precision": "tf32"} and _tf32(False) == {}
    matmul = torch_with(allow_tf32=False)
    assert _tf32(True) == {"allow_tf32": True}
    with _matmul_switches(**_tf32(True)):
        assert matmul.allow_tf32 is True
    assert matmul.allow_tf32 is False
