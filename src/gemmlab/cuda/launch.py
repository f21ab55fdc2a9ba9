"""Launch a compiled kernel on a stream with the SGEMM argument convention."""
from __future__ import annotations

import numpy as np

from ..errors import LaunchError
from ..registry import Launch
from .compile import CompiledKernel


def launch_gemm(ck: CompiledKernel, geometry: Launch, stream, M: int, N: int, K: int, alpha: float,
                a_ptr: int, b_ptr: int, beta: float, c_ptr: int) -> None:
    """Enqueue C = alpha*A@B + beta*C; pointers are raw device addresses."""
    from cuda.core import LaunchConfig, launch

    if max(geometry.grid[1], geometry.grid[2]) > 65535:
        raise LaunchError(f"{ck.spec.name}: grid {geometry.grid} exceeds 65535 in y or z for this shape")
    config = LaunchConfig(grid=geometry.grid, block=geometry.block, shmem_size=geometry.shmem)
    try:
        launch(stream, config, ck.kernel(), np.int32(M), np.int32(N), np.int32(K), np.float32(alpha),
               a_ptr, b_ptr, np.float32(beta), c_ptr)
    except Exception as exc:
        raise LaunchError(f"{ck.spec.name}: launch failed ({exc})") from None
