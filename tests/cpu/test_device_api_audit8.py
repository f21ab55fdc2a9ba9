"""Tests that could not fail, eighth audit (part c): hand-made mutants of cuda/nvml.py,
cuda/device.py, api/launches.py and api/explaining.py that every other CPU test let through, each
pinned here by what a user would see: NVML asked for another GPU than CUDA's (the PCI bus id
misread, dropped, or asked of a driver that failed), a clock range or throttle warning that is
wrong, NVML left initialised; a driver with no device, or one whose count cannot be read, taken
for a GPU; the device not made current, its architecture or memory read from another device;
a stream handed to CuPy or cuda.core through the wrong entry point, made afresh each time, or
not waited for; a prepared launch opted in to dynamic shared memory at 48 KiB or not above it, or
without its cluster; alpha and beta swapped; explain answering for another architecture than the
GPU's or the one named, refusing a form of arch it takes or taking one it refuses, taking a shape
out of range or of the wrong length, an empty GEMM refused, the wrong default dtype, a given C's
type dropped, a layout note where no implementation was named, its text written to stdout.
No GPU: recording stand-ins for cuda.bindings' driver, pynvml, cuda.core and CuPy (each a
namespace of Python functions), and fake_api_gpu's fake H100 for explain with arrays."""
from __future__ import annotations

import enum
import sys
import types

import pytest

import cuda.bindings
from gemmlab.cuda import core_import, device, nvml
from gemmlab.cuda.nvml import ClockSampler
from gemmlab.errors import LaunchError, NoGPUError

from . import fake_api_gpu, test_envinfo
from .fake_api_gpu import CAI

fake_gpu = fake_api_gpu.fake_gpu  # fixture, bound here by name


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_UNKNOWN = 999


