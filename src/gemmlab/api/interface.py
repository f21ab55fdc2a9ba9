"""A __cuda_array_interface__ dict read and checked, with no GPU: what a producer that is neither
torch nor CuPy tells gemmlab about its array (shape, type, strides, pointer, read-only flag,
stream), and whether a strided layout may let two elements share memory.

The protocol (version 3, Numba's documentation) leaves much to the producer, and a dict that
looked plausible was once read as a dense array: strides not a multiple of the element size were
floored, a strides tuple of the wrong length was cut short by zip, negative dimensions cancelled
in the element count, a mask was ignored. Each is refused here in one BadArgumentError line.
"""
from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import NamedTuple

from ..errors import BadArgumentError

TYPESTR = {"<f4": "fp32", "<f2": "fp16", "<f8": "fp64"}  # the types gemmlab has names for
ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8}
ADDRESS_LIMIT = 2**64  # pointers and stream handles
NEWEST_VERSION = 3  # a later version may change what the fields mean: refused, not guessed at


class Fields(NamedTuple):
    shape: tuple[int, ...]
    dtype: str            # fp32, fp16, fp64, or NumPy's name for another type (refused by the op's checks)
    strides: tuple[int, ...] | None  # in elements; None: C order
    ptr: int
    readonly: bool
    stream: int | None    # None: the producer named none


def _type(typestr, what: str) -> tuple[str, int]:
    """(gemmlab's name, else NumPy's, and the item size in bytes) of a typestr, or one line. NumPy
    normalises the byte order ('=f4' and 'f4' are '<f4' here); a non-native one ('>f4') keeps its
    typestr as its name, so a refusal does not read "has float32, needs float32"."""
    if typestr in TYPESTR:
        return TYPESTR[typestr], ITEMSIZE[TYPESTR[typestr]]
    t = None
    if isinstance(typestr, str):
        try:
            import numpy

            t = numpy.dtype(typestr)
        except Exception:  # numpy says TypeError, ValueError or SyntaxError for a string it cannot read
            pass
    if t is None:
        raise BadArgumentError(f"{what}: __cuda_array_interface__ typestr {typestr!r} is not a type")
    return TYPESTR.get(t.str) or (t.name if t.isnative else t.str), t.itemsize


def _integers(values, what: str, field: str) -> tuple[int, ...]:
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise BadArgumentError(f"{what}: __cuda_array_interface__ {field} must be a tuple of integers, "
                               f"not {values!r}") from None


