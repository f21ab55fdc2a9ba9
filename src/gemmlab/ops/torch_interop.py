"""torch objects over gemmlab's buffers and streams, for the torch-based baselines of every op."""
from __future__ import annotations

_torch_streams: dict[int, object] = {}


def torch_stream(handle: int):
    """A torch stream object over a raw stream handle (cached: one per handle)."""
    import torch

    stream = _torch_streams.get(handle)
    if stream is None:
        stream = _torch_streams[handle] = torch.cuda.ExternalStream(handle)
    return stream


_views_cache: dict[tuple, tuple] = {}


def torch_views(*arrays, bf16: bool = False):
    """torch views of CuPy arrays, made once per set of buffers (DLPack costs host time).
    bf16: the first two arrays hold bf16 bits as uint16 and are viewed as bfloat16."""
    import torch

    key = (bf16, *((x.data.ptr, x.shape, x.strides) for x in arrays))
    views = _views_cache.get(key)
    if views is None:
        if len(_views_cache) >= 2:  # each entry keeps its arrays alive
            _views_cache.clear()
        views = tuple(torch.from_dlpack(x) for x in arrays)
        if bf16:
            views = (views[0].view(torch.bfloat16), views[1].view(torch.bfloat16), *views[2:])
        _views_cache[key] = views
    return views


def torch_reason() -> str:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    return ""
