"""The Dask back end of the tuner: a running cluster (`--cluster tcp://host:8786`) or one
started here (`--cluster local`: one worker per visible GPU, plus CPU workers for NVRTC).

- A GPU worker is a Dask worker with the resource GPU=1 and one GPU visible
  (CUDA_VISIBLE_DEVICES pinned). Workers are grouped by GPU model; each model is a sweep of its
  own, recorded as its own run, so a mixed cluster of H100s and H200s tunes both.
- NVRTC needs no GPU: compilation runs on any worker, and each compiled entry comes back to
  the client, which hands it to the GPU worker with the trial (the cache is content-addressed,
  so any worker may fill it and an entry present under its key is the same one).
- The client is the only writer of the results database; the tuner writes a row as each trial
  answers. A trial whose worker dies (KilledWorker), hangs or stops answering is retried once on
  another worker of its model, then recorded as ERROR with the reason.
"""
from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadArgumentError, GemmlabError
from .worker import resolve, visible_id

GPU_RESOURCE = "GPU"
DESCRIBE = "gemmlab.tune.remote:describe_worker"


class ClusterError(GemmlabError):
    """The cluster cannot run the sweep (unreachable, no GPU worker, lost mid-sweep)."""


def require_dask() -> None:
    if importlib.util.find_spec("distributed") is None:
        raise BadArgumentError('--cluster needs Dask distributed: pip install "gemmlab[cluster]"')


@dataclass
class GpuWorker:
    address: str
    env: dict  # describe_worker() as the worker answered it

    @property
    def gpu(self) -> dict:
        return self.env.get("gpu") or {}

    @property
    def model(self) -> str:
        return self.gpu.get("name") or "unknown GPU"

    @property
    def label(self) -> str:
        device = self.env.get("cuda_visible_devices")
        return f"{self.address} ({self.model}{f', GPU {device}' if device else ''})"


