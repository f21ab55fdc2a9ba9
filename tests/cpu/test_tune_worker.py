"""The sweep survives candidates that crash, hang or poison their context; --resume skips
what is recorded; heatmaps render. No GPU: the candidates are stand-ins (fake_tasks.py)."""
import pytest

from gemmlab import registry
from gemmlab.problem import GemmProblem
from gemmlab.store import ResultStore
from gemmlab.harness.tuned import best_params, tried_points
from gemmlab.tune.search import Exhaustive
from gemmlab.tune.tuner import TuneOptions, tune
from gemmlab.tune.worker import WorkerPool

FAKE = "tests.cpu.fake_tasks:misbehave"


def test_pool_replaces_dead_hung_and_poisoned_workers():
    tasks = [{"params": {"X": x}} for x in (0, 1, 4, 2, 3, 5)]
    seen = {}
    pool = WorkerPool(task_path=FAKE, timeout_s=3.0)
    pool.run(iter(tasks), lambda task, result: seen.__setitem__(task["params"]["X"], result))
    assert set(seen) == {0, 1, 2, 3, 4, 5}, "every candidate gets a result, the sweep goes on"
    assert seen[1]["status"] == "ERROR" and "exit code 7" in seen[1]["reason"]
    assert seen[2]["status"] == "ERROR" and "timed out" in seen[2]["reason"]
    assert seen[3]["status"] == "ERROR" and "sticky" in seen[3]["reason"]
    assert [seen[x]["status"] for x in (0, 4, 5)] == ["PASS"] * 3
    assert pool.restarts == 3


def test_two_workers_share_one_queue():
    tasks = [{"params": {"X": x}} for x in (0, 4, 5, 6, 7, 8)]
    seen = []
    WorkerPool(devices=[None, None], task_path=FAKE).run(iter(tasks), lambda t, r: seen.append(r["gflops"]))
    assert sorted(seen) == [1000.0, 1004.0, 1005.0, 1006.0, 1007.0, 1008.0]  # no BK: no fraction


@pytest.fixture
def small_space():
    spec = registry.get("blocktiling_1d")
    # at most 512 threads: NVRTC 13.0 spills TM=4 at 1024 threads (64-register cap), 13.5 does not
    points = [{**spec.defaults, "BN": 32, "TM": 4, "BK": 16}, {**spec.defaults, "TM": 8, "BK": 8},
              {**spec.defaults, "TM": 8, "BK": 16}]
    for p in points:
        assert not spec.failed_constraints(p)
    return spec, points


