"""A prepared launch: one kernel's grid, block, shared memory, cluster and argument buffers built
once, so that a launch costs one ctypes call into the driver plus the argument fields that changed.

Why not cuda.core.launch on the hot path: it builds a launch configuration and converts every
argument on every call, tens of microseconds of Python that a plan or a plain API call would pay
again and again. Here the arguments live in ctypes slots whose addresses are handed to the driver
once (kernelParams); a call writes the new pointers into their slots and calls cuLaunchKernelEx
with a configuration built once (a cluster attribute where the kernel runs in clusters). The
driver copies the parameter values at the call, so a slot may be rewritten right after it.
cuLaunchKernelEx, not cuLaunchKernel: four ctypes arguments instead of eleven, one path for
clustered and plain kernels (session 21, H200, driver 580: 0.6 and 1.2 us less host time per
launch in two runs, the same in a third). The API's executors launch through a graph built from
these launches where they can (cuda/launch_graph.py), which costs 1.5-2.5 us less again.

Tensor maps (TMA descriptors) are encoded here too, with cuTensorMapEncodeTiled, into 64-byte
aligned slots that the kernel receives by value.
"""
from __future__ import annotations

import ctypes
import sys
import threading
import weakref
from contextlib import contextmanager
from typing import Sequence

from ..errors import BadArgumentError, LaunchError

_lock = threading.Lock()
_driver = None

CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
TENSOR_MAP_BYTES = 128  # CU_TENSOR_MAP_NUM_QWORDS * 8
# CUtensorMapDataType by gemmlab's dtype name: bf16 is described as 16-bit words (UINT16), as the
# bench path's maps describe CuPy's uint16 view of it; a copy engine moves bytes, the type only
# sets the element size (and the fill, which is zero for every type here)
TENSOR_MAP_DTYPES = {"fp16": 6, "bf16": 1, "fp32": 7, "tf32": 7}
SWIZZLE_128B = 3
SWIZZLE_BY_SPAN = {0: 0, 32: 1, 64: 2, 128: SWIZZLE_128B}  # CUtensorMapSwizzle by span in bytes
L2_PROMOTION_256B = 3
CU_STREAM_CAPTURE_MODE_RELAXED = 2  # CUstreamCaptureMode: capture that restricts no other thread


class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte value union."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint32 * 16)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig, as cuda.h lays it out."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


def driver():
    """libcuda with the few entry points used here typed (loaded once, under a lock)."""
    global _driver
    if _driver is None:
        with _lock:
            if _driver is None:
                try:
                    lib = ctypes.CDLL("libcuda.so.1")
                except OSError as exc:
                    from ..errors import NoGPUError

                    raise NoGPUError(f"no GPU: the NVIDIA driver library is not loadable ({exc})") from None
                p, u = ctypes.c_void_p, ctypes.c_uint
                lib.cuLaunchKernelEx.argtypes = [ctypes.POINTER(LaunchConfig), p, p, p]
                lib.cuLaunchKernelEx.restype = ctypes.c_int
                lib.cuTensorMapEncodeTiled.argtypes = [p, ctypes.c_int, u, p, p, p, p, p, ctypes.c_int,
                                                       ctypes.c_int, ctypes.c_int, ctypes.c_int]
                lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
                lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
                lib.cuGetErrorName.restype = ctypes.c_int
                lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
                lib.cuCtxGetCurrent.restype = ctypes.c_int
                lib.cuCtxSetCurrent.argtypes = [p]
                lib.cuCtxSetCurrent.restype = ctypes.c_int
                lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
                lib.cuMemAlloc_v2.restype = ctypes.c_int
                lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
                lib.cuDevicePrimaryCtxRetain.restype = ctypes.c_int
                _driver = lib
    return _driver


_raw = None


def raw_driver():
    """A second handle on libcuda whose functions carry no argtypes: the hot path passes ready
    ctypes objects, which then cross without any per-argument conversion (a few microseconds
    less per launch than the typed entry points)."""
    global _raw
    if _raw is None:
        driver()
        with _lock:
            if _raw is None:
                _raw = ctypes.CDLL("libcuda.so.1")
    return _raw


