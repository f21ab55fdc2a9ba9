"""bgemm (strided batched SGEMM): every kernel and baseline over the odd-shape batch sweep, the
entry point against torch.bmm / baddbmm, and `gemmlab bench --op bgemm` end to end."""
import json

import pytest

from gemmlab import registry
from gemmlab.cli import main
from gemmlab.harness.bench import verify_sweep
from gemmlab.ops import ShapeArgs
from gemmlab.ops.bgemm import OP
from gemmlab.problem import BatchedGemmProblem

IMPLS = registry.all_impls("bgemm")


def _bad(results):
    return [f"{r.problem.shape} a={r.problem.alpha} b={r.problem.beta}: {r.status} {r.reason}"
            for r in results if r.status != "PASS"]


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_odd_shape_batch_sweep(impl):
    if impl.kind == "baseline" and impl.unavailable_reason():
        pytest.skip(impl.unavailable_reason())
    results = verify_sweep([impl], OP.sweep(ShapeArgs()))
    assert len(results) == 2 * 9 and not _bad(results), "\n".join(_bad(results))


@pytest.mark.parametrize("impl", [k for k in IMPLS if k.kind == "kernel"], ids=lambda i: i.name)
def test_large_batches_aligned_and_not(impl):
    """Tile-aligned matrices (16-byte paths) and odd ones whose batch offsets break 16-byte alignment."""
    problems = [BatchedGemmProblem(256, 256, 256, 1.0, 0.0, batch=3),
                BatchedGemmProblem(129, 131, 67, -0.5, 2.0, batch=5)]
    results = verify_sweep([impl], problems)
    assert not _bad(results), "\n".join(_bad(results))


@pytest.mark.parametrize("impl", [k for k in IMPLS if k.kind == "kernel"], ids=lambda i: i.name)
def test_batches_past_the_grid_z_limit(impl):
    """gridDim.z stops at 65535, so a kernel loops over the batches past it (b += gridDim.z): twice
    round for 2 * 65535 + 3 batches of tiny odd matrices, alpha/beta both ways."""
    problems = [BatchedGemmProblem(5, 3, 7, 1.0, 0.0, batch=2 * 65535 + 3),
                BatchedGemmProblem(5, 3, 7, -0.5, 2.0, batch=2 * 65535 + 3)]
    assert impl.launch(problems[0], impl.resolve({})).grid[2] == 65535
    results = verify_sweep([impl], problems)
    assert not _bad(results), "\n".join(_bad(results))


def test_entry_point_against_torch():
    torch = pytest.importorskip("torch")
    import gemmlab

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.rand(7, 65, 33, device="cuda").sub_(0.5)
    b = torch.rand(7, 33, 129, device="cuda").sub_(0.5)
    ref = a.double() @ b.double()
    c = gemmlab.bgemm(a, b)
    assert isinstance(c, torch.Tensor) and c.shape == (7, 65, 129)
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-5
    c0 = torch.rand(7, 65, 129, device="cuda")
    want = 2.0 * ref - 0.5 * c0.double()
    out = gemmlab.bgemm(a, b, c0.clone(), alpha=2.0, beta=-0.5)
    assert float((out.double() - want).norm() / want.norm()) < 1e-5
    with pytest.raises(ValueError, match="3-D"):
        gemmlab.bgemm(a[0], b[0])
    with pytest.raises(ValueError, match="batch sizes differ"):
        gemmlab.bgemm(a, b[:6])
    with pytest.raises(ValueError, match="inner dimensions"):
        gemmlab.bgemm(a, b[:, :32])


def test_bench_end_to_end(tmp_path, capsys):
    db = tmp_path / "r.db"
    code = main(["bench", "--op", "bgemm", "--sizes", "3x64,2x65x33x17", "--repeat", "3", "--warmup", "1",
                 "--db", str(db), "--json", str(tmp_path / "rows.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "batched_pipeline" in out and "share of cublas" in out
    rows = json.loads((tmp_path / "rows.json").read_text())
    rows = rows["results"] if isinstance(rows, dict) else rows
    names = {r["impl"] for r in rows if r["status"] == "PASS"}
    assert {"batched_pipeline", "cublas"} <= names
    # every implementation run passed (bench exits 0 on an ERROR row), each at both shapes
    assert not [(r["impl"], r["status"], r.get("reason")) for r in rows if r["status"] != "PASS"]
    assert all(sum(r["impl"] == name for r in rows) == 2 for name in names)
    assert all(r["op"] == "bgemm" and r["extra"]["batch"] in (3, 2) for r in rows)
