"""Tests that could not fail, sixth audit (a helper's mutants of harness/session.py, harness/bench.py,
the CPU-side logic of apibench.py and envinfo.py). Each test below kills mutants that the CPU suite
let live: it fails with them and passes without. CPU only: the GPU, the timer, NVML, the driver and
the clock are stand-ins defined here or borrowed from the tests that already fake them."""
from __future__ import annotations

import enum
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace

import cuda.bindings
import pytest

from gemmlab import apibench, envinfo, ops, registry
from gemmlab.apibench import Row
from gemmlab.cuda import device as cuda_device
from gemmlab.cuda import nvml
from gemmlab.errors import BadArgumentError, GemmlabError, LaunchError, NoGPUError, VerificationError
from gemmlab.harness import bench as harness_bench
from gemmlab.harness import session
from gemmlab.harness.bench import BenchOptions, Point
from gemmlab.harness.timing import Stats
from gemmlab.problem import GemmProblem, ReduceProblem
from gemmlab.store import ResultStore

from .test_envinfo import _fake_driver


def _clock(monkeypatch, module, *spans):
    """module.time.perf_counter scripted: each (start, seconds) span gives the two reads of one
    timed stretch, in order."""
    ticks = iter([t for start, seconds in spans for t in (start, start + seconds)])
    monkeypatch.setattr(module.time, "perf_counter", lambda: next(ticks))


class _Sampler:
    """ClockSampler as a context manager: each one entered takes the next (lowest, highest
    supported) pair."""
    readings: list = []

    def __enter__(self):
        self.min_clock, self.max_supported_clock = _Sampler.readings.pop(0)
        return self

    def __exit__(self, *exc):
        return None


# ---------------------------------------------------------------- apibench: batches and timing

def test_a_host_batch_never_queues_past_the_drain_budget_by_rounding_up():
    """Calls of 18.4 ms: 13.6 of them fit in DRAIN_S (0.25 s), so 13 (239 ms), never 14 (257 ms, past it)."""
    work_s = apibench.DRAIN_S / 13.6
    assert apibench.host_batch(work_s) == 13


def test_host_time_is_the_median_round_in_microseconds_per_call(monkeypatch):
    """Three rounds of batches of 2 calls: 1, 2 and 15 us a call (a host stall in the last): 2 us,
    the median, never the mean (6) nor a batch's whole time (4)."""
    _clock(monkeypatch, apibench, (0.0, 2e-6), (10.0, 4e-6), (20.0, 30e-6))
    (us,) = apibench._host_us([lambda: None], lambda: None, rounds=3, batch=2)
    assert us == pytest.approx(2.0)


@pytest.mark.parametrize("work_s, calls", [(0.02, 5), (0.001, 50), (1e-8, 2000)])
def test_a_loop_is_about_50_ms_of_calls_between_5_and_2000(monkeypatch, work_s, calls):
    monkeypatch.setattr(nvml, "ClockSampler", _Sampler)
    monkeypatch.setattr(_Sampler, "readings", [(None, None)] * apibench.LOOP_REPEATS)
    monkeypatch.setattr(apibench, "host_probe_us", lambda: 2.0)
    made = []
    apibench._loops([lambda: made.append(1)], lambda: None, work_s)
    assert len(made) == 1 + apibench.LOOP_REPEATS * calls  # one warm-up call, then the loops


def test_a_loops_figure_is_the_median_loop_per_call_and_the_highest_clock_the_first_read(monkeypatch):
    """Loops of 5 calls taking 5, 10 and 50 ms: 2 ms a call (the median), not 4.33 (the mean) nor
    10 (a whole loop); the GPU's highest clock as first read, kept where a later sampler has none."""
    monkeypatch.setattr(nvml, "ClockSampler", _Sampler)
    monkeypatch.setattr(_Sampler, "readings", [(1700, 1980), (1650, None), (1800, None)])
    monkeypatch.setattr(apibench, "host_probe_us", lambda: 2.0)
    _clock(monkeypatch, apibench, (0.0, 5e-3), (1.0, 10e-3), (2.0, 50e-3))
    ((seconds, mhz, probe, top),) = apibench._loops([lambda: None], lambda: None, 0.01)
    assert seconds == pytest.approx(2e-3)
    assert (mhz, probe, top) == (1650, 2.0, 1980)


def test_the_work_estimate_is_the_fastest_warm_call(monkeypatch):
    _clock(monkeypatch, apibench, (0.0, 3e-3), (1.0, 1e-3), (2.0, 2e-3), (3.0, 9e-3), (4.0, 4e-3))
    assert apibench._work_seconds(lambda: None, lambda: None) == pytest.approx(1e-3)


# ---------------------------------------------------------------- apibench: bench's figure

def _bench_figure(monkeypatch, point=None, error=None):
    """apibench._bench_figure over a stand-in run_bench: the options it was given and its answer."""
    given = []

    def run_bench(impls, problems, options, on_result=None):
        given.append(options)
        if error:
            raise error
        return [point]

    monkeypatch.setattr(harness_bench, "run_bench", run_bench)
    monkeypatch.setattr(registry, "get", lambda name, op=None: SimpleNamespace(name=name))
    return given


def test_benchs_figure_is_a_cold_l2_pass_in_tflops_with_its_lowest_clock(monkeypatch):
    point = SimpleNamespace(status="PASS", gflops=51000.0, gbps=3000.0,
                            clocks={"sm_clock_min_mhz": 1755, "sm_clock_max_mhz": 1980})
    given = _bench_figure(monkeypatch, point)
    assert apibench._bench_figure("sgemm", "cublas", None) == (51.0, 1755)
    (options,) = given
    assert (options.flush, options.check, options.repeat, options.min_time_ms) == (True, True, 10, 20.0)
    assert apibench._bench_figure("reduce", "cub", None) == (3000.0, 1755), "a sum's figure: GB/s"


