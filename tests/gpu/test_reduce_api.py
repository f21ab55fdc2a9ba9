"""gemmlab.api.reduce_sum (exported as gemmlab.reduce_sum) on CuPy and torch inputs."""
import math

import numpy as np
import pytest

from gemmlab import registry
from gemmlab.errors import BadArgumentError
from gemmlab.api import DEFAULT_REDUCE, reduce_sum

KERNEL_NAMES = [k.name for k in registry.kernels("reduce")]


def _ref(host):
    return float(np.asarray(host, dtype=np.float64).sum())


@pytest.mark.parametrize("impl", KERNEL_NAMES + ["cub", "torch"])
def test_every_impl_through_the_api(impl):
    import cupy as cp

    if impl in ("cub", "torch") and registry.get(impl, "reduce").unavailable_reason():
        pytest.skip(registry.get(impl, "reduce").unavailable_reason())
    host = np.random.default_rng(1).integers(-4, 5, size=123_457).astype(np.float32)
    out = reduce_sum(cp.asarray(host), impl=impl)
    assert isinstance(out, cp.ndarray) and out.shape == () and out.dtype == cp.float32
    assert float(out.get()) == _ref(host)


def test_shapes_and_views():
    import cupy as cp

    host = np.random.default_rng(2).uniform(-1, 1, (300, 701)).astype(np.float32)
    x = cp.asarray(host)
    ref = _ref(host)
    assert math.isclose(float(reduce_sum(x).get()), ref, rel_tol=0, abs_tol=1e-3)
    assert math.isclose(float(reduce_sum(x[:, ::3]).get()), _ref(host[:, ::3]), abs_tol=1e-3)
    assert math.isclose(float(reduce_sum(x.T).get()), ref, abs_tol=1e-3)
    assert float(reduce_sum(cp.zeros(0, dtype=cp.float32)).get()) == 0.0
    assert float(reduce_sum(cp.full(7, 2.0, dtype=cp.float32)).get()) == 14.0


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    t = torch.arange(1000, device="cuda", dtype=torch.float32)
    out = reduce_sum(t)
    assert isinstance(out, torch.Tensor) and out.shape == () and out.item() == 499500.0
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t2 = torch.ones(1 << 20, device="cuda")
        out2 = reduce_sum(t2)
    s.synchronize()
    assert out2.item() == float(1 << 20)


def test_bad_input():
    import cupy as cp

    with pytest.raises(BadArgumentError, match="float32"):
        reduce_sum(cp.zeros(10, dtype=cp.float64))
    with pytest.raises(BadArgumentError, match="host"):
        reduce_sum(np.zeros(10, dtype=np.float32))
    with pytest.raises(BadArgumentError, match="ceiling"):
        reduce_sum(cp.zeros(10, dtype=cp.float32), impl="copy")


def test_default_is_a_single_pass_rung():
    from gemmlab.kernels.reduce.specs import SINGLE_PASS

    assert SINGLE_PASS in registry.get(DEFAULT_REDUCE, "reduce").tags


def test_cli_verify_and_bench(tmp_path, capsys):
    from gemmlab.cli import main

    assert main(["verify", "--op", "reduce", "--impl", "shuffle,single_pass,tile_queue", "--n", "1,1000,2^20+7"]) == 0
    md = tmp_path / "bench.md"
    code = main(["bench", "--op", "reduce", "--impl", "single_pass", "--n", "4096,65536", "--repeat", "3",
                 "--db", str(tmp_path / "r.db"), "--markdown", str(md)])
    out = capsys.readouterr().out
    assert code == 0, out
    text = md.read_text()
    for needle in ("single_pass", "cub", "copy", "GB/s", "share of the copy", "share of cub", "Device:"):
        assert needle in text
    from gemmlab.store import ResultStore

    with ResultStore(tmp_path / "r.db") as store:
        rows = store.results(op="reduce")
    assert {r["impl"] for r in rows} >= {"single_pass", "cub", "copy"}
    assert all(r["status"] == "PASS" and r["gbps"] > 0 for r in rows)
