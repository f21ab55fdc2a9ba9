"""What stops a bench or verify run and what does not (session 26's review): a check made before
anything is launched (a grid past the GPU's limits, more shared memory than it has) is one point's
ERROR row; a real launch failure stops the run, but the point that met it is recorded first."""
from types import SimpleNamespace

import pytest

from gemmlab import ops, registry
from gemmlab.errors import BadArgumentError, LaunchError
from gemmlab.harness import bench as harness_bench
from gemmlab.problem import GemmProblem
from gemmlab.registry import Launch


def test_a_grid_past_the_limits_is_refused_without_a_launch():
    from gemmlab.cuda.launch import launch_kernel

    ck = SimpleNamespace(spec=SimpleNamespace(name="vectorize"))
    with pytest.raises(BadArgumentError, match="exceeds 65535") as info:
        launch_kernel(ck, Launch(grid=(1, 65536, 1), block=(256, 1, 1)), None)
    assert not isinstance(info.value, LaunchError), "a LaunchError would end the whole run"


@pytest.fixture
def fake_device(monkeypatch):
    from gemmlab.cuda import device as cuda_device

    monkeypatch.setattr(cuda_device, "device", lambda index=0: SimpleNamespace(create_stream=lambda: None))
    op = ops.get("sgemm")
    monkeypatch.setattr(op, "timing_inputs", lambda problem, seed: None, raising=False)
    return op


@pytest.mark.parametrize("error, stops", [(BadArgumentError("too tall"), False), (LaunchError("illegal address"), True)])
def test_the_point_that_fails_is_recorded_and_only_a_launch_error_stops(fake_device, monkeypatch, error, stops):
    def prepare_for(impl, params, problem):
        if impl.name == "vectorize":
            raise error
        return SimpleNamespace(params={}, resources=None)

    monkeypatch.setattr(fake_device, "prepare_for", prepare_for, raising=False)
    monkeypatch.setattr(harness_bench, "verify_runner", lambda *a, **k: (SimpleNamespace(passed=True, reason=""), 0))
    monkeypatch.setattr(harness_bench, "time_enqueue", lambda *a, **k: (None, {}))
    impls = [registry.get(n, "sgemm") for n in ("vectorize", "naive")]
    seen = []
    options = harness_bench.BenchOptions()
    if stops:
        with pytest.raises(LaunchError):
            harness_bench.run_bench(impls, [GemmProblem(64, 64, 64)], options, on_result=seen.append)
        with pytest.raises(LaunchError):
            harness_bench.verify_sweep(impls, [GemmProblem(64, 64, 64)], on_result=seen.append)
        assert [(p.impl, p.status, p.reason) for p in seen] == [("vectorize", "ERROR", "illegal address")] * 2
    else:
        points = harness_bench.run_bench(impls, [GemmProblem(64, 64, 64)], options, on_result=seen.append)
        assert [(p.impl, p.status) for p in points] == [("vectorize", "ERROR"), ("naive", "PASS")]
        assert points[0].reason == "too tall" and seen == points
