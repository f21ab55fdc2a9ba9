"""A small real sweep on the GPU: valid candidates verified and timed, a spilling one
recorded as ERROR with its reason, and the best used by bench's lookup."""
from gemmlab import registry
from gemmlab.cuda.device import info
from gemmlab.problem import GemmProblem
from gemmlab.store import ResultStore
from gemmlab.harness.tuned import best_params
from gemmlab.tune.search import Exhaustive
from gemmlab.tune.space import enumerate_space
from gemmlab.tune.tuner import TuneOptions, tune


def test_small_real_sweep(tmp_path):
    spec = registry.get("warptiling")
    kept = enumerate_space(spec, {"BM": (64, 128), "BN": (64, 128), "BK": (8,), "NT": (128, 256)}).kept[:7]
    spilling = {"BM": 256, "BN": 64, "BK": 32, "WM": 128, "WN": 32, "WNITER": 4, "TM": 8, "TN": 4, "NT": 128}
    points = kept + [spilling]
    store = ResultStore(tmp_path / "t.db")
    gpu = info().name
    run = store.start_run("tune", "test", {"gpu": {"name": gpu}})
    problem = GemmProblem(512, 384, 256)
    summary = tune(spec, problem, Exhaustive(points, {}), TuneOptions(jobs=4), info().arch, store, run, gpu)
    statuses = [r["status"] for r in summary.trials]
    assert statuses.count("PASS") == 7 and statuses.count("ERROR") == 1, statuses
    bad = next(r for r in summary.trials if r["status"] == "ERROR")
    assert bad["params"] == spilling and "spills" in bad["reason"]
    assert all(r["gflops"] > 0 and r["rel_err"] < 1e-5 for r in summary.trials if r["status"] == "PASS")
    params, shape, gflops = best_params(store, gpu, spec.name, problem)
    assert shape == problem.shape and gflops == summary.best["gflops"]


def test_small_real_sweep_on_a_local_dask_cluster(tmp_path, monkeypatch):
    """The same kind of sweep through `gemmlab tune --cluster local`: compiled on CPU workers,
    verified and timed on a pinned GPU worker, rows under the worker's GPU name."""
    import pytest

    pytest.importorskip("distributed", reason='the Dask back end needs pip install "gemmlab[cluster]"')
    from gemmlab.cli import main

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))  # cold: the CPU workers compile
    db = tmp_path / "c.db"
    args = ["tune", "--impl", "warptiling", "--M", "512", "--N", "384", "--K", "256", "--param", "BM=64,128",
            "--param", "BN=64,128", "--param", "BK=8", "--param", "NT=128,256", "--budget", "6",
            "--cluster", "local", "--devices", "0", "--compile-workers", "2", "--db", str(db)]
    assert main(args) == 0
    with ResultStore(db) as store:
        rows = store.results()
        runs = store.runs()
    assert len(rows) == 6 and all(r["status"] == "PASS" and r["gflops"] > 0 and r["rel_err"] < 1e-5 for r in rows)
    assert [r["gpu"] for r in runs] == [info().name]
    assert runs[0]["env"]["cluster"]["workers"][0]["cuda_visible_devices"] == "0"
    assert all(r["extra"]["compile_seconds"] > 0 for r in rows), "compiled on the cluster, cold"


def test_small_real_hgemm_sweep_per_dtype(tmp_path):
    """Tensor-core kernels tune too: the rows are verified in their dtype, and the lookup that
    bench and the API use finds them for that dtype only."""
    import pytest

    if info().arch not in ("sm_90", "sm_90a"):
        pytest.skip(f"persistent is a Hopper kernel; this GPU is {info().arch}")
    spec = registry.get("persistent")
    store = ResultStore(tmp_path / "h.db")
    gpu = info().name
    for dtype, flag in (("bf16", 1), ("fp16", 0)):
        points = enumerate_space(spec, {"DTYPE": (flag,), "BN": (128,), "STAGES": (3, 4)}).kept[:3]
        problem = GemmProblem(1000, 768, 520, dtype=dtype)  # odd M: the TMA kernels' padded path
        run = store.start_run("tune", f"test {dtype}", {"gpu": {"name": gpu}})
        summary = tune(spec, problem, Exhaustive(points, {}), TuneOptions(jobs=4), info().arch, store, run, gpu)
        assert [r["status"] for r in summary.trials] == ["PASS"] * len(points), summary.trials
        assert all(r["dtype"] == dtype and r["gflops"] > 0 for r in summary.trials)
        params, shape, gflops = best_params(store, gpu, spec.name, problem)
        assert params["DTYPE"] == flag and gflops == summary.best["gflops"]
