"""Streams: a stream= argument read as a raw handle, and the ordering between a call's stream and
the streams its operands' producers named.

A __cuda_array_interface__ producer may name its own stream, and the protocol asks a consumer to
order its work after that stream's. A call runs on A's stream; where B or C names another, that
stream's pending work (B being written, C's old values) must finish first, and C's producer must
see the new C after it: an event recorded on one stream and waited on by the other, made only
where the streams differ (torch and CuPy operands all carry their framework's current stream).
"""
from __future__ import annotations

from typing import Any, Iterable

from ..errors import BadArgumentError
from .interface import ADDRESS_LIMIT


def handle(stream: Any) -> int:
    """A raw stream handle from an int, a torch or CuPy stream, or a __cuda_stream__ object; one
    line for anything else (a bool, a negative or too large number, a handle that is not one)."""
    if type(stream) is not bool and isinstance(stream, int):
        value = stream
    else:
        value = _handle_of(stream)
    if type(value) is bool or not isinstance(value, int) or not 0 <= value < ADDRESS_LIMIT:
        raise BadArgumentError(f"stream must be a stream handle (an integer from 0 to 2^64 - 1) or a torch/CuPy/CUDA "
                               f"stream, not {stream!r}")
    return value


def _handle_of(stream: Any):
    try:
        if hasattr(stream, "__cuda_stream__"):
            return int(stream.__cuda_stream__()[1])
        for attr in ("cuda_stream", "ptr", "handle"):
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
    except (TypeError, ValueError, IndexError, OverflowError) as exc:
        raise BadArgumentError(f"stream {stream!r} gives no stream handle ({exc})") from None
    raise BadArgumentError(f"stream must be a stream handle or a torch/CuPy/CUDA stream, got {type(stream).__name__}")


def _order(first: int, then: int) -> None:
    """Work enqueued on `then` from now on starts after what `first` holds now."""
    from cupy.cuda import runtime  # plain handles (CuPy's ExternalStream is deprecated)

    event = runtime.eventCreateWithFlags(runtime.eventDisableTiming)
    try:
        runtime.eventRecord(event, first)
        runtime.streamWaitEvent(then, event, 0)
    finally:
        runtime.eventDestroy(event)  # released once it completes; the wait already enqueued holds


def join(launch: int, streams: Iterable[int]) -> None:
    """Before a launch on `launch`: wait for every other stream in `streams`."""
    for s in set(streams):
        if s != launch:
            _order(s, launch)


def release(launch: int, stream: int) -> None:
    """After the launch: work on `stream` (C's producer's) waits for it."""
    if stream != launch:
        _order(launch, stream)
