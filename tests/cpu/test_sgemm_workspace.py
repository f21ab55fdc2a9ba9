"""The sgemm bench runner's workspace (ops/sgemm.py) without a GPU, CuPy and the launch faked:
zeroed once when allocated; split-K's planes never cleared; stream-K's flags cleared again only
when another shape reuses the buffer (its flags may then lie on the last shape's partial tiles)."""
import sys
import types

import pytest

from gemmlab import registry
from gemmlab.cuda import launch
from gemmlab.kernels.sgemm import specs
from gemmlab.ops.sgemm import GemmRunner
from gemmlab.problem import GemmProblem

SPEC = registry.get("bigtile", "sgemm")


class FakeCupy:
    """What the runner asks of CuPy, recorded: allocations (zeroed) and memsets."""

    float32 = "float32"

    def __init__(self):
        self.events = []
        self.cuda = types.SimpleNamespace(
            get_current_stream=lambda: types.SimpleNamespace(synchronize=lambda: None),
            runtime=types.SimpleNamespace(memsetAsync=self._memset))

    def zeros(self, n, dtype):
        self.events.append(("zeros", n))
        ptr = 4096 * len(self.events)
        return types.SimpleNamespace(size=n, data=types.SimpleNamespace(ptr=ptr))

    def _memset(self, ptr, value, nbytes, stream):
        self.events.append(("memset", ptr, value, nbytes, stream))


@pytest.fixture
def fake(monkeypatch):
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(specs, "sm_count", lambda: 132)
    launched = []
    monkeypatch.setattr(launch, "launch_gemm", lambda ck, geometry, stream, *args: launched.append(args[-1]))
    cp.launched = launched
    return cp


def _runner(**params) -> GemmRunner:
    runner = GemmRunner.__new__(GemmRunner)  # no compilation: the kernel is never launched
    runner.impl, runner.params, runner.compiled, runner.reduce = SPEC, SPEC.resolve(params), object(), None
    runner._workspace = runner._workspace_shape = None
    return runner


def _run(runner, p: GemmProblem):
    runner.enqueue(p, *(types.SimpleNamespace(data=types.SimpleNamespace(ptr=0)),) * 3,
                   types.SimpleNamespace(handle=7))


def test_stream_k_clears_once_at_allocation_and_again_only_for_another_shape(fake):
    runner = _runner(STREAMK=1)
    one_tile = GemmProblem(128, 256, 8192)  # 1 tile over 132 blocks: flags in floats 0-31, slots after
    many_tiles = GemmProblem(33 * 128, 256, 16)  # 33 tiles of 2 K-steps, 66 blocks: flags in floats 0-63
    big, small = SPEC.workspace_floats(one_tile, runner.params), SPEC.workspace_floats(many_tiles, runner.params)
    assert small < big, "the second shape reuses the first one's buffer"
    _run(runner, one_tile)
    _run(runner, one_tile)
    assert fake.events == [("zeros", big)], "allocated zeroed, never cleared again for its own shape"
    _run(runner, many_tiles)
    ptr = fake.launched[0]
    assert fake.events[1:] == [("memset", ptr, 0, 4 * small, 7)], "flags 32-63 lay on the last shape's slot 0"
    _run(runner, many_tiles)
    assert len(fake.events) == 2 and fake.launched == [ptr] * 4
    _run(runner, GemmProblem(4096, 4096, 4096))
    assert fake.events[2:] == [("zeros", SPEC.workspace_floats(GemmProblem(4096, 4096, 4096), runner.params))], \
        "a larger need: a new zeroed buffer, not cleared twice"


def test_split_k_planes_are_never_cleared(fake):
    runner = _runner(SPLITK=2)
    first, second = GemmProblem(512, 512, 4096), GemmProblem(256, 256, 4096)
    assert SPEC.workspace_floats(first, runner.params) == 2 * 512 * 512
    for p in (first, second, first):
        _run(runner, p)
    assert fake.events == [("zeros", 2 * 512 * 512)], "written before they are read: zeroed once, at allocation"


def test_the_sm_count_is_read_once_and_the_stand_in_is_not_remembered(monkeypatch):
    """specs.sm_count remembers the GPU's count once read (the dispatch's refit asks for it at every
    candidate of a new shape, and each read asked the driver again), but not the stand-in it gives
    without a GPU: a process that reads before its GPU answers would keep 132 for good."""
    from types import SimpleNamespace

    from gemmlab.cuda import device
    from gemmlab.kernels.sgemm import specs as sgemm_specs

    monkeypatch.setattr(sgemm_specs, "_sm_count", [])
    reads = []

    def no_gpu(index=0):
        reads.append(index)
        raise RuntimeError("no GPU")

    monkeypatch.setattr(device, "info", no_gpu)
    assert sgemm_specs.sm_count() == 132 and sgemm_specs.sm_count() == 132
    assert len(reads) == 2, "the stand-in is not remembered"
    monkeypatch.setattr(device, "info", lambda index=0: reads.append(index) or SimpleNamespace(sm_count=78))
    assert [sgemm_specs.sm_count() for _ in range(3)] == [78, 78, 78]
    assert len(reads) == 3, "the GPU's count read once"
