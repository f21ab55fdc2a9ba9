"""Tests that could not fail, fifth audit (a helper's mutants of the tuner: tune/space.py, search.py,
sweeps.py, tuner.py, harness/tuned.py and harness/tables.py). Each test below kills mutants that
the CPU suite let live: it fails with them and passes without. CPU only and no process started:
the executor, the compile stream, the cluster session and the clock are stand-ins defined here.
The last test is the audit's one source fix: a relative GEMMLAB_DB no longer follows os.chdir."""
from __future__ import annotations

import random

import pytest

from gemmlab import registry
from gemmlab.errors import BadArgumentError
from gemmlab.harness.tuned import best_params, canonical, tried_points, usable_best
from gemmlab.problem import GemmProblem
from gemmlab.store import ResultStore
from gemmlab.tune import space
from gemmlab.tune.compile_pool import CompileOutcome
from gemmlab.tune.search import Exhaustive, RandomSample, random_sample
from gemmlab.tune.space import axes, enumerate_space, parse_param_axes
from gemmlab.tune.tuner import TuneOptions, TuneSummary, tune

from . import test_tune_devices_models

gpus = test_tune_devices_models.gpus  # the fixture of three fake GPUs, tuner.tune faked

# test_tune_space.py's hand-counted space: 8 points, 5 kept
HAND = {"BM": (32, 64), "BN": (32, 64), "BK": (8,), "TM": (4, 8)}
A_TILE = "threads must split the A tile (BM*BK/1) evenly"
B_TILE = "threads must split the B tile (BK*BN/1) evenly"


# ---------------------------------------------------------------- the space (tune/space.py)

def test_a_point_breaking_two_constraints_is_counted_under_the_first():
    """(64, 64, 8, 4): 1024 threads split neither tile; the dry run's table counts it once, under
    the first constraint it breaks (A), so A drops 2 points and B 1 - not 1 and 2."""
    report = enumerate_space(registry.get("blocktiling_1d"), HAND)
    assert dict(report.dropped) == {A_TILE: 2, B_TILE: 1}


def test_kept_points_come_in_the_specs_parameter_order_and_the_listed_value_order():
    """The exhaustive order (and so which points --budget takes) is the product over the spec's
    parameters in their declared order, each over its values as listed."""
    spec = registry.get("blocktiling_1d")
    report = enumerate_space(spec, {**HAND, "BM": (64, 32)})  # BM listed high first
    assert [tuple(p.items()) for p in report.kept] == [
        (("BM", 64), ("BN", 32), ("BK", 8), ("TM", 8)),
        (("BM", 64), ("BN", 64), ("BK", 8), ("TM", 8)),
        (("BM", 32), ("BN", 32), ("BK", 8), ("TM", 4)),
        (("BM", 32), ("BN", 32), ("BK", 8), ("TM", 8)),
        (("BM", 32), ("BN", 64), ("BK", 8), ("TM", 8))]
    assert Exhaustive(report.kept, {}, budget=1).points == [{"BM": 64, "BN": 32, "BK": 8, "TM": 8}]


def test_an_unknown_parameter_names_the_ones_there_are():
    with pytest.raises(BadArgumentError) as info:
        axes(registry.get("blocktiling_1d"), {"XX": (1,)})
    assert str(info.value) == "blocktiling_1d has no parameter 'XX' (parameters: BM, BN, BK, TM)"


def test_an_axis_with_no_values_is_refused():
    """parse_param_axes refuses an empty list first ('--param BM is empty'); axes() itself, called
    with one, must not make the whole space empty in silence."""
    with pytest.raises(BadArgumentError) as info:
        axes(registry.get("blocktiling_1d"), {"BM": ()})
    assert str(info.value) == "--param BM has no values"


def test_the_enumeration_limit_is_inclusive_and_its_message_exact(monkeypatch):
    spec = registry.get("blocktiling_1d")
    ten = tuple(range(1, 11))
    grid = {"BM": ten, "BN": ten, "BK": ten, "TM": (1,)}  # 1,000 points
    monkeypatch.setattr(space, "MAX_POINTS", 1000)
    assert enumerate_space(spec, grid).total == 1000, "a space of exactly MAX_POINTS is enumerated"
    monkeypatch.setattr(space, "MAX_POINTS", 999)
    with pytest.raises(BadArgumentError) as info:
        enumerate_space(spec, grid)
    assert str(info.value) == ("the search space of blocktiling_1d has 1,000 points, past the 999 that are "
                               "enumerated: list fewer values with --param")


