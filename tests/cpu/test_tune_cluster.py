"""The Dask back end of the tuner, end to end on a LocalCluster of worker processes, without a
GPU: the workers announce FAKE GPUs and the trials are FAKE measurements (fake_tasks.py), so
what is tested is the scheduling, the recording and the recovery, on rung 10's real space."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason='the Dask back end needs pip install "gemmlab[cluster]"')

from gemmlab import registry  # noqa: E402
from gemmlab.problem import GemmProblem  # noqa: E402
from gemmlab.store import ResultStore  # noqa: E402
from gemmlab.tune.cluster import ClusterError, connect, start_local_cluster  # noqa: E402
from gemmlab.tune.search import RandomSample  # noqa: E402
from gemmlab.tune.space import enumerate_space  # noqa: E402
from gemmlab.tune.sweeps import select_models, tune_on_cluster  # noqa: E402
from gemmlab.tune.tuner import TuneOptions  # noqa: E402

from .fake_tasks import fake_gflops  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAKE_GPU = "tests.cpu.fake_tasks:fake_gpu"
FAKE_MEASURE = "tests.cpu.fake_tasks:fake_measure"


@pytest.fixture(autouse=True)
def no_nvml_in_workers():
    """The fake GPU indices may not exist on a machine with GPUs: Dask's own NVML monitor must
    not look them up (nannies hand their config, this included, to the workers they start)."""
    import dask

    with dask.config.set({"distributed.diagnostics.nvml": False}):
        yield


def _rows(db: Path) -> list[dict]:
    with ResultStore(db) as store:
        return store.query("SELECT r.params, r.status, r.reason, r.gflops, r.extra, runs.gpu FROM results r "
                           "JOIN runs ON runs.id = r.run_id")


def _client(address: str, db: Path, resume: bool) -> subprocess.Popen:
    code = f"from tests.cpu.fake_tasks import run_client; run_client({address!r}, {str(db)!r}, {resume})"
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_sweep_survives_a_killed_worker_and_a_killed_client(tmp_path, monkeypatch):
    """Rung 10's 704 points on 3 GPU workers: one worker is killed during a trial, the client is
    killed mid-sweep and restarted with --resume. Every point ends with exactly one row."""
    kept = enumerate_space(registry.get("warptiling")).kept
    assert len(kept) == 704
    victim = kept[60]  # its trial kills its own worker, once
    monkeypatch.setenv("GEMMLAB_FAKE_GPU_MODELS", "Fake H200")
    monkeypatch.setenv("GEMMLAB_FAKE_KILL_FLAG", str(tmp_path / "killed"))
    monkeypatch.setenv("GEMMLAB_FAKE_KILL_POINT", json.dumps(victim, sort_keys=True))
    monkeypatch.setenv("GEMMLAB_FAKE_TRIAL_S", "0.01")
    db = tmp_path / "results.db"
    cluster = start_local_cluster(devices=[0, 1, 2], compile_workers=0)
    try:
        address = cluster.scheduler_address
        first = _client(address, db, resume=False)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            if db.exists() and len(_rows(db)) >= 250:
                break
            time.sleep(0.2)
        assert first.poll() is None, "the first client should still be running: " + first.stdout.read().decode()
        os.kill(first.pid, signal.SIGKILL)  # the client dies mid-sweep, trials in flight
        first.wait()
        recorded_before = len(_rows(db))
        assert 250 <= recorded_before < 704
        assert (tmp_path / "killed").exists(), "the victim's trial ran (and killed its worker) before the client died"

        second = _client(address, db, resume=True)
        out, _ = second.communicate(timeout=300)
        assert second.returncode == 0, out.decode()[-3000:]
    finally:
        cluster.close()

    rows = _rows(db)
    keys = [json.dumps(json.loads(r["params"]), sort_keys=True) for r in rows]
    assert len(rows) == 704 and len(set(keys)) == 704, "no row lost, none duplicated"
    assert {r["gpu"] for r in rows} == {"Fake H200"}
    assert [(r["status"], r["reason"], r["extra"]) for r in rows if r["status"] != "PASS"] == []
    retried = [json.loads(r["extra"]) for r, k in zip(rows, keys) if k == json.dumps(victim, sort_keys=True)]
    assert retried[0]["retried_after"].startswith("KilledWorker"), retried
    assert retried[0]["worker"] != retried[0]["first_worker"], "the retry ran on another worker"
    assert len({json.loads(r["extra"])["worker"] for r in rows}) >= 3, "every worker took trials"
    assert max(r["gflops"] for r in rows) == max(fake_gflops(p) for p in kept), "the best point is found"


def test_mixed_cluster_tunes_each_model_on_its_own_workers(tmp_path, monkeypatch):
    """Two GPU models: two runs, each with its GPU, each model's trials on its own workers; a
    candidate whose process dies or hangs is retried once, then recorded as an ERROR with both
    reasons."""
    monkeypatch.setenv("GEMMLAB_FAKE_GPU_MODELS", "Fake H100,Fake H200")
    spec = registry.get("warptiling")
    session = connect("local", devices=[0, 1], compile_workers=0, describe_path=FAKE_GPU)
    try:
        sweeps = select_models(session, None)
        assert [(s.model, len(s.workers)) for s in sweeps] == [("Fake H100", 1), ("Fake H200", 1)]
        by_model = {s.model: {w.address for w in s.workers} for s in sweeps}
        options = TuneOptions(task_path="tests.cpu.fake_tasks:misbehave", precompile=False, timeout_s=2)
        points = [{"X": x, "BK": 8} for x in (0, 1, 2, 5)]  # X=1: the candidate process dies; X=2: it hangs
        tune_on_cluster(spec, GemmProblem(512, 512, 512), lambda: RandomSample(points, {}), options, session, sweeps,
                        tmp_path / "r.db", "mixed")
        with pytest.raises(ClusterError, match="contains 'A100'"):
            select_models(session, "A100")
    finally:
        session.close()
    assert all(s.error is None and len(s.summary.trials) == 4 for s in sweeps)
    rows = _rows(tmp_path / "r.db")
    assert sorted(r["gpu"] for r in rows) == ["Fake H100"] * 4 + ["Fake H200"] * 4
    for r in rows:
        extra = json.loads(r["extra"])
        assert extra["worker"] in by_model[r["gpu"]], "a trial ran on a worker of another model"
        x = json.loads(r["params"])["X"]
        if x == 1:
            assert r["status"] == "ERROR" and "exit code 7" in r["reason"] and "exit code 7" in extra["retried_after"]
        elif x == 2:
            assert r["status"] == "ERROR" and "timed out" in r["reason"] and "timed out" in extra["retried_after"]
        else:
            assert r["status"] == "PASS"


def test_compiled_entries_travel_between_caches(tmp_path, monkeypatch):
    """A worker compiles; the client installs the entry in its cache and hands it on; the GPU
    worker's compile is then a cache hit (content-addressed: the same key is the same kernel)."""
    from gemmlab.cuda.compile import compile_kernel, install_cache_entry, read_cache_entry
    from gemmlab.tune.remote import compile_point

    spec = registry.get("naive")
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "compiler"))
    outcome, files = compile_point("naive", spec.defaults, "sm_90")
    assert outcome.error == "" and files and set(files) == {"meta.json", "kernel.cubin"}
    assert read_cache_entry(outcome.cache_key) == files
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "gpu-worker"))
    assert install_cache_entry(outcome.cache_key, files) is True
    assert install_cache_entry(outcome.cache_key, files) is False, "present already: left alone"
    again = compile_kernel(spec, spec.defaults, arch="sm_90")
    assert again.cached and again.cubin == files["kernel.cubin"] and again.cache_key == outcome.cache_key
    with pytest.raises(ValueError):
        install_cache_entry("../../etc", files)


