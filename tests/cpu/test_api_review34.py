"""Session 34: a kernel the caller names is refused when the call is decided, for what the kernel
cannot run (its input types, its shape rule, the GPU's architecture), so explain answers what the
call does. Before, explain said "runs: wmma" for tf32 inputs, and "runs: persistent" on an sm_80
GPU, while the call refused both later, at its executor or compile."""
from __future__ import annotations

import io

import pytest

import gemmlab
from gemmlab.errors import BadArgumentError

from .fake_api_gpu import CAI, fake_gpu  # noqa: F401  (the fixture)

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"


@pytest.mark.parametrize("kwargs, says", [
    (dict(op="hgemm", dtype="tf32", impl="wmma", gpu=H100), "wmma takes fp16 or bf16 inputs, not tf32"),
    (dict(op="hgemm", dtype="bf16", impl="persistent", gpu=A100, arch="sm_80"), r"persistent needs sm_90a \(Hopper\)"),
    (dict(op="sgemm", impl="tma_ffma", gpu=A100, arch="sm_80"), r"tma_ffma needs sm_90a \(Hopper\)"),
])
def test_explain_refuses_a_named_kernel_the_call_refuses(kwargs, says):
    with pytest.raises(BadArgumentError, match=says):
        gemmlab.explain(shape=(256, 256, 256), file=io.StringIO(), **kwargs)


def test_the_call_refuses_it_in_the_same_line_before_any_launch(fake_gpu):
    with pytest.raises(BadArgumentError, match="wmma takes fp16 or bf16 inputs, not tf32"):
        gemmlab.hgemm(CAI(64, 64), CAI(64, 64), impl="wmma")
    assert not any(e[0] == "run" for e in fake_gpu)


def test_a_named_library_or_runnable_kernel_is_still_answered_on_a_cpu():
    """A library's availability is its call's to say (explain answers for another GPU on a CPU)."""
    for kwargs in (dict(op="hgemm", dtype="bf16", impl="cublas"), dict(op="hgemm", dtype="tf32", impl="tf32_wgmma"),
                   dict(op="reduce", shape=(1000,), impl="single_pass")):
        args = dict(shape=(256, 256, 256), gpu=H100) | kwargs
        assert f"runs:    {kwargs['impl']} " in gemmlab.explain(file=io.StringIO(), **args)


def test_explain_with_arrays_and_another_gpu_answers_for_that_gpus_architecture(fake_gpu):
    """Beside arrays, gpu= naming another GPU took this GPU's architecture: 'on NVIDIA A100 (sm_90)
    runs: persistent'. A GPU a table names gives its own; one no table names needs arch=."""
    with pytest.raises(BadArgumentError, match="needs arch="):
        gemmlab.explain(CAI(64, 64, typestr="<f2"), CAI(64, 64, typestr="<f2"), gpu=A100, file=io.StringIO())
    with pytest.raises(BadArgumentError, match=r"persistent needs sm_90a \(Hopper\)"):
        gemmlab.explain(CAI(64, 64, typestr="<f2"), CAI(64, 64, typestr="<f2"), impl="persistent", gpu=A100,
                        arch="sm_80", file=io.StringIO())
    text = gemmlab.explain(CAI(64, 64), CAI(64, 64), gpu="NVIDIA H200", file=io.StringIO())
    assert "on NVIDIA H200 (sm_90)" in text
