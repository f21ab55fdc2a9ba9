"""NVML helpers: open a device by its CUDA index, and watch clocks while a timing loop runs.

An absolute time means little without the SM clock and temperature it was measured at
(a GPU at its power cap runs 10-20 % slower than at full boost), so the timer wraps each
measurement in a ClockSampler and the clock range is stored with the row.

Monitoring must never break a benchmark: every NVML failure here degrades to "unknown"
(None) rather than raising.
"""
from __future__ import annotations

import threading
from types import ModuleType


def open_nvml() -> ModuleType:
    """Import pynvml and start NVML; raises ImportError or pynvml.NVMLError on failure.

    The caller owns one nvmlShutdown() per successful call (NVML counts inits).
    """
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def handle_for_cuda_device(pynvml: ModuleType, cuda_index: int = 0):
    """The NVML handle of CUDA device `cuda_index`.

    NVML numbers GPUs by PCI order and ignores CUDA_VISIBLE_DEVICES, CUDA numbers the
    visible ones fastest-first, so the same index can name two different GPUs. The PCI bus
    id is common to both; the plain index is only the fallback when the CUDA driver cannot
    tell us (no libcuda, or the device is hidden from CUDA).
    """
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err == driver.CUresult.CUDA_SUCCESS:
            err, dev = driver.cuDeviceGet(cuda_index)
            if err == driver.CUresult.CUDA_SUCCESS:
                err, bus = driver.cuDeviceGetPCIBusId(32, dev)
                if err == driver.CUresult.CUDA_SUCCESS:
                    bus_id = bus.split(b"\x00", 1)[0].decode() if isinstance(bus, bytes) else str(bus)
                    return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
    except Exception:  # no driver library, old bindings, NVML cannot resolve the id
        pass
    return pynvml.nvmlDeviceGetHandleByIndex(cuda_index)


def _try(fn, *args):
    """One NVML query, None when this GPU or driver does not support it."""
    try:
        return fn(*args)
    except Exception:
        return None


class ClockSampler:
    """Context manager: polls SM clock and GPU temperature in a background thread.

    Enter it after the warm-up launches: the start sample should see a busy GPU, not the
    idle clock of a device that has just woken up. One sample is taken on entry and one
    on exit, so even a loop shorter than `interval_s` has a range.

    Without NVML (no GPU, no driver, pynvml missing) it does nothing: every field stays
    None, `throttled` is False and `reason` says why.
    """

    THROTTLE_FRACTION = 0.9  # below 90 % of the max SM clock, times are not comparable

    def __init__(self, device_index: int = 0, interval_s: float = 0.01):
        self.device_index = device_index
        self.interval_s = interval_s
        self._reset()

    def _reset(self) -> None:
        self.min_clock: int | None = None
        self.max_clock: int | None = None
        self.max_temp: int | None = None
        self.max_supported_clock: int | None = None
        self.samples = 0
        self.reason: str | None = None
        self._nvml = None
        self._handle = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def available(self) -> bool:
        return self._handle is not None or self.samples > 0

    @property
    def throttled(self) -> bool:
        if self.min_clock is None or not self.max_supported_clock:
            return False
        return self.min_clock < self.THROTTLE_FRACTION * self.max_supported_clock

    def _sample(self) -> None:
        nv, h = self._nvml, self._handle
        clock = _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        temp = _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        if clock is not None:
            self.min_clock = clock if self.min_clock is None else min(self.min_clock, clock)
            self.max_clock = clock if self.max_clock is None else max(self.max_clock, clock)
        if temp is not None:
            self.max_temp = temp if self.max_temp is None else max(self.max_temp, temp)
        if clock is not None or temp is not None:
            self.samples += 1

    def _run(self) -> None:
        # Event.wait doubles as the sleep, so stop() never waits a whole interval.
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> "ClockSampler":
        self._reset()
        try:
            self._nvml = open_nvml()
        except Exception as e:  # ImportError, NVMLError (no library, no driver)
            self.reason = f"NVML unavailable: {e}"
            self._nvml = None
            return self
        try:
            self._handle = handle_for_cuda_device(self._nvml, self.device_index)
        except Exception as e:
            self.reason = f"NVML has no device {self.device_index}: {e}"
            self._shutdown()
            return self
        nv = self._nvml
        self.max_supported_clock = _try(nv.nvmlDeviceGetMaxClockInfo, self._handle, nv.NVML_CLOCK_SM)
        self._sample()
        self._thread = threading.Thread(target=self._run, name="gemmlab-clock-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._handle is not None:
            self._sample()
            self._handle = None
        self._shutdown()

    def _shutdown(self) -> None:
        if self._nvml is not None:
            _try(self._nvml.nvmlShutdown)
            self._nvml = None

    def summary(self) -> dict:
        """The fields a result row stores (store.py column names)."""
        return {
            "sm_clock_min_mhz": self.min_clock,
            "sm_clock_max_mhz": self.max_clock,
            "temp_max_c": self.max_temp,
            "clock_warning": self.throttled,
        }