def test_param_names_are_stripped_and_a_missing_name_is_named_as_such():
    assert parse_param_axes([" BM =64,128"]) == {"BM": (64, 128)}
    with pytest.raises(BadArgumentError) as info:
        parse_param_axes(["=8"])
    assert str(info.value) == "--param '=8' is not NAME=V1,V2,..."


# ---------------------------------------------------------------- the strategies (tune/search.py)

def test_random_takes_the_first_budget_points_of_the_seeds_shuffle_of_the_whole_space():
    pts = [{"a": i} for i in range(20)]
    for seed in (1, 7):
        shuffled = list(pts)
        random.Random(seed).shuffle(shuffled)
        assert random_sample(pts, 4, seed=seed) == shuffled[:4]
        assert RandomSample(pts, {}, None, seed).points == shuffled, "no budget: all of them, shuffled"
    assert random_sample(pts, 20, seed=1) != random_sample(pts, 20, seed=7), "--seed changes the order"
    assert random_sample(pts, 20, seed=1) != pts, "random is not the exhaustive order"


def test_bayes_without_optuna_says_how_to_install_it(monkeypatch):
    """review25's test sees 'needs Optuna'; the line also says how to get it."""
    import importlib.util

    from gemmlab.tune.search import Bayes

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "optuna" else real(name, *a))
    with pytest.raises(BadArgumentError) as info:
        Bayes(POINTS, axes(SPEC, HAND))
    assert str(info.value) == "--strategy bayes needs Optuna: pip install optuna"


def _completed(strategy) -> list:
    return [t for t in strategy._study.trials if t.state.name == "COMPLETE"]


def test_bayes_maximises_and_each_trial_is_told_its_own_points_figure():
    """The study maximises GFLOP/s, and every trial it completed - the fallback's too, once TPE
    only repeats itself (over 200 refused proposals in a row here) - holds the point that ran and
    that point's own figure."""
    pytest.importorskip("optuna", reason="optuna is optional (pip install optuna)")
    from .test_tune_worker import _bayes_sequence

    asked, strategy = _bayes_sequence(0, 20)
    study = strategy._study
    assert sum(t.state.name == "FAIL" for t in study.trials) >= 200, "the fallback ran"
    done = _completed(strategy)
    assert sorted(tuple(sorted(t.params.items())) for t in done) == sorted(asked)
    assert all(t.value == t.params["BM"] * t.params["BN"] for t in done)
    assert study.best_value == max(dict(k)["BM"] * dict(k)["BN"] for k in asked) == 32768.0


def test_bayes_refuses_a_recorded_point_outside_its_space_without_counting_it():
    """--resume hands prior() every point recorded for the GPU, kernel and shape, also those of a
    run over other --param values: one the constraints drop, or with a value off the axes, is
    neither a trial of the study nor part of the budget (and no ValueError from Optuna)."""
    pytest.importorskip("optuna", reason="optuna is optional (pip install optuna)")
    from gemmlab.tune.search import Bayes

    spec = registry.get("autotuned")
    report = enumerate_space(spec)
    strategy = Bayes(report.kept, axes(spec), budget=5, seed=0)
    dropped = {**report.kept[0], "TM": 32, "TN": 32}  # on the axes, but 16 threads' worth of C each
    assert spec.failed_constraints(dropped)
    strategy.prior(dropped, 5.0)
    strategy.prior({**report.kept[0], "BM": 999}, 5.0)  # off the axes
    assert strategy._asked == 0 and strategy._study.trials == []
    strategy.prior(report.kept[1], 123.5)
    (trial,) = _completed(strategy)
    assert strategy._asked == 1 and trial.params == report.kept[1] and trial.value == 123.5