def parse(cai, what: str) -> Fields:
    """The fields of a producer's __cuda_array_interface__ dict, each checked."""
    if not isinstance(cai, Mapping):
        raise BadArgumentError(f"{what}: __cuda_array_interface__ must be a dict, not {type(cai).__name__}")
    missing = [k for k in ("shape", "typestr", "data") if k not in cai]
    if missing:
        raise BadArgumentError(f"{what}: __cuda_array_interface__ has no {', '.join(missing)}")
    version = cai.get("version", NEWEST_VERSION)
    if type(version) is not int or not 0 <= version <= NEWEST_VERSION:
        raise BadArgumentError(f"{what}: __cuda_array_interface__ version {version!r}; gemmlab reads versions "
                               f"up to {NEWEST_VERSION}")
    if cai.get("mask") is not None:
        raise BadArgumentError(f"{what}: a masked array (__cuda_array_interface__ mask); gemmlab reads every element")
    shape = _integers(cai["shape"], what, "shape")
    if any(d < 0 for d in shape):
        raise BadArgumentError(f"{what}: __cuda_array_interface__ shape {shape} has a negative dimension")
    dtype, item = _type(cai["typestr"], what)
    data = cai["data"]
    if not isinstance(data, (tuple, list)) or len(data) != 2:  # the protocol says a 2-tuple; a list is read alike
        raise BadArgumentError(f"{what}: __cuda_array_interface__ data must be (pointer, read-only), not {data!r}")
    ptr = 0 if data[0] is None else _integers(data[:1], what, "data pointer")[0]
    size = 1
    for d in shape:
        size *= d
    if size and (ptr <= 0 or ptr >= ADDRESS_LIMIT):
        raise BadArgumentError(f"{what}: __cuda_array_interface__ data pointer {ptr:#x} for {size} elements")
    if size and ptr % item:
        raise BadArgumentError(f"{what}: its data pointer {ptr:#x} is not a multiple of its {item}-byte element")
    strides = cai.get("strides")
    if strides is not None:
        strides = _integers(strides, what, "strides")
        if len(strides) != len(shape):
            raise BadArgumentError(f"{what}: __cuda_array_interface__ strides {strides} for a {len(shape)}-D shape")
        if size and any(s % item for s, n in zip(strides, shape) if n > 1):  # an empty array reads nothing
            raise BadArgumentError(f"{what}: strides {strides} (bytes) are not multiples of its {item}-byte element")
        strides = tuple(s // item for s in strides)
    return Fields(shape, dtype, strides, ptr, bool(data[1]), _stream(cai.get("stream"), what))


def _stream(stream, what: str) -> int | None:
    """The producer's stream: None, or a handle from 1 (1 and 2 are the legacy and per-thread
    default streams; version 3 forbids 0 as ambiguous)."""
    if stream is None:
        return None
    if type(stream) is bool or not isinstance(stream, int) or not 0 < stream < ADDRESS_LIMIT:
        raise BadArgumentError(f"{what}: __cuda_array_interface__ stream {stream!r} is not a stream handle "
                               "(an integer from 1; 0 is not allowed)")
    return int(stream)


def dense_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order strides in elements."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return tuple(strides)


def c_order(shape: tuple[int, ...], strides: tuple[int, ...] | None) -> bool:
    """Whether strides (None: C order) lay the array out in C order (a dimension of one element
    may have any stride)."""
    return strides is None or all(s == d or n == 1 for s, d, n in zip(strides, dense_strides(shape), shape))


def may_share(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether a strided layout may map two elements to one address. False only where it is sure:
    each dimension's step, in increasing size, clears the whole extent of the smaller ones (the
    rule torch applies before writing in place); a zero step over two or more elements always
    shares. Writing such an array in place races, so it is refused as an output."""
    if 0 in shape:  # no elements, nothing to share
        return False
    steps = sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1)
    reach = 0
    for step, n in steps:
        if step <= reach:
            return True
        reach += step * (n - 1)
    return False


def cupy_view(x, device: int, cupy):
    """A CuPy array over a producer's memory, made from its __cuda_array_interface__ dict. Not
    cupy.asarray: for a dict that names a stream, CuPy's import waits on the host until that stream
    is idle (the protocol's rule for a consumer that does not order itself; CuPy's
    CUPY_CUDA_ARRAY_INTERFACE_SYNC). A call has already made its own stream wait for the
    producer's (api/streams.py), so that wait would only block the caller for as long as the
    producer's queued work runs (session 36). `cupy` is the module, imported by the caller."""
    cai = x.__cuda_array_interface__
    f = parse(cai, "")
    dtype = cupy.dtype(cai["typestr"])
    if 0 in f.shape:
        return cupy.ndarray(f.shape, dtype)
    item = dtype.itemsize
    strides = f.strides if f.strides is not None else dense_strides(f.shape)
    low = sum(s * (n - 1) for s, n in zip(strides, f.shape) if s < 0)  # elements below the pointer
    high = sum(s * (n - 1) for s, n in zip(strides, f.shape) if s > 0)  # and above it
    memory = cupy.cuda.UnownedMemory(f.ptr + low * item, (high - low + 1) * item, x, device)
    return cupy.ndarray(f.shape, dtype, cupy.cuda.MemoryPointer(memory, -low * item),
                        tuple(s * item for s in strides))
