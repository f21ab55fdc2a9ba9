"""`gemmlab analyze`: compile report, theoretical occupancy and SASS mix, with no GPU.

Everything comes from the compiled cubin and ptxas's resource report for a named
architecture: registers and shared memory from ptxas, block size and dynamic shared memory
from the kernel's spec (its launch geometry for the given shape), the SASS from cuobjdump
or nvdisasm when one is installed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import GemmlabError
from .occupancy import Occupancy, occupancy
from . import sass as S
from .sass import SassMix


@dataclass
class Analysis:
    impl: str
    arch: str
    params: dict
    mangled: str
    resources: Any  # cuda.compile.Resources
    smem_dynamic: int
    threads: int
    occupancy: Occupancy
    sass: SassMix | None
    sass_reason: str = ""
    sass_text: str = ""
    op: str = "sgemm"
    cluster: tuple = (1, 1, 1)  # CTAs per thread-block cluster (rung 5's CM x CN), shown beside the occupancy

    def row(self) -> dict:
        r = self.resources
        return dict(op=self.op, impl=self.impl, arch=self.arch, params=self.params, mangled=self.mangled,
                    registers=r.registers, smem_static=r.smem_static, smem_dynamic=self.smem_dynamic,
                    stack_frame=r.stack_frame, spill_stores=r.spill_stores, spill_loads=r.spill_loads,
                    threads=self.threads, blocks_per_sm=self.occupancy.blocks_per_sm,
                    occupancy_pct=100 * self.occupancy.occupancy, limiter=self.occupancy.limiter,
                    occupancy=self.occupancy.as_fields(),
                    sass_tool=self.sass.tool if self.sass else None, sass_reason=self.sass_reason or None,
                    sass=self.sass.as_fields() if self.sass else None)


def analyze(spec: Any, params: dict | None, arch: str, problem, with_sass: bool = True,
            tool: tuple[str, str] | None = None) -> Analysis:
    from ..cuda.compile import compile_kernel

    ck = compile_kernel(spec, params, arch=arch)
    geometry = spec.geometry(problem, ck.params)  # its block and shared memory: a grid past the GPU's limits still has them
    occ = occupancy(arch, geometry.threads, ck.resources.registers, ck.resources.smem_static, geometry.shmem,
                    ck.resources.barriers)
    mix, reason, text = None, "", ""
    if with_sass:
        tool = tool or S.find_tool()
        if tool is None:
            reason = S.no_tool()
        else:
            try:
                text = S.disassemble(ck.cubin, tool)
                mix = S.sass_mix(text, ck.mangled, tool[0])
            except GemmlabError as exc:
                reason = str(exc)
    return Analysis(spec.name, arch, dict(ck.params), ck.mangled, ck.resources, geometry.shmem, geometry.threads,
                    occ, mix, reason, text, op=spec.op, cluster=tuple(geometry.cluster))