@pytest.mark.usefixtures("gpus")
def test_the_cli_hands_tune_the_strategy_seed_and_budget_named(monkeypatch, tmp_path, capsys):
    from gemmlab.cli import main
    from gemmlab.tune import tuner

    seen = {}

    def fake_tune(spec, problem, strategy, *args, **kwargs):
        seen["strategy"] = strategy
        return TuneSummary()

    monkeypatch.setattr(tuner, "tune", fake_tune)  # over the fixture's own fake
    kept = enumerate_space(registry.get("vectorize")).kept
    for name, cls, expected in (("random", RandomSample, random_sample(kept, 3, seed=11)),
                                ("exhaustive", Exhaustive, kept[:3])):
        assert main(["tune", "--impl", "vectorize", "--strategy", name, "--seed", "11", "--budget", "3",
                     "--db", str(tmp_path / "r.db")]) == 0, capsys.readouterr().err
        assert type(seen["strategy"]) is cls and seen["strategy"].points == expected


# ---------------------------------------------------------------- the sweep (tune/tuner.py)

class FakeStream:
    """A CompileStream stand-in: each point's outcome at once (0.25 s each), `errors` by canonical
    key; 1.5 s from the first compilation to the last."""

    def __init__(self, errors):
        self.errors, self.seconds, self.closed = errors, 1.5, False

    def outcome(self, point):
        key = canonical(point)
        return CompileOutcome(point, None, 0.25, self.errors.get(key, ""))

    def close(self):
        self.closed = True


class FakeExecutor:
    """An executor that answers each task at once, PASS at BM + TM GFLOP/s from worker 'w1' (or
    answer(task)), and keeps what it was asked to compile and to run. (test_compile_stream.py's
    _LoggingExecutor logs the order of compilations and trials; this one answers as told.)"""

    def __init__(self, errors=None, restarts=0, answer=None):
        self.errors, self.restarts, self.answer = errors or {}, restarts, answer
        self.compiled, self.tasks, self.stream = None, [], None

    def compile(self, impl, points, arch):
        self.compiled = [canonical(p) for p in points]
        self.stream = FakeStream(self.errors)
        return self.stream

    def run(self, tasks, on_result):
        for task in tasks:
            self.tasks.append(task)
            result = self.answer(task) if self.answer else {
                "status": "PASS", "gflops": float(task["params"]["BM"] + task["params"]["TM"]), "t_median_ms": 1.0, "fatal": False,
                "worker": "w1"}
            on_result(task, result)


SPEC = registry.get("blocktiling_1d")
POINTS = enumerate_space(SPEC, HAND).kept  # 5 points
PROBLEM = GemmProblem(256, 256, 256)


def _tune(store, run, strategy=None, executor=None, gpu="FakeGPU", **options):
    return tune(SPEC, PROBLEM, strategy or Exhaustive(POINTS, {}), TuneOptions(**options), "sm_90", store, run, gpu,
                executor=executor or FakeExecutor())


@pytest.fixture
def store(tmp_path):
    with ResultStore(tmp_path / "r.db") as s:
        yield s


def _run(store, gpu="FakeGPU"):
    return store.start_run("tune", "t", {"gpu": {"name": gpu}})


def test_the_best_is_the_fastest_verified_trial():
    rows = [{"status": "PASS", "gflops": 5.0, "params": {"a": 1}}, {"status": "PASS", "gflops": 9.0, "params": {"a": 2}},
            {"status": "FAIL", "gflops": 20.0, "params": {"a": 3}}, {"status": "ERROR", "gflops": None, "params": {}},
            {"status": "PASS", "gflops": 7.0, "params": {"a": 4}}]
    assert TuneSummary(trials=rows).best == rows[1]
    assert TuneSummary(trials=rows[2:4]).best is None


def test_without_resume_recorded_points_run_again(store):
    first = _tune(store, _run(store))
    assert len(first.trials) == 5 and first.skipped == 0
    executor = FakeExecutor()
    again = _tune(store, _run(store), executor=executor)
    assert len(again.trials) == 5 and again.skipped == 0 and len(executor.compiled) == 5


def test_resume_compiles_and_runs_only_the_points_not_recorded(store):
    _tune(store, _run(store), Exhaustive(POINTS[:2], {}))
    executor = FakeExecutor()
    summary = _tune(store, _run(store), executor=executor, resume=True)
    rest = [canonical(p) for p in POINTS[2:]]
    assert executor.compiled == rest and [canonical(t["params"]) for t in executor.tasks] == rest
    assert summary.skipped == 2 and len(summary.trials) == 3 and summary.compiled == 3


