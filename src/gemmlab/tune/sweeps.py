"""One sweep per GPU model of a Dask cluster, side by side, each recorded as its own run.

A mixed cluster (H100 and H200 workers, say) tunes every model at once: each model gets its
own strategy (its own order, or its own Bayesian study), its own run in the database with
that model's environment, and only its own workers.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from ..problem import GemmProblem
from ..registry import KernelSpec
from ..store import ResultStore
from .cluster import ClusterError, ClusterSession, GpuWorker
from .dask_executor import DaskExecutor
from .search import Strategy
from .tuner import TuneOptions, TuneSummary, tune


@dataclass
class ModelSweep:
    model: str
    workers: list[GpuWorker]
    run_id: int | None = None
    summary: TuneSummary | None = None
    error: str | None = None  # why the cluster stopped this sweep (its rows so far are kept)
    exception: BaseException | None = None  # anything else: a defect, raised in the caller


def run_env(workers: list[GpuWorker], session: ClusterSession) -> dict:
    """The run's environment: its first worker's, with the cluster and every worker named."""
    env = dict(workers[0].env)
    env["cluster"] = {"scheduler": session.address,
                      "workers": [{"address": w.address, "host": w.env.get("hostname"), "gpu_uuid": w.gpu.get("uuid"),
                                   "cuda_visible_devices": w.env.get("cuda_visible_devices")} for w in workers]}
    return env


def select_models(session: ClusterSession, gpu_filter: str | None) -> list[ModelSweep]:
    groups = session.models()
    chosen = [ModelSweep(m, ws) for m, ws in sorted(groups.items())
              if not gpu_filter or gpu_filter.lower() in m.lower()]
    if not chosen:
        raise ClusterError(f"no GPU worker's model contains {gpu_filter!r} (the cluster has: {', '.join(sorted(groups))})")
    return chosen


def tune_on_cluster(spec: KernelSpec, problem: GemmProblem, make_strategy: Callable[[], Strategy],
                    options: TuneOptions, session: ClusterSession, sweeps: list[ModelSweep], db_path: Any,
                    command: str, on_result: Callable[[str, dict], None] | None = None) -> list[ModelSweep]:
    """Run every model's sweep at once (a thread each); rows reach the database as they arrive.

    Each thread has its own connection to the database (SQLite serialises the writers), and
    this process stays the only writer: workers only answer.
    """
    def one(sweep: ModelSweep) -> None:
        store = ResultStore(db_path)
        try:
            env = run_env(sweep.workers, session)
            sweep.run_id = store.start_run("tune", command, env)
            arch = (env.get("gpu") or {}).get("compute_capability") or "sm_90"
            executor = DaskExecutor(session, sweep.model, options.task_path, options.timeout_s)
            report = (lambda row: on_result(sweep.model, row)) if on_result else None
            sweep.summary = tune(spec, problem, make_strategy(), options, arch, store, sweep.run_id, sweep.model,
                                 on_result=report, executor=executor)
        except ClusterError as exc:
            sweep.error = str(exc)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            sweep.exception = exc
        finally:
            store.close()

    threads = [threading.Thread(target=one, args=(s,), name=f"tune-{s.model}", daemon=True) for s in sweeps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for sweep in sweeps:
        if sweep.exception is not None:
            raise sweep.exception
    return sweeps
