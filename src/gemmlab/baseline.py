"""A library call timed beside the kernels (cuBLAS, CUB, torch, Triton, a copy): what the registry
holds for it. Its own module so that the registry stays the kernels' spec and lookup."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable


@dataclass(frozen=True)
class Baseline:
    """A library call timed beside the kernels (cuBLAS, CUB, torch, Triton, a copy)."""

    name: str
    op: str
    title: str
    idea: str
    _available: Callable[[], str]  # "" when usable, else why not
    _enqueue: Callable  # the op's calling convention (see the op's module)
    bytes_per_element: int = 4  # reduce: bytes a baseline moves per element (the copy: 8)
    ceiling: bool = False  # a bandwidth reference (the copy), not an implementation of the op
    same_as: str | None = None  # set on variants: the same library call under another name

    kind = "baseline"
    rung = None
    params = ()
    seed = ""
    tags = ()
    dtypes = ()
    problem_check = None
    slow_path = None

    defaults = property(lambda self: {})  # a library has no parameters of ours

    def unavailable_reason(self) -> str:
        return self._available()

    def enqueue(self, *args):
        return self._enqueue(*args)

    def variant(self, name: str, title: str, idea: str) -> "Baseline":
        """The same library call, availability check and all, under another name (no parameters)."""
        return replace(self, name=name, title=title, idea=idea, same_as=self.name)