def test_rows_are_stored_with_a_cold_l2_and_the_workers_and_compile_extras(store):
    run = _run(store)
    seen = []
    summary = tune(SPEC, PROBLEM, Exhaustive(POINTS[:2], {}), TuneOptions(warmup=3, repeat=4, min_time_ms=5.0),
                   "sm_90", store, run, "FakeGPU", on_result=seen.append, executor=FakeExecutor())
    assert seen == summary.trials and len(seen) == 2
    rows = store.results(run_id=run)
    assert [r["flush"] for r in rows] == [1, 1]
    assert [r["extra"] for r in rows] == [{"worker": "w1", "compile_seconds": 0.25}] * 2
    assert [(r["status"], r["gflops"], r["dtype"], r["op"], r["impl"]) for r in rows] == [
        ("PASS", 36.0, "fp32", "sgemm", "blocktiling_1d"), ("PASS", 40.0, "fp32", "sgemm", "blocktiling_1d")]


def test_each_task_carries_the_problem_and_the_timing_options():
    executor = FakeExecutor()
    tune(SPEC, GemmProblem(128, 64, 32, alpha=2.0, beta=0.5), Exhaustive(POINTS[:1], {}),
         TuneOptions(warmup=3, repeat=4, min_time_ms=5.0), "sm_90", executor=executor)
    assert executor.tasks == [{"impl": "blocktiling_1d", "params": POINTS[0], "M": 128, "N": 64, "K": 32,
                               "dtype": "fp32", "alpha": 2.0, "beta": 0.5, "warmup": 3, "repeat": 4,
                               "min_time_ms": 5.0}]


def test_a_point_that_fails_to_compile_is_one_error_row_with_its_compile_time_and_the_stream_is_closed(store):
    bad = canonical(POINTS[1])
    executor = FakeExecutor(errors={bad: "spills (8 B stores, 8 B loads, 0 B stack)"})
    summary = _tune(store, _run(store), executor=executor)
    assert len(summary.trials) == 5 and summary.compiled == 4
    assert bad not in [canonical(t["params"]) for t in executor.tasks] and len(executor.tasks) == 4
    (error,) = [t for t in summary.trials if t["status"] != "PASS"]
    assert (error["params"], error["status"], error["reason"], error["extra"]) == (
        POINTS[1], "ERROR", "spills (8 B stores, 8 B loads, 0 B stack)", {"compile_seconds": 0.25})
    assert summary.compile_seconds == 1.5 and executor.stream.closed


def test_restarts_come_from_the_executor_and_a_result_without_status_is_an_error():
    summary = tune(SPEC, PROBLEM, Exhaustive(POINTS[:1], {}), TuneOptions(precompile=False), "sm_90",
                   executor=FakeExecutor(restarts=2, answer=lambda task: {"reason": "no answer"}))
    assert summary.restarts == 2
    assert [(t["status"], t["reason"]) for t in summary.trials] == [("ERROR", "no answer")]


class _Clock:
    """tuner's time module: each perf_counter() one second later."""

    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        self.now += 1.0
        return self.now


def test_the_time_limit_stops_starting_candidates(monkeypatch):
    from gemmlab.tune import tuner

    monkeypatch.setattr(tuner, "time", _Clock())
    # start at 101; the loop asks at 102 and 103 (< 103.5), stops at 104; the wall time read at 105
    summary = tune(SPEC, PROBLEM, Exhaustive(POINTS, {}), TuneOptions(precompile=False, time_limit_s=2.5), "sm_90",
                   executor=FakeExecutor())
    assert [t["params"] for t in summary.trials] == POINTS[:2] and summary.wall_seconds == 4.0


def test_bayes_through_the_tuner_learns_every_trial_and_resumes_from_the_recorded_ones(store):
    """A learning strategy is never compiled up front; each result is told to its study; with
    --resume the recorded trials are told first and count toward --budget."""
    pytest.importorskip("optuna", reason="optuna is optional (pip install optuna)")
    from gemmlab.tune.search import Bayes

    grid = axes(SPEC, HAND)
    executor = FakeExecutor()
    strategy = Bayes(POINTS, grid, budget=2, seed=0)
    first = _tune(store, _run(store), strategy, executor)
    assert executor.compiled is None and len(first.trials) == 2
    assert sorted(t.value for t in _completed(strategy)) == sorted(t["gflops"] for t in first.trials)

    resumed = Bayes(POINTS, grid, budget=4, seed=0)
    again = _tune(store, _run(store), resumed, resume=True)
    assert len(again.trials) == 2, "--budget is the total over the runs"
    ran = {canonical(t["params"]) for t in first.trials + again.trials}
    assert len(ran) == 4 and len(_completed(resumed)) == 4


