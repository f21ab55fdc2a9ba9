"""Scalars the API takes (checks.real), and use_tuning arriving while a thread decides: what it
was building is used for that call but not kept (core.keep). No GPU: executors are
fakes here; the GPU halves are tests/gpu/test_api_hot_paths.py and test_api_plans.py."""
import numpy as np
import pytest

from gemmlab.api import checks, core
from gemmlab.errors import BadArgumentError


@pytest.mark.parametrize("value, expected", [(2, 2.0), (True, 1.0), (0.5, 0.5), (np.float32(0.25), 0.25),
                                             (np.int64(3), 3.0), (np.array(1.5), 1.5), (-0.0, -0.0)])
def test_reals_are_taken_as_floats(value, expected):
    got = checks.real(value, "alpha", "gemmlab.sgemm")
    assert type(got) is float and got == expected and str(got) == str(float(expected))


@pytest.mark.parametrize("value", [None, "2.5", b"1", 1j, np.complex64(1), np.array([1.0, 2.0]), object()])
def test_other_scalars_are_refused_in_one_line(value):
    with pytest.raises(BadArgumentError, match=r"^gemmlab.sgemm: beta must be a real number, not \w+$"):
        checks.real(value, "beta", "gemmlab.sgemm")


class FakeExecutor:
    owns_workspace = False


def test_an_executor_built_across_a_use_tuning_serves_its_call_but_is_not_kept(monkeypatch):
    cache = core.ThreadCache()

    def build(*args):
        core.forget_executors()  # another thread's use_tuning while this one builds
        return FakeExecutor()

    monkeypatch.setattr(core._thread, "executors", cache, raising=False)
    key = ("sgemm", "fp32", (8, 8, 8), None, None)  # core.executor's key for these arguments
    monkeypatch.setattr(core, "new_executor", build)
    ex = core.executor("sgemm", "fp32", (8, 8, 8), None, None, 0)
    assert isinstance(ex, FakeExecutor) and ex.stream == 0 and key not in cache
    monkeypatch.setattr(core, "new_executor", lambda *args: FakeExecutor())
    ex = core.executor("sgemm", "fp32", (8, 8, 8), None, None, 0)
    assert cache[key] is ex, "without one in between, the executor is kept"


def test_a_call_decided_across_a_use_tuning_is_not_kept(monkeypatch):
    hot = core.ThreadCache()
    monkeypatch.setattr(core._thread, "hot_calls", hot, raising=False)
    before = core.forgotten[0]
    core.forget_executors()
    core.keep(hot, ("k",), (FakeExecutor(), None), before)
    assert ("k",) not in hot
    core.keep(hot, ("k",), (FakeExecutor(), None), core.forgotten[0])
    assert ("k",) in hot