def _driver(monkeypatch, init=CUresult.CUDA_SUCCESS, count=1, count_err=CUresult.CUDA_SUCCESS,
            bus=b"0000:41:00.0\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
            total=80 << 30):
    """A fake cuda.bindings.driver: `calls` records each entry point with its arguments."""
    calls = []

    def rec(name, result):
        def fn(*args):
            calls.append((name, *args))
            return result(*args) if callable(result) else result
        return fn

    fake = types.SimpleNamespace(
        CUresult=CUresult, calls=calls,
        cuInit=rec("cuInit", (init,)),
        cuDeviceGetCount=rec("cuDeviceGetCount", (count_err, count)),
        cuDeviceGet=rec("cuDeviceGet", lambda i: (CUresult.CUDA_SUCCESS, ("dev", i))),
        cuDeviceGetPCIBusId=rec("cuDeviceGetPCIBusId", (CUresult.CUDA_SUCCESS, bus)),
        cuDeviceTotalMem=rec("cuDeviceTotalMem", lambda dev: (CUresult.CUDA_SUCCESS, total + dev[1])),
    )
    monkeypatch.setattr(cuda.bindings, "driver", fake, raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", fake)
    return fake


class PyNVML(test_envinfo.FakeNVML):
    """test_envinfo's scripted pynvml (clocks and temperatures from the lists, the last repeating),
    with `log` recording the calls and handles that name how the GPU was asked for."""

    def __init__(self, clocks=(1900,), temps=(60,), max_clocks=None):
        super().__init__(clocks, temps)
        self.log = []
        self.max_clocks = max_clocks or {self.NVML_CLOCK_SM: 1980, self.NVML_CLOCK_MEM: 2619}

    def nvmlInit(self):
        self.log.append("init")

    def nvmlShutdown(self):
        self.log.append("shutdown")

    def nvmlDeviceGetHandleByIndex(self, i):
        self.log.append(("by index", i))
        return ("index", i)

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        self.log.append(("by bus", bus))
        return ("bus", bus)

    def nvmlDeviceGetMaxClockInfo(self, h, which):
        return self.max_clocks[which]

    def nvmlDeviceGetClockInfo(self, h, which):
        self.log.append(("clock", h))
        return super().nvmlDeviceGetClockInfo(h, which)


# -- cuda/nvml.py ---------------------------------------------------------------------------------

def test_nvml_opens_the_gpu_by_the_pci_bus_id_cuda_gives(monkeypatch):
    """CUDA's index and NVML's differ under CUDA_VISIBLE_DEVICES: the bus id, NUL padding cut, names the GPU."""
    drv = _driver(monkeypatch)
    nv = PyNVML()
    assert nvml.handle_for_cuda_device(nv, 1) == ("bus", "0000:41:00.0")
    assert nv.log == [("by bus", "0000:41:00.0")]
    assert drv.calls == [("cuInit", 0), ("cuDeviceGet", 1), ("cuDeviceGetPCIBusId", 32, ("dev", 1))]


def test_nvml_falls_back_to_the_index_when_cuinit_fails(monkeypatch):
    drv = _driver(monkeypatch, init=CUresult.CUDA_ERROR_UNKNOWN)
    nv = PyNVML()
    assert nvml.handle_for_cuda_device(nv, 2) == ("index", 2)
    assert nv.log == [("by index", 2)] and drv.calls == [("cuInit", 0)]


def test_the_sampler_asks_for_its_own_device(monkeypatch):
    _driver(monkeypatch, init=CUresult.CUDA_ERROR_UNKNOWN)
    nv = PyNVML()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    with ClockSampler(device_index=2, interval_s=60):
        pass
    assert nv.log[:2] == ["init", ("by index", 2)] and ("clock", ("index", 2)) in nv.log


def test_a_clock_at_exactly_the_throttle_fraction_is_not_a_warning(monkeypatch):
    _driver(monkeypatch, init=CUresult.CUDA_ERROR_UNKNOWN)
    monkeypatch.setitem(sys.modules, "pynvml", PyNVML(clocks=[1800], max_clocks={1: 2000}))
    with ClockSampler(interval_s=60) as s:
        pass
    assert s.min_clock == 1800 and s.max_supported_clock == 2000
    assert s.throttled is False and s.summary()["clock_warning"] is False


def test_a_finished_sampler_that_sampled_is_available_and_shut_nvml_once(monkeypatch):
    _driver(monkeypatch, init=CUresult.CUDA_ERROR_UNKNOWN)
    nv = PyNVML(clocks=[1900], temps=[None])  # no temperature: a clock alone is a sample
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    with ClockSampler(interval_s=60) as s:
        assert s.available
    assert s.available and s.samples == 2 and s.max_temp is None
    assert nv.log.count("init") == nv.log.count("shutdown") == 1


def test_a_sampler_used_twice_starts_afresh(monkeypatch):
    _driver(monkeypatch, init=CUresult.CUDA_ERROR_UNKNOWN)
    monkeypatch.setitem(sys.modules, "pynvml", PyNVML(clocks=[1500], temps=[80]))
    s = ClockSampler(interval_s=60)
    with s:
        pass
    monkeypatch.setitem(sys.modules, "pynvml", PyNVML(clocks=[1950], temps=[55]))
    with s:
        pass
    assert (s.min_clock, s.max_clock, s.max_temp, s.samples) == (1950, 1950, 55, 2)
    assert not s.throttled


def test_a_device_nvml_cannot_open_shuts_nvml_once(monkeypatch):
    _driver(monkeypatch, init=CUresult.CUDA_ERROR_UNKNOWN)
    nv = PyNVML()

    def missing(i):
        nv.log.append(("by index", i))
        raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")

    nv.nvmlDeviceGetHandleByIndex = missing
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    with ClockSampler(device_index=5) as s:
        assert nv.log == ["init", ("by index", 5), "shutdown"]  # at once, not held through the body
    assert nv.log == ["init", ("by index", 5), "shutdown"]
    assert s.reason.startswith("NVML has no device 5") and s.samples == 0 and not s.available


# -- cuda/device.py -------------------------------------------------------------------------------

@pytest.fixture
def fresh(monkeypatch):
    """No remembered probe, no cached device or info, a fresh CuPy stream cache (restored after)."""
    monkeypatch.setattr(device, "_no_gpu", [])
    monkeypatch.setattr(device, "_cupy_streams", {})
    device.device.cache_clear()
    device.info.cache_clear()
    yield
    device.device.cache_clear()
    device.info.cache_clear()


@pytest.mark.parametrize("count, count_err", [(0, CUresult.CUDA_SUCCESS), (1, CUresult.CUDA_ERROR_UNKNOWN)])
def test_a_driver_with_no_device_or_no_count_is_no_gpu(monkeypatch, fresh, count, count_err):
    _driver(monkeypatch, count=count, count_err=count_err)
    with pytest.raises(NoGPUError, match="the CUDA driver sees no device"):
        device.device()
    assert device.gpu_available() == (False, "no GPU: the CUDA driver sees no device")


def _core(monkeypatch, log, cc=(9, 0)):
    """A fake cuda.core whose Device records being made and made current."""

    class Device:
        def __init__(self, index):
            log.append(("Device", index))
            self.index, self.name, self.compute_capability = index, f"GPU {index}", cc
            self.properties = types.SimpleNamespace(multiprocessor_count=132, l2_cache_size=50 << 20,
                                                    max_shared_memory_per_block_optin=232448)

        def set_current(self):
            log.append(("set_current", self.index))

        def create_stream(self, obj):
            log.append(("create_stream", obj.__cuda_stream__()))
            return ("stream", obj.handle)

    monkeypatch.setattr(core_import, "_module", types.SimpleNamespace(Device=Device, Stream=types.SimpleNamespace()))
    return core_import._module


def test_the_device_is_the_one_asked_for_and_made_current(monkeypatch, fresh):
    _driver(monkeypatch)
    log = []
    _core(monkeypatch, log)
    dev = device.device(1)
    assert dev.index == 1 and log == [("Device", 1), ("set_current", 1)]
    assert device.device(1) is dev and len(log) == 2  # cached


def test_a_device_that_cannot_be_made_current_is_no_gpu_and_a_usable_one_is_available(monkeypatch, fresh):
    _driver(monkeypatch)
    core = _core(monkeypatch, [])
    assert device.gpu_available() == (True, "")

    class Broken(core.Device):
        def set_current(self):
            raise RuntimeError("CUDA_ERROR_INVALID_DEVICE")

    monkeypatch.setattr(core, "Device", Broken)
    with pytest.raises(NoGPUError, match=r"^no GPU: device 3 is not usable \(CUDA_ERROR_INVALID_DEVICE\)$"):
        device.device(3)


def test_info_reads_the_device_asked_for(monkeypatch, fresh):
    drv = _driver(monkeypatch, total=80 << 30)
    _core(monkeypatch, [], cc=(8, 6))
    got = device.info(1)
    assert got == device.DeviceInfo(index=1, name="GPU 1", arch="sm_86", sm_count=132, l2_bytes=50 << 20,
                                    total_memory=(80 << 30) + 1, max_smem_per_block_optin=232448)
    assert ("cuDeviceTotalMem", ("dev", 1)) in drv.calls


def test_a_stream_handle_speaks_version_0_of_the_protocol():
    assert device._StreamHandle(0x55).__cuda_stream__() == (0, 0x55)


def _cupy(monkeypatch, log, from_external=True):
    class Stream:
        pass

    if from_external:
        Stream.from_external = staticmethod(lambda obj: log.append(("from_external", obj.__cuda_stream__()))
                                            or ("cupy", obj.handle))
    cuda_ns = types.SimpleNamespace(Stream=Stream,
                                    ExternalStream=lambda h: log.append(("ExternalStream", h)) or ("old", h))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda_ns))