@pytest.mark.parametrize("status", ["FAIL", "ERROR", "UNCHECKED"])
def test_benchs_figure_is_none_unless_the_point_passed(monkeypatch, status):
    _bench_figure(monkeypatch, SimpleNamespace(status=status, gflops=51000.0, gbps=1.0, clocks={}))
    assert apibench._bench_figure("sgemm", "cublas", None) == (None, None)


def test_benchs_figure_is_none_when_bench_cannot_run(monkeypatch):
    _bench_figure(monkeypatch, error=RuntimeError("no GPU"))
    assert apibench._bench_figure("sgemm", "cublas", None) == (None, None)


# ---------------------------------------------------------------- apibench: rows, run and tables

def test_measure_gives_benchs_figure_and_the_plans_impl_to_gemmlabs_calls_only(monkeypatch):
    """One reference and two gemmlab calls at 1024^3 (2 * 1024^3 FLOP, 0.00215 TFLOP a call): each
    row's figure is that work over its own loop's seconds a call; the plan's work estimate (5 ms)
    sets the host batch (0.25 s / 5 ms = 50) and the loops' length."""
    ref, call, plan_call = (lambda: "ref"), (lambda: "call"), (lambda: "plan")
    plan = SimpleNamespace(execute=plan_call, impl="cublas")
    seen = {}

    def work_seconds(fn, sync):
        seen["estimated"] = fn
        return 0.005

    def host_us(fns, sync, batch):
        seen["batch"] = batch
        return [10.0, 6.0, 4.0]

    def loops(fns, sync, work_s):
        seen["work_s"] = work_s
        return [(1e-4, 1600, 2.0, 1980), (2e-4, 1500, 2.1, 1980), (4e-4, None, 2.2, 1980)]

    monkeypatch.setattr(apibench, "_work_seconds", work_seconds)
    monkeypatch.setattr(apibench, "_host_us", host_us)
    monkeypatch.setattr(apibench, "_loops", loops)
    rows = apibench._measure("sgemm torch", "1024x1024x1024", [("torch.mm", ref)],
                             [("gemmlab.sgemm(A, B)", call), ("Matmul.execute()", plan_call)], plan,
                             lambda: None, "TFLOP/s", (40.0, 1755))
    assert seen == {"estimated": plan_call, "batch": 50, "work_s": 0.005}
    work = 2 * 1024 ** 3 / 1e12
    assert [(r.call, r.impl, r.bench_figure, r.bench_mhz, r.loop_mhz, r.host_us, r.probe_us) for r in rows] == [
        ("torch.mm", "", None, None, 1600, 10.0, 2.0),
        ("gemmlab.sgemm(A, B)", "cublas", 40.0, 1755, 1500, 6.0, 2.1),
        ("Matmul.execute()", "cublas", 40.0, 1755, None, 4.0, 2.2)]
    assert [r.figure for r in rows] == pytest.approx([work / 1e-4, work / 2e-4, work / 4e-4])
    assert all((r.case, r.shape, r.unit, r.gpu_max_mhz) == ("sgemm torch", "1024x1024x1024", "TFLOP/s", 1980)
               for r in rows)


def test_run_takes_each_kinds_sizes_and_asks_bench_from_512_cubed(monkeypatch):
    """GEMM kinds take the GEMM sizes (an int is a cube), sums the sum sizes; bench's figure is
    asked for GEMMs of M*N*K >= 512^3 (512^3 itself included) and for every sum; every row
    reaches on_row as it comes, in run order."""
    asked = []

    def gemm_rows(kind, M, N, K, with_bench):
        asked.append((kind, (M, N, K), with_bench))
        return [Row(kind, f"{M}x{N}x{K}", "c", 1.0, 1.0, "TFLOP/s")]

    def sum_rows(kind, n, with_bench):
        asked.append((kind, n, with_bench))
        return [Row(kind, str(n), "c", 1.0, 1.0, "GB/s")]

    monkeypatch.setattr(apibench, "_gemm_rows", gemm_rows)
    monkeypatch.setattr(apibench, "_sum_rows", sum_rows)
    seen = []
    rows = apibench.run(("sgemm torch", "reduce cupy"), (256, 512, (1000, 3000, 2000)), (1024,), on_row=seen.append)
    assert asked == [("sgemm torch", (256, 256, 256), False), ("sgemm torch", (512, 512, 512), True),
                     ("sgemm torch", (1000, 3000, 2000), True), ("reduce cupy", 1024, True)]
    assert seen == rows and [r.shape for r in rows] == ["256x256x256", "512x512x512", "1000x3000x2000", "1024"]
    apibench.run(("sgemm torch",), (512,), (), with_bench=False)
    assert asked[-1] == ("sgemm torch", (512, 512, 512), False)


