"""What machine and software a number was measured on (seed 002's collect_env.sh, in Python).

Every run stores this dict with its rows, so a result can be read back years later with
its GPU, driver, clocks and package versions. Nothing here may fail: an unknown value is
None, and a missing GPU is `gpu: None` with `gpu_reason` saying why.
"""
from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from datetime import datetime
from importlib import metadata

from .errors import NoGPUError

# Distribution names (as pip knows them); versions come from metadata, so torch is never
# imported just to ask its version (that alone takes seconds and initialises CUDA).
PACKAGES = ("cuda-core", "cuda-bindings", "cupy", "numpy", "nvidia-ml-py", "torch",
            "triton", "typer", "rich", "matplotlib")
_ALIASES = {"cupy": ("cupy-cuda13x", "cupy-cuda12x", "cupy")}  # whichever wheel is there


def _dist_version(name: str) -> str | None:
    for candidate in _ALIASES.get(name, (name,)):
        try:
            return metadata.version(candidate)
        except metadata.PackageNotFoundError:
            continue
    return None


def gemmlab_version() -> str:
    try:
        return metadata.version("gemmlab")
    except metadata.PackageNotFoundError:
        return "source tree"  # run with PYTHONPATH=src, not installed


def git_revision(cwd: str | os.PathLike | None = None) -> str | None:
    """HEAD of the repository holding `cwd` (default: the working directory), '+dirty' when
    tracked files have uncommitted changes; None without git or outside a repository."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=cwd or os.getcwd(), capture_output=True,
                                 text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    rev = git("rev-parse", "HEAD")
    if not rev:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return rev + ("+dirty" if dirty else "")


def nvrtc_version() -> str | None:
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}" if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else None
    except Exception:  # bindings missing, or no libnvrtc (the nvidia-cuda-nvrtc wheel)
        return None


def nvrtc_archs() -> list[int]:
    """The architectures this NVRTC builds for (75, 80, ..., 90, 100, ...); empty without it."""
    try:
        from cuda.bindings import nvrtc

        err, archs = nvrtc.nvrtcGetSupportedArchs()
        return [int(a) for a in archs] if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else []
    except Exception:  # as nvrtc_version
        return []


def _cuda_driver():
    """(driver module, None) after a successful cuInit, else (None, one-line reason)."""
    try:
        from cuda.bindings import driver
    except Exception as e:
        return None, f"cuda-bindings is not importable ({e})"
    try:
        (err,) = driver.cuInit(0)
    except Exception as e:  # cuda.bindings raises when libcuda.so itself is missing
        return None, f"no NVIDIA driver: libcuda could not be loaded ({type(e).__name__})"
    if err == driver.CUresult.CUDA_ERROR_NO_DEVICE:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return None, f"the NVIDIA driver found no CUDA device{hint}"
    if err != driver.CUresult.CUDA_SUCCESS:
        return None, f"cuInit failed: {err.name}"
    return driver, None


def gpu_count() -> int:
    """CUDA devices this process sees (after CUDA_VISIBLE_DEVICES); 0 without a driver."""
    driver, _ = _cuda_driver()
    if driver is None:
        return 0
    err, count = driver.cuDeviceGetCount()
    return count if err == driver.CUresult.CUDA_SUCCESS else 0


def _uuid(driver, dev) -> str | None:
    err, uuid = driver.cuDeviceGetUuid(dev)
    if err != driver.CUresult.CUDA_SUCCESS:
        return None
    h = bytes(uuid.bytes).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"  # as nvidia-smi prints it


def cuda_driver_version() -> str | None:
    """CUDA version the driver supports, e.g. '13.0'; works even when cuInit finds no GPU."""
    try:
        from cuda.bindings import driver

        driver.cuInit(0)  # the brief's order; cuDriverGetVersion itself needs no init
        err, v = driver.cuDriverGetVersion()
        return f"{v // 1000}.{(v % 1000) // 10}" if err == driver.CUresult.CUDA_SUCCESS else None
    except Exception:
        return None


def gpu_info(index: int = 0) -> dict:
    """Properties and current state of CUDA device `index`; NoGPUError if there is none.

    The CUDA driver decides whether there is a usable GPU (it is what runs the kernels);
    NVML adds clocks, temperature and power. If NVML alone fails, its fields are None and
    `nvml_error` says why, rather than declaring a working GPU absent. Device attributes
    are read with cuDeviceGetAttribute, which needs no context (creating one costs time
    and memory in every process that only wants to print the environment).
    """
    driver, reason = _cuda_driver()
    if driver is None:
        raise NoGPUError(reason)
    ok = driver.CUresult.CUDA_SUCCESS
    err, count = driver.cuDeviceGetCount()
    if err != ok or count == 0:
        raise NoGPUError("the NVIDIA driver found no CUDA device")
    if not 0 <= index < count:
        raise NoGPUError(f"there is no GPU {index}: {count} CUDA device(s) visible")
    _, dev = driver.cuDeviceGet(index)

    def attr(name: str):
        err, value = driver.cuDeviceGetAttribute(getattr(driver.CUdevice_attribute, name), dev)
        return value if err == ok else None

    err, raw_name = driver.cuDeviceGetName(256, dev)
    name = raw_name.split(b"\x00", 1)[0].decode() if err == ok else None
    major = attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
    minor = attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
    err, mem = driver.cuDeviceTotalMem(dev)
    info = {
        "index": index,
        "name": name,
        "uuid": _uuid(driver, dev),
        "compute_capability": f"sm_{major}{minor}" if major is not None else None,
        "sm_count": attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        "l2_bytes": attr("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
        "memory_bytes": int(mem) if err == ok else None,
        "smem_per_block_optin_bytes": attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
    }
    info.update(_nvml_info(index))
    return info


def _nvml_info(index: int) -> dict:
    from .cuda.nvml import _try, handle_for_cuda_device, open_nvml

    keys = ("driver_version", "max_sm_clock_mhz", "sm_clock_mhz", "max_mem_clock_mhz",
            "mem_clock_mhz", "temperature_c", "power_limit_w", "persistence_mode", "mig_mode")
    try:
        nv = open_nvml()
    except Exception as e:
        return {**dict.fromkeys(keys), "nvml_error": f"NVML unavailable: {e}"}
    try:
        h = handle_for_cuda_device(nv, index)
        power = _try(nv.nvmlDeviceGetEnforcedPowerLimit, h)  # milliwatts
        persistence = _try(nv.nvmlDeviceGetPersistenceMode, h)
        mig = _try(nv.nvmlDeviceGetMigMode, h)  # (current, pending); raises on GPUs without MIG
        driver_version = _try(nv.nvmlSystemGetDriverVersion)
        return {
            "driver_version": driver_version.decode() if isinstance(driver_version, bytes) else driver_version,
            "max_sm_clock_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
            "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            "max_mem_clock_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM),
            "mem_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            "temperature_c": _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            "power_limit_w": power / 1000 if power is not None else None,
            "persistence_mode": bool(persistence) if persistence is not None else None,
            "mig_mode": bool(mig[0]) if mig is not None else None,
        }
    except Exception as e:
        return {**dict.fromkeys(keys), "nvml_error": f"NVML has no device {index}: {e}"}
    finally:
        _try(nv.nvmlShutdown)


def _cwd() -> str | None:
    """The working directory, None where it has been removed (os.getcwd then raises)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def collect_env(index: int = 0) -> dict:
    """Everything that can change a measurement, as a JSON-serialisable dict; `gpu` is device
    `index` (tune --devices 1 stores its rows under the GPU that ran them)."""
    try:
        gpu, gpu_reason = gpu_info(index), None
    except NoGPUError as e:
        gpu, gpu_reason = None, str(e)
    return {
        "timestamp": datetime.now().astimezone().isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "gemmlab": gemmlab_version(),
        "git": git_revision(),
        "cwd": _cwd(),
        "packages": {name: _dist_version(name) for name in PACKAGES},
        "nvrtc": nvrtc_version(),
        "cuda_driver": cuda_driver_version(),
        "gpu": gpu,
        "gpu_reason": gpu_reason,
    }


def _show(key: str, value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_bytes") and isinstance(value, int):
        for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if value >= size:
                return f"{value} ({value / size:.1f} {unit})"
    return str(value)


def env_rows(env: dict) -> list[tuple[str, str]]:
    """Flatten nested dicts into ('gpu.name', 'NVIDIA H100 80GB HBM3') rows for a table."""
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, d: dict) -> None:
        for key, value in d.items():
            full = f"{prefix}{key}"
            if isinstance(value, dict):
                walk(full + ".", value)
            else:
                rows.append((full, _show(key, value)))

    walk("", env)
    return rows
