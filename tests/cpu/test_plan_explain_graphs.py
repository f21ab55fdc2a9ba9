"""A plan's explain() says when its executor's CUDA graphs were turned off (a capture or an
instantiation failed: every call then launches directly), and why. Before session 35 the text
said nothing, and the docs claimed it did."""
from __future__ import annotations

import types

import gemmlab

from .fake_api_gpu import CAI, fake_gpu  # noqa: F401  (the fixture)


def _plan():
    return gemmlab.Matmul(CAI(64, 32), CAI(32, 16))


def test_graphs_on_add_no_line(fake_gpu):  # noqa: F811
    plan = _plan()
    plan._executor.graph = types.SimpleNamespace(enabled=True, disabled_reason="")
    assert "graphs:" not in plan.explain()


def test_a_kernels_launch_graph_turned_off_is_named(fake_gpu):  # noqa: F811
    plan = _plan()
    plan._executor.graph = types.SimpleNamespace(enabled=False, disabled_reason="cuGraphInstantiate: CUDA_ERROR_X")
    assert "graphs:  off, each call launches directly: cuGraphInstantiate: CUDA_ERROR_X" in plan.explain()


def test_a_cublas_replay_turned_off_is_named(fake_gpu):  # noqa: F811
    plan = _plan()
    plan._executor.call = types.SimpleNamespace(enabled=False, disabled_reason="")
    assert "graphs:  off, each call launches directly: no reason kept" in plan.explain()