def test_each_case_has_its_own_table_in_run_order_each_shape_read_against_its_first_row():
    rows = [Row("sgemm torch", "512x512x512", "torch.mm", 8.0, 10.0, "TFLOP/s", probe_us=0.0),
            Row("sgemm torch", "512x512x512", "gemmlab.sgemm(A, B)", 4.0, 9.0, "TFLOP/s", "cublas", 12.0),
            Row("sgemm torch", "512x512x512", "Matmul.execute()", 2.0, 9.5, "TFLOP/s", "cublas", 12.0),
            Row("hgemm cupy fp16", "512x512x512", "cupy.matmul", 20.0, 30.0, "TFLOP/s"),
            Row("hgemm cupy fp16", "512x512x512", "gemmlab.hgemm(A, B)", 5.0, 40.0, "TFLOP/s", "mma_sync", 50.0)]
    text = apibench.to_markdown(rows, "c")
    assert text.index("**sgemm torch**") < text.index("**hgemm cupy fp16**"), "cases in run order"
    sgemm, hgemm = text.split("**hgemm cupy fp16**")
    assert "| 512x512x512 | torch.mm | - | 8.0 | - | 10.0 | - | - | - | 0.0 |" in sgemm, "a probe of 0.0 is a reading"
    assert "| gemmlab.sgemm(A, B) | cublas | 4.0 | 0.50x | 9.0 | 12.0 | 75% |" in sgemm
    assert "| Matmul.execute() | cublas | 2.0 | 0.25x |" in sgemm
    assert "cupy" not in sgemm and "torch" not in hgemm, "each case's table holds its own rows only"
    assert "| gemmlab.hgemm(A, B) | mma_sync | 5.0 | 0.25x | 40.0 | 50.0 | 80% |" in hgemm
    groups = apibench.by_shape(rows)
    assert list(groups) == [("sgemm torch", "512x512x512"), ("hgemm cupy fp16", "512x512x512")]


# ---------------------------------------------------------------- envinfo: versions and git

def _installed(monkeypatch, **versions):
    """importlib.metadata.version answering for these distributions only (names with '-' as '_')."""
    known = {name.replace("_", "-"): v for name, v in versions.items()}

    def version(name):
        if name not in known:
            raise envinfo.metadata.PackageNotFoundError(name)
        return known[name]

    monkeypatch.setattr(envinfo.metadata, "version", version)


def test_cupy_is_found_under_whichever_wheel_is_installed(monkeypatch):
    _installed(monkeypatch, cupy_cuda12x="13.6.0")
    assert envinfo._dist_version("cupy") == "13.6.0", "the first alias missing is not the end of the search"
    _installed(monkeypatch, cupy_cuda13x="14.2.0")
    assert envinfo._dist_version("cupy") == "14.2.0"
    _installed(monkeypatch, cupy="12.0.0")
    assert envinfo._dist_version("cupy") == "12.0.0"
    assert envinfo._dist_version("numpy") is None


def test_gemmlab_run_from_the_source_tree_says_so(monkeypatch):
    _installed(monkeypatch)
    assert envinfo.gemmlab_version() == "source tree"


