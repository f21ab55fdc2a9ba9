"""Tests that could not fail, sixth audit (a helper's mutants of the command line and the tuner's
back ends: cli.py, tune/command.py, tune/worker.py, tune/cluster.py, tune/dask_executor.py). Each
test below kills mutants that the CPU suite let live: it fails with them and passes without. No
GPU: the worker processes run the stand-in tasks defined here, and the Dask client, its futures
and SpecCluster are stand-ins where a real cluster could not show the difference."""
from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from gemmlab.tune.worker import CandidateProcess, WorkerPool

from . import test_cli_review25, test_tune_devices_models
from .cli_lines import one_line, run

HERE = "tests.cpu.test_cli_cluster_audit6"  # this module, as a worker process imports it
PREPARED = []  # in a worker process: prepare_worker ran there


def prepare_worker() -> None:
    """What a worker process runs when it starts, before its first task (worker.prepare_worker's
    place: the imports and the CUDA context, paid while the first point compiles)."""
    PREPARED.append(True)


def answer(task: dict) -> dict:
    """A stand-in candidate (runs in the worker process): sleeps as told, then answers its own
    task's x, the status asked for, the GPU this process was pinned to and whether it prepared."""
    time.sleep(task.get("sleep", 0))
    return {"status": task.get("status", "PASS"), "x": task["x"], "fatal": False,
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "prepared": PREPARED == [True]}


# ---------------------------------------------------------------- the local pool (tune/worker.py)

def test_each_answer_goes_with_its_task_from_its_pinned_gpu_and_an_error_answer_restarts_nothing(monkeypatch):
    """Two GPUs under CUDA_VISIBLE_DEVICES=4,5: worker i sees physical GPU 4+i and is named GPU i;
    with both busy, each answer is handed over with the task that asked it (not the other slot's);
    a candidate that answers ERROR without a sticky error keeps its process (no restart). Each
    process prepared itself (once) before its first candidate."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    tasks = [{"x": x, "sleep": 0.2 * (x % 3), "status": "ERROR" if x == 4 else "PASS"} for x in range(8)]
    pairs = []
    pool = WorkerPool(devices=[0, 1], task_path=f"{HERE}:answer", timeout_s=60)
    pool.run(iter(tasks), lambda task, result: pairs.append((task["x"], result)))
    assert sorted(x for x, _ in pairs) == list(range(8))
    assert [x for x, result in pairs if result["x"] != x] == [], "an answer was handed over with another task"
    assert {(result["worker"], result["visible"]) for _, result in pairs} == {("GPU 0", "4"), ("GPU 1", "5")}
    assert [x for x, result in pairs if result["status"] == "ERROR"] == [4] and pool.restarts == 0
    assert all(result["prepared"] for _, result in pairs)
    # the sweep is over: its processes (on a GPU, each holding a CUDA context) are ended with it
    assert [slot.process for slot in pool._slots] == [None, None]


def test_a_candidate_counts_as_hung_once_past_the_timeout(monkeypatch):
    """The pool's clock (stood in for): the candidate is sent at 0, its process says it is ready
    at 0.5 (the clock starts again there) and the clock reads 2.0 with --timeout 1, so it is
    ended at that check; a clock read past it means it waited longer."""
    from gemmlab.tune import worker

    readings = iter([0.0, 0.5, 2.0])

    def monotonic():
        reading = next(readings, None)
        assert reading is not None, "the hung candidate was not ended at 1.5 s past its start with --timeout 1"
        return reading

    pool = WorkerPool(task_path=f"{HERE}:answer", timeout_s=1.0)
    assert pool._slots[0].conn.poll(60), "the worker process never said it was ready"
    monkeypatch.setattr(worker, "time", SimpleNamespace(monotonic=monotonic))
    seen = []
    pool.run(iter([{"x": 0, "sleep": 600}]), lambda task, result: seen.append(result))
    assert seen == [{"status": "ERROR", "reason": "timed out after 1 s", "fatal": True, "worker": "local"}]
    assert pool.restarts == 1


SLOW_START = "tests.cpu.slow_start_tasks:answer"


def test_a_new_workers_start_up_is_not_the_candidates_time(monkeypatch):
    """A process that takes 2 s to start (a real one: imports and a CUDA context, after every
    crash) and a candidate of 2 s, with --timeout 3.5: each is within it, so the candidate
    passes, in the pool and in a Dask worker's call. Counted from the send, as it once was,
    the two together ran past it and a good candidate was recorded as timed out."""
    monkeypatch.setenv("GEMMLAB_TEST_PREPARE_S", "2.0")
    seen = []
    WorkerPool(task_path=SLOW_START, timeout_s=3.5).run(iter([{"x": 0, "sleep": 2.0}]),
                                                        lambda task, result: seen.append(result))
    assert seen == [{"status": "PASS", "x": 0, "fatal": False, "worker": "local"}]
    process = CandidateProcess(task_path=SLOW_START)
    try:
        assert process.call({"x": 1, "sleep": 2.0}, 3.5) == {"status": "PASS", "x": 1, "fatal": False}
    finally:
        process.close()


def test_a_worker_that_never_starts_is_named_as_such(monkeypatch):
    """A process still starting when the timeout has passed (a CUDA context that never comes)
    is ended, and the candidate's row says the worker did not start, not that it hung."""
    monkeypatch.setenv("GEMMLAB_TEST_PREPARE_S", "600")
    seen = []
    pool = WorkerPool(task_path=SLOW_START, timeout_s=1.0)
    pool.run(iter([{"x": 0}]), lambda task, result: seen.append(result))
    assert seen == [{"status": "ERROR", "reason": "the worker did not start within 1 s", "fatal": True,
                     "worker": "local"}]
    assert pool.restarts == 1
    process = CandidateProcess(task_path=SLOW_START)
    try:
        assert process.call({"x": 1}, 1.0) == {"status": "ERROR", "reason": "the worker did not start within 1 s",
                                               "fatal": True}
    finally:
        process.close()


