"""Streams: a stream= argument read as a raw handle, and the ordering between a call's stream and
the streams its operands' producers named.

A __cuda_array_interface__ producer may name its own stream, and the protocol asks a consumer to
order its work after that stream's. A call runs on A's stream; where B or C names another, that
stream's pending work (B being written, C's old values) must finish first, and afterwards that
stream waits for the call (C's producer must see the new C, B's must not overwrite B while it is
read): an event recorded on one stream and waited on by the other, made only for streams a
producer named and only where they differ from the launch stream. Under a capture of the launch
stream nothing is ordered (_capturing).
"""
from __future__ import annotations

import ctypes
import operator
from typing import Any, Iterable

from ..errors import BadArgumentError
from .interface import ADDRESS_LIMIT


def handle(stream: Any) -> int:
    """A raw stream handle from an int, a torch or CuPy stream, or a __cuda_stream__ object; one
    line for anything else (a bool, a negative or too large number, a handle that is not one)."""
    if type(stream) is int and 0 <= stream < ADDRESS_LIMIT:  # the common case first (plans' execute)
        return stream
    value = None if isinstance(stream, (bool, int)) else _handle_of(stream)
    if value is None or not 0 <= value < ADDRESS_LIMIT:
        raise BadArgumentError(f"stream must be a stream handle (an integer from 0 to 2^64 - 1) or a torch/CuPy/CUDA "
                               f"stream, not {stream!r}")
    return value


def _handle_of(stream: Any) -> int:
    if hasattr(type(stream), "__index__"):  # a NumPy integer
        return operator.index(stream)
    if isinstance(stream, ctypes.c_void_p):  # a raw handle as Numba holds one (None: the null stream)
        return stream.value or 0
    try:  # an integer only (a float handle is no handle); anything the object raises is one line
        if hasattr(stream, "__cuda_stream__"):
            return operator.index(stream.__cuda_stream__()[1])
        for attr in ("cuda_stream", "ptr", "handle"):
            if hasattr(stream, attr):
                value = getattr(stream, attr)
                return operator.index(getattr(value, "value", value) or 0)  # Numba's handle: a c_void_p, None for the null stream
    except Exception as exc:
        raise BadArgumentError(f"stream {stream!r} gives no stream handle ({type(exc).__name__}: {exc})") from None
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


def _capturing(launch: int) -> bool:
    """Whether the launch stream is being captured (or cannot say: the legacy stream while another
    captures in global mode). An event recorded outside a capture and waited on inside it, or a
    producer's stream made to wait on one recorded inside (a fork the capture never joins),
    would break the user's graph; under capture the ordering with other streams is the capturer's."""
    from ..cuda.launch_graph import is_captured

    return is_captured(launch)


def join(launch: int, streams: Iterable[int]) -> tuple[int, ...]:
    """Before a launch on `launch`: wait for every other stream in `streams` (the ones producers
    named). Returns those it ordered, for release: the capture state is read once, here, since
    a wait on an event recorded in a capture would itself pull `launch` into that capture. A
    producer's stream being captured while `launch` is not is refused: the call would run now,
    outside the graph that is to produce the operand, and the capture could not end joined."""
    others = tuple(set(streams) - {launch})
    if not others or _capturing(launch):
        return ()
    for s in others:
        if _capturing(s):
            raise BadArgumentError(f"an operand names stream {s:#x}, which is being captured, but the call runs on "
                                   f"stream {launch:#x}, which is not: run it on the captured stream (stream=), "
                                   "or give operands that name it")
    for s in others:
        _order(s, launch)
    return others


def release(launch: int, ordered: tuple[int, ...]) -> None:
    """After the launch: work on each stream join ordered waits for it (a producer writing B or
    reading C next)."""
    for s in ordered:
        _order(launch, s)
