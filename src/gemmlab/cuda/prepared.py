"""What every op's runner starts from: a kernel compiled for this device, or a baseline
checked to be usable. The op modules add their calling convention on top (gemmlab.ops)."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import NoGPUError
from .compile import CompiledKernel, Resources, compile_kernel


class PreparedImpl:
    """`compiled` (with its resolved `params`) for a kernel; nothing but a check for a baseline."""

    def __init__(self, impl: Any, params: Mapping[str, int] | None = None, arch: str | None = None):
        self.impl = impl
        self.compiled: CompiledKernel | None = None
        self.params: dict = {}
        if impl.kind == "kernel":
            self.arch = impl.arch_for(arch or device_arch())
            self.compiled = compile_kernel(impl, params, arch=self.arch)
            self.params = dict(self.compiled.params)
        else:
            reason = impl.unavailable_reason()
            if reason:
                raise NoGPUError(f"{impl.name} is unavailable: {reason}")

    @property
    def name(self) -> str:
        return self.impl.name

    @property
    def resources(self) -> Resources | None:
        return self.compiled.resources if self.compiled else None


def device_arch() -> str:
    from .device import info

    return info().arch
