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