def test_an_untracked_file_does_not_make_the_revision_dirty(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    subprocess.run("git init -q && git -c user.name=t -c user.email=t@t -c commit.gpgsign=false commit -q "
                   "--allow-empty -m c", shell=True, cwd=tmp_path, check=True)
    (tmp_path / "results.db").write_text("made by a run, never added")
    rev = envinfo.git_revision(tmp_path)
    assert rev and len(rev) == 40 and not rev.endswith("+dirty")


def _fake_nvrtc(monkeypatch, ok: bool):
    class Result(enum.IntEnum):
        NVRTC_SUCCESS = 0
        NVRTC_ERROR_INTERNAL_ERROR = 11

    err = Result.NVRTC_SUCCESS if ok else Result.NVRTC_ERROR_INTERNAL_ERROR
    fake = SimpleNamespace(nvrtcResult=Result, nvrtcVersion=lambda: (err, 13, 1),
                           nvrtcGetSupportedArchs=lambda: (err, [75, 90, 100]))
    monkeypatch.setattr(cuda.bindings, "nvrtc", fake, raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", fake)


@pytest.mark.parametrize("ok", [True, False])
def test_nvrtc_version_and_archs_only_from_a_successful_call(monkeypatch, ok):
    _fake_nvrtc(monkeypatch, ok)
    assert envinfo.nvrtc_version() == ("13.1" if ok else None)
    assert envinfo.nvrtc_archs() == ([75, 90, 100] if ok else [])


# ---------------------------------------------------------------- envinfo: the GPU, through a fake driver

class _CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_UNKNOWN = 999


ATTRIBUTES = {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 9, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 0,
              "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": 132, "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE": 52428800,
              "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448}


def _driver(monkeypatch, count=2, init=_CUresult.CUDA_SUCCESS, count_err=_CUresult.CUDA_SUCCESS,
            mem_err=_CUresult.CUDA_SUCCESS):
    """test_envinfo's fake driver with devices: `count` H100s (CUDA device i's UUID bytes start at i)."""
    ok = _CUresult.CUDA_SUCCESS
    fake = _fake_driver(monkeypatch, lambda: (init,))
    fake.CUresult = _CUresult
    fake.CUdevice_attribute = SimpleNamespace(**{name: name for name in ATTRIBUTES})
    fake.cuDeviceGetCount = lambda: (count_err, count)
    fake.cuDeviceGet = lambda i: (ok, i)
    fake.cuDeviceGetAttribute = lambda name, dev: (ok, ATTRIBUTES[name])
    fake.cuDeviceGetName = lambda size, dev: (ok, b"NVIDIA H100 80GB HBM3\x00\x00\xff junk")
    fake.cuDeviceTotalMem = lambda dev: (mem_err, 85520809984)
    fake.cuDeviceGetUuid = lambda dev: (ok, SimpleNamespace(bytes=bytes(range(dev, dev + 16))))
    return fake


class _NVML(SimpleNamespace):
    """pynvml on one H100: every query answers; handles name the CUDA index they were asked for."""
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, persistence=1):
        super().__init__(shutdowns=0, persistence=persistence)

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700000

    def nvmlDeviceGetPersistenceMode(self, h):
        return self.persistence

    def nvmlDeviceGetMigMode(self, h):
        return (0, 1)  # MIG off now, on after the next reset

    def nvmlSystemGetDriverVersion(self):
        return b"580.65.06"

    def nvmlDeviceGetMaxClockInfo(self, h, which):
        return {1: 1980, 2: 2619}[which]

    def nvmlDeviceGetClockInfo(self, h, which):
        return {1: 1755, 2: 2600}[which]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 41


def _nvml(monkeypatch, nv):
    handles = []
    monkeypatch.setattr(nvml, "open_nvml", lambda: nv)
    monkeypatch.setattr(nvml, "handle_for_cuda_device", lambda pynvml, index: handles.append(index) or ("h", index))
    return handles


def test_gpu_info_reads_the_driver_and_nvml_of_the_device_asked_for(monkeypatch):
    _driver(monkeypatch)
    nv = _NVML()
    handles = _nvml(monkeypatch, nv)
    info = envinfo.gpu_info(1)
    assert info == {
        "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-01020304-0506-0708-090a-0b0c0d0e0f10",
        "compute_capability": "sm_90", "sm_count": 132, "l2_bytes": 52428800, "memory_bytes": 85520809984,
        "smem_per_block_optin_bytes": 232448, "driver_version": "580.65.06", "max_sm_clock_mhz": 1980,
        "sm_clock_mhz": 1755, "max_mem_clock_mhz": 2619, "mem_clock_mhz": 2600, "temperature_c": 41,
        "power_limit_w": 700.0, "persistence_mode": True, "mig_mode": False}
    assert handles == [1] and nv.shutdowns == 1, "NVML's handle of the same device, and NVML shut down"


def test_collect_env_describes_the_device_it_is_given(monkeypatch):
    _driver(monkeypatch)
    _nvml(monkeypatch, _NVML())
    assert envinfo.collect_env(1)["gpu"]["index"] == 1


def test_what_nvml_cannot_tell_is_none(monkeypatch):
    _driver(monkeypatch, mem_err=_CUresult.CUDA_ERROR_UNKNOWN)
    nv = _NVML(persistence=None)
    _nvml(monkeypatch, nv)
    info = envinfo.gpu_info(0)
    assert info["memory_bytes"] is None and info["persistence_mode"] is None


def test_without_nvml_every_nvml_field_is_there_as_none(monkeypatch):
    _driver(monkeypatch)

    def unavailable():
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(nvml, "open_nvml", unavailable)
    info = envinfo.gpu_info(0)
    keys = ("driver_version", "max_sm_clock_mhz", "sm_clock_mhz", "max_mem_clock_mhz", "mem_clock_mhz",
            "temperature_c", "power_limit_w", "persistence_mode", "mig_mode")
    assert {k: info[k] for k in keys} == dict.fromkeys(keys)
    assert info["nvml_error"] == "NVML unavailable: NVML Shared Library Not Found"


@pytest.mark.parametrize("index, message", [(2, "there is no GPU 2: 2 CUDA device(s) visible"),
                                            (-1, "there is no GPU -1: 2 CUDA device(s) visible")])
def test_a_device_index_past_those_visible_is_no_gpu(monkeypatch, index, message):
    _driver(monkeypatch)
    with pytest.raises(NoGPUError) as info:
        envinfo.gpu_info(index)
    assert str(info.value) == message


def test_a_driver_with_no_devices_says_it_found_none(monkeypatch):
    _driver(monkeypatch, count=0)
    with pytest.raises(NoGPUError) as info:
        envinfo.gpu_info(0)
    assert str(info.value) == "the NVIDIA driver found no CUDA device"
    assert envinfo.gpu_count() == 0


def test_a_failed_cuinit_is_no_gpu_with_its_error_name(monkeypatch):
    _driver(monkeypatch, init=_CUresult.CUDA_ERROR_UNKNOWN)
    env = envinfo.collect_env()
    assert env["gpu"] is None and env["gpu_reason"] == "cuInit failed: CUDA_ERROR_UNKNOWN"
    assert envinfo.gpu_count() == 0


def test_gpu_count_is_zero_when_the_count_cannot_be_read(monkeypatch):
    _driver(monkeypatch, count=3, count_err=_CUresult.CUDA_ERROR_UNKNOWN)
    assert envinfo.gpu_count() == 0
    _driver(monkeypatch, count=3)
    assert envinfo.gpu_count() == 3


def test_a_removed_working_directory_is_none(monkeypatch):
    def removed():
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(envinfo.os, "getcwd", removed)
    assert envinfo._cwd() is None


def test_sizes_in_binary_units_from_exactly_one_unit_and_only_for_bytes():
    assert envinfo._show("memory_bytes", 1 << 30) == "1073741824 (1.0 GiB)"
    assert envinfo._show("l2_bytes", 1 << 20) == "1048576 (1.0 MiB)"
    assert envinfo._show("smem_bytes", 1024) == "1024 (1.0 KiB)"
    assert envinfo._show("smem_bytes", 1023) == "1023"
    assert envinfo._show("max_sm_clock_mhz", 1980) == "1980"
    assert envinfo._show("sm_count", 1 << 20) == "1048576"


# ---------------------------------------------------------------- harness/bench.py: a stand-in op

@dataclass
class _Op(ops.Op):
    """An op whose every step is recorded in `calls`; an implementation refuses a problem with its
    `refuse`, fails verification where `fails`; problems carry their runner key."""
    calls: list = field(default_factory=list)
    always_measured: tuple = ("ref",)

    def refusal(self, impl, problem):
        return getattr(impl, "refuse", "")

    def runner_key(self, problem):
        return problem.key

    def prepare_for(self, impl, params, problem):
        self.calls.append(("prepare", impl.name, dict(params or {}), problem.key))
        return SimpleNamespace(impl=impl, params={**(params or {}), "RESOLVED": 1},
                               resources=SimpleNamespace(registers=96, spill_stores=4, smem_static=2048))

    def annotate(self, point, runner):
        point.grids = [8, 2]

    def verify(self, runner, problem, stream, seed, host_data=False, special=True):
        self.calls.append(("verify", runner.impl.name, host_data, special))
        fails = getattr(runner.impl, "fails", False)
        return SimpleNamespace(passed=not fails, reason="max error 3.0 past 1e-05" if fails else "",
                               rel_err=3e-7, tol=1e-5)

    def timing_inputs(self, problem, seed):
        self.calls.append(("inputs", problem.key))
        return f"inputs of {problem.key}"

    def before_timing(self, runner, problem):
        self.calls.append(("before", runner.impl.name))

    def enqueue(self, runner, problem, inputs, stream):
        self.calls.append(("enqueue", runner.impl.name, inputs))

    def shares_of(self, point, done):
        return {"measured_before": sorted(done)}

    # what `bench` and `verify` ask of an op: its implementations (`impls`) and problems (`cases`)
    impls: list = field(default_factory=list)
    cases: list = field(default_factory=list)

    def select(self, names, dtype, with_baselines=True):
        named = [n.strip() for n in names.split(",")]
        return [i for i in self.impls if "all" in named or i.name in named]

    def problems(self, args):
        return list(self.cases)

    def sweep(self, args):
        return list(self.cases)


def _problem(key="64x64x64", **kw):
    return SimpleNamespace(op="fake", shape=key, key=key, M=64, N=64, K=64, alpha=1.0, beta=0.0, dtype="fp32",
                           flops=2 * 64 ** 3, min_bytes=3 * 4 * 64 * 64, **kw)


def _impl(name, kind="kernel", missing="", **kw):
    """An implementation; a baseline's library is `missing` for that reason."""
    return SimpleNamespace(name=name, kind=kind, unavailable_reason=lambda: missing, resolve=dict, **kw)


@pytest.fixture
def fake_op(monkeypatch):
    """The stand-in op registered as 'fake', a device that is never touched, and a timer that
    enqueues once and answers samples of 1, 1 and 4 ms (median 1, mean 2) at 1500-1980 MHz."""
    op = _Op(name="fake", title="a stand-in op")
    monkeypatch.setitem(ops.OPS, "fake", op)
    monkeypatch.setattr(cuda_device, "device", lambda index=0: SimpleNamespace(create_stream=lambda: "stream"))

    def time_enqueue(enqueue, stream, options):
        op.calls.append(("time", options.flush))
        enqueue()
        return Stats((1.0, 1.0, 4.0)), {"sm_clock_min_mhz": 1500, "sm_clock_max_mhz": 1980}

    monkeypatch.setattr(harness_bench, "time_enqueue", time_enqueue)
    return op


def test_a_rows_figures_come_from_the_median_and_it_keeps_every_measured_field(fake_op):
    problem = _problem()
    point = Point("k", "kernel", problem, "PASS", params={"BM": 64}, stats=Stats((1.0, 1.0, 4.0)),
                  verdict=SimpleNamespace(rel_err=3e-7, tol=1e-5), clocks={"sm_clock_min_mhz": 1500},
                  resources=SimpleNamespace(registers=96, spill_stores=4, smem_static=2048), bytes_moved=100_000)
    row = point.row()
    assert row["gflops"] == pytest.approx(2 * 64 ** 3 / 1e6), "the median's 1 ms, not the mean's 2"
    assert row["gbps"] == pytest.approx(100_000 / 1e6), "the bytes the point recorded, over the median"
    assert {k: row[k] for k in ("rel_err", "tol", "registers", "spill_stores", "smem_static", "sm_clock_min_mhz",
                                "t_min_ms", "t_median_ms", "t_mean_ms", "count")} == {
        "rel_err": 3e-7, "tol": 1e-5, "registers": 96, "spill_stores": 4, "smem_static": 2048,
        "sm_clock_min_mhz": 1500, "t_min_ms": 1.0, "t_median_ms": 1.0, "t_mean_ms": 2.0, "count": 3}
    point.bytes_moved = 0
    assert point.row()["gbps"] == pytest.approx(3 * 4 * 64 * 64 / 1e6), "0: the op's count for the problem"


def test_a_dispatch_row_keeps_the_ops_own_extra_beside_the_choice():
    point = Point("dispatch", "kernel", ReduceProblem(1024), "PASS", stats=Stats((0.002,)), bytes_moved=4096,
                  grids=[4], chosen={"impl": "single_pass", "where": "table"})
    extra = point.row()["extra"]
    assert extra["dispatch"] == {"impl": "single_pass", "where": "table"}
    assert (extra["bytes"], extra["launches"]) == (4096, 1)


def test_a_point_runs_with_the_users_params_over_the_tuned_ones_and_records_what_was_built(fake_op):
    problem = _problem()
    options = BenchOptions(params={"k": {"BM": 64}}, tuned={("k", problem.shape): {"BM": 128}})
    point = harness_bench.run_point(_impl("k"), problem, "stream", options, inputs="given")
    assert fake_op.calls[0] == ("prepare", "k", {"BM": 64}, problem.key)
    assert point.params == {"BM": 64, "RESOLVED": 1}, "the parameters the runner was built with"
    assert (point.status, point.grids, point.resources.registers) == ("PASS", [8, 2], 96)
    assert ("inputs", problem.key) not in fake_op.calls, "the inputs given are the ones timed"
    assert fake_op.calls[-3:] == [("before", "k"), ("time", True), ("enqueue", "k", "given")]
    fake_op.calls.clear()
    harness_bench.run_point(_impl("k"), problem, "stream", BenchOptions(tuned={("k", problem.shape): {"BM": 128}}))
    assert fake_op.calls[0] == ("prepare", "k", {"BM": 128}, problem.key)


def test_without_checks_a_point_is_timed_unverified_and_says_so(fake_op):
    point = harness_bench.run_point(_impl("k"), _problem(), "stream", BenchOptions(check=False))
    assert point.status == "UNCHECKED" and point.verdict is None and point.stats is not None
    assert not any(c[0] == "verify" for c in fake_op.calls)


def test_a_point_that_fails_verification_is_never_timed(fake_op):
    point = harness_bench.run_point(_impl("k", fails=True), _problem(), "stream", BenchOptions())
    assert (point.status, point.reason, point.stats) == ("FAIL", "max error 3.0 past 1e-05", None)
    assert not any(c[0] in ("time", "before") for c in fake_op.calls)


def test_a_run_measures_the_reference_first_on_one_set_of_inputs_per_problem(fake_op):
    """Kernels listed before the reference: the reference is measured first, so the kernels'
    shares see it; every implementation times the problem's one set of inputs."""
    problems = [_problem("p1"), _problem("p2")]
    seen = []
    points = harness_bench.run_bench([_impl("k1"), _impl("k2"), _impl("ref", "baseline")], problems,
                                     BenchOptions(), on_result=seen.append)
    assert [(p.impl, p.problem.key) for p in points] == [(n, k) for k in ("p1", "p2") for n in ("ref", "k1", "k2")]
    assert seen == points
    assert [p.shares["measured_before"] for p in points[:3]] == [[], ["ref"], ["k1", "ref"]]
    assert [c for c in fake_op.calls if c[0] in ("inputs", "enqueue")] == [
        ("inputs", "p1"), ("enqueue", "ref", "inputs of p1"), ("enqueue", "k1", "inputs of p1"),
        ("enqueue", "k2", "inputs of p1"), ("inputs", "p2"), ("enqueue", "ref", "inputs of p2"),
        ("enqueue", "k1", "inputs of p2"), ("enqueue", "k2", "inputs of p2")]


def test_a_launch_error_while_timing_is_recorded_and_stops_the_run(fake_op, monkeypatch):
    def lost(enqueue, stream, options):
        raise LaunchError("illegal address")

    monkeypatch.setattr(harness_bench, "time_enqueue", lost)
    seen = []
    with pytest.raises(LaunchError):
        harness_bench.run_bench([_impl("ref", "baseline"), _impl("k")], [_problem()], BenchOptions(),
                                on_result=seen.append)
    assert [(p.impl, p.status, p.reason) for p in seen] == [("ref", "ERROR", "illegal address")]


def test_verify_sweep_builds_one_runner_per_key_with_the_params_given(fake_op):
    problems = [_problem("a"), _problem("b"), _problem("a")]
    points = harness_bench.verify_sweep([_impl("k")], problems, {"k": {"BM": 32}}, host_data=True, special=False)
    assert [c for c in fake_op.calls if c[0] == "prepare"] == [("prepare", "k", {"BM": 32}, "a"),
                                                              ("prepare", "k", {"BM": 32}, "b")]
    assert [c for c in fake_op.calls if c[0] == "verify"] == [("verify", "k", True, False)] * 3
    assert all(p.status == "PASS" and p.params == {"BM": 32, "RESOLVED": 1} for p in points)


def test_verify_sweep_gives_a_failure_its_reason_and_a_refusal_its_error(fake_op):
    points = harness_bench.verify_sweep([_impl("bad", fails=True), _impl("no", refuse="no takes 64")], [_problem()])
    assert [(p.impl, p.status, p.reason) for p in points] == [("bad", "FAIL", "max error 3.0 past 1e-05"),
                                                             ("no", "ERROR", "no takes 64")]


def test_verify_runner_hands_the_special_values_choice_to_the_op(fake_op):
    runner = SimpleNamespace(impl=_impl("k"))
    harness_bench.verify_runner(runner, _problem(), "stream", host_data=True, special=False)
    assert fake_op.calls == [("verify", "k", True, False)]


def _failed(impl, status="FAIL", reason="wrong"):
    return Point(impl, "kernel", _problem(), status, reason=reason)


def test_only_failures_fail_a_run_and_the_first_is_named_with_the_count_of_the_others(fake_op):
    harness_bench.raise_on_failure([_failed("a", "ERROR"), _failed("b", "PASS"), _failed("c", "UNCHECKED")])
    with pytest.raises(VerificationError) as info:
        harness_bench.raise_on_failure([_failed("a", "ERROR"), _failed("x", reason="off by one")])
    assert str(info.value) == "x failed at 64x64x64: off by one"
    with pytest.raises(VerificationError) as info:
        harness_bench.raise_on_failure([_failed("x", reason="off by one"), _failed("y"), _failed("z")])
    assert str(info.value) == "x failed at 64x64x64: off by one (and 2 more)"


def test_bench_options_default_to_cold_l2_checked_and_50_ms_of_samples():
    options = BenchOptions()
    assert (options.warmup, options.repeat, options.flush, options.check, options.min_time_ms) == (3, 10, True, True,
                                                                                                     50.0)


def test_time_enqueue_hands_the_options_to_the_timer_samples_the_clock_around_it_and_closes_it(monkeypatch):
    made = []

    class Timer:
        def __init__(self, stream, **kw):
            self.kw, self.closed = kw, False
            made.append(self)

        def measure(self, enqueue, around=None):
            self.around = around
            if self.kw["warmup"] < 0:
                raise LaunchError("lost")
            return Stats((1.0,))

        def close(self):
            self.closed = True

    class Sampler:
        def summary(self):
            return {"sm_clock_min_mhz": 1410}

    monkeypatch.setattr(harness_bench, "Timer", Timer)
    monkeypatch.setattr(nvml, "ClockSampler", Sampler)
    options = BenchOptions(warmup=2, repeat=7, flush=False, min_time_ms=12.5)
    stats, clocks = harness_bench.time_enqueue(lambda: None, "stream", options)
    (timer,) = made
    assert timer.kw == {"warmup": 2, "repeat": 7, "flush": False, "min_time_ms": 12.5}
    assert isinstance(timer.around, Sampler) and timer.closed and clocks == {"sm_clock_min_mhz": 1410}
    with pytest.raises(LaunchError):
        harness_bench.time_enqueue(lambda: None, "stream", BenchOptions(warmup=-1))
    assert made[-1].closed, "the timer's buffers are freed when a measurement fails too"
    assert made[-1].kw["flush"] is True, "the default: L2 flushed before each timed launch"


# ---------------------------------------------------------------- harness/session.py: choosing what runs

def test_a_named_baseline_without_its_library_is_refused_however_the_names_are_spaced():
    impls = [_impl("k"), _impl("torch", "baseline", missing="PyTorch is not installed")]
    with pytest.raises(BadArgumentError, match="^PyTorch is not installed$"):
        session.require_named_libraries(impls, "k, torch")
    session.require_named_libraries(impls, "k")  # brought in, not named: left to usable()
    assert [i.name for i in session.usable(impls)] == ["k"]


def test_a_named_implementation_refusing_every_problem_is_refused_with_the_first_problems_reason():
    class Op:
        def refusal(self, impl, problem):
            return f"{impl.name} cannot take {problem}"

    with pytest.raises(BadArgumentError, match="^k cannot take 64$"):
        session.refuse_named_without_problems(Op(), [_impl("k")], "ref, k", [64, 128])
    session.refuse_named_without_problems(Op(), [_impl("k")], "all", [64, 128])


def test_tuned_params_are_looked_up_per_kernel_and_shape_for_the_kernels_without_params(monkeypatch):
    asked = []

    def usable_best(store, gpu, spec, problem):
        asked.append((gpu, spec.name, problem.shape))
        return {"BM": problem.M} if problem.M < 4096 else None

    monkeypatch.setattr(session, "usable_best", usable_best)
    problems = [GemmProblem(64, 64, 64), GemmProblem(4096, 4096, 4096)]
    tuned = session.tuned_params("store", "GPU A", [_impl("k"), _impl("cublas", "baseline"), _impl("mine")], problems,
                                 {"mine": {"BM": 8}})
    assert tuned == {("k", "64x64x64"): {"BM": 64}}
    assert asked == [("GPU A", "k", "64x64x64"), ("GPU A", "k", "4096x4096x4096")]


@pytest.fixture
def bench_run(fake_op, monkeypatch, tmp_path):
    """`bench` on the stand-in op: kernel k, the always-measured reference ref, two problems;
    tuned_params answers BM=16 for k. Returns (op, database path, stored rows reader)."""
    fake_op.impls = [_impl("k"), _impl("ref", "baseline")]
    fake_op.cases = [_problem("p1"), _problem("p2")]
    monkeypatch.setattr(session, "tuned_params", lambda store, gpu, impls, problems, chosen: {
        ("k", p.shape): {"BM": 16} for p in problems})
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "r.db"

    def rows():
        with ResultStore(db) as store:
            (run,) = store.runs()
            return [(r["impl"], r["params"]) for r in store.results(run["id"])]

    return fake_op, db, rows


def _bench(db, impl="k", params=None, default_params=False):
    args = SimpleNamespace(dtype=None)
    session.bench("fake", impl, args, BenchOptions(), params, default_params, db, None, None, None)


def test_bench_adds_the_reference_once_and_runs_the_tuned_params_unless_told_not_to(bench_run):
    op, db, rows = bench_run
    _bench(db, "k,ref")
    assert rows() == [("ref", {"RESOLVED": 1}), ("k", {"BM": 16, "RESOLVED": 1})] * 2
    op.calls.clear()
    db.unlink()
    _bench(db, "k", default_params=True)
    assert [c[2] for c in op.calls if c[:2] == ("prepare", "k")] == [{}, {}]


def test_bench_runs_the_params_given_for_its_kernel(bench_run):
    op, db, rows = bench_run
    _bench(db, "k", params="BM=8")
    assert [c[2] for c in op.calls if c[:2] == ("prepare", "k")] == [{"BM": 8}, {"BM": 8}]


def test_bench_leaves_out_a_reference_it_brought_in_whose_library_is_missing(bench_run):
    op, db, rows = bench_run
    op.impls[1] = _impl("ref", "baseline", missing="no library")
    _bench(db, "k")
    assert [name for name, _ in rows()] == ["k", "k"]


def test_bench_exits_failed_after_storing_every_row(bench_run):
    op, db, rows = bench_run
    op.impls[0] = _impl("k", fails=True)
    with pytest.raises(VerificationError, match=r"^k failed at p1: max error 3.0 past 1e-05 \(and 1 more\)$"):
        _bench(db, "k")
    assert [name for name, _ in rows()] == ["ref", "k", "ref", "k"]


# ---------------------------------------------------------------- harness/session.py: what a run writes

def test_a_run_prints_and_writes_its_tables_failures_and_warnings_beside_its_database(monkeypatch, tmp_path, capsys):
    """The batch file beside --db (not the default folder), the same text as printed: the command,
    the header, the tables, the failures table and the clock warnings; CSV and JSON of this run
    only; the Markdown with the command and header above every table, in a folder made for it."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "data" / "r.db"
    store = ResultStore(db)
    store.add_result(store.start_run("bench", "an earlier run"), op="sgemm", impl="earlier", impl_kind="kernel",
                     status="PASS", M=8, N=8, K=8, dtype="fp32")
    run_id = store.start_run("bench", "gemmlab bench x")
    p = GemmProblem(64, 64, 64)
    points = [Point("naive", "kernel", p, "PASS", stats=Stats((0.01,)),
                    clocks={"clock_warning": True, "sm_clock_min_mhz": 1200}),
              Point("vectorize", "kernel", p, "FAIL", reason="max error 2.0"),
              Point("tiled", "kernel", p, "ERROR", reason="tiled needs K % 16 == 0")]

    def run_bench(impls, problems, options, on_result):
        for point in points:
            on_result(point)
        return points

    monkeypatch.setattr(session, "run_bench", run_bench)
    out = tmp_path / "out"
    results = session.record_and_report(
        ["naive", "vectorize", "tiled"], [p], BenchOptions(), store=store, run_id=run_id, command="gemmlab bench x",
        db=db, csv=out / "t.csv", json_out=out / "t.json", markdown=tmp_path / "md" / "t.md", batch_prefix="bench_t",
        header=("Device: GPU A",))
    printed = capsys.readouterr().out
    assert results == points
    (batch,) = (tmp_path / "data").glob("bench_t_*.txt")
    assert not (tmp_path / "gemmlab-results").exists()
    text = batch.read_text()
    assert text.startswith("command: gemmlab bench x\nDevice: GPU A\n")
    assert "points without a time" in text and "tiled needs K % 16 == 0" in text and "max error 2.0" in text
    assert "warning: naive at 64x64x64: SM clock fell to 1200 MHz (< 90% of max) while timing" in text
    assert text.strip() in printed
    assert printed.strip().endswith(f"stored run {run_id} in {db}; table in {batch}")
    csv = (out / "t.csv").read_text()
    assert "earlier" not in csv and all(name in csv for name in ("naive", "vectorize", "tiled"))
    assert [r["impl"] for r in json.loads((out / "t.json").read_text())["results"]] == ["naive", "vectorize", "tiled"]
    md = (tmp_path / "md" / "t.md").read_text()
    assert md.startswith("Command: `gemmlab bench x`\n\nDevice: GPU A\n\n")
    assert "points without a time" in md and "tiled needs K % 16 == 0" in md
    store.close()


# ---------------------------------------------------------------- harness/session.py: verify

def _verify(fake_op, capsys, *impls, one=False, params=None, cases=("p1", "p2")):
    fake_op.impls, fake_op.cases = list(impls), [_problem(c) for c in cases]
    try:
        session.verify("fake", "all", SimpleNamespace(dtype=None, one_gemm=one), params)
    finally:
        fake_op.printed = capsys.readouterr().out


def test_verify_skips_problems_a_rung_brought_in_cannot_take_and_counts_them(fake_op, capsys):
    _verify(fake_op, capsys, _impl("k"), _impl("narrow", refuse="narrow takes K % 8 == 0 only"))
    assert [c[1] for c in fake_op.calls if c[0] == "verify"] == ["k", "k"], "the refused problems are not run"
    assert "PASS" in fake_op.printed
    assert fake_op.printed.strip().endswith("all 2 checks passed (2 shapes outside a rung's shape rule not run)")


def test_verify_without_skips_says_only_how_many_passed(fake_op, capsys):
    _verify(fake_op, capsys, _impl("k"))
    assert fake_op.printed.strip().endswith("all 2 checks passed")


def test_verify_refuses_a_single_shape_a_rung_cannot_take_before_the_gpu(fake_op, capsys, monkeypatch):
    monkeypatch.setattr(cuda_device, "device", lambda index=0: pytest.fail("reached the GPU"))
    with pytest.raises(BadArgumentError, match="^narrow takes K % 8 == 0 only$"):
        _verify(fake_op, capsys, _impl("k"), _impl("narrow", refuse="narrow takes K % 8 == 0 only"), one=True)


def test_verify_runs_the_params_given(fake_op, capsys):
    _verify(fake_op, capsys, _impl("k"), params="BM=8")
    assert [c[2] for c in fake_op.calls if c[0] == "prepare"] == [{"BM": 8}, {"BM": 8}]


class _Broken(GemmlabError):
    pass


def _unbuildable(fake_op, monkeypatch, reason):
    prepare = fake_op.prepare_for

    def prepare_for(impl, params, problem):
        if impl.name == "broken":
            raise _Broken(reason)
        return prepare(impl, params, problem)

    monkeypatch.setattr(fake_op, "prepare_for", prepare_for)


@pytest.mark.parametrize("reason, message", [("nvrtc: error in line 3", "broken: nvrtc: error in line 3"),
                                             ("broken needs sm_90", "broken needs sm_90")])
def test_verify_fails_on_a_point_it_could_not_check_naming_the_implementation_once(fake_op, capsys, monkeypatch,
                                                                                   reason, message):
    _unbuildable(fake_op, monkeypatch, reason)
    with pytest.raises(GemmlabError) as info:
        _verify(fake_op, capsys, _impl("k"), _impl("broken"))
    assert str(info.value) == message and not isinstance(info.value, VerificationError)
    assert "ERROR" in fake_op.printed


def test_a_verification_failure_is_reported_before_a_point_that_could_not_be_checked(fake_op, capsys, monkeypatch):
    _unbuildable(fake_op, monkeypatch, "nvrtc: error")
    with pytest.raises(VerificationError, match=r"^bad failed at p1: max error 3.0 past 1e-05 \(and 1 more\)$"):
        _verify(fake_op, capsys, _impl("broken"), _impl("bad", fails=True))