# ---------------------------------------------------------------- what was tuned (harness/tuned.py)

def _add(store, run, params, shape=(1024, 1024, 1024), status="PASS", gflops=1.0, **fields):
    store.add_result(run, **{"op": "sgemm", "impl": "blocktiling_1d", "impl_kind": "kernel", "params": params,
                             "M": shape[0], "N": shape[1], "K": shape[2], "dtype": "fp32", "status": status,
                             "gflops": gflops, **fields})


def test_a_points_recorded_figure_is_its_best_pass(store):
    run = _run(store)
    p, q = POINTS[0], POINTS[1]
    for status, gflops in (("PASS", 5.0), ("PASS", 9.0), ("FAIL", 50.0), ("PASS", 7.0)):
        _add(store, run, p, status=status, gflops=gflops)
    _add(store, run, q, status="FAIL", gflops=50.0)  # a failed verification's figure is no figure
    _add(store, run, None)  # a row without parameters names no point (and is no JSON to read)
    assert tried_points(store, "FakeGPU", "blocktiling_1d", GemmProblem(1024, 1024, 1024)) == {
        canonical(p): 9.0, canonical(q): None}


def test_a_points_key_does_not_depend_on_the_order_of_its_parameters(store):
    run = _run(store)
    _add(store, run, dict(reversed(list(POINTS[0].items()))), (256, 256, 256))
    summary = _tune(store, _run(store), Exhaustive(POINTS[:2], {}), resume=True)
    assert summary.skipped == 1 and [t["params"] for t in summary.trials] == [POINTS[1]]


def test_only_tune_runs_count_as_tuned(store):
    bench = store.start_run("bench", "b", {"gpu": {"name": "FakeGPU"}})
    _add(store, bench, POINTS[0], gflops=99.0)
    problem = GemmProblem(1024, 1024, 1024)
    assert tried_points(store, "FakeGPU", "blocktiling_1d", problem) == {}
    assert best_params(store, "FakeGPU", "blocktiling_1d", problem) is None


def test_rows_from_before_the_dtype_column_count_as_fp32(store):
    run = _run(store)
    _add(store, run, POINTS[2], gflops=3.0, dtype=None)
    problem = GemmProblem(1024, 1024, 1024)
    assert tried_points(store, "FakeGPU", "blocktiling_1d", problem) == {canonical(POINTS[2]): 3.0}
    assert best_params(store, "FakeGPU", "blocktiling_1d", problem) == (POINTS[2], "1024x1024x1024", 3.0)


@pytest.mark.parametrize("asked, shape, params", [
    ((2500, 2500, 2500), "4096x4096x4096", 1),  # log distance: 4096 is nearer (0.49 a side, against 0.89)
    ((1024, 1024, 4096), "1024x1024x1024", 0),
])
def test_the_nearest_tuned_shape_serves_with_its_own_best(store, asked, shape, params):
    run = _run(store)
    _add(store, run, POINTS[0], (1024, 1024, 1024), gflops=10.0)
    _add(store, run, POINTS[3], (1024, 1024, 1024), gflops=20.0, status="FAIL")  # faster, but wrong
    _add(store, run, POINTS[1], (4096, 4096, 4096), gflops=30.0)
    _add(store, run, POINTS[2], (4096, 4096, 4096), gflops=25.0)
    expected = [(POINTS[0], "1024x1024x1024", 10.0), (POINTS[1], "4096x4096x4096", 30.0)][params]
    assert best_params(store, "FakeGPU", "blocktiling_1d", GemmProblem(*asked)) == expected and expected[1] == shape


def test_tuned_parameters_the_constraints_now_refuse_are_not_used_and_missing_ones_take_the_defaults(store):
    """A database from another gemmlab: a point the spec's constraints refuse is unusable; one
    that names fewer parameters is checked with the spec's defaults for the others."""
    run = _run(store)
    broken = {"BM": 64, "BN": 64, "BK": 8, "TM": 4}  # 1024 threads split neither tile
    assert SPEC.failed_constraints(broken)
    _add(store, run, broken, (4096, 4096, 4096))
    assert usable_best(store, "FakeGPU", SPEC, GemmProblem(4096, 4096, 4096)) is None
    _add(store, run, {"BM": 32}, (1024, 1024, 1024))
    assert usable_best(store, "FakeGPU", SPEC, GemmProblem(1024, 1024, 1024)) == {"BM": 32}