def error_name(code: int) -> str:
    name = ctypes.c_char_p()
    if driver().cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode()
    return f"CUresult {code}"


_thread = threading.local()


def ensure_context(context: int) -> None:
    """Make the device's primary context current on this thread (once per thread): a launch on
    the legacy default stream (handle 0) takes the thread's current context, and a thread that
    never touched CUDA has none."""
    if getattr(_thread, "context", None) == context:
        return
    lib = driver()
    current = ctypes.c_void_p()
    lib.cuCtxGetCurrent(ctypes.byref(current))
    if (current.value or 0) != context:
        err = lib.cuCtxSetCurrent(context)
        if err:
            raise LaunchError(f"could not make the GPU's context current on this thread ({error_name(err)})")
    _thread.context = context


@contextmanager
def relaxed_capture(lib=None):
    """This thread in relaxed stream-capture mode for the block, then back to its own mode: while
    any stream captures (torch.cuda.graph's default mode is global), cuMemAlloc, a library's own
    set-up calls and cuGraphInstantiate are refused and would invalidate the capture. What is
    built under it is memory, descriptors and graphs kept for later calls, not work the user's
    graph would record, so allowing them is sound. `lib`: the driver to use (default: libcuda)."""
    lib = lib or driver()
    mode = ctypes.c_int(CU_STREAM_CAPTURE_MODE_RELAXED)
    swapped = lib.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode)) == 0
    try:
        yield
    finally:
        if swapped:
            lib.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))


def device_alloc(nbytes: int, what: str) -> tuple[int, int]:
    """(pointer, context) of `nbytes` of device memory of the caller's own: a cuMemAlloc in relaxed
    capture mode, so it may be made while a stream captures (memory a user's graph will hold).
    device_free gives it back. `what` names it in the error."""
    lib = driver()
    ptr = ctypes.c_uint64()
    with relaxed_capture(lib):
        err = lib.cuMemAlloc_v2(ctypes.byref(ptr), nbytes)
    if err:
        raise LaunchError(f"could not allocate {what} of {nbytes} bytes ({error_name(err)})")
    context = ctypes.c_void_p()
    lib.cuCtxGetCurrent(ctypes.byref(context))
    return ptr.value, context.value


def device_free(ptr: int, context: int) -> None:
    """cuMemFree of device_alloc's memory, from any thread (a finalizer's may never have touched
    CUDA) and while a stream captures. It waits for the whole device: free only what is rare."""
    with relaxed_capture():
        ensure_context(context)
        driver().cuMemFree_v2(ctypes.c_uint64(ptr))


class DeviceMemory:
    """`nbytes` of device memory of the holder's own (device_alloc), at `ptr`, freed when this object
    goes (not at interpreter exit: the process's end frees everything): cuBLASLt's workspace where
    no `allocate` is given, and the workspaces a user's capture records (cuda/cublaslt.py,
    api/shared_workspaces.py)."""

    def __init__(self, nbytes: int, what: str):
        self.ptr, context = device_alloc(nbytes, what)
        weakref.finalize(self, _free_quietly, self.ptr, context).atexit = False


def _free_quietly(ptr: int, context: int) -> None:
    if sys.is_finalizing():  # the driver's bindings may be gone; the process frees everything
        return
    try:  # a finalizer must not raise; a leak is the lesser harm
        device_free(ptr, context)
    except Exception:
        pass


# argument kinds of a kernel signature -> ctypes slot types
_SLOT_TYPES = {"i32": ctypes.c_int32, "i64": ctypes.c_int64, "f32": ctypes.c_float, "ptr": ctypes.c_uint64}