@dataclass
class ClusterSession:
    """A client on a Dask cluster, and what its GPU workers are."""

    client: Any
    cluster: Any = None  # the LocalCluster started here, if any
    describe_path: str = DESCRIBE
    workers: dict[str, GpuWorker] = field(default_factory=dict)
    _checked: float = 0.0

    @property
    def dashboard(self) -> str | None:
        try:
            services = self.client.scheduler_info().get("services", {})
        except Exception:  # noqa: BLE001 - a dashboard address is a courtesy
            return None
        return self.client.dashboard_link if "dashboard" in services else None

    @property
    def address(self) -> str:
        return self.client.scheduler.address

    def refresh(self, force: bool = False) -> dict[str, GpuWorker]:
        """GPU workers now: a worker that left is dropped, a new one (a restarted one) is asked
        what it is. Asks the scheduler at most every 2 s unless forced."""
        if not force and time.monotonic() - self._checked < 2.0:
            return self.workers
        self._checked = time.monotonic()
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        gpu_addresses = {a for a, w in info.items() if (w.get("resources") or {}).get(GPU_RESOURCE, 0) >= 1}
        for gone in set(self.workers) - gpu_addresses:
            del self.workers[gone]
        new = sorted(gpu_addresses - set(self.workers))
        if new:
            describe = resolve(self.describe_path)
            try:
                answers = self.client.run(describe, workers=new, on_error="return")
            except OSError:  # a new worker went away again before it answered
                answers = {}
            for address, env in answers.items():
                if isinstance(env, BaseException):
                    raise ClusterError(f"worker {address} could not describe its GPU "
                                       f"({type(env).__name__}: {env}); is gemmlab installed there?")
                self.workers[address] = GpuWorker(address, env)
            _check_pinning(self.workers.values())
        return self.workers

    def cpu_workers(self) -> list[str]:
        """Workers without the GPU resource: where compilation goes when there are some."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return sorted(a for a, w in info.items() if not (w.get("resources") or {}).get(GPU_RESOURCE))

    def models(self) -> dict[str, list[GpuWorker]]:
        groups: dict[str, list[GpuWorker]] = {}
        for w in self.refresh(force=True).values():
            groups.setdefault(w.model, []).append(w)
        return groups

    def close(self) -> None:
        try:
            self.client.close()
        finally:  # a client that fails to close must not leave the local cluster's processes running
            if self.cluster is not None:
                self.cluster.close()


def _check_pinning(workers) -> None:
    """Two workers timing on one GPU would each measure half a GPU: refuse that, and a worker
    that sees several GPUs (which one would it use?)."""
    seen: dict[str, str] = {}
    for w in workers:
        visible = w.env.get("visible_gpus")
        if visible is not None and visible > 1:
            raise ClusterError(f"worker {w.address} sees {visible} GPUs: start each GPU worker with one "
                               "CUDA_VISIBLE_DEVICES index (docs/tuning.md)")
        uuid = w.gpu.get("uuid")
        if uuid and uuid in seen:
            raise ClusterError(f"workers {seen[uuid]} and {w.address} share one GPU ({uuid}): "
                               "pin each to its own CUDA_VISIBLE_DEVICES")
        if uuid:
            seen[uuid] = w.address


SCHEMES = ("tcp", "tls", "ucx", "ws", "wss")  # Dask's network transports (inproc:// is within one process)


def check_address(target: str) -> None:
    """--cluster: "local", or a scheduler's [SCHEME://]HOST:PORT (PORT 1-65535), refused in
    one line before anything connects (distributed raised a ValueError of its own, or waited
    out its timeout for a port that cannot exist)."""
    if target == "local":
        return
    scheme, sep, rest = target.partition("://")
    if not sep:
        scheme, rest = "tcp", target
    host, _, port = rest.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")  # IPv6: [::1]:8786 (::1:8786 is ambiguous)
    if scheme not in SCHEMES or not host.strip("[]") or (":" in host and not bracketed) \
            or not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise BadArgumentError(f"--cluster {target!r}: give 'local' or a Dask scheduler's address, "
                               f"[{'|'.join(SCHEMES)}://]HOST:PORT (e.g. tcp://10.0.0.5:8786)")


def connect(target: str, devices: list[int] | None = None, compile_workers: int | None = None,
            describe_path: str = DESCRIBE, timeout_s: float = 30.0) -> ClusterSession:
    """A session on `target`: "local" starts a cluster here, anything else is a scheduler address."""
    require_dask()
    from distributed import Client

    if target == "local":
        cluster = start_local_cluster(devices, compile_workers)
        try:
            client = Client(cluster)
        except BaseException:
            with contextlib.suppress(Exception):  # an error in closing must not hide the one raised
                cluster.close()  # started for this sweep (a process per core): not left running
            raise
    else:
        cluster = None
        try:
            client = Client(target, timeout=timeout_s)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"no Dask scheduler answered at {target}: {exc}") from None
    session = ClusterSession(client, cluster, describe_path)
    try:
        found = session.refresh(force=True)
    except BaseException:
        # a worker that cannot describe its GPU, two on one GPU, a scheduler gone: the caller gets
        # no session to close, so the client and a local cluster are closed here
        with contextlib.suppress(Exception):
            session.close()
        raise
    if not found:
        session.close()
        raise ClusterError(f"the cluster at {session.address if cluster is None else 'local'} has no GPU worker "
                           f"(a worker with the resource {GPU_RESOURCE}=1)")
    return session


def start_local_cluster(devices: list[int] | None = None, compile_workers: int | None = None):
    """One single-threaded GPU worker per device (resource GPU=1, CUDA_VISIBLE_DEVICES pinned)
    and `compile_workers` CPU workers that see no GPU, for NVRTC (default: the other cores; they
    compile at low priority, remote.compile_point, so the scheduler and the client still run)."""
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    if devices is None:
        devices = list(range(_visible_gpu_count()))
    if not devices:
        raise ClusterError("--cluster local: this machine has no GPU to start a worker for")
    if compile_workers is None:
        compile_workers = max(0, (os.cpu_count() or 1) - len(devices))
    quiet = {"nthreads": 1, "silence_logs": logging.ERROR}
    workers = {}
    for d in devices:
        workers[f"gpu-{d}"] = {"cls": Nanny, "options": {**quiet, "resources": {GPU_RESOURCE: 1},
                                                           "env": {"CUDA_VISIBLE_DEVICES": visible_id(d)}}}
    for i in range(compile_workers):
        workers[f"cpu-{i}"] = {"cls": Nanny, "options": {**quiet, "env": {"CUDA_VISIBLE_DEVICES": ""}}}
    # a free port for the scheduler's HTTP server, dashboard or not: without bokeh, None meant
    # distributed's default :8787, and two local clusters at once (two tunes, two test runs) collided
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0",
                                               "dashboard": importlib.util.find_spec("bokeh") is not None}}
    # The scheduler reads these when it starts: a worker that dies fails its trial at once
    # (KilledWorker), which the client retries once itself; and workers are not daemonic, since
    # their trials run in a child process (remote.py; a restarted worker is handled there).
    # Each worker's statistical profiler samples its threads every 10 ms: off, since with a
    # worker per core it took from the compilations (2.36 s a point against 2.00 s without it,
    # 30 compile workers on the 32 cores of an H200 host).
    with dask.config.set({"distributed.worker.daemon": False, "distributed.scheduler.allowed-failures": 0,
                          "distributed.worker.profile.enabled": False}):
        return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR, name="gemmlab-tune")


def _visible_gpu_count() -> int:
    from ..envinfo import gpu_count

    return gpu_count()