def test_between_two_tuned_shapes_as_near_the_smaller_serves(store):
    run = _run(store)
    _add(store, run, POINTS[0], (4096, 1024, 2048))
    _add(store, run, POINTS[1], (1024, 4096, 2048))  # as far from 2048^3 (the same terms, summed in another order)
    assert best_params(store, "FakeGPU", "blocktiling_1d", GemmProblem(2048, 2048, 2048)) == (
        POINTS[1], "1024x4096x2048", 1.0)


# ---------------------------------------------------------------- one sweep per GPU model (tune/sweeps.py)

class FakeSession:
    """What sweeps.py asks of a ClusterSession: its address and its GPU workers by model."""

    address = "tcp://fake:8786"

    def __init__(self, *workers):
        self.groups = {}
        for w in workers:
            self.groups.setdefault(w.model, []).append(w)

    def models(self):
        return dict(reversed(list(self.groups.items())))  # not in name order


def _worker(address, model, host, device):
    from gemmlab.tune.cluster import GpuWorker

    return GpuWorker(address, {"gpu": {"name": model, "uuid": f"U-{device}", "compute_capability": "sm_90"},
                               "hostname": host, "cuda_visible_devices": device})


@pytest.fixture
def cluster(monkeypatch):
    """Three fake GPU workers (two H100s, one H200); each model's executor answers at once, or as
    `behaviour[model]` says (an exception to raise)."""
    from gemmlab.tune import sweeps

    behaviour, executors = {}, {}

    def executor(session, model, task_path, timeout_s):
        def answer(task):
            if model in behaviour:
                raise behaviour[model]
            return {"status": "PASS", "gflops": 1.0, "worker": model}

        executors[model] = FakeExecutor(answer=answer)
        return executors[model]

    monkeypatch.setattr(sweeps, "DaskExecutor", executor)
    session = FakeSession(_worker("tcp://b:1", "Fake H200", "host-b", "0"), _worker("tcp://a:1", "Fake H100", "host-a", "0"),
                          _worker("tcp://a:2", "Fake H100", "host-a", "1"))
    return session, behaviour, executors


def test_models_are_chosen_by_name_in_any_case_and_in_name_order(cluster):
    from gemmlab.tune.cluster import ClusterError
    from gemmlab.tune.sweeps import select_models

    session = cluster[0]
    assert [(s.model, [w.address for w in s.workers]) for s in select_models(session, None)] == [
        ("Fake H100", ["tcp://a:1", "tcp://a:2"]), ("Fake H200", ["tcp://b:1"])]
    assert [s.model for s in select_models(session, "h200")] == ["Fake H200"]
    with pytest.raises(ClusterError) as info:
        select_models(session, "A100")
    assert str(info.value) == "no GPU worker's model contains 'A100' (the cluster has: Fake H100, Fake H200)"


def test_each_model_runs_the_whole_strategy_as_its_own_run_with_its_workers_named(cluster, tmp_path):
    from gemmlab.tune.sweeps import select_models, tune_on_cluster

    session, _, executors = cluster
    seen = []
    sweeps = tune_on_cluster(SPEC, PROBLEM, lambda: Exhaustive(POINTS[:3], {}), TuneOptions(precompile=False), session,
                             select_models(session, None), tmp_path / "r.db", "gemmlab tune",
                             on_result=lambda model, row: seen.append((model, canonical(row["params"]))))
    keys = [canonical(p) for p in POINTS[:3]]
    assert sorted(seen) == sorted((m, k) for m in ("Fake H100", "Fake H200") for k in keys)
    assert {m: [canonical(t["params"]) for t in e.tasks] for m, e in executors.items()} == {
        "Fake H100": keys, "Fake H200": keys}, "each model gets a strategy of its own"
    with ResultStore(tmp_path / "r.db") as store:
        runs = {r["id"]: r for r in store.runs()}
        h100 = runs[sweeps[0].run_id]
        assert (h100["gpu"], h100["env"]["hostname"], h100["env"]["gpu"]["uuid"]) == ("Fake H100", "host-a", "U-0")
        assert h100["env"]["cluster"] == {"scheduler": "tcp://fake:8786", "workers": [
            {"address": "tcp://a:1", "host": "host-a", "gpu_uuid": "U-0", "cuda_visible_devices": "0"},
            {"address": "tcp://a:2", "host": "host-a", "gpu_uuid": "U-1", "cuda_visible_devices": "1"}]}
        assert runs[sweeps[1].run_id]["gpu"] == "Fake H200"
        assert sorted(r["gpu"] for r in store.query(
            "SELECT runs.gpu FROM results JOIN runs ON runs.id = results.run_id")) == ["Fake H100"] * 3 + ["Fake H200"] * 3


