"""What a Dask worker runs for a sweep: describe its GPU, compile one point, run one trial.

These functions travel by reference (module and name), so every worker needs gemmlab
installed; they import Dask only where they need the worker they run in.

A trial runs in a CandidateProcess owned by the worker process, exactly as in the local pool:
a candidate that crashes, hangs or leaves a sticky CUDA error costs that process, which is
replaced, and the Dask worker (with its connections and its other tasks) carries on.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import threading
from typing import Mapping

from .compile_pool import CompileOutcome, background_priority, compile_one
from .worker import CandidateProcess

# Candidate failures that say nothing of the candidate itself: the trial is worth one retry
# on another worker (a died process may be the OOM killer, a hang may be a sick GPU).
INFRASTRUCTURE_FAILURES = ("the worker died", "timed out", "KilledWorker", "no answer from the cluster")

_process: CandidateProcess | None = None
_lock = threading.Lock()


def describe_worker() -> dict:
    """This worker's environment, its GPU included (no CUDA context is created): what the
    client groups workers by and what it stores with each run."""
    from ..envinfo import collect_env, gpu_count

    env = collect_env()
    env["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    env["visible_gpus"] = gpu_count()
    return env


def compile_point(impl: str, params: dict, arch: str) -> tuple[CompileOutcome, dict[str, bytes] | None]:
    """Compile one point here (no GPU needed) and hand back its cache entry, so the client can
    pass it to whichever GPU worker runs the trial."""
    from ..cuda.compile import read_cache_entry

    background_priority()
    outcome = compile_one((impl, params, arch))
    return outcome, read_cache_entry(outcome.cache_key) if outcome.cache_key else None


def run_trial(task: dict, task_path: str, timeout_s: float,
              cache_entry: tuple[str, Mapping[str, bytes]] | None = None) -> dict:
    """Verify and time one candidate in this worker's candidate process; answers a result row."""
    if cache_entry is not None:
        from ..cuda.compile import install_cache_entry

        install_cache_entry(*cache_entry)
    with _lock:  # one trial at a time per worker: the GPU resource says so, this makes sure
        result = _candidate_process(task_path).call(task, timeout_s)
    result["worker"] = _worker_address()
    return result


def start_trial_process(task_path: str) -> str:
    """Start this worker's candidate process before its first trial is due (the executor asks
    while the first points compile): its imports and CUDA context take seconds."""
    with _lock:
        _candidate_process(task_path).start()
    return _worker_address()


def _candidate_process(task_path: str) -> CandidateProcess:
    global _process
    if _process is None or _process.task_path != task_path:
        if _process is not None:
            _process.close()
        _allow_children()
        _process = CandidateProcess(None, task_path)  # the worker's CUDA_VISIBLE_DEVICES pins it
    return _process


def _allow_children() -> None:
    """Dask's nanny starts workers as daemonic processes (unless distributed.worker.daemon is
    False), and multiprocessing refuses children to those. The candidate process ends by
    itself when its pipe to this worker closes, which is what the daemon flag would ensure."""
    if mp.current_process().daemon:
        mp.current_process()._config["daemon"] = False


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "local"
