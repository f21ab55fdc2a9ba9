"""Stand-in candidates for the worker-pool tests: they misbehave on purpose, without a GPU."""
import os
import time


def misbehave(task: dict) -> dict:
    x = task["params"].get("X", task["params"].get("TM", 0))
    if x == 1:
        os._exit(7)  # the worker process dies (like a segfault in a driver call)
    if x == 2:
        time.sleep(600)  # hangs (like a kernel that never ends)
    if x == 3:
        return {"status": "ERROR", "reason": "illegal address (sticky)", "fatal": True}
    return {"status": "PASS", "gflops": 1000.0 + x + task["params"].get("BK", 0) / 100, "t_median_ms": 1.0,
            "fatal": False}


# --- FAKE GPU and FAKE measurement for the Dask tests (tests/cpu/test_tune_cluster.py) only ---
# No GPU exists in CI: a worker "has" the GPU model named by GEMMLAB_FAKE_GPU_MODELS (one name
# per CUDA_VISIBLE_DEVICES index), and a trial's "GFLOP/s" is a fixed function of its parameters.

def fake_gpu() -> dict:
    device = os.environ.get("CUDA_VISIBLE_DEVICES") or "0"
    models = os.environ.get("GEMMLAB_FAKE_GPU_MODELS", "Fake GPU").split(",")
    return {"gpu": {"name": models[int(device) % len(models)], "compute_capability": "sm_90",
                    "uuid": f"FAKE-{device}"},
            "hostname": "fake-host", "cuda_visible_devices": device, "visible_gpus": 1}


def fake_gflops(params: dict) -> float:
    import hashlib
    import json

    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).digest()
    return 1000.0 + int.from_bytes(digest[:4], "little") % 100000 / 100


def fake_measure(task: dict) -> dict:
    """Sleeps a little, answers fake_gflops. For the point named by GEMMLAB_FAKE_KILL_POINT it
    kills the Dask worker that hosts it (this process's parent), once (a flag file says so)."""
    import json
    import signal

    params = task["params"]
    flag = os.environ.get("GEMMLAB_FAKE_KILL_FLAG")
    if flag and json.dumps(params, sort_keys=True) == os.environ.get("GEMMLAB_FAKE_KILL_POINT") \
            and not os.path.exists(flag):
        open(flag, "w").close()
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(30)
    time.sleep(float(os.environ.get("GEMMLAB_FAKE_TRIAL_S", "0.002")))
    return {"status": "PASS", "gflops": fake_gflops(params), "t_median_ms": 1.0, "fatal": False}


def run_client(address: str, db: str, resume: bool) -> None:
    """A tuning client on the cluster at `address` (run in its own process by the test, which
    may kill it): rung 10's whole space at 4096^3, FAKE GPUs and FAKE measurements."""
    from gemmlab import registry
    from gemmlab.problem import GemmProblem
    from gemmlab.tune.cluster import connect
    from gemmlab.tune.search import Exhaustive
    from gemmlab.tune.space import enumerate_space
    from gemmlab.tune.sweeps import select_models, tune_on_cluster
    from gemmlab.tune.tuner import TuneOptions

    spec = registry.get("warptiling")
    kept = enumerate_space(spec).kept
    session = connect(address, describe_path="tests.cpu.fake_tasks:fake_gpu")
    try:
        options = TuneOptions(task_path="tests.cpu.fake_tasks:fake_measure", precompile=False, timeout_s=20,
                              resume=resume)
        sweeps = select_models(session, None)
        tune_on_cluster(spec, GemmProblem(4096, 4096, 4096), lambda: Exhaustive(kept, {}), options, session, sweeps,
                        db, "fake client" + (" --resume" if resume else ""))
        assert not any(s.error for s in sweeps), [s.error for s in sweeps]
    finally:
        session.close()
