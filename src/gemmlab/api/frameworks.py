"""What the plain calls' hot paths (api/calls.py, api/sum_calls.py) read from torch and CuPy, set
once per process: the array types, the dtypes each op takes, the stream readers, and the
templates of new torch outputs."""
from __future__ import annotations

from .operands import torch_stream_reader

torch_refs: dict = {}  # torch.Tensor, the dtypes each op takes from torch, raw-stream accessor (set once)
# Templates of the hot paths' new outputs: (M, N, torch dtype) -> a 1 x 1 tensor expanded to M x N,
# "sum" -> a 0-d fp32 tensor (reduce_sum). torch.empty_like of a template is a new dense tensor on
# the template's device (gemmlab's) and that device's current stream, 1.2-1.5 us less than
# A.new_empty((M, N), dtype=) with the free counted (session 22, H200: 3.4-3.8 us against 4.9-5.3,
# on a slow host). A template's one element lives in CuPy's memory pool, not in torch's: made
# while torch allocates from a private pool (torch.cuda.graph, torch.compile's CUDA graphs and
# their warm-up runs), torch's would belong to that pool and be freed or reused under us.
# (A template on the meta device, empty_like(..., device=) to make the output, costs 14 us.)
# The templates of one type share that element (_units): a template is a view, a few us to make,
# where making the element (CuPy's allocation, DLPack) took about 75 us of each new shape's first
# call until session 37 (H100, an LLM's x @ W.T with M changing). Bounded all the same.
torch_outputs: dict = {}
TORCH_OUTPUTS_KEPT = 1024
_units: dict = {}  # (device, torch dtype) -> the one-element tensor the templates of that type expand
cupy_refs: dict = {}  # cupy.ndarray (None where it lacks the flags read here), dtypes, stream reader


def setup_torch() -> None:
    import torch

    torch_refs.update(tensor=torch.Tensor, f32=torch.float32, stream=torch_stream_reader(), empty_like=torch.empty_like,
                      dtypes={"sgemm": {torch.float32: "fp32"},
                              "hgemm": {torch.float32: "tf32", torch.float16: "fp16", torch.bfloat16: "bf16"}})


def setup_cupy() -> None:
    import cupy
    import numpy as np

    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    # _c_contiguous / _f_contiguous: the flags CuPy keeps on every array (x.flags builds an object)
    nd = cupy.ndarray if hasattr(cupy.ndarray, "_c_contiguous") and hasattr(cupy.ndarray, "_f_contiguous") else None
    cupy_refs.update(ndarray=nd, f32=f32, stream=cupy.cuda.get_current_stream,
                     dtypes={"sgemm": {f32: "fp32"}, "hgemm": {f32: "tf32", f16: "fp16"}})


def new_torch_output(key, shape: tuple, dtype, like):
    """A new `shape` tensor of `dtype` on `like`'s device where `key` has no template yet (the hot
    paths look the template up themselves): the template (see torch_outputs) is made and kept, and
    the tensor made from it; while the current stream is being captured none is made, and the
    tensor comes from new_empty (the template then comes with a later call). A 1 x 1 tensor
    expanded: empty_like keeps the strides of a dense tensor, so a 1 x 1 output gets (1, 1), and
    gives an expanded (overlapping) one contiguous ones, as new_empty would. Its memory is CuPy's,
    taken in over DLPack."""
    import cupy
    import torch

    if torch.cuda.is_current_stream_capturing():
        return like.new_empty(shape, dtype=dtype)
    device = like.get_device()
    one = _units.get((device, dtype))
    if one is None:
        with cupy.cuda.Device(device):
            raw = cupy.empty((1, dtype.itemsize), dtype=cupy.uint8)
        one = _units[(device, dtype)] = torch.from_dlpack(raw).view(dtype)  # (1, 1), in no pool of torch's
    if len(torch_outputs) >= TORCH_OUTPUTS_KEPT:
        torch_outputs.clear()
    template = torch_outputs[key] = one.expand(*shape) if shape else one.reshape(())
    return torch.empty_like(template)