class TensorMapSlot:
    """A 128-byte CUtensorMap in a 64-byte aligned host buffer."""

    def __init__(self):
        self._buffer = ctypes.create_string_buffer(TENSOR_MAP_BYTES + 64)
        self.address = (ctypes.addressof(self._buffer) + 63) & ~63

    def encode(self, dtype: str, ptr: int, rows: int, cols: int, row_stride_bytes: int,
               box: tuple[int, int], swizzle: int = 128) -> None:
        """Describe a row-major rows x cols matrix at `ptr` (rows `row_stride_bytes` apart), copied
        box = (rows, cols) at a time with the swizzle of that span in bytes (128 unless given; 0:
        none); zeros are read past the edges."""
        dims = (ctypes.c_uint64 * 2)(cols, rows)  # the driver counts from the innermost dimension
        strides = (ctypes.c_uint64 * 1)(row_stride_bytes)
        box_dim = (ctypes.c_uint32 * 2)(box[1], box[0])
        element_strides = (ctypes.c_uint32 * 2)(1, 1)
        err = driver().cuTensorMapEncodeTiled(self.address, TENSOR_MAP_DTYPES[dtype], 2, ptr, dims, strides,
                                              box_dim, element_strides, 0, SWIZZLE_BY_SPAN[swizzle],
                                              L2_PROMOTION_256B, 0)
        if err:  # nothing launched, the context intact: the point's own error, not one that ends a run
            raise BadArgumentError(f"cannot describe a {rows}x{cols} {dtype} operand for TMA (box {box}, row stride "
                              f"{row_stride_bytes} B): {error_name(err)}")


class PreparedLaunch:
    """One kernel launch with its configuration fixed and its arguments in reusable slots.

    `signature` names each argument's kind: "i32", "i64", "f32", "ptr" or "tmap" (a tensor map
    passed by value). Set values with `set(index, value)` (tensor maps: `tmap(index).encode(...)`),
    then `launch(stream_handle)`. One PreparedLaunch serves one thread at a time (its slots are
    shared state); the plans that own them say so.
    """

    def __init__(self, kernel_handle: int, name: str, grid: Sequence[int], block: Sequence[int], shmem: int,
                 signature: Sequence[str], cluster: Sequence[int] = (1, 1, 1)):
        if max(grid[1], grid[2]) > 65535:  # refused before any launch, as cuda/launch.py does
            raise BadArgumentError(f"{name}: grid {tuple(grid)} exceeds 65535 in y or z for this shape")
        self.name = name
        self.kernel = ctypes.c_void_p(kernel_handle)
        self.grid = tuple(int(g) for g in grid)
        self.block = tuple(int(b) for b in block)
        self.shmem = int(shmem)
        self.signature = tuple(signature)
        self.slots: list = []
        addresses = []
        for kind in self.signature:
            if kind == "tmap":
                slot = TensorMapSlot()
                addresses.append(slot.address)
            else:
                slot = _SLOT_TYPES[kind]()
                addresses.append(ctypes.addressof(slot))
            self.slots.append(slot)
        self._params = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
        self.cluster = tuple(int(c) for c in cluster)
        cfg = LaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = self.grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = self.block
        cfg.sharedMemBytes = self.shmem
        if self.cluster != (1, 1, 1):
            attr = LaunchAttribute()
            attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value[0], attr.value[1], attr.value[2] = self.cluster
            self._attr = attr
            cfg.attrs = ctypes.pointer(attr)
            cfg.numAttrs = 1
        self._config = cfg
        self._fn = raw_driver().cuLaunchKernelEx
        self._args = (ctypes.byref(cfg), self.kernel, self._params, None)

    @property
    def params_address(self) -> int:
        """The address of the kernelParams array (one pointer per argument slot)."""
        return ctypes.addressof(self._params)

    def set(self, index: int, value) -> None:
        self.slots[index].value = value

    def tmap(self, index: int) -> TensorMapSlot:
        return self.slots[index]

    def launch(self, stream: int) -> None:
        """Enqueue the launch on the raw stream handle `stream`; a refused launch raises LaunchError."""
        self._config.hStream = stream
        err = self._fn(*self._args)
        if err:
            raise LaunchError(f"{self.name}: launch failed ({error_name(err)})")