@pytest.mark.parametrize("from_external", [True, False])
def test_a_cupy_stream_is_made_once_per_handle(monkeypatch, fresh, from_external):
    log = []
    _cupy(monkeypatch, log, from_external)
    first = device.cupy_stream(0x77)
    assert device.cupy_stream(0x77) is first
    if from_external:
        assert first == ("cupy", 0x77) and log == [("from_external", (0, 0x77))]
    else:  # CuPy < 14
        assert first == ("old", 0x77) and log == [("ExternalStream", 0x77)]


def test_wrap_stream_uses_from_handle_where_cuda_core_has_it(monkeypatch, fresh):
    log = []
    core = _core(monkeypatch, log)
    core.Stream.from_handle = lambda h: log.append(("from_handle", h)) or ("core", h)
    assert device.wrap_stream(0x99) == ("core", 0x99) and log == [("from_handle", 0x99)]


def test_wrap_stream_on_an_older_cuda_core_goes_through_the_device(monkeypatch, fresh):
    _driver(monkeypatch)
    log = []
    _core(monkeypatch, log)
    assert device.wrap_stream(0x99) == ("stream", 0x99)
    assert log == [("Device", 0), ("set_current", 0), ("create_stream", (0, 0x99))]


def test_sync_or_raise_waits_and_turns_an_error_into_a_launch_error():
    waited = []
    device.sync_or_raise(types.SimpleNamespace(sync=lambda: waited.append(1)))
    assert waited == [1]

    def illegal():
        raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")

    with pytest.raises(LaunchError, match="the GPU reported an error: CUDA_ERROR_ILLEGAL_ADDRESS"):
        device.sync_or_raise(types.SimpleNamespace(sync=illegal))