def test_a_dask_workers_call_waits_the_whole_timeout():
    """CandidateProcess.call (a Dask worker's trial): an answer after 2.5 s of a 4 s timeout is
    the candidate's, not a hang."""
    process = CandidateProcess(task_path=f"{HERE}:answer")
    try:
        assert process.call({"x": 0}, 60)["status"] == "PASS"  # started and imported: not timed
        assert process.call({"x": 1, "sleep": 2.5}, 4) == {"status": "PASS", "x": 1, "fatal": False, "prepared": True,
                                                              "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
    finally:
        process.close()


@pytest.fixture
def candidate(monkeypatch):
    """run_candidate on naive at 64^3 outside a worker (no GPU: its stream is a stand-in, no
    CUDA_VISIBLE_DEVICES set), run_point answering `measured()`."""
    from gemmlab.harness import bench
    from gemmlab.tune import worker

    monkeypatch.setattr(worker, "_stream", "a stream")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def go(measured):
        monkeypatch.setattr(bench, "run_point", lambda spec, problem, stream, options: measured())
        return worker.run_candidate({"impl": "naive", "params": {"BLOCK": 16}, "M": 64, "N": 64, "K": 64})

    return go


def test_a_candidates_row_names_the_gpu_that_ran_it_and_a_spilling_build_is_an_error(candidate):
    """Without CUDA_VISIBLE_DEVICES the worker ran on GPU 0; a build that spills is no candidate,
    as a precompiled point's would have been refused."""
    def measured(spilling):
        resources = SimpleNamespace(spill_stores=8 * spilling, spill_loads=0, stack_frame=0)
        return lambda: SimpleNamespace(row=lambda: {"status": "PASS", "gflops": 1.0}, resources=resources)

    assert candidate(measured(False)) == {"status": "PASS", "gflops": 1.0, "extra": {"device": "0"}, "fatal": False}
    assert candidate(measured(True)) == {"status": "ERROR", "gflops": 1.0, "reason": "spills (8 B stores, 0 B loads, "
                                         "0 B stack)", "extra": {"device": "0"}, "fatal": False}


@pytest.mark.parametrize("error, fatal", [("LaunchError", True), ("GemmlabError", False)])
def test_only_a_launch_error_ends_the_candidates_process(candidate, error, fatal):
    """A failed launch may leave the CUDA context unusable (sticky): the process is replaced. Any
    other refusal is the candidate's own ERROR row."""
    from gemmlab import errors

    def measured():
        raise getattr(errors, error)("illegal address")

    assert candidate(measured) == {"impl": "naive", "params": {"BLOCK": 16}, "status": "ERROR",
                                   "reason": "illegal address", "fatal": fatal}


# ---------------------------------------------------------------- the cluster session (tune/cluster.py)

class FakeClient:
    """What ClusterSession asks of a distributed.Client: the scheduler's workers (address ->
    resources) and each new worker's description; `asked` counts the scheduler's answers."""

    scheduler = SimpleNamespace(address="tcp://sched:8786")
    dashboard_link = "http://sched:8787/status"

    def __init__(self, workers: dict, describe: dict, services=None):
        self.workers, self.describe, self.asked, self.closed = workers, describe, 0, False
        self.services = services or {}

    def scheduler_info(self, n_workers=None):
        self.asked += 1
        return {"workers": {a: {"resources": r} for a, r in self.workers.items()}, "services": self.services}

    def run(self, function, workers, on_error):
        return {a: self.describe[a] for a in workers}

    def close(self):
        self.closed = True


def _env(model, uuid, visible=1):
    return {"gpu": {"name": model, "uuid": uuid}, "visible_gpus": visible, "cuda_visible_devices": uuid[-1]}


def _session(workers, describe):
    from gemmlab.tune.cluster import ClusterSession

    return ClusterSession(FakeClient(workers, describe), describe_path=f"{HERE}:answer")


def test_gpu_workers_are_those_with_the_gpu_resource_and_the_rest_compile():
    """GPU=1 is a GPU worker; no resource or GPU=0 is a CPU worker, where compilation goes."""
    session = _session({"tcp://g:1": {"GPU": 1}, "tcp://c:1": {}, "tcp://c:2": {"GPU": 0}},
                       {"tcp://g:1": _env("H100", "U-0")})
    assert list(session.refresh(force=True)) == ["tcp://g:1"]
    assert session.cpu_workers() == ["tcp://c:1", "tcp://c:2"]


def test_a_worker_that_left_is_dropped_and_a_new_one_is_seen_on_the_next_look():
    """refresh asks the scheduler at most every 2 s (a clock read 2.5 s later asks again);
    models() always asks, so a sweep starts with the workers there are now."""
    from gemmlab.tune import cluster

    describe = {"tcp://a:1": _env("H100", "U-0"), "tcp://b:1": _env("H100", "U-1"), "tcp://c:1": _env("H200", "U-2")}
    session = _session({"tcp://a:1": {"GPU": 1}, "tcp://b:1": {"GPU": 1}}, describe)
    client = session.client
    now = [1000.0]
    cluster.time, real_time = SimpleNamespace(monotonic=lambda: now[0]), cluster.time
    try:
        assert sorted(session.refresh(force=True)) == ["tcp://a:1", "tcp://b:1"]
        del client.workers["tcp://a:1"]
        client.workers["tcp://c:1"] = {"GPU": 1}
        now[0] += 1.0
        assert sorted(session.refresh()) == ["tcp://a:1", "tcp://b:1"] and client.asked == 1, "asked within 2 s"
        now[0] += 1.5
        assert sorted(session.refresh()) == ["tcp://b:1", "tcp://c:1"] and client.asked == 2
        client.workers["tcp://a:1"] = {"GPU": 1}
        assert {m: [w.address for w in ws] for m, ws in session.models().items()} == {
            "H100": ["tcp://b:1", "tcp://a:1"], "H200": ["tcp://c:1"]}
    finally:
        cluster.time = real_time


@pytest.mark.parametrize("describe, message", [
    ({"tcp://a:1": _env("H100", "U-0", visible=2)},
     "worker tcp://a:1 sees 2 GPUs: start each GPU worker with one CUDA_VISIBLE_DEVICES index (docs/tuning.md)"),
    ({"tcp://a:1": _env("H100", "U-0"), "tcp://b:1": _env("H100", "U-0")},
     "workers tcp://a:1 and tcp://b:1 share one GPU (U-0): pin each to its own CUDA_VISIBLE_DEVICES"),
    ({"tcp://a:1": ModuleNotFoundError("No module named 'gemmlab'")},
     "worker tcp://a:1 could not describe its GPU (ModuleNotFoundError: No module named 'gemmlab'); is gemmlab "
     "installed there?")])
def test_a_worker_that_cannot_time_alone_on_one_gpu_is_refused(describe, message):
    from gemmlab.tune.cluster import ClusterError

    session = _session({a: {"GPU": 1} for a in describe}, describe)
    with pytest.raises(ClusterError) as info:
        session.refresh(force=True)
    assert str(info.value) == message


def test_a_worker_gone_before_it_answered_is_left_out():
    session = _session({"tcp://a:1": {"GPU": 1}}, {})

    def gone(function, workers, on_error):
        raise OSError("connection closed")

    session.client.run = gone
    assert session.refresh(force=True) == {}


def test_closing_a_session_closes_the_local_cluster_it_started():
    session = _session({}, {})
    session.cluster = SimpleNamespace(closed=False)
    session.cluster.close = lambda: setattr(session.cluster, "closed", True)
    session.close()
    assert session.client.closed and session.cluster.closed


def test_a_local_clusters_workers_each_pinned_to_its_gpu_and_the_rest_compile(monkeypatch):
    """--cluster local --devices 1 under CUDA_VISIBLE_DEVICES="4, 5" on 6 cores: one single-threaded
    GPU worker on physical GPU 5 (the list's spaces are no part of an index), five CPU workers that
    see no GPU; a free port for the dashboard, and a worker that dies fails its trial at once (no
    Dask retry: the client retries it)."""
    import dask
    import distributed

    from gemmlab.tune.cluster import start_local_cluster

    seen = {}

    def spec_cluster(workers, scheduler, **kwargs):
        seen.update(workers=workers, scheduler=scheduler["options"],
                    failures=dask.config.get("distributed.scheduler.allowed-failures"))
        return "cluster"

    monkeypatch.setattr(distributed, "SpecCluster", spec_cluster)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4, 5")
    assert start_local_cluster([1]) == "cluster"
    options = {name: w["options"] for name, w in seen["workers"].items()}
    assert options.pop("gpu-1") == {"nthreads": 1, "silence_logs": 40, "resources": {"GPU": 1},
                                    "env": {"CUDA_VISIBLE_DEVICES": "5"}}
    assert options == {f"cpu-{i}": {"nthreads": 1, "silence_logs": 40, "env": {"CUDA_VISIBLE_DEVICES": ""}}
                       for i in range(5)}
    assert seen["scheduler"]["dashboard_address"] == ":0" and seen["failures"] == 0


# ---------------------------------------------------------------- the command line (cli.py)

def test_one_kernel_that_fails_to_compile_is_its_own_error_line(tmp_path, monkeypatch, capsys):
    """One failure is ptxas's words alone ("1 kernels failed to compile; the first: ..." only
    counts where there are several)."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    code, _, err = run(capsys, "compile", "--arch", "sm_75", "--impl", "async_pipeline")
    one_line(code, err, "requires .target sm_80 or higher")
    assert err.startswith("error: async_pipeline (gemmlab::sgemm_async_pipeline<") and "failed to compile: ptxas" in err


def test_alpha_with_part_of_a_shape_is_asked_for_the_rest_of_the_shape(capsys):
    """--K alone with --alpha: the missing --M/--N are the problem, not the scalar (which goes with
    a shape, and one is being given)."""
    assert run(capsys, "verify", "--K", "64", "--alpha", "2") == (
        2, "", "error: give all three of --M, --N and --K (or use --sizes)\n")


def test_verify_of_one_shape_runs_alpha_1_5_and_beta_minus_0_75_by_default(monkeypatch, capsys):
    """Not bench's (1, 0): a beta of 0 would never read C, and an alpha of 1 never scale."""
    from gemmlab.harness import session

    seen = []
    monkeypatch.setattr(session, "verify", lambda op, impl, args, params: seen.append((op, impl, args)))
    assert run(capsys, "verify", "--M", "8", "--N", "16", "--K", "24")[0] == 0
    (op, impl, args), = seen
    assert (op, impl, args.alpha, args.beta) == ("sgemm", "all", 1.5, -0.75)


def test_bench_hands_the_session_each_timing_option_as_typed(monkeypatch, capsys, tmp_path):
    """--no-flush turns off the L2 flush, not the check; --default-params reaches the session."""
    from gemmlab.harness import session
    from gemmlab.harness.bench import BenchOptions

    seen = []
    monkeypatch.setattr(session, "bench", lambda *args, **kwargs: seen.append(args))
    for flag, flush, check in (("--no-flush", False, True), ("--no-check", True, False)):
        assert run(capsys, "bench", "--M", "8", "--N", "8", "--K", "8", "--warmup", "0", "--repeat", "5", flag,
                   "--default-params", "--db", tmp_path / "r.db")[0] == 0
        args = seen.pop()
        options, default_params, db = args[3], args[5], args[6]
        assert (options, default_params, db) == (BenchOptions(warmup=0, repeat=5, flush=flush, check=check), True,
                                                 tmp_path / "r.db")


# ---------------------------------------------------------------- tune's body (tune/command.py)

fake_gpus = test_cli_review25.fake_gpus  # two fake GPUs, tuner.tune faked: it records its options
gpus = test_tune_devices_models.gpus  # three fake GPUs, two H100s and an H200


def test_tune_hands_the_sweep_every_option_typed(fake_gpus, capsys, tmp_path):
    from gemmlab.tune.tuner import TuneOptions

    code, _, err = run(capsys, "tune", "--impl", "naive", "--devices", "1", "--jobs", "3", "--timeout", "7",
                       "--time", "9", "--resume", "--db", tmp_path / "r.db")
    assert code == 0, err
    assert fake_gpus["options"] == TuneOptions(jobs=3, devices=[1], timeout_s=7.0, time_limit_s=9.0, resume=True)


def test_devices_whose_models_differ_anywhere_in_the_list_are_refused(gpus, capsys, tmp_path):
    """0 and 1 are both H100s; 2 is not: one run would store the H200's rows as an H100's."""
    code, _, err = run(capsys, "tune", "--impl", "naive", "--devices", "0,1,2", "--db", tmp_path / "r.db")
    one_line(code, err, "--devices names GPUs of different models (0: NVIDIA H100 80GB HBM3, 1: NVIDIA H100 80GB "
                        "HBM3, 2: NVIDIA H200); tune each model in its own run")
    assert "devices" not in gpus and not (tmp_path / "r.db").exists()


def test_the_summary_ranks_the_fifteen_fastest_and_names_the_defaults(fake_gpus, monkeypatch, capsys, tmp_path):
    """Verified trials only, fastest first, fifteen of them; the best said to be the defaults."""
    from gemmlab import registry
    from gemmlab.tune import tuner

    defaults = registry.get("naive").defaults
    trials = [{"status": "PASS", "gflops": float(g), "t_median_ms": 1.0, "params": {**defaults, "X": g}}
              for g in range(100, 117)] + [{"status": "FAIL", "gflops": 999.0, "params": defaults},
                                           {"status": "PASS", "gflops": 500.0, "t_median_ms": 0.5, "params": defaults}]
    summary = tuner.TuneSummary(trials=trials, compiled=19, compile_seconds=2.0, wall_seconds=4.0)
    monkeypatch.setattr(tuner, "tune", lambda *a, **k: summary)
    code, out, err = run(capsys, "tune", "--impl", "naive", "--db", tmp_path / "r.db")
    assert code == 0, err
    assert "naive at 4096x4096x4096 fp32 on Fake GPU 0: 19 trials in 4 s" in " ".join(out.split())  # the default shape
    rows = [line.split("│")[1:3] for line in out.splitlines() if line.startswith("│")]
    assert [(int(rank), int(gflops)) for rank, gflops in rows] == [(1, 500)] + [(n, 118 - n) for n in range(2, 16)]
    assert "; ran 19 ({'PASS': 18, 'FAIL': 1}); " in out  # the FAIL's 999 is no rank
    assert out.splitlines()[-1] == "best: BLOCK=32 at 500 GFLOP/s (the defaults)"


class Totals:
    """SweepProgress's stand-in: keeps the totals each progress bar was given."""

    seen: list = []

    def __init__(self, totals):
        Totals.seen.append(totals)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def advance(self, model, row):
        pass


@pytest.mark.parametrize("budget, total", [([], 3), (["--budget", "2"], 2)])
def test_the_progress_bar_counts_the_points_a_run_will_time(fake_gpus, monkeypatch, capsys, tmp_path, budget, total):
    """naive keeps 3 points: a --budget below that is the bar's total (the sweep stops there)."""
    from gemmlab.tune import progress

    monkeypatch.setattr(progress, "SweepProgress", Totals)
    Totals.seen = []
    assert run(capsys, "tune", "--impl", "naive", *budget, "--db", tmp_path / "r.db")[0] == 0
    assert Totals.seen == [{"Fake GPU 0": total}]


def test_a_dry_runs_budget_line_counts_no_more_than_the_kept_points(capsys):
    code, out, _ = run(capsys, "tune", "--impl", "naive", "--budget", "5", "--dry-run")
    assert code == 0 and out.splitlines()[-1] == "--budget 5: a run would time 3 of the 3 kept points"


@pytest.mark.parametrize("args, line", [
    (["--gpu", "H100"], "--compile-workers and --gpu go with --cluster"),
    (["--cluster", "tcp://sched:8786", "--compile-workers", "2"],
     "--devices and --compile-workers shape a local cluster: with --cluster ADDRESS the workers are whatever was "
     "started there")])
def test_cluster_options_without_their_cluster_are_refused(capsys, args, line):
    assert run(capsys, "tune", "--impl", "naive", *args) == (2, "", f"error: {line}\n")


def test_a_cluster_sweep_that_stopped_is_one_error_line_after_the_others_results(fake_gpus, monkeypatch, capsys,
                                                                                   tmp_path):
    """H100's sweep ran, H200's lost its workers: H100's summary is printed, then one line names
    H200's run to resume; the cluster gets the options typed and its session is closed."""
    from gemmlab.tune import cluster, sweeps
    from gemmlab.tune.tuner import TuneOptions, TuneSummary

    session = SimpleNamespace(address="tcp://sched:8786", dashboard=None, closed=False)
    session.close = lambda: setattr(session, "closed", True)
    worker = SimpleNamespace(label="tcp://w:1 (Fake, GPU 0)")
    # each model's sweep as sweeps.select_models makes it; tune_on_cluster fills in the rest
    ran = [SimpleNamespace(model="Fake H100", workers=[worker]), SimpleNamespace(model="Fake H200", workers=[worker])]
    seen = {}

    def tune_on_cluster(spec, problem, make_strategy, options, session, sweeps, db_path, command, on_result):
        seen["options"] = options
        vars(ran[0]).update(run_id=1, error=None, summary=TuneSummary(trials=[{"status": "PASS", "gflops": 9.0,
                                                                         "t_median_ms": 1.0, "params": {"BLOCK": 8}}]))
        vars(ran[1]).update(run_id=2, error="lost every worker of Fake H200", summary=None)

    monkeypatch.setattr(cluster, "connect", lambda *args: seen.setdefault("connect", args) and session)
    monkeypatch.setattr(sweeps, "select_models", lambda session, gpu: ran)
    monkeypatch.setattr(sweeps, "tune_on_cluster", tune_on_cluster)
    code, out, err = run(capsys, "tune", "--impl", "naive", "--cluster", "tcp://sched:8786", "--timeout", "7",
                         "--time", "9", "--resume", "--db", tmp_path / "r.db")
    assert (code, err) == (2, "error: Fake H200: lost every worker of Fake H200; its rows so far are in run 2 (rerun "
                              "with --resume to go on)\n")
    lines = out.splitlines()
    assert lines[lines.index("Dask scheduler tcp://sched:8786"):][1:3] == [
        "Fake H100: 1 GPU worker(s): tcp://w:1 (Fake, GPU 0)", "Fake H200: 1 GPU worker(s): tcp://w:1 (Fake, GPU 0)"]
    assert "stored run 1 in" in out and "run 2" not in out  # one summary: H200's has none
    assert out.splitlines()[-1] == "best: BLOCK=8 at 9 GFLOP/s"
    assert seen["options"] == TuneOptions(timeout_s=7.0, time_limit_s=9.0, resume=True)
    assert seen["connect"] == ("tcp://sched:8786", None, None) and session.closed


# ---------------------------------------------------------------- trials on Dask (tune/dask_executor.py)

class FakeFuture:
    """A Dask future whose fate the test scripts: finished with a value, erred with an exception,
    cancelled, or pending until the client's deadline. A finished one whose value is Lost loses
    it when fetched: its worker died in between (the future then reads as erred)."""

    def __init__(self, key, outcome):
        self.key, self.cancelled = key, False
        self.status, self.value = outcome if outcome else ("pending", None)

    def result(self, timeout=None):
        if isinstance(self.value, Lost):
            self.status, self.value = _killed(self.value.address)
            raise OSError("the result's worker is gone")
        return self.value

    def exception(self):
        return self.value

    def cancel(self):
        self.cancelled = True

    def add_done_callback(self, callback):
        callback(self)


class Lost(SimpleNamespace):
    """A finished trial's result that its worker took with it (see FakeFuture)."""


class FakeDaskClient:
    """Submits trials as `script(x, attempt, workers)` says (a (status, value) pair, or None
    for a trial that never answers) and anything else as finished with `other(function, args)`;
    keeps every submission (a trial's cache entry in its kwargs as "entry")."""

    def __init__(self, script, status="running", other=lambda function, args: None):
        self.script, self.status, self.other = script, status, other
        self.submitted, self.futures, self.others, self.most_in_flight = [], [], [], 0

    def submit(self, function, *args, **kwargs):
        from gemmlab.tune.remote import run_trial

        if function is not run_trial:
            self.others.append((function, args, kwargs))
            return FakeFuture(f"other-{len(self.others)}", ("finished", self.other(function, args)))
        task, task_path, timeout_s, entry = args
        attempt = sum(1 for t, _ in self.submitted if t["x"] == task["x"])
        assert attempt < 3, f"trial {task['x']} submitted a third time"
        self.submitted.append((task, {**kwargs, "entry": entry}))
        future = FakeFuture(f"trial-{len(self.submitted)}", self.script(task["x"], attempt, kwargs["workers"]))
        self.futures.append(future)
        in_flight = [f for f in self.futures if f.status == "pending" or not getattr(f, "seen", False)]
        self.most_in_flight = max(self.most_in_flight, len(in_flight))
        return future

    def scheduler_info(self):
        return {}

    def processing(self):
        return {"tcp://a:1": [f.key for f in self.futures if f.status == "pending"]}


@pytest.fixture
def dask_run(monkeypatch):
    """dask_run(script, ...) -> (executor, client, {x: result}, [clock at each result]): an H100
    executor (2 in flight per worker, 5 s timeout) on fake workers, an H200 among them; the
    clock moves 10 s at each wait. dask_run.make(...) -> (executor, client) to drive by hand."""
    distributed = pytest.importorskip("distributed")
    from gemmlab.tune import dask_executor
    from gemmlab.tune.cluster import GpuWorker

    now = [0.0]

    def wait(futures, timeout, return_when):
        now[0] += 10.0
        for f in futures:
            f.seen = True
        return {f for f in futures if f.status != "pending"}, set()

    monkeypatch.setattr(distributed, "wait", wait)
    monkeypatch.setattr(dask_executor, "time", SimpleNamespace(monotonic=lambda: now[0]))

    def make(script, addresses=("tcp://a:1", "tcp://a:2"), status="running", cpu=(), other=lambda f, a: None):
        workers = {a: GpuWorker(a, {"gpu": {"name": "H100"}}) for a in addresses}
        workers["tcp://h200:1"] = GpuWorker("tcp://h200:1", {"gpu": {"name": "H200"}})
        client = go.client = FakeDaskClient(script, status, other)
        session = SimpleNamespace(client=client, refresh=lambda: workers, cpu_workers=lambda: list(cpu))
        return dask_executor.DaskExecutor(session, "H100", "tests:task", timeout_s=5.0), client

    def go(script, addresses=("tcp://a:1", "tcp://a:2"), xs=range(4), status="running", on_result=None):
        executor, client = make(script, addresses, status)
        seen, clock = [], []

        def record(task, result):
            seen.append((task["x"], result))
            clock.append(now[0])
            if on_result:
                on_result(task, result)

        executor.run(iter({"x": x, "params": {"X": x}} for x in xs), record)
        return executor, client, dict(seen), clock

    go.make = make
    return go


def _killed(address):
    from distributed.scheduler import KilledWorker

    return ("error", KilledWorker("trial", SimpleNamespace(address=address), 0))


def test_a_lost_trial_is_retried_once_on_another_worker_and_recorded_with_both_reasons(dask_run):
    """x=0: its worker dies, the retry elsewhere passes; x=1: timed out twice, recorded as the
    second with the first as retried_after; x=2: a candidate's own ERROR, not retried; x=3: a
    task that raised, not retried. Only the H100s are asked, at the GPU priority, 2 per worker."""
    def script(x, attempt, workers):
        if x == 0:
            return _killed("tcp://a:1") if attempt == 0 else ("finished", {"status": "PASS", "worker": workers[0]})
        if x == 1:
            return ("finished", {"status": "ERROR", "reason": "timed out after 5 s", "worker": "tcp://a:2"})
        if x == 2:
            return ("finished", {"status": "ERROR", "reason": "outputs differ", "worker": "tcp://a:1"})
        return ("error", ValueError("boom"))

    executor, client, seen, _ = dask_run(script)
    assert seen == {
        0: {"status": "PASS", "worker": "tcp://a:2", "extra": {
            "retried_after": "KilledWorker: its worker tcp://a:1 died", "first_worker": "tcp://a:1"}},
        1: {"status": "ERROR", "reason": "timed out after 5 s", "worker": "tcp://a:2", "extra": {
            "retried_after": "timed out after 5 s", "first_worker": "tcp://a:2"}},
        2: {"status": "ERROR", "reason": "outputs differ", "worker": "tcp://a:1"},
        3: {"status": "ERROR", "reason": "ValueError: boom", "fatal": False}}
    assert [(task["x"], kwargs["workers"]) for task, kwargs in client.submitted] == [
        (0, ["tcp://a:1", "tcp://a:2"]), (1, ["tcp://a:1", "tcp://a:2"]), (2, ["tcp://a:1", "tcp://a:2"]),
        (3, ["tcp://a:1", "tcp://a:2"]), (0, ["tcp://a:2"]), (1, ["tcp://a:1"])]
    assert all(kw["resources"] == {"GPU": 1} and kw["priority"] == 10 and kw["allow_other_workers"] is False
               and kw["entry"] is None for _, kw in client.submitted)
    assert executor.restarts == 2 and client.most_in_flight == 4


def test_a_retry_with_one_worker_left_goes_to_that_worker(dask_run):
    script = lambda x, attempt, workers: _killed("tcp://a:1") if attempt == 0 else ("finished", {"status": "PASS"})
    _, client, seen, _ = dask_run(script, addresses=("tcp://a:1",), xs=[0])
    assert [kwargs["workers"] for _, kwargs in client.submitted] == [["tcp://a:1"], ["tcp://a:1"]]
    assert seen[0]["status"] == "PASS"


def test_a_trial_that_never_answers_is_given_up_after_the_queue_and_the_grace(dask_run):
    """2 in flight per worker x (5 s to run + 5 s for a new candidate process to start) + 60 s of
    grace = 80 s: at the first look past it (90 s on a clock that moves 10 s a look) the trial is
    cancelled and retried, once, then recorded with the worker that held it."""
    executor, client, seen, clock = dask_run(lambda x, attempt, workers: None, xs=[0])
    assert seen == {0: {"status": "ERROR", "fatal": True, "reason": "no answer from the cluster after 80 s",
                        "extra": {"retried_after": "no answer from the cluster after 80 s",
                                  "first_worker": "tcp://a:1"}}}
    assert clock == [180.0] and all(f.cancelled for f in client.futures) and executor.restarts == 1


@pytest.mark.parametrize("future, client_status", [(("cancelled", None), "running"), (("lost", None), "failed")])
def test_a_trial_the_scheduler_dropped_ends_the_sweep(dask_run, future, client_status):
    from gemmlab.tune.cluster import ClusterError

    with pytest.raises(ClusterError, match="^the Dask scheduler went away$"):
        dask_run(lambda x, attempt, workers: future, xs=[0], status=client_status)


def test_trials_in_flight_are_cancelled_when_the_sweep_stops(dask_run):
    """Ctrl-C (here: the first result's handler raising) must not leave trials queued on the GPUs."""
    script = lambda x, attempt, workers: ("finished", {"status": "PASS"}) if x == 0 else None

    def interrupt(task, result):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dask_run(script, on_result=interrupt)
    assert [f.cancelled for f in dask_run.client.futures] == [False, True, True, True]


# ---------------------------------------------------------------- connecting (tune/cluster.py)

def test_a_worker_is_labelled_with_its_model_and_its_gpu():
    from gemmlab.tune.cluster import GpuWorker

    pinned = GpuWorker("tcp://a:1", {"gpu": {"name": "H100"}, "cuda_visible_devices": "3"})
    assert pinned.label == "tcp://a:1 (H100, GPU 3)"
    assert GpuWorker("tcp://a:1", {"gpu": None}).label == "tcp://a:1 (unknown GPU)"


@pytest.mark.parametrize("services, link", [({}, None), ({"dashboard": 8787}, "http://sched:8787/status")])
def test_a_dashboard_is_named_only_where_the_scheduler_serves_one(services, link):
    """Without bokeh the scheduler serves no dashboard: its link would lead nowhere."""
    from gemmlab.tune.cluster import ClusterSession

    assert ClusterSession(FakeClient({}, {}, services)).dashboard == link


@pytest.mark.parametrize("address, taken", [("tcp://h:65535", True), ("tcp://h:1", True), ("tcp://h:65536", False),
                                            ("localhost:8786", True), ("local2", False)])
def test_the_last_port_is_an_address_and_only_local_itself_is_local(address, taken):
    from gemmlab.errors import BadArgumentError
    from gemmlab.tune.cluster import check_address

    if taken:
        check_address(address)
    else:
        with pytest.raises(BadArgumentError, match="give 'local' or a Dask scheduler's address"):
            check_address(address)


def test_connect_waits_the_timeout_given_and_refuses_a_cluster_without_gpu_workers(monkeypatch):
    """The client is asked to wait timeout_s (not Dask's own 30 s); a cluster whose workers have
    no GPU resource is one line, and the client is closed."""
    distributed = pytest.importorskip("distributed")
    from gemmlab.tune.cluster import ClusterError, connect

    made = []

    def client(target, timeout):
        made.append((target, timeout))
        return FakeClient({"tcp://c:1": {}}, {})

    monkeypatch.setattr(distributed, "Client", client)
    with pytest.raises(ClusterError) as info:
        connect("tcp://sched:8786", timeout_s=7, describe_path=f"{HERE}:answer")
    assert str(info.value) == "the cluster at tcp://sched:8786 has no GPU worker (a worker with the resource GPU=1)"
    assert made == [("tcp://sched:8786", 7)]


def test_connect_asks_the_workers_with_the_describe_function_named(monkeypatch):
    distributed = pytest.importorskip("distributed")
    from gemmlab.tune.cluster import connect

    monkeypatch.setattr(distributed, "Client", lambda target, timeout: FakeClient({"tcp://g:1": {"GPU": 1}},
                                                                                 {"tcp://g:1": _env("H100", "U-0")}))
    session = connect("tcp://sched:8786", describe_path=f"{HERE}:answer")
    assert session.describe_path == f"{HERE}:answer" and list(session.workers) == ["tcp://g:1"]


def test_a_local_cluster_needs_a_gpu(monkeypatch):
    pytest.importorskip("distributed")
    from gemmlab import envinfo
    from gemmlab.tune.cluster import ClusterError, start_local_cluster

    monkeypatch.setattr(envinfo, "gpu_count", lambda: 0)
    with pytest.raises(ClusterError, match=r"^--cluster local: this machine has no GPU to start a worker for$"):
        start_local_cluster()


# ---------------------------------------------------------------- more of the command line

def test_tune_plot_draws_the_runs_rows_beside_the_database(fake_gpus, monkeypatch, capsys, tmp_path):
    from gemmlab.tune import plots

    drawn = []
    monkeypatch.setattr(plots, "tune_plots", lambda rows, out, impl, shape: drawn.append((out, impl, shape)) or
                        [out / "tune.png"])
    code, out, err = run(capsys, "tune", "--impl", "naive", "--M", "64", "--plot", "--db", tmp_path / "r.db")
    assert code == 0, err
    assert drawn == [(tmp_path / "plots", "naive", "64x4096x4096")]
    assert out.split()[-2:] == ["plot:", str(tmp_path / "plots" / "tune.png")]  # (a long path may wrap)


def test_a_verification_failure_exits_1(monkeypatch, capsys):
    """Not 2 (bad input): a script can tell a wrong kernel from a wrong command line."""
    from gemmlab.errors import VerificationError
    from gemmlab.harness import session

    def fails(*args):
        raise VerificationError("naive: 3 of 64 outputs differ")

    monkeypatch.setattr(session, "verify", fails)
    assert run(capsys, "verify", "--impl", "naive") == (1, "", "error: naive: 3 of 64 outputs differ\n")


def test_a_result_lost_with_its_worker_before_it_was_fetched_is_retried(dask_run):
    script = lambda x, attempt, workers: ("finished", Lost(address="tcp://a:1") if attempt == 0 else {"status": "PASS"})
    _, client, seen, _ = dask_run(script, xs=[0])
    assert seen == {0: {"status": "PASS", "extra": {"retried_after": "KilledWorker: its worker tcp://a:1 died",
                                                    "first_worker": "tcp://a:1"}}}
    assert [kwargs["workers"] for _, kwargs in client.submitted] == [["tcp://a:1", "tcp://a:2"], ["tcp://a:2"]]


@pytest.mark.parametrize("cpu, where", [(["tcp://c:1"], {"workers": ["tcp://c:1"], "allow_other_workers": False}),
                                        ([], {})])
def test_compilations_go_to_cpu_workers_and_each_entry_rides_with_its_trial(dask_run, monkeypatch, cpu, where):
    """NVRTC on the CPU-only workers where there are some (anywhere otherwise); the cubin comes
    back into the client's cache and is handed to the GPU worker with that point's trial."""
    from gemmlab.cuda import compile as nvrtc
    from gemmlab.tune.compile_pool import CompileOutcome
    from gemmlab.tune.remote import compile_point

    cache, files = {}, {"meta.json": b"{}", "kernel.cubin": b"\x7fELF"}
    monkeypatch.setattr(nvrtc, "install_cache_entry", lambda key, entry: cache.setdefault(key, entry) is entry)
    monkeypatch.setattr(nvrtc, "read_cache_entry", lambda key: cache.get(key))
    compiled = lambda function, args: (CompileOutcome(args[1], None, 0.1, "", "key-0"), files) \
        if function is compile_point else "tcp://a:1"  # the other: a candidate process started
    executor, client = dask_run.make(lambda x, attempt, workers: ("finished", {"status": "PASS"}), cpu=cpu,
                                     other=compiled)
    point = {"X": 0}
    assert executor.compile("naive", [point], "sm_90").outcome(point).cache_key == "key-0"
    assert cache == {"key-0": files}
    assert [kwargs for function, _, kwargs in client.others if function is compile_point] == [{"pure": False, **where}]
    executor.run(iter([{"x": 0, "params": point}]), lambda task, result: None)
    assert client.submitted[0][1]["entry"] == ("key-0", files)


def test_a_message_of_several_lines_is_said_on_one(monkeypatch, capsys):
    """A message may carry a tool's own newlines and tabs (ptxas, a driver): one line all the same."""
    from gemmlab.errors import BadArgumentError
    from gemmlab.harness import session

    def refuses(*args):
        raise BadArgumentError("first line\nsecond\tline  ")

    monkeypatch.setattr(session, "verify", refuses)
    assert run(capsys, "verify") == (2, "", "error: first line second line\n")


def test_a_space_with_no_point_kept_is_refused_before_a_run_is_stored(fake_gpus, capsys, tmp_path):
    """After the table of what was dropped, one line; no GPU asked and no empty run recorded."""
    code, out, err = run(capsys, "tune", "--impl", "naive", "--param", "BLOCK=7", "--db", tmp_path / "r.db")
    assert (code, err) == (2, "error: no point of naive's space satisfies its constraints\n")
    assert "BLOCK must be a power of two" in out and "options" not in fake_gpus and not (tmp_path / "r.db").exists()



def test_a_non_utf8_argument_is_echoed_in_at_most_80_characters(capsys):
    assert run(capsys, "report", "--title", "x" * 200 + "\udcff") == (
        2, "", f"error: argument '{'x' * 79} is not UTF-8 text\n")


def test_no_command_prints_the_help_and_exits_0(capsys):
    code, out, err = run(capsys)
    assert (code, err) == (0, "") and "Usage: " in out and "tune" in out


@pytest.fixture
def env_raises(monkeypatch):
    """`gemmlab env`, its collect_env raising what the test names."""
    import gemmlab.envinfo

    def go(exc):
        def raises():
            raise exc

        monkeypatch.setattr(gemmlab.envinfo, "collect_env", raises)

    return go


def test_what_no_command_could_foresee_is_still_one_line_with_its_own_exit_code(env_raises, capsys):
    """A disk that filled mid-run: its reason and file, exit 2 (what was stored is kept); a bug:
    "internal error" and its type, exit 3; click's Abort (Ctrl-C at a prompt): 130."""
    import errno

    import click

    for exc, expected in (
            (OSError(errno.ENOSPC, "No space left on device", "/full/r.db"),
             (2, "error: No space left on device: /full/r.db\n")),
            (OSError(errno.EROFS, "Read-only file system"), (2, "error: Read-only file system\n")),
            (KeyError("gpu"), (3, "internal error: KeyError: 'gpu'\n")),
            (click.exceptions.Abort(), (130, "error: interrupted (results recorded so far are kept)\n"))):
        env_raises(exc)
        code, _, err = run(capsys, "env")
        assert (code, err) == expected


def test_ctrl_c_before_any_command_runs_exits_130(monkeypatch, capsys):
    from gemmlab import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_command", interrupted)
    assert run(capsys, "env") == (130, "", "error: interrupted (results recorded so far are kept)\n")


def test_report_refuses_an_empty_file_and_a_bad_size_before_reading_anything(capsys, tmp_path):
    """An empty file would open as a new, empty database; '--size abc' is refused whatever the
    database holds (here: a gemmlab database with no run at all). Nothing is written."""
    from gemmlab.store import ResultStore

    empty, fresh = tmp_path / "empty.db", tmp_path / "fresh.db"
    empty.touch()
    ResultStore(fresh).close()
    out = tmp_path / "rep"
    assert run(capsys, "report", "--db", empty, "--out", out) == (
        2, "", f"error: {empty} is empty: no runs are recorded in it (pass the --db a bench wrote)\n")
    assert run(capsys, "report", "--db", fresh, "--out", out, "--size", "abc") == (
        2, "", "error: size 'abc' is not an integer or MxNxK\n")
    assert not out.exists()


def test_tune_times_a_kernels_first_dtype_by_default(fake_gpus, monkeypatch, capsys, tmp_path):
    """wmma takes fp16 and bf16: fp16, its first, is what a tune without --dtype times."""
    from gemmlab.tune import tuner

    seen = []
    monkeypatch.setattr(tuner, "tune", lambda spec, problem, *a, **k: seen.append(problem) or tuner.TuneSummary())
    code, _, err = run(capsys, "tune", "--impl", "wmma", "--db", tmp_path / "r.db")
    assert code == 0, err
    assert [(p.shape, p.dtype) for p in seen] == [("4096x4096x4096", "fp16")]