def test_a_sweep_the_cluster_stops_is_an_error_and_a_defect_is_raised(cluster, tmp_path):
    from gemmlab.tune.cluster import ClusterError
    from gemmlab.tune.sweeps import select_models, tune_on_cluster

    session, behaviour, _ = cluster
    behaviour["Fake H100"] = ClusterError("lost every worker of Fake H100")
    sweeps = tune_on_cluster(SPEC, PROBLEM, lambda: Exhaustive(POINTS[:2], {}), TuneOptions(precompile=False), session,
                             select_models(session, None), tmp_path / "r.db", "t")
    assert [(s.model, s.error, s.summary is None) for s in sweeps] == [
        ("Fake H100", "lost every worker of Fake H100", True), ("Fake H200", None, False)]
    behaviour["Fake H200"] = KeyError("a defect")
    with pytest.raises(KeyError, match="a defect"):
        tune_on_cluster(SPEC, PROBLEM, lambda: Exhaustive(POINTS[:2], {}), TuneOptions(precompile=False), session,
                        select_models(session, "H200"), tmp_path / "r.db", "t")


# ---------------------------------------------------------------- bench tables (harness/tables.py)

def _pt(impl, kind, ms, shape=(64, 64, 64), status="PASS", reason=None, clocks=None):
    from gemmlab.harness.bench import Point
    from gemmlab.harness.timing import Stats

    return Point(impl, kind, GemmProblem(*shape), status, reason=reason, stats=Stats((ms,)) if ms else None,
                 clocks=clocks or {})


def _md(tables) -> dict:
    from gemmlab.harness.tables import to_markdown

    return {str(t.title).split(" (")[0]: to_markdown(t) for t in tables}


def test_the_tables_in_markdown_cell_by_cell():
    """Two shapes, one of them missing for a kernel; an unverified time; two ladders (main and seed
    002), each rung compared with the one before it on its own ladder; a failure."""
    from gemmlab.harness.tables import bench_tables

    big = (128, 128, 128)
    pts = [_pt("naive", "kernel", 2.0), _pt("naive", "kernel", 4.0, big),
           _pt("tiled", "kernel", 1.0),
           _pt("vectorize", "kernel", 0.5, status="UNCHECKED"), _pt("vectorize", "kernel", 1.0, big),
           _pt("tiled_rb1x4", "kernel", 0.25),
           _pt("coalescing", "kernel", None, big, status="FAIL", reason="off by 1"),
           _pt("cublas", "baseline", 0.25), _pt("cublas", "baseline", 0.5, big)]
    md = _md(bench_tables(pts))
    assert list(md) == ["GFLOP/s", "share of cublas", "speedup over the previous rung"]
    assert md["GFLOP/s"] == (
        "**GFLOP/s (median, 2MNK / time)**\n\n"
        "| impl | 64x64x64 | 128x128x128 |\n| --- | ---: | ---: |\n"
        "| naive | 0 | 1 |\n| tiled | 1 | - |\n| vectorize | 1 (unchecked) | 4 |\n| tiled_rb1x4 | 2 | - |\n"
        "| coalescing | - | FAIL |\n| cublas | 2 | 8 |\n")
    assert md["share of cublas"].splitlines()[4:] == [
        "| naive | 12.5% | 12.5% |", "| tiled | 25.0% | - |", "| vectorize | 50.0% | 50.0% |",
        "| tiled_rb1x4 | 100.0% | - |", "| coalescing | - | - |", "| cublas | 100.0% | 100.0% |"]
    assert md["speedup over the previous rung"].splitlines()[4:] == [
        "| naive | - | - |", "| tiled | - | - |", "| vectorize | 4.00x | 4.00x |", "| tiled_rb1x4 | 4.00x | - |",
        "| coalescing | - | - |"], "cublas climbs no ladder; tiled_rb1x4 follows tiled, vectorize follows naive"


