"""cuda.core, imported once under a lock, for every gemmlab module that uses it.

cuda.core's first import loads a versioned submodule (cuda.core.cu13) and copies its names
into the package, so a thread that imports it while another is doing so can find the names
missing: eight threads compiling kernels at once, first thing in a process, failed 4 to 7 times
in 8 with "ImportError: cannot import name 'Program' from 'cuda.core.cu13'". Once the first
import has finished, plain attribute access is safe from any thread."""
from __future__ import annotations

import threading
from types import ModuleType

_lock = threading.Lock()
_module: ModuleType | None = None


def cuda_core() -> ModuleType:
    """The cuda.core package, fully imported (by the first caller, under the lock)."""
    global _module
    if _module is None:
        with _lock:
            if _module is None:
                import cuda.core

                _module = cuda.core
    return _module
