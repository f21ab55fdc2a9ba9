"""The CUDA device: is there one, which architecture, its limits, its streams."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..errors import NoGPUError


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    arch: str  # e.g. 'sm_90'
    sm_count: int
    l2_bytes: int
    total_memory: int
    max_smem_per_block_optin: int


_no_gpu: list[str] = []  # the reason, once the probe found no usable device: a process does not gain one


def _probe_driver() -> None:
    """Raise NoGPUError with the driver's own reason when no device can be used. The reason is
    remembered: without a driver every probe failed afresh, about 130 us each, and the kernels'
    launch geometry asks for the SM count (sgemm specs' sm_count falls back to 132) many times a
    decision, so explain and the dispatch ran about 10x slower on a CPU (session 38)."""
    if _no_gpu:
        raise NoGPUError(_no_gpu[0])
    try:
        _probe()
    except NoGPUError as exc:
        _no_gpu.append(str(exc))
        raise


def _probe() -> None:
    """cuInit and a device count, each failure as NoGPUError with its reason."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:  # pragma: no cover - cuda-bindings is a dependency
        raise NoGPUError(f"no GPU: cuda-bindings is not importable ({exc})") from None
    try:
        (err,) = driver.cuInit(0)
    except Exception:  # the driver library itself is missing
        raise NoGPUError("no GPU: the NVIDIA driver library (libcuda) is not installed on this machine") from None
    if err != driver.CUresult.CUDA_SUCCESS:
        raise NoGPUError(f"no GPU: cuInit failed ({err.name})")
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        raise NoGPUError("no GPU: the CUDA driver sees no device")


@lru_cache(maxsize=None)
def device(index: int = 0):
    """The cuda.core Device, made current (CuPy and PyTorch share its primary context)."""
    _probe_driver()
    from .core_import import cuda_core

    Device = cuda_core().Device

    try:
        dev = Device(index)
        dev.set_current()
    except Exception as exc:
        raise NoGPUError(f"no GPU: device {index} is not usable ({exc})") from None
    return dev


def gpu_available() -> tuple[bool, str]:
    try:
        device()
    except NoGPUError as exc:
        return False, str(exc)
    return True, ""


@lru_cache(maxsize=None)
def info(index: int = 0) -> DeviceInfo:
    dev = device(index)
    props = dev.properties
    major, minor = dev.compute_capability
    return DeviceInfo(
        index=index, name=dev.name, arch=f"sm_{major}{minor}",
        sm_count=props.multiprocessor_count, l2_bytes=props.l2_cache_size,
        total_memory=_total_memory(index),
        max_smem_per_block_optin=props.max_shared_memory_per_block_optin,
    )


def _total_memory(index: int) -> int:
    from cuda.bindings import driver

    err, dev = driver.cuDeviceGet(index)
    err, total = driver.cuDeviceTotalMem(dev)
    return int(total)


class _StreamHandle:
    """The CUDA stream protocol over a raw handle, for libraries that accept it."""

    def __init__(self, handle: int):
        self.handle = int(handle)

    def __cuda_stream__(self):
        return (0, self.handle)


_cupy_streams: dict[int, object] = {}


def cupy_stream(handle: int):
    """A CuPy stream object over a raw stream handle (cached: one per handle)."""
    import cupy as cp

    stream = _cupy_streams.get(handle)
    if stream is None:
        if hasattr(cp.cuda.Stream, "from_external"):
            stream = cp.cuda.Stream.from_external(_StreamHandle(handle))
        else:  # CuPy < 14
            stream = cp.cuda.ExternalStream(int(handle))
        _cupy_streams[handle] = stream
    return stream


def wrap_stream(handle: int):
    """A cuda.core Stream over a stream someone else owns (CuPy's, PyTorch's)."""
    from .core_import import cuda_core

    Stream = cuda_core().Stream

    if hasattr(Stream, "from_handle"):
        return Stream.from_handle(int(handle))

    return device().create_stream(_StreamHandle(handle))  # older cuda.core


def sync_or_raise(stream) -> None:
    """Wait for `stream`; a CUDA error (illegal address, failed launch) becomes a LaunchError."""
    from ..errors import LaunchError

    try:
        stream.sync()
    except Exception as exc:  # an illegal address or a failed launch surfaces here
        raise LaunchError(f"the GPU reported an error: {exc}") from None