def test_cluster_refusals_are_one_line(capsys, monkeypatch):
    from gemmlab.cli import main

    with pytest.raises(ClusterError, match="no Dask scheduler answered"):
        connect("tcp://127.0.0.1:9", timeout_s=2)
    # each refusal by its own message (without a GPU, or a scheduler, they would exit 2 anyway)
    refusals = ((["--compile-workers", "2"], "--compile-workers and --gpu go with --cluster"),
                (["--cluster", "tcp://127.0.0.1:9", "--devices", "0"], "--devices and --compile-workers shape a local "
                                                                        "cluster"),
                (["--cluster", "local", "--jobs", "4"], "--jobs sets this machine's NVRTC processes"))
    for args, message in refusals:
        assert main(["tune", "--impl", "naive", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "distributed" else object())
    assert main(["tune", "--impl", "naive", "--cluster", "local"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert 'pip install "gemmlab[cluster]"' in err


def test_a_local_cluster_starts_while_dasks_default_dashboard_port_is_taken():
    """Without bokeh the scheduler's HTTP server took distributed's default :8787: a second local
    cluster (another tune, another test run) warned 'Port 8787 is already in use', which failed to
    start it where warnings are errors (as in this suite's CI)."""
    import socket
    import warnings

    taken = socket.socket()
    try:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("", 8787))
        taken.listen(1)
    except OSError:
        taken.close()
        taken = None  # in use already (another cluster): the same condition
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            cluster = start_local_cluster(devices=[0], compile_workers=0)
        cluster.close()
    finally:
        if taken is not None:
            taken.close()