def test_a_share_skips_its_own_skipped_rows_and_a_share_without_its_reference_is_not_shown():
    from gemmlab.harness.bench import Point as ReducePoint
    from gemmlab.harness.tables import bench_tables
    from gemmlab.harness.timing import Stats
    from gemmlab.problem import ReduceProblem

    n = 1 << 20
    pts = [ReducePoint("copy", "baseline", ReduceProblem(n), "PASS", stats=Stats((0.004,)), bytes_moved=8 * n),
           ReducePoint("single_pass", "kernel", ReduceProblem(n), "PASS", stats=Stats((0.002,)), bytes_moved=4 * n)]
    md = _md(bench_tables(pts))
    assert list(md) == ["time", "GB/s", "share of the copy bandwidth", "speedup over the previous rung"], \
        "no cub row: no share of cub"
    assert md["share of the copy bandwidth"].splitlines()[4:] == ["| single_pass | 100.0% |", "| copy | 100.0% |"]
    with_cub = pts + [ReducePoint("cub", "baseline", ReduceProblem(n), "PASS", stats=Stats((0.004,)), bytes_moved=4 * n)]
    assert _md(bench_tables(with_cub))["share of cub"].splitlines()[4:] == [
        "| single_pass | 200.0% |", "| cub | 100.0% |", "| copy | - |"], "copy's share of cub is skipped"
    assert bench_tables([]) == []


def test_points_without_a_time_are_listed_with_their_reasons_and_clock_warnings_only_where_flagged():
    from gemmlab.harness.tables import clock_warnings, failures_table, to_markdown

    pts = [_pt("naive", "kernel", 1.0, clocks={"sm_clock_min_mhz": 1980}),
           _pt("vectorize", "kernel", None, status="ERROR", reason="out of registers"),
           _pt("tiled", "kernel", None, status="FAIL", reason="off by 1"),
           _pt("cublas", "baseline", 1.0, clocks={"clock_warning": True, "sm_clock_min_mhz": 1200})]
    assert to_markdown(failures_table(pts)).splitlines()[2:] == [
        "| impl | shape | status | reason |", "| --- | --- | --- | --- |",
        "| vectorize | 64x64x64 | ERROR | out of registers |", "| tiled | 64x64x64 | FAIL | off by 1 |"]
    assert failures_table(pts[:1] + pts[3:]) is None
    assert clock_warnings(pts) == ["cublas at 64x64x64: SM clock fell to 1200 MHz (< 90% of max) while timing"]


# ---------------------------------------------------------------- the API's tuned parameters, from any folder

def test_a_relative_gemmlab_db_stays_the_file_it_named_after_a_chdir(tmp_path, monkeypatch):
    """GEMMLAB_DB=t.db read from folder a, then os.chdir(b): the shapes looked up before kept a/t.db's
    parameters, those after it found no b/t.db (a warning, the table's parameters) - one program, two
    answers by the order of its calls. It is the file named when first read, as use_tuning's path is."""
    import warnings

    from gemmlab.api import tuning

    from .test_tuned_params_scope import _named_by_env, _tuned_db

    spec = registry.get("bigtile", "sgemm")
    tuned = {**spec.defaults, "BM": 64, "NT": 128, "MINB": 2}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _tuned_db(tmp_path / "a" / "t.db", "bigtile", tuned)
    monkeypatch.chdir(tmp_path / "a")
    monkeypatch.setattr(tuning, "_env_files", {}, raising=False)  # no value read before
    _named_by_env(monkeypatch, "t.db")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuning.tuned_params(spec, GemmProblem(4096, 4096, 4096), "GPU A") == tuned
        monkeypatch.chdir(tmp_path / "b")
        assert tuning.tuned_params(spec, GemmProblem(2048, 2048, 2048), "GPU A") == tuned
    assert tuning.database() == str(tmp_path / "a" / "t.db")
    assert tuning.describe() == f"{tmp_path / 'a' / 't.db'} (GEMMLAB_DB)"