def test_tune_records_every_trial_and_resume_skips_them(tmp_path, small_space, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    spec, points = small_space
    store = ResultStore(tmp_path / "r.db")
    problem = GemmProblem(256, 256, 256)
    options = TuneOptions(task_path=FAKE, jobs=1, timeout_s=5.0)
    run = store.start_run("tune", "test", {"gpu": {"name": "FakeGPU"}})
    summary = tune(spec, problem, Exhaustive(points, {}), options, "sm_90", store, run, "FakeGPU")
    assert len(summary.trials) == 3 and summary.compiled == 3
    assert len(store.results(run_id=run)) == 3
    assert all(r["extra"]["compile_seconds"] >= 0 for r in store.results(run_id=run))
    assert len(tried_points(store, "FakeGPU", spec.name, problem)) == 3

    run2 = store.start_run("tune", "test --resume", {"gpu": {"name": "FakeGPU"}})
    again = tune(spec, problem, Exhaustive(points, {}), TuneOptions(task_path=FAKE, jobs=1, resume=True),
                 "sm_90", store, run2, "FakeGPU")
    assert again.trials == [] and again.skipped == 3
    other_gpu = tune(spec, problem, Exhaustive(points, {}), TuneOptions(task_path=FAKE, jobs=1, resume=True),
                     "sm_90", store, store.start_run("tune", "t", {"gpu": {"name": "Other"}}), "Other")
    assert len(other_gpu.trials) == 3, "resume is per GPU"

    # the best PASS (TM=8, BK=16 -> 1008.16 in the fake) is what bench and the API will use
    params, shape, gflops = best_params(store, "FakeGPU", spec.name, GemmProblem(300, 200, 256))
    assert (params["TM"], params["BK"]) == (8, 16) and shape == "256x256x256" and gflops == 1008.16
    assert best_params(store, "NoSuchGPU", spec.name, problem) is None


def test_compile_failures_are_rows_not_exceptions(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    spec = registry.get("warptiling")
    spilling = {"BM": 256, "BN": 64, "BK": 32, "WM": 128, "WN": 32, "WNITER": 4, "TM": 8, "TN": 4, "NT": 128}
    assert not spec.failed_constraints(spilling)
    summary = tune(spec, GemmProblem(64, 64, 64), Exhaustive([spilling], {}), TuneOptions(task_path=FAKE, jobs=1),
                   "sm_90")
    assert summary.trials[0]["status"] == "ERROR" and "spills" in summary.trials[0]["reason"]


def test_heatmap_and_progress_plots(tmp_path):
    from gemmlab.tune.plots import default_axes, tune_plots

    rows = [{"status": "PASS", "gflops": 100.0 * bm / bn + tm, "params": {"BM": bm, "BN": bn, "TM": tm, "TN": 4}}
            for bm in (64, 128) for bn in (64, 128, 256) for tm in (4, 8)]
    rows.append({"status": "FAIL", "gflops": None, "params": {"BM": 64, "BN": 64, "TM": 4, "TN": 4}})
    assert default_axes(rows) == [("BM", "BN")]
    paths = tune_plots(rows, tmp_path, "k", "64x64x64")
    assert [p.name for p in paths] == ["tune_k_64x64x64_progress.png", "tune_k_64x64x64_BMxBN.png"]
    for p in paths:
        assert p.stat().st_size > 5000 and p.read_bytes()[:4] == b"\x89PNG"


def test_heatmap_axes_carry_the_parameter_values(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gemmlab.tune import plots

    rows = [{"status": "PASS", "gflops": float(bm + bn), "params": {"BM": bm, "BN": bn}}
            for bm in (64, 128) for bn in (32, 256)]
    captured = {}
    real_savefig = plt.Figure.savefig

    def spy(fig, path, **kw):
        ax = fig.axes[0]
        captured["x"] = [t.get_text() for t in ax.get_xticklabels()]
        captured["y"] = [t.get_text() for t in ax.get_yticklabels()]
        return real_savefig(fig, path, **kw)

    plt.Figure.savefig = spy
    try:
        plots.heatmap(rows, "BM", "BN", tmp_path / "h.png", "t")
    finally:
        plt.Figure.savefig = real_savefig
    assert captured == {"x": ["64", "128"], "y": ["32", "256"]}


def test_bayes_strategy_proposes_only_kept_points_and_learns():
    pytest.importorskip("optuna", reason="optuna is optional (pip install optuna)")
    from gemmlab.tune.search import Bayes
    from gemmlab.tune.space import axes, enumerate_space

    spec = registry.get("blocktiling_2d")
    report = enumerate_space(spec)
    strategy = Bayes(report.kept, axes(spec), budget=12, seed=3)
    kept = [tuple(sorted(p.items())) for p in report.kept]
    asked = []
    while (point := strategy.ask()) is not None:
        assert tuple(sorted(point.items())) in kept, "a proposal broke a constraint"
        asked.append(point)
        strategy.tell(point, float(point["BM"] * point["BN"]))
    assert len(asked) == 12 and len({tuple(sorted(p.items())) for p in asked}) == 12


def _bayes_sequence(seed: int, budget: int | None, prior=()):
    from gemmlab.tune.search import Bayes
    from gemmlab.tune.space import axes, enumerate_space

    spec = registry.get("autotuned")
    strategy = Bayes(enumerate_space(spec).kept, axes(spec), budget=budget, seed=seed)
    for point, gflops in prior:
        strategy.prior(point, gflops)
    asked = []
    while (point := strategy.ask()) is not None:
        asked.append(tuple(sorted(point.items())))
        strategy.tell(point, float(point["BM"] * point["BN"]))
    return asked, strategy


def test_bayes_is_reproducible_from_its_seed_when_the_sampler_runs_dry(monkeypatch):
    """After a dozen trials TPE keeps proposing points it has seen, and the fallback took the first
    of a set, whose order follows PYTHONHASHSEED; now the seed picks it, and the study hears it."""
    pytest.importorskip("optuna", reason="optuna is optional (pip install optuna)")
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, 'tests/cpu'); from test_tune_worker import _bayes_sequence; "
            "import hashlib; a, s = _bayes_sequence(0, 20); "
            "done = [t for t in s._study.trials if t.state.name == 'COMPLETE']; "
            "print(len(a), len(set(a)), len(done), hashlib.sha1(repr(a).encode()).hexdigest())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": str(h)}).stdout for h in (1, 2)}
    assert len(outs) == 1, outs
    asked, distinct, completed, _ = outs.pop().split()
    assert asked == distinct, "no point asked twice"
    assert completed == asked, "every asked point is a completed trial of the study (the fallback's too)"


def test_bayes_resume_learns_the_recorded_trials_and_counts_them():
    pytest.importorskip("optuna", reason="optuna is optional (pip install optuna)")
    first, _ = _bayes_sequence(5, 10)
    prior = [(dict(k), float(dict(k)["BM"] * dict(k)["BN"])) for k in first]
    resumed, strategy = _bayes_sequence(5, 25, prior)
    assert len(resumed) == 15, "--budget is the total over the runs, as the fixed orders count it"
    assert not set(resumed) & set(first), "a recorded point is not asked again"
    completed = [t for t in strategy._study.trials if t.state.name == "COMPLETE"]
    assert len(completed) >= 25, "the recorded trials are in the study"


def test_dry_run_reports_the_space(capsys):
    from gemmlab.cli import main

    assert main(["tune", "--impl", "blocktiling_1d", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "blocktiling_1d: 108 points, 63 kept" in out  # 3 BM x 3 BN x 4 BK x 3 TM
    assert "threads must split the A tile" in out


def test_bad_tune_input_is_one_line(capsys):
    from gemmlab.cli import main

    # each refusal by its own message: a machine with no GPU also exits 2 ("no GPU"), so the
    # code alone would not show that the option was checked
    for args, message in ((["--impl", "cublas"], "cublas is a baseline: there is nothing to tune"),
                          (["--impl", "naive", "--strategy", "nope"], "--strategy 'nope': choose one of"),
                          (["--impl", "naive", "--devices", "a,b"], "--devices 'a,b' must be GPU indices")):
        assert main(["tune", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err
