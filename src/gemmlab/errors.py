"""One exception type per failure kind.

The CLI turns each into one line on stderr and an exit code: 1 for a verification
failure (the kernel ran and gave a wrong answer), 2 for everything that stopped the
run before an answer existed (bad input, no GPU, a compile failure, no memory).
"""
from __future__ import annotations


class GemmlabError(Exception):
    """Base class: a failure the user should see as one clear line."""

    exit_code = 2


class BadArgumentError(GemmlabError, ValueError):
    """A shape, dtype, name or option the user gave cannot be used."""


class UnknownKernelError(BadArgumentError):
    """No kernel or baseline is registered under this name."""


class ConstraintError(BadArgumentError):
    """Template parameters break one of the kernel's constraints (checked before compiling)."""


class NoGPUError(GemmlabError):
    """The command needs a CUDA device and none is usable."""


class CompileError(GemmlabError):
    """NVRTC rejected the source; the message carries the compiler log."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class OutOfMemoryError(GemmlabError):
    """The GPU could not hold the problem's arrays."""


class LaunchError(GemmlabError):
    """A kernel launch or a CUDA call failed (illegal address, bad configuration...)."""


class VerificationError(GemmlabError):
    """A kernel's result differs from the fp64 reference beyond the stated bound."""

    exit_code = 1


def run_script(main, *args) -> int:
    """The exit status of a scripts/ entry point `main(*args)`, with the CLI's rule for failures:
    a GemmlabError (bad input, no GPU, a compile failure) or a missing optional package becomes one
    line on stderr and its exit code, never a traceback. Returns main's own status otherwise
    (None counts as 0). A missing gemmlab module is a bug, and is raised as one."""
    import sys
    from pathlib import Path

    name = Path(sys.argv[0]).name or "script"
    try:
        status = main(*args)
    except GemmlabError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ModuleNotFoundError as exc:
        if not exc.name or exc.name.split(".")[0] == "gemmlab":  # a bug of ours, not a missing package
            raise
        print(f"{name}: error: needs the module {exc.name!r}, which is not installed here", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{name}: error: interrupted", file=sys.stderr)
        return 130
    return int(status or 0)
