"""Tests that could not fail, seventh audit (a helper's mutants of the tuner's back ends:
tune/worker.py, tune/dask_executor.py and tune/cluster.py, the sixth audit's mutants run and new
ones made). Each test below kills mutants that the CPU suite let live: it fails with them and
passes without. No GPU: the worker processes run the stand-in tasks of slow_start_tasks.py, and
the Dask client, its futures, the clock and SpecCluster are the sixth audit's stand-ins
(test_cli_cluster_audit6.py) where a real cluster could not show the difference."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from gemmlab.tune.worker import READY, CandidateProcess, WorkerPool

from . import test_cli_cluster_audit6

SLOW_START = "tests.cpu.slow_start_tasks:answer"  # starts at once unless GEMMLAB_TEST_PREPARE_S says
HERE = "tests.cpu.test_tune_backends_audit7"  # this module, as a worker process imports it


def inherited(task: dict) -> dict:
    """A stand-in candidate (runs in the worker process): the stream its worker module holds."""
    from gemmlab.tune import worker

    return {"status": "PASS", "stream": worker._stream, "fatal": False}


# ---------------------------------------------------------------- the candidate process (tune/worker.py)

def test_a_gpu_past_the_visible_list_is_named_by_its_own_index(monkeypatch):
    from gemmlab.tune.worker import visible_id

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert visible_id(2) == "2"


def _started(process: CandidateProcess) -> CandidateProcess:
    process.start()
    assert process.conn.poll(60) and process.conn.recv() == READY, "the worker process never said it was ready"
    return process


def test_one_process_runs_candidate_after_candidate_and_a_hung_one_is_ended():
    """Its start-up (a CUDA context, seconds) is paid once, not per candidate; a candidate past
    its timeout is killed with its process, which would otherwise keep its GPU busy."""
    process = CandidateProcess(task_path=SLOW_START)
    try:
        assert process.call({"x": 0}, 60)["status"] == "PASS"
        first = process.process
        assert process.call({"x": 1}, 60)["status"] == "PASS" and process.process is first
        assert process.call({"x": 2, "sleep": 600}, 1.0) == {"status": "ERROR", "reason": "timed out after 1 s",
                                                              "fatal": True}
        assert not first.is_alive() and process.process is None
    finally:
        process.close()


@pytest.mark.parametrize("task", [None, {"x": 0, "sleep": 0.5}])
def test_a_process_whose_parent_is_gone_ends_by_itself_without_an_error(task):
    """The parent's end of the pipe closes (its Dask worker was killed), the process idle or
    mid-candidate: it returns, exit code 0, rather than spin on the closed pipe or die of it."""
    process = _started(CandidateProcess(task_path=SLOW_START))
    child = process.process
    try:
        if task is not None:
            process.conn.send(task)
        process.conn.close()
        child.join(30)
        assert child.exitcode == 0
    finally:
        process.kill()


def test_a_process_whose_parent_went_before_it_was_ready_ends_quietly(capfd, monkeypatch):
    """Its parent went while it started (the sweep interrupted, its Dask worker killed): the send
    of READY meets a closed pipe, and the process ends as it does when the parent goes later -
    exit code 0, no BrokenPipeError traceback on the terminal of whoever ran the sweep."""
    monkeypatch.setenv("GEMMLAB_TEST_PREPARE_S", "1")  # the parent's end is closed before READY
    process = CandidateProcess(task_path=SLOW_START)
    process.start()
    child = process.process
    try:
        process.conn.close()
        child.join(60)
        assert child.exitcode == 0
        assert "Traceback" not in capfd.readouterr().err
    finally:
        process.kill()


def test_the_worker_loop_returns_when_its_ready_cannot_be_sent():
    """The same in this process: _worker_main returns, reading no task from a pipe with no one
    at its other end."""
    from gemmlab.tune.worker import _worker_main

    class Gone:
        received = 0

        def send(self, message):
            raise BrokenPipeError(32, "Broken pipe")

        def recv(self):
            self.received += 1
            raise EOFError

    conn = Gone()
    assert _worker_main(conn, None, SLOW_START) is None
    assert conn.received == 0


def test_closing_a_process_lets_it_end_by_itself():
    """close() asks it to stop: it exits 0 at once, where being killed after 2 s would add 2 s to
    the end of every sweep and take a CUDA context down mid-teardown."""
    process = _started(CandidateProcess(task_path=SLOW_START))
    child = process.process
    process.close()
    assert child.exitcode == 0 and process.process is None


def test_a_worker_process_inherits_none_of_its_parents_cuda_state(monkeypatch):
    """Spawned, never forked: a forked child would hold the parent's CUDA context and stream (a
    stand-in here), which CUDA does not let it use."""
    from gemmlab.tune import worker

    monkeypatch.setattr(worker, "_stream", "the parent's stream")
    process = CandidateProcess(task_path=f"{HERE}:inherited")
    try:
        assert process.call({}, 60) == {"status": "PASS", "stream": None, "fatal": False}
    finally:
        process.close()


def test_prepare_worker_makes_one_stream_and_leaves_a_failure_to_the_first_trial(monkeypatch):
    """A worker that cannot reach its GPU must still say READY, so that its first candidate's row
    says why (not 'the worker died' for every candidate); a worker that can makes its stream once."""
    from gemmlab.cuda import device as cuda_device
    from gemmlab.errors import NoGPUError
    from gemmlab.tune import worker

    made = []
    monkeypatch.setattr(worker, "_stream", None)
    monkeypatch.setattr(cuda_device, "device", lambda index=0: SimpleNamespace(
        create_stream=lambda: made.append(object()) or made[-1]))
    worker.prepare_worker()
    worker.prepare_worker()
    assert len(made) == 1 and worker._stream is made[0]

    def no_gpu(index=0):
        raise NoGPUError("no GPU: the CUDA driver sees no device")

    monkeypatch.setattr(worker, "_stream", None)
    monkeypatch.setattr(cuda_device, "device", no_gpu)
    worker.prepare_worker()
    assert worker._stream is None
    assert worker.run_candidate({"impl": "naive", "params": {"BLOCK": 16}, "M": 64, "N": 64, "K": 64}) == {
        "impl": "naive", "params": {"BLOCK": 16}, "status": "ERROR", "reason": "no GPU: the CUDA driver sees no device",
        "fatal": False}


def test_a_candidate_is_timed_with_its_own_point_problem_and_timing_options(monkeypatch):
    """The task carries them (the tuner's options, not run_candidate's defaults); a spilling build
    whose outputs were wrong stays a FAIL with its own reason."""
    from gemmlab.harness import bench
    from gemmlab.problem import GemmProblem
    from gemmlab.tune import worker

    seen = []
    spilling = SimpleNamespace(spill_stores=8, spill_loads=0, stack_frame=0)

    def run_point(spec, problem, stream, options):
        seen.append((spec.name, problem, stream, options))
        return SimpleNamespace(row=lambda: {"status": "FAIL", "reason": "3 of 512 outputs differ"}, resources=spilling)

    monkeypatch.setattr(worker, "_stream", "a stream")
    monkeypatch.setattr(bench, "run_point", run_point)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    row = worker.run_candidate({"impl": "naive", "params": {"BLOCK": 8}, "M": 8, "N": 16, "K": 32, "alpha": 1.5,
                                "beta": -0.75, "dtype": "tf32", "warmup": 0, "repeat": 3, "min_time_ms": 1.0})
    assert row == {"status": "FAIL", "reason": "3 of 512 outputs differ", "extra": {"device": "3"}, "fatal": False}
    assert seen == [("naive", GemmProblem(8, 16, 32, 1.5, -0.75, "tf32"), "a stream",
                     bench.BenchOptions(warmup=0, repeat=3, min_time_ms=1.0, params={"naive": {"BLOCK": 8}}))]


def test_a_worker_that_died_with_no_candidate_in_flight_is_replaced_for_the_next(monkeypatch, tmp_path):
    """Its process died as it started (a crash in its CUDA initialisation) or between two
    candidates (the OOM killer): the next candidate runs in a new process. The send to the dead
    one raised BrokenPipeError, which ended the local sweep and, in a Dask worker, failed every
    later trial there (its dead process was never replaced). The source fix of this audit."""
    monkeypatch.setenv("GEMMLAB_TEST_DIE_ONCE", str(tmp_path / "died"))
    pool = WorkerPool(task_path=SLOW_START, timeout_s=60)
    pool._slots[0].process.join(60)
    assert pool._slots[0].process.exitcode == 5
    seen = []
    pool.run(iter([{"x": 0}]), lambda task, result: seen.append(result))
    assert seen == [{"status": "PASS", "x": 0, "fatal": False, "worker": "local"}]

    process = CandidateProcess(task_path=SLOW_START)
    try:
        assert process.call({"x": 1}, 60)["status"] == "PASS"
        process.process.kill()
        process.process.join(60)
        assert process.call({"x": 2}, 60) == {"status": "PASS", "x": 2, "fatal": False}
        # one that dies after send() looked (it reads as alive here): its candidate's row says it died
        dead = process.process
        dead.kill()
        dead.join(60)
        dead.is_alive = lambda: True
        assert process.call({"x": 3}, 60) == {"status": "ERROR", "reason": "the worker died (exit code -9)",
                                              "fatal": True}
    finally:
        process.close()


# ---------------------------------------------------------------- trials on Dask (tune/dask_executor.py)

dask_run = test_cli_cluster_audit6.dask_run  # an H100 executor on fake workers, a clock that moves 10 s a look
Lost = test_cli_cluster_audit6.Lost


def test_a_model_with_no_worker_left_ends_its_sweep_with_that_reason(dask_run):
    """Its workers all gone (the H200 is another model's): the sweep stops with a ClusterError
    that says so, rather than ending as if every point were tried, or queueing trials nobody can run."""
    from gemmlab.tune.cluster import ClusterError

    with pytest.raises(ClusterError) as info:
        dask_run(lambda x, attempt, workers: ("finished", {"status": "PASS"}), addresses=())
    assert str(info.value) == "no H100 worker is left in the cluster"


def test_each_gpu_worker_starts_its_candidate_process_while_the_points_compile(dask_run):
    """On its own worker only (another worker's would be of no use to it), ahead of any
    compilation queued there; the other model's worker (the H200) is not asked."""
    from gemmlab.tune.remote import start_trial_process

    executor, client = dask_run.make(lambda x, attempt, workers: None, other=lambda function, args: None)
    executor.compile("naive", [], "sm_90")
    assert [(args, kwargs) for function, args, kwargs in client.others if function is start_trial_process] == [
        (("tests:task",), {"workers": [a], "allow_other_workers": False, "pure": False, "priority": 20})
        for a in ("tcp://a:1", "tcp://a:2")]


def test_a_compilation_lost_with_its_worker_is_done_here(dask_run, monkeypatch):
    """Its future erred (the CPU worker died): the point is compiled by the client itself, not
    recorded as a failure, nor the sweep ended."""
    from gemmlab.tune import dask_executor
    from gemmlab.tune.compile_pool import CompileOutcome
    from gemmlab.tune.remote import compile_point

    here = []
    monkeypatch.setattr(dask_executor, "compile_one", lambda job: here.append(job) or CompileOutcome(job[1], None, 0.5))
    executor, _ = dask_run.make(lambda x, attempt, workers: None,
                                other=lambda function, args: Lost(address="tcp://c:1") if function is compile_point
                                else "started")
    point = {"X": 0}
    assert executor.compile("naive", [point], "sm_90").outcome(point) == CompileOutcome(point, None, 0.5)
    assert here == [("naive", point, "sm_90")]


def test_a_compiled_point_whose_entry_did_not_come_back_is_not_installed(dask_run, monkeypatch):
    """The worker compiled it but could not read its entry back (torn, or pruned meanwhile): the
    outcome stands, nothing is put in the client's cache (an entry of no files raised there and
    ended the sweep), and the trial goes without one (its worker compiles the point again)."""
    from gemmlab.cuda import compile as nvrtc
    from gemmlab.tune.compile_pool import CompileOutcome
    from gemmlab.tune.remote import compile_point

    installed = []
    monkeypatch.setattr(nvrtc, "install_cache_entry", lambda key, files: installed.append(key))
    executor, client = dask_run.make(lambda x, attempt, workers: ("finished", {"status": "PASS"}),
                                     other=lambda function, args: (CompileOutcome(args[1], None, 0.1, "", "key-0"), None)
                                     if function is compile_point else "started")
    point = {"X": 0}
    assert executor.compile("naive", [point], "sm_90").outcome(point).cache_key == "key-0"
    executor.run(iter([{"x": 0, "params": point}]), lambda task, result: None)
    assert installed == [] and client.submitted[0][1]["entry"] is None


def test_no_more_than_two_trials_per_worker_are_in_flight(dask_run):
    """Six points on two H100s: four queued at once, the rest as answers come (an adaptive
    strategy learns from each answer before it proposes the next points)."""
    _, client, seen, _ = dask_run(lambda x, attempt, workers: ("finished", {"status": "PASS"}), xs=range(6))
    assert len(seen) == 6 and client.most_in_flight == 4


def test_a_retried_trial_keeps_its_own_extras_beside_the_first_failure(dask_run):
    """The retry's row carries what its worker said of it (which GPU ran it) as well as why the
    first attempt was lost."""
    script = lambda x, attempt, workers: test_cli_cluster_audit6._killed("tcp://a:1") if attempt == 0 else (
        "finished", {"status": "PASS", "extra": {"device": "1"}})
    _, _, seen, _ = dask_run(script, xs=[0])
    assert seen == {0: {"status": "PASS", "extra": {"device": "1", "first_worker": "tcp://a:1",
                                                    "retried_after": "KilledWorker: its worker tcp://a:1 died"}}}


def test_a_client_reconnecting_to_its_scheduler_does_not_end_the_sweep(dask_run):
    """A trial's future lost while the client is 'connecting' is waited for (then given up after
    the deadline, like a silent one), not taken for a scheduler that went away."""
    _, _, seen, _ = dask_run(lambda x, attempt, workers: ("lost", None), xs=[0], status="connecting")
    assert seen[0]["reason"] == "no answer from the cluster after 80 s"


def test_a_scheduler_that_cannot_be_asked_has_gone_away(dask_run):
    from gemmlab.tune.cluster import ClusterError

    executor, client = dask_run.make(lambda x, attempt, workers: ("lost", None))

    def unreachable():
        raise OSError("Timed out trying to connect to tcp://sched:8786")

    client.scheduler_info = unreachable
    with pytest.raises(ClusterError, match="^the Dask scheduler went away$"):
        executor.run(iter([{"x": 0, "params": {"X": 0}}]), lambda task, result: None)


@pytest.mark.parametrize("processing, first", [
    (lambda keys: {"tcp://a:2": ["other"], "tcp://a:1": keys}, "tcp://a:1"), (None, None)])
def test_a_silent_trial_is_retried_away_from_the_worker_that_holds_it(dask_run, processing, first):
    """The worker named is the one processing the trial's key, not the first the scheduler lists;
    where the scheduler cannot say, the trial is still given up and retried (anywhere)."""
    executor, client = dask_run.make(lambda x, attempt, workers: None)
    pending = lambda: [f.key for f in client.futures if f.status == "pending" and not f.cancelled]

    def unknown():
        raise OSError("the scheduler is busy")

    client.processing = (lambda: processing(pending())) if processing else unknown
    seen = []
    executor.run(iter([{"x": 0, "params": {"X": 0}}]), lambda task, result: seen.append(result))
    assert [r["extra"]["first_worker"] for r in seen] == [first]
    assert [kwargs["workers"] for _, kwargs in client.submitted] == [
        ["tcp://a:1", "tcp://a:2"], ["tcp://a:2"] if first else ["tcp://a:1", "tcp://a:2"]]


# ---------------------------------------------------------------- the cluster session (tune/cluster.py)

FakeClient = test_cli_cluster_audit6.FakeClient  # the scheduler's workers and their descriptions
DESCRIBE = f"{test_cli_cluster_audit6.HERE}:answer"  # resolved, never called by FakeClient


def test_a_dashboard_the_scheduler_cannot_name_is_left_out():
    """It is printed as a courtesy when a sweep starts: a scheduler that does not answer then must
    not end the sweep before it began."""
    from gemmlab.tune.cluster import ClusterSession

    client = FakeClient({}, {}, {"dashboard": 8787})

    def unreachable(n_workers=None):
        raise OSError("Timed out trying to connect")

    client.scheduler_info = unreachable
    assert ClusterSession(client).dashboard is None


@pytest.mark.parametrize("address", ["[::1:8786", "::1]:8786", "tcp://[]:8786"])
def test_a_half_bracketed_or_empty_ipv6_host_is_refused(address):
    from gemmlab.errors import BadArgumentError
    from gemmlab.tune.cluster import check_address

    with pytest.raises(BadArgumentError, match="give 'local' or a Dask scheduler's address"):
        check_address(address)


@pytest.fixture
def clients(monkeypatch):
    """distributed.Client and the local cluster stood in for: clients(workers) makes each Client a
    FakeClient of those workers (address -> resources; each an H100 of its own) and answers the
    list of clients made; clients.local holds what start_local_cluster was asked."""
    distributed = pytest.importorskip("distributed")
    from gemmlab.tune import cluster

    made, local = [], {}

    def go(workers):
        def client(target, timeout=None):
            made.append(FakeClient(workers, {a: test_cli_cluster_audit6._env("H100", f"U-{i}")
                                             for i, a in enumerate(workers)}))
            return made[-1]

        monkeypatch.setattr(distributed, "Client", client)
        return made

    monkeypatch.setattr(cluster, "start_local_cluster", lambda devices, compile_workers: local.update(
        devices=devices, compile_workers=compile_workers) or SimpleNamespace(close=lambda: local.update(closed=True)))
    go.local = local
    return go


@pytest.mark.parametrize("target, where", [("tcp://sched:8786", "tcp://sched:8786"), ("local", "local")])
def test_a_cluster_without_gpu_workers_is_refused_and_left_closed(clients, target, where):
    """The client is closed, and a local cluster started for the sweep is shut down, before the
    refusal: nothing is left running (a local cluster holds a process per core)."""
    from gemmlab.tune.cluster import ClusterError, connect

    made = clients({"tcp://c:1": {}})
    with pytest.raises(ClusterError) as info:
        connect(target, describe_path=DESCRIBE)
    assert str(info.value) == f"the cluster at {where} has no GPU worker (a worker with the resource GPU=1)"
    assert [c.closed for c in made] == [True]
    assert clients.local.get("closed") is (True if target == "local" else None)


def _refusing(exc, close_fails=False):
    """A ClusterSession.refresh that raises exc as it describes the workers (after the client is
    made); close_fails makes the client's close() raise too, after noting that it was called."""
    def refresh(self, force=False):
        if close_fails:
            def close():
                self.client.closed = True
                raise OSError("the scheduler went away")

            self.client.close = close
        raise exc

    return refresh


@pytest.mark.parametrize("target", ["tcp://sched:8786", "local"])
@pytest.mark.parametrize("exc, close_fails", [
    (None, False),  # a ClusterError: a worker that cannot describe its GPU
    (OSError("Timed out trying to connect to tcp://sched:8786"), False),
    (None, True)])
def test_a_cluster_whose_workers_cannot_be_described_is_left_closed(clients, monkeypatch, target, exc, close_fails):
    """refresh() raising (a worker without gemmlab, two workers on one GPU, a scheduler gone):
    the client and a local cluster are closed before the error goes on, unchanged - connect()
    answers no session, so a Python caller had no way to close them. A client that fails to
    close does not keep the cluster running, nor hide the error."""
    from gemmlab.tune import cluster
    from gemmlab.tune.cluster import ClusterError, connect

    if exc is None:
        exc = ClusterError("worker tcp://g:1 could not describe its GPU (ImportError: no gemmlab)")
    monkeypatch.setattr(cluster.ClusterSession, "refresh", _refusing(exc, close_fails))
    made = clients({"tcp://g:1": {"GPU": 1}})
    with pytest.raises(type(exc)) as info:
        connect(target, describe_path=DESCRIBE)
    assert info.value is exc
    assert [c.closed for c in made] == [True]
    assert clients.local.get("closed") is (True if target == "local" else None)


def test_a_local_cluster_whose_client_cannot_start_is_shut_down(clients, monkeypatch):
    """Client(cluster) raising leaves no client to close, but the cluster started for the sweep
    (a process per core) is shut down before the error goes on."""
    import distributed

    from gemmlab.tune.cluster import connect

    failure = OSError("Timed out during handshake while connecting to tcp://127.0.0.1:40000")

    def client(target, timeout=None):
        raise failure

    monkeypatch.setattr(distributed, "Client", client)
    with pytest.raises(OSError) as info:
        connect("local", describe_path=DESCRIBE)
    assert info.value is failure
    assert clients.local.get("closed") is True


def test_a_local_cluster_is_started_with_the_devices_and_compile_workers_asked(clients):
    from gemmlab.tune.cluster import connect

    clients({"tcp://g:1": {"GPU": 1}})
    connect("local", devices=[1], compile_workers=3, describe_path=DESCRIBE)
    assert clients.local == {"devices": [1], "compile_workers": 3}


def test_a_local_cluster_with_no_compile_workers_asked_starts_none_and_its_workers_keep_their_children(monkeypatch):
    """--compile-workers 0 is none (not the default of the other cores); the workers are not
    daemonic (each starts a candidate process, which multiprocessing refuses a daemon) and do not
    run Dask's profiler, which took 18% from the compilations."""
    distributed = pytest.importorskip("distributed")
    import dask

    from gemmlab.tune.cluster import start_local_cluster

    seen = {}

    def spec_cluster(workers, scheduler, **kwargs):
        seen.update(workers=sorted(workers), config={key: dask.config.get(key) for key in (
            "distributed.worker.daemon", "distributed.worker.profile.enabled")})

    monkeypatch.setattr(distributed, "SpecCluster", spec_cluster)
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    start_local_cluster([0], compile_workers=0)
    assert seen == {"workers": ["gpu-0"], "config": {"distributed.worker.daemon": False,
                                                     "distributed.worker.profile.enabled": False}}
