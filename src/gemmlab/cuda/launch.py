"""Launch a compiled kernel on a stream with the SGEMM argument convention."""
from __future__ import annotations

import numpy as np

from ..errors import BadArgumentError, LaunchError
from ..registry import Launch
from .compile import CompiledKernel


STATIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in to more dynamic shared memory


def allow_dynamic_smem(ck: CompiledKernel, nbytes: int) -> None:
    """Raise the kernel's dynamic shared-memory limit (once per size) or refuse clearly."""
    if getattr(ck, "_smem_optin", 0) >= nbytes:
        return
    from cuda.bindings import driver

    from .device import info

    limit = info().max_smem_per_block_optin
    if nbytes > limit:  # nothing launched: the context is fine, so no LaunchError (which ends a bench run)
        raise BadArgumentError(f"{ck.spec.name}: needs {nbytes} B of shared memory, the GPU allows {limit} B per block")
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = ck.kernel().handle
    if isinstance(handle, driver.CUkernel):  # library-loaded kernels take a per-device attribute
        err, dev = driver.cuCtxGetDevice()
        (err,) = driver.cuKernelSetAttribute(attr, nbytes, handle, dev)
    else:
        (err,) = driver.cuFuncSetAttribute(handle, attr, nbytes)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"{ck.spec.name}: could not allow {nbytes} B of shared memory ({err.name})")
    ck._smem_optin = nbytes


def launch_kernel(ck: CompiledKernel, geometry: Launch, stream, *args) -> None:
    """Enqueue one launch; args already typed (np.int32/np.float32 scalars, int pointers)."""
    from .core_import import cuda_core

    core = cuda_core()
    LaunchConfig, launch = core.LaunchConfig, core.launch

    if max(geometry.grid[1], geometry.grid[2]) > 65535:  # refused before launching, as above
        raise BadArgumentError(f"{ck.spec.name}: grid {geometry.grid} exceeds 65535 in y or z for this shape")
    if geometry.cluster != (1, 1, 1):  # cuda.core counts the grid in clusters then
        grid = tuple(g // c for g, c in zip(geometry.grid, geometry.cluster))
        config = LaunchConfig(grid=grid, cluster=geometry.cluster, block=geometry.block, shmem_size=geometry.shmem)
    else:
        config = LaunchConfig(grid=geometry.grid, block=geometry.block, shmem_size=geometry.shmem)
    if geometry.shmem > STATIC_SMEM_LIMIT:
        allow_dynamic_smem(ck, geometry.shmem)
    try:
        launch(stream, config, ck.kernel(), *args)
    except Exception as exc:
        raise LaunchError(f"{ck.spec.name}: launch failed ({exc})") from None


def launch_gemm(ck: CompiledKernel, geometry: Launch, stream, M: int, N: int, K: int, alpha: float,
                a_ptr: int, b_ptr: int, beta: float, c_ptr: int, *extra: int) -> None:
    """Enqueue C = alpha*A@B + beta*C; pointers are raw device addresses (extra: workspace)."""
    launch_kernel(ck, geometry, stream, np.int32(M), np.int32(N), np.int32(K), np.float32(alpha),
                  a_ptr, b_ptr, np.float32(beta), c_ptr, *extra)
