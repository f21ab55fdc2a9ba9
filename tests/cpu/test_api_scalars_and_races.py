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


class _OnCudaArrayInterface:
    __cuda_array_interface__ = dict(shape=(), typestr="<f4", data=(1 << 20, False), version=3)

    def __float__(self):
        raise AssertionError("read: a copy to the host and a wait for the GPU")


class _Dlpack:
    def __init__(self, device_type):
        self.device_type = device_type

    def __dlpack_device__(self):
        return self.device_type, 0

    def __float__(self):
        if self.device_type != 1:
            raise AssertionError("read: a copy to the host and a wait for the GPU")
        return 2.5


class _TorchLike:
    is_cuda = True

    def __float__(self):
        raise AssertionError("read: .item(), a wait for the GPU")


@pytest.mark.parametrize("value", [_OnCudaArrayInterface(), _Dlpack(2), _Dlpack(13), _TorchLike()])
def test_a_scalar_in_gpu_memory_is_refused_rather_than_read_at_every_call(value):
    # float() of a CUDA tensor or CuPy array copies it to the host and waits for the GPU: a hidden
    # synchronisation in every call (session 36's audit); the caller can read it once, where it chooses
    with pytest.raises(BadArgumentError, match=r"^gemmlab.sgemm: alpha is a GPU array; reading it would make the "
                                               r"call wait for the GPU: pass a Python float"):
        checks.real(value, "alpha", "gemmlab.sgemm")


def test_a_dlpack_scalar_on_the_host_is_read():
    assert checks.real(_Dlpack(1), "alpha", "gemmlab.sgemm") == 2.5


class _TorchCpuLike:
    """As torch.Tensor on the CPU: the class declares __cuda_array_interface__ (a property for every
    device), and reading it on a CPU tensor raises AttributeError."""
    is_cuda = False

    @property
    def __cuda_array_interface__(self):
        raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor type")

    def __dlpack_device__(self):
        return 1, 0

    def __float__(self):
        return 0.5


def test_a_cpu_tensor_is_read_although_its_class_declares_a_cuda_array_interface():
    # the first version asked the type, and refused torch.tensor(0.5) as "a GPU array" (session 36's review)
    assert checks.real(_TorchCpuLike(), "beta", "gemmlab.sgemm") == 0.5


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


def _operand(ptr, shape, dtype="fp32"):
    from gemmlab.api.operands import Operand

    return Operand(None, ptr, shape, dtype, 0, 0, "cupy", True)


@pytest.mark.parametrize("c_ptr, expected", [(0, True), (4096 * 4 - 4, True), (4096 * 4, False),
                                             (-16 * 16 * 4, False), (-16 * 16 * 4 + 4, True)])
def test_overlap_is_any_shared_byte_of_two_extents(c_ptr, expected):
    """A is 64x64 fp32 at 1 MiB; C 16x16 fp32 at 1 MiB + c_ptr: sharing one byte is overlapping."""
    base = 1 << 20
    a, c = _operand(base, (64, 64)), _operand(base + c_ptr, (16, 16))
    assert checks.overlap(c, a) is expected and checks.overlap(a, c) is expected


def test_overlap_counts_each_operands_own_element_size():
    a16 = _operand(1 << 20, (64, 64), "bf16")  # 8 KiB
    assert checks.overlap(_operand((1 << 20) + 8192 - 2, (1, 1)), a16)
    assert not checks.overlap(_operand((1 << 20) + 8192, (1, 1)), a16)


def test_a_tuned_lookup_survives_a_use_tuning_clearing_the_cache_meanwhile(monkeypatch, tmp_path):
    """tuned_params stored what it found and read it back from the shared cache, which another
    thread's use_tuning may clear in between: a KeyError out of a plain call."""
    from types import SimpleNamespace

    from gemmlab.api import tuning
    from gemmlab.harness import tuned

    db = tmp_path / "results.db"
    db.write_bytes(b"SQLite format 3\0")  # not empty (an empty file is as a missing one); the store is faked below
    monkeypatch.setattr(tuning, "database", lambda: str(db))
    monkeypatch.setattr(tuning, "_cache", {})

    class ClearingLock:  # the store happens; another thread's use_tuning clears right after
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            tuning._cache.clear()

    monkeypatch.setattr(tuning, "_lock", ClearingLock())
    monkeypatch.setattr(tuned, "usable_best", lambda store, gpu, spec, problem: {"BN": 64})

    class Store:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    import gemmlab.store
    monkeypatch.setattr(gemmlab.store, "ResultStore", Store)
    spec = SimpleNamespace(kind="kernel", name="vectorize")
    problem = SimpleNamespace(op="sgemm", dtype="fp32", M=64, N=64, K=64)
    assert tuning.tuned_params(spec, problem, "GPU A") == {"BN": 64}


def test_a_full_cache_drops_its_oldest_entry_not_every_shape(monkeypatch):
    """A program with more shapes than the bound rebuilds the one dropped, not all of them: until
    session 37 the cache was emptied, the shapes in use rebuilt at a few hundred us each."""
    monkeypatch.setattr(core, "MAX_EXECUTORS", 4)
    cache, now = {}, core.forgotten[0]
    for n in range(6):
        core.keep(cache, ("shape", n), n, now)
    assert list(cache) == [("shape", 2), ("shape", 3), ("shape", 4), ("shape", 5)]


def test_a_cache_emptied_while_full_still_keeps_the_new_entry(monkeypatch):
    class EmptiedOnIteration(dict):  # use_tuning's forget from another thread, between len and del
        def __iter__(self):
            self.clear()
            return super().__iter__()

    monkeypatch.setattr(core, "MAX_EXECUTORS", 2)
    cache = EmptiedOnIteration({("a",): 1, ("b",): 2})
    core.keep(cache, ("c",), 3, core.forgotten[0])
    assert dict(cache) == {("c",): 3}