# -- api/launches.py ------------------------------------------------------------------------------

def _prepared(monkeypatch, shmem):
    from gemmlab.api import launches

    log = []
    monkeypatch.setattr(launches, "allow_dynamic_smem", lambda ck, n: log.append(("allow", ck.spec.name, n)))
    monkeypatch.setattr(launches, "PreparedLaunch", lambda *args: log.append(("launch", *args)) or "prepared")
    ck = types.SimpleNamespace(kernel=lambda: types.SimpleNamespace(handle=0xABC),
                               spec=types.SimpleNamespace(name="sgemm_v9"))
    geometry = types.SimpleNamespace(grid=(8, 4, 1), block=(256, 1, 1), shmem=shmem, cluster=(2, 1, 1))
    assert launches.prepared(ck, geometry, ("i32",)) == "prepared"
    return log


def test_prepared_opts_in_above_48_kib_only_and_keeps_the_cluster(monkeypatch):
    launch = ("launch", 0xABC, "sgemm_v9", (8, 4, 1), (256, 1, 1))
    assert _prepared(monkeypatch, 48 * 1024) == [launch + (48 * 1024, ("i32",), (2, 1, 1))]
    assert _prepared(monkeypatch, 48 * 1024 + 16) == [("allow", "sgemm_v9", 48 * 1024 + 16),
                                                      launch + (48 * 1024 + 16, ("i32",), (2, 1, 1))]


def test_run_operands_hands_alpha_and_beta_in_their_places():
    from gemmlab.api import launches

    calls = []

    class Gemm(launches.FastGemm):
        def run(self, *args):
            calls.append(args)

    op = lambda ptr: types.SimpleNamespace(ptr=ptr)  # noqa: E731
    Gemm().run_operands(op(1), op(2), op(3), 0.5, 2.0, 9)
    assert calls == [(1, 2, 3, 0.5, 2.0, 9)]


# -- api/explaining.py ----------------------------------------------------------------------------


def _explain(*args, **kwargs):
    import io

    import gemmlab

    return gemmlab.explain(*args, file=io.StringIO(), **kwargs)


def test_this_gpu_named_beside_arrays_keeps_its_own_architecture(fake_gpu, monkeypatch):
    """gpu= naming the GPU this process runs on, which no shipped table names: its architecture is
    setup()'s, not a table's (which has none for it)."""
    from gemmlab.api import core

    monkeypatch.setitem(core._state, "gpu", "NVIDIA Lab GPU")
    text = _explain(CAI(64, 64), CAI(64, 64), gpu="NVIDIA Lab GPU")
    assert "on NVIDIA Lab GPU (sm_90)" in text


def test_arch_named_beside_arrays_is_the_one_answered_for(fake_gpu):
    text = _explain(CAI(64, 64), CAI(64, 64), arch="sm_80")
    assert "(sm_80)" in text and "(sm_90)" not in text


