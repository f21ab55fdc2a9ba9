"""Rung 15's tensor maps in KernelGemm (api/executors.py): a pointer pair counts as decided only
once the flag and both maps are set, so an encode that raised is retried, never skipped (the
launch graph copies whatever the slots hold)."""
from types import SimpleNamespace

import pytest

from gemmlab.api.executors import KernelGemm


class Maps:
    def __init__(self, fail_once: int | None):
        self.encoded, self.fail_once = [], fail_once

    def tmap(self, index):
        def encode(dtype, ptr, *args):
            if index == self.fail_once:
                self.fail_once = None
                raise RuntimeError("cannot describe it")
            self.encoded.append((index, ptr))
        return SimpleNamespace(encode=encode)


def _gemm(fail_once=None, fits=True):
    return SimpleNamespace(_decided=None, _dims=(64, 64, 64), _fits=lambda a, b: fits,
                           _boxes={"A": (32, 16, 64), "B": (16, 32, 64)}, main=Maps(fail_once),
                           _mapped=[None, None], _flag=SimpleNamespace(value=-1))


def test_a_failed_encode_is_retried_on_the_next_call():
    g = _gemm(fail_once=1)
    with pytest.raises(RuntimeError):
        KernelGemm._encode_maps(g, 1024, 2048)  # A's map made, B's refused
    assert g._decided is None and g._flag.value == -1
    KernelGemm._encode_maps(g, 1024, 2048)  # the same pointers: B's map made now, the flag set
    assert g.main.encoded == [(0, 1024), (1, 2048)] and g._flag.value == 1 and g._decided == (1024, 2048)
    KernelGemm._encode_maps(g, 1024, 2048)
    assert len(g.main.encoded) == 2  # decided: nothing encoded again


def test_pointers_the_maps_cannot_describe_set_the_flag_to_zero():
    g = _gemm(fits=False)
    KernelGemm._encode_maps(g, 1024, 2050)
    assert g._flag.value == 0 and g.main.encoded == [] and g._decided == (1024, 2050)
