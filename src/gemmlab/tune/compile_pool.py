"""Compile many candidates in parallel: NVRTC in a process pool, sharing the disk cache.

A failure or a spill is a result with its reason, never an exception for the sweep.
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from ..cuda.compile import Resources


@dataclass
class CompileOutcome:
    params: dict
    resources: Resources | None
    seconds: float
    error: str = ""
    cache_key: str = ""  # where the cubin is in the NVRTC cache (empty when it failed)


def compile_one(args) -> CompileOutcome:
    name, params, arch = args
    from .. import registry
    from ..cuda.compile import compile_kernel
    from ..errors import GemmlabError

    try:
        ck = compile_kernel(registry.get(name), params, arch=arch)
    except GemmlabError as exc:
        return CompileOutcome(params, None, 0.0, str(exc))
    r = ck.resources
    if r.spill_stores or r.spill_loads or r.stack_frame:
        return CompileOutcome(params, r, ck.compile_seconds,
                              f"spills ({r.spill_stores} B stores, {r.spill_loads} B loads, {r.stack_frame} B stack)")
    return CompileOutcome(params, r, ck.compile_seconds, cache_key=ck.cache_key)


def compile_all(name: str, points: list[dict], arch: str, jobs: int | None = None) -> list[CompileOutcome]:
    jobs = jobs or os.cpu_count() or 1
    work = [(name, p, arch) for p in points]
    if jobs <= 1 or len(work) <= 1:
        return [compile_one(w) for w in work]
    # spawn: the parent may hold a CUDA context, which must not be forked
    import multiprocessing as mp

    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as pool:
        return list(pool.map(compile_one, work, chunksize=1))
