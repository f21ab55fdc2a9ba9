"""Environment capture and the clock sampler, without a GPU (fakes stand in for the driver)."""
from __future__ import annotations

import enum
import json
import shutil
import subprocess
import sys
import types

import pytest

import cuda.bindings
from gemmlab import envinfo
from gemmlab.cuda import nvml
from gemmlab.cuda.nvml import ClockSampler
from gemmlab.errors import NoGPUError
from gemmlab.store import RESULT_COLUMNS


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NO_DEVICE = 100


def _fake_driver(monkeypatch, cuinit):
    """Install a fake cuda.bindings.driver whose cuInit does `cuinit()`."""
    fake = types.SimpleNamespace(CUresult=CUresult, cuInit=lambda flags: cuinit(),
                                 cuDriverGetVersion=lambda: (CUresult.CUDA_SUCCESS, 13020))
    # `from cuda.bindings import driver` reads the package attribute first, sys.modules second.
    monkeypatch.setattr(cuda.bindings, "driver", fake, raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", fake)
    return fake


def _no_libcuda():
    raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')


def test_collect_env_without_driver(monkeypatch):
    _fake_driver(monkeypatch, _no_libcuda)
    env = envinfo.collect_env()
    assert env["gpu"] is None
    assert "no NVIDIA driver" in env["gpu_reason"] and "\n" not in env["gpu_reason"]
    assert env["cuda_driver"] is None  # the fake's cuInit raises before the version is asked
    json.dumps(env)  # it goes into the database as JSON


def test_collect_env_without_device(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    _fake_driver(monkeypatch, lambda: (CUresult.CUDA_ERROR_NO_DEVICE,))
    env = envinfo.collect_env()
    assert env["gpu"] is None
    assert "no CUDA device" in env["gpu_reason"] and "CUDA_VISIBLE_DEVICES=''" in env["gpu_reason"]
    assert env["cuda_driver"] == "13.2"  # the driver is there, only the GPU is not


def test_gpu_info_raises_no_gpu_error(monkeypatch):
    _fake_driver(monkeypatch, lambda: (CUresult.CUDA_ERROR_NO_DEVICE,))
    with pytest.raises(NoGPUError, match="no CUDA device"):
        envinfo.gpu_info()
    _fake_driver(monkeypatch, _no_libcuda)
    with pytest.raises(NoGPUError, match="no NVIDIA driver"):
        envinfo.gpu_info(0)


def test_collect_env_on_this_machine():
    """The real thing: a GPU dict or a reason, never an exception."""
    torch_loaded = "torch" in sys.modules
    env = envinfo.collect_env()
    assert (env["gpu"] is None) != (env["gpu_reason"] is None)
    if env["gpu"] is None:
        assert env["gpu_reason"]
    else:
        assert env["gpu"]["name"] and env["gpu"]["compute_capability"].startswith("sm_")
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert set(envinfo.PACKAGES) == set(env["packages"])
    assert env["packages"]["cuda-bindings"] == cuda.bindings.__version__
    assert env["gemmlab"]
    assert ("torch" in sys.modules) == torch_loaded  # versions come from metadata, not imports
    json.dumps(env)


def test_missing_package_is_none(monkeypatch):
    monkeypatch.setattr(envinfo, "PACKAGES", ("numpy", "surely-not-installed-gemmlab-xyz"))
    pkgs = envinfo.collect_env()["packages"]
    assert pkgs["surely-not-installed-gemmlab-xyz"] is None and pkgs["numpy"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_revision(tmp_path, monkeypatch):
    assert envinfo.git_revision(tmp_path) is None  # not a repository
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "f.txt").write_text("1")
    subprocess.run([*git, "add", "f.txt"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "c"], cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True,
                          text=True).stdout.strip()
    assert envinfo.git_revision(tmp_path) == head
    (tmp_path / "f.txt").write_text("2")
    assert envinfo.git_revision(tmp_path) == head + "+dirty"
    monkeypatch.chdir(tmp_path)
    assert envinfo.git_revision() == head + "+dirty"  # default: the working directory
    monkeypatch.setenv("PATH", "")  # git missing: None, not an exception
    assert envinfo.git_revision(tmp_path) is None


def test_env_rows_flatten():
    env = {"python": "3.12.3", "packages": {"torch": None, "numpy": "2.0"},
           "gpu": {"name": "H100", "l2_bytes": 52428800, "memory_bytes": 85520809984,
                   "smem_bytes": 232448, "persistence_mode": True,
                   "nested": {"deep": 1}}, "gpu_reason": None}
    assert envinfo.env_rows(env) == [
        ("python", "3.12.3"),
        ("packages.torch", "-"),
        ("packages.numpy", "2.0"),
        ("gpu.name", "H100"),
        ("gpu.l2_bytes", "52428800 (50.0 MiB)"),
        ("gpu.memory_bytes", "85520809984 (79.6 GiB)"),
        ("gpu.smem_bytes", "232448 (227.0 KiB)"),
        ("gpu.persistence_mode", "yes"),
        ("gpu.nested.deep", "1"),
        ("gpu_reason", "-"),
    ]
    rows = envinfo.env_rows({"gpu": None, "gpu_reason": "no NVIDIA driver"})
    assert rows == [("gpu", "-"), ("gpu_reason", "no NVIDIA driver")]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in envinfo.env_rows(envinfo.collect_env()))


# -- ClockSampler -------------------------------------------------------------------------

def _assert_noop(s: ClockSampler):
    assert (s.min_clock, s.max_clock, s.max_temp, s.max_supported_clock) == (None,) * 4
    assert s.samples == 0 and s.throttled is False and not s.available
    assert "NVML" in s.reason


def test_clock_sampler_noop_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    ran = False
    with ClockSampler(interval_s=0.001) as s:
        ran = True
    assert ran
    _assert_noop(s)
    assert s.summary() == {"sm_clock_min_mhz": None, "sm_clock_max_mhz": None,
                           "temp_max_c": None, "clock_warning": False}


def test_clock_sampler_noop_when_nvml_init_fails(monkeypatch):
    class NVMLError(Exception):
        pass

    def init():
        raise NVMLError("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(nvmlInit=init, NVMLError=NVMLError))
    with ClockSampler() as s:
        pass
    _assert_noop(s)
    assert "Library Not Found" in s.reason


def test_clock_sampler_noop_on_this_machine():
    """Whatever this machine has, entering and leaving never raises."""
    with ClockSampler(interval_s=0.001) as s:
        pass
    if s.samples == 0:
        _assert_noop(s)
    else:
        assert s.min_clock <= s.max_clock


class FakeNVML(types.SimpleNamespace):
    """Scripted clocks: each query returns the next value; the last one repeats."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, clocks, temps, max_clock=1980):
        super().__init__()
        self.clocks, self.temps, self.max_clock = list(clocks), list(temps), max_clock
        self.inits = self.shutdowns = 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("handle", i)

    def nvmlDeviceGetHandleByPciBusId(self, bus):  # used when a real CUDA driver exists
        return ("handle", 0)

    def nvmlDeviceGetMaxClockInfo(self, h, which):
        assert h == ("handle", 0) and which == self.NVML_CLOCK_SM
        return self.max_clock

    def nvmlDeviceGetClockInfo(self, h, which):
        return self.clocks.pop(0) if len(self.clocks) > 1 else self.clocks[0]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self.temps.pop(0) if len(self.temps) > 1 else self.temps[0]


def test_clock_sampler_short_loop_has_start_and_stop_samples(monkeypatch):
    fake = FakeNVML(clocks=[1980, 1700], temps=[50, 58])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with ClockSampler(interval_s=60) as s:  # the thread never wakes: only start + stop
        pass
    assert s.samples == 2
    assert (s.min_clock, s.max_clock, s.max_temp, s.max_supported_clock) == (1700, 1980, 58, 1980)
    assert s.throttled  # 1700 < 0.9 * 1980
    assert fake.inits == fake.shutdowns == 1
    assert set(s.summary()) <= set(RESULT_COLUMNS) and s.summary()["clock_warning"] is True


def test_clock_sampler_polls_in_background(monkeypatch):
    fake = FakeNVML(clocks=[1900, 1850, 1980, 1890], temps=[60, 71, 65])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    import time

    with ClockSampler(interval_s=0.001) as s:
        deadline = time.monotonic() + 5
        while s.samples < 5 and time.monotonic() < deadline:
            time.sleep(0.001)
    assert s.samples >= 5  # polled while the body ran, not only at the ends
    assert (s.min_clock, s.max_clock, s.max_temp) == (1850, 1980, 71)
    assert not s.throttled  # 1850 >= 0.9 * 1980
    assert fake.shutdowns == 1


def test_clock_sampler_survives_failing_queries(monkeypatch):
    fake = FakeNVML(clocks=[1500], temps=[40])

    def broken(*a):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    fake.nvmlDeviceGetTemperature = broken
    fake.nvmlDeviceGetMaxClockInfo = broken
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with ClockSampler(interval_s=0.001) as s:
        pass
    assert s.min_clock == 1500 and s.max_temp is None and s.max_supported_clock is None
    assert s.throttled is False  # no maximum known: no claim


def test_handle_falls_back_to_index(monkeypatch):
    _fake_driver(monkeypatch, _no_libcuda)
    fake = FakeNVML(clocks=[1], temps=[1])
    assert nvml.handle_for_cuda_device(fake, 3) == ("handle", 3)


def test_no_gpu_is_probed_once_per_process(monkeypatch):
    """cuda/device.py remembers why there is no GPU: a probe that failed afresh each time cost
    130 us, many times a decision (the kernels' geometry asks for the SM count), session 38."""
    from gemmlab.cuda import device

    calls = []
    _fake_driver(monkeypatch, lambda: calls.append(1) or (CUresult.CUDA_ERROR_NO_DEVICE,))
    monkeypatch.setattr(device, "_no_gpu", [])
    device.device.cache_clear()
    for _ in range(3):
        with pytest.raises(NoGPUError, match="cuInit failed"):
            device.device()
    assert calls == [1]
    device.device.cache_clear()