def test_explain_of_one_array_with_op_reduce_is_its_sum(fake_gpu):
    assert "gemmlab.reduce_sum" in _explain(CAI(1000), op="reduce")


def test_the_layout_note_is_for_a_named_implementation_only(fake_gpu, monkeypatch):
    from gemmlab.api import checks, core

    monkeypatch.setattr(core, "layout_note", lambda spec, problem, layout: "LAYOUT NOTE")
    monkeypatch.setattr(checks, "layout_of", lambda op, a, b: (True, False))  # A a transposed view (torch's W.T)
    a_t = CAI(64, 64)
    assert "LAYOUT NOTE" not in _explain(a_t, CAI(64, 64))
    assert "LAYOUT NOTE" in _explain(a_t, CAI(64, 64), impl="cublas")


def test_explain_writes_to_the_file_given_and_not_to_stdout(capsys):
    import io

    import gemmlab

    out = io.StringIO()
    text = gemmlab.explain(op="sgemm", shape=(256, 256, 256), gpu="NVIDIA H100 80GB HBM3", file=out)
    assert out.getvalue().strip() == text.strip() and capsys.readouterr().out == ""


@pytest.mark.parametrize("arch, ok", [("sm_90", True), ("sm_90a", True), ("sm_100f", True), ("sm_05", False),
                                      ("sm_90b", False), ("sm_", False)])
def test_arch_must_have_the_form_of_one(arch, ok):
    from gemmlab.api import explaining
    from gemmlab.errors import BadArgumentError

    if ok:
        explaining._check_arguments(None, None, None, None, None, arch, None)
    else:
        with pytest.raises(BadArgumentError, match="arch must look like 'sm_90'"):
            explaining._check_arguments(None, None, None, None, None, arch, None)


def test_a_16bit_c_given_is_the_c_answered_for(fake_gpu):
    h = lambda: CAI(64, 64, typestr="<f2")  # noqa: E731
    assert ", C fp16" in _explain(h(), h(), C=h())


@pytest.mark.parametrize("op, shape, dtype, want", [
    ("sgemm", (0, 256, 0), None, ((0, 256, 0), "fp32")),  # an empty GEMM is a problem too
    ("reduce", (2**63 - 1,), None, ((2**63 - 1,), "fp32")),
    ("hgemm", (64, 64, 64), None, ((64, 64, 64), "bf16")),  # hgemm's first dtype is the default
    ("hgemm", (64, 64, 64), "fp32", ((64, 64, 64), "tf32")),
])
def test_explained_shapes_taken(op, shape, dtype, want):
    from gemmlab.api import explaining

    assert explaining._explained_shape(op, shape, dtype) == want


@pytest.mark.parametrize("op, shape", [("reduce", (2**63,)), ("sgemm", (64, 64, 64, 2)), ("sgemm", (-1, 64, 64)),
                                       ("bgemm", (64, 64, 64))])
def test_explained_shapes_refused(op, shape):
    from gemmlab.api import explaining
    from gemmlab.errors import BadArgumentError

    with pytest.raises(BadArgumentError, match=f"explain\\(op='{op}'\\) takes shape="):
        explaining._explained_shape(op, shape, None)


def test_op_without_shape_or_arrays_is_refused_in_one_line():
    from gemmlab.errors import BadArgumentError

    with pytest.raises(BadArgumentError, match=r"^explain needs arrays, or op= and shape=$"):
        _explain(op="sgemm", gpu="NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize("given", [dict(shape=(64, 64, 64)), dict(dtype="fp32")])
def test_arrays_with_shape_or_dtype_are_refused(given):
    from gemmlab.api import explaining
    from gemmlab.errors import BadArgumentError

    args = dict(A=CAI(64, 64), op=None, shape=None, dtype=None, gpu=None, arch=None, file=None) | given
    with pytest.raises(BadArgumentError, match="explain takes arrays or shape= and dtype=, not both"):
        explaining._check_arguments(**args)
