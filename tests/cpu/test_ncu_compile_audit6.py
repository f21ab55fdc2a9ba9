"""Tests that could not fail, sixth audit: what hand-made mutants of profile/ncu.py, commands.py,
profiler.py, cuda/launch_graph.py and cuda/compile.py left standing, each pinned here on the CPU
(ncu, the GPU and the target process replaced by stand-ins where the code reaches them)."""
import json
import os
import types
from pathlib import Path

import pytest
import typer

from gemmlab.cuda import compile as cc
from gemmlab.cuda.launch_graph import LaunchGraph
from gemmlab.errors import BadArgumentError
from gemmlab.problem import GemmProblem, ReduceProblem
from gemmlab.profile import ncu as N
from gemmlab.profile import profiler
from gemmlab.profile.commands import command_text, profile_table
from gemmlab.profile.target import PREFIX

from .test_launch_graph import _launches
from .test_launch_graph import fake as graph_driver  # noqa: F401  (the fake driver fixture, by a name of its own)
from .test_profile_cli import run
from .test_profile_ncu import FIX


# -- ncu.py: metrics, units, finding ncu, its words, its command lines, its CSV ----------------

def test_each_headline_is_in_its_shown_unit():
    """ncu prints base units (--print-units base): ns and byte/s; the table shows us and GB/s."""
    r = N.KernelResult("k", {}, {"gpu__time_duration.sum": 1500.0, "dram__bytes.sum.per_second": 2.5e12,
                                 "launch__registers_per_thread": 40.0}, {})
    h = r.headline()
    assert h["duration_us"] == pytest.approx(1.5) and h["dram_gbps"] == pytest.approx(2500.0)
    assert h["registers"] == 40.0 and h["l2_hit_rate_pct"] is None
    assert set(h) == set(N.METRIC_KEYS)


def test_a_metric_ncu_did_not_print_is_none_not_zero():
    (r,) = N.parse_raw_csv((FIX / "raw-naive.csv").read_text())
    assert r.value("sm__no_such_metric.sum") is None


def test_the_extra_metrics_are_asked_for_after_the_table_s():
    assert N.metric_names() == [m.name for m in N.METRICS] + list(N.EXTRA_METRICS)
    assert "dram__bytes_read.sum" in N.metric_names() and "launch__grid_size" in N.metric_names()


def _runnable(path: Path) -> str:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def test_gemmlab_ncu_must_name_a_runnable_file_and_is_never_passed_over(tmp_path, monkeypatch):
    """A GEMMLAB_NCU that is a folder or not executable is no ncu, and then none is looked for on
    PATH: the user named one, and profiling another would hide the mistake."""
    monkeypatch.setattr(N.shutil, "which", lambda name: "/usr/bin/ncu")
    good = _runnable(tmp_path / "ncu")
    plain = tmp_path / "plain"
    plain.write_text("")
    plain.chmod(0o644)
    for value, found in ((good, good), (str(plain), None), (str(tmp_path), None), (str(tmp_path / "none"), None)):
        monkeypatch.setenv("GEMMLAB_NCU", value)
        assert N.find_ncu() == found, value
    monkeypatch.delenv("GEMMLAB_NCU")
    assert N.find_ncu() == "/usr/bin/ncu"


def test_without_ncu_on_path_the_newest_installed_one_is_taken(tmp_path, monkeypatch):
    """/opt/nvidia/nsight-compute's newest version first, then a toolkit's; the folders are
    mapped into tmp_path."""
    real_path = Path
    monkeypatch.delenv("GEMMLAB_NCU", raising=False)
    monkeypatch.setattr(N.shutil, "which", lambda name: None)
    monkeypatch.setattr(N, "Path", lambda p: real_path(tmp_path / str(p).lstrip("/")))
    assert N.find_ncu() is None
    toolkit = tmp_path / "usr/local/cuda-12.4/bin"
    toolkit.mkdir(parents=True)
    _runnable(toolkit / "ncu")
    assert N.find_ncu() == str(toolkit / "ncu")
    for version in ("2024.3.0", "2025.1.0", "2023.2.2"):
        (tmp_path / "opt/nvidia/nsight-compute" / version).mkdir(parents=True)
        _runnable(tmp_path / "opt/nvidia/nsight-compute" / version / "ncu")
    assert N.find_ncu() == str(tmp_path / "opt/nvidia/nsight-compute/2025.1.0/ncu")


@pytest.mark.parametrize("line", ["==ERROR== Profiling is not supported on this device",
                                  "==ERROR== LibraryNotLoaded: libnvperf_host.so"])
def test_a_gpu_or_library_ncu_cannot_use_is_fatal(line):
    """No later kernel can succeed either: profiling stops at the first."""
    found = N.diagnose(line)
    assert found is not None and found.fatal, line


def test_diagnose_takes_the_first_failure_in_its_own_order_not_the_output_s():
    output = ('==ERROR== Failed to profile "k" in process 7\n'
              "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    found = N.diagnose(output)
    assert found.fatal and str(found).startswith("ncu may not read the GPU's performance counters")


def test_diagnose_drops_ncu_s_prefix_and_keeps_200_characters():
    found = N.diagnose('==ERROR== Failed to profile "k" in process 7')
    assert str(found) == 'ncu failed to profile the kernel (Failed to profile "k" in process 7)' and not found.fatal
    long = N.diagnose("==ERROR== Failed to profile " + "x" * 500)
    assert str(long) == "ncu failed to profile the kernel (Failed to profile " + "x" * 182 + ")"


def test_diagnose_names_the_first_plain_error_and_ignores_warnings():
    found = N.diagnose("==WARNING== a warning\n==ERROR== first\n==ERROR== second\n")
    assert str(found) == "ncu: first" and not found.fatal
    assert N.diagnose("==WARNING== only a warning\n==PROF== Disconnected") is None


def test_the_profile_command_line_exactly(tmp_path):
    """Clocks left alone, caches flushed, child processes followed, the report written over."""
    report = tmp_path / "r.ncu-rep"
    cmd = N.profile_command("/x/ncu", ["py", "-m", "t"], report, kernels=["_Za", "_Zb"], skip=6, count=2,
                            sections=("SourceCounters", "Other"), metrics=["a__b.sum", "c__d.sum"])
    assert cmd == ["/x/ncu", "--clock-control", "none", "--cache-control", "all", "--target-processes", "all",
                   "--metrics", "a__b.sum,c__d.sum", "--export", str(report), "--force-overwrite",
                   "--section", "SourceCounters", "--section", "Other",
                   "--kernel-name-base", "mangled", "--kernel-name", "regex:^(_Za|_Zb)$",
                   "--launch-skip", "6", "--launch-count", "2", "--", "py", "-m", "t"]


def test_the_import_and_source_command_lines_exactly(tmp_path):
    report = tmp_path / "r.ncu-rep"
    assert N.import_command("ncu", report) == ["ncu", "--import", str(report), "--csv", "--page", "raw",
                                               "--print-units", "base"]
    assert N.source_command("ncu", report) == ["ncu", "--import", str(report), "--csv", "--page", "source",
                                               "--print-source", "sass"]


def test_numbers_that_are_not_grouped_or_not_finite_are_not_read():
    assert N.to_number("12,34") is None and N.to_number("1,2345") is None
    assert N.to_number("inf") is None and N.to_number("-inf") is None
    assert N.to_number("12,345.5") == 12345.5 and N.to_number('"7"') == 7.0


def _table(*rows: list[str]) -> str:
    return "\n".join(",".join(f'"{c}"' for c in row) for row in rows) + "\n"


def test_a_ragged_row_is_skipped_and_the_others_kept():
    text = _table(["ID", "Kernel Name", "Grid Size", "gpu__time_duration.sum"], ["", "", "", "ns"],
                  ["0", "k1", "(1, 1, 1)", "1,500"], ["1", "k2"], ["2", "k3", "(2, 1, 1)", "n/a"])
    a, b = N.parse_raw_csv(text)
    assert (a.kernel, a.fields, a.metrics, a.units) == (
        "k1", {"ID": "0", "Kernel Name": "k1", "Grid Size": "(1, 1, 1)"}, {"gpu__time_duration.sum": 1500.0},
        {"gpu__time_duration.sum": "ns"})
    assert (b.kernel, b.metrics) == ("k3", {"gpu__time_duration.sum": None})


def test_output_without_ncu_s_table_gives_no_kernel():
    """ncu's log lines alone (three of them, as many columns as each other) are not a table."""
    assert N.parse_raw_csv("==PROF== Connected\n==ERROR== failed\n==PROF== Disconnected\n") == []
    assert N.parse_raw_csv(_table(["ID", "Kernel Name", "a__b"], ["", "", "x"])) == []


# -- commands.py: the command line as typed, the side-by-side table, profile's end ------------

def _profile_context(*args: str):
    import gemmlab.cli

    return typer.main.get_command(gemmlab.cli.app).commands["profile"].make_context("profile", list(args))


def test_the_command_from_python_names_only_what_was_given(monkeypatch):
    """Called as main([...]) sys.argv is the caller's: the command is rebuilt from the options,
    defaults left out, a flag by the name that was given (--no-check, not --check)."""
    monkeypatch.setattr("sys.argv", ["pytest", "tests/cpu"])
    ctx = _profile_context("--impl", "naive", "--M", "512", "--no-check", "--from-table", "--timeout", "30")
    assert command_text(ctx) == "gemmlab profile --impl naive --M 512 --no-check --from-table --timeout 30.0"
    assert command_text(_profile_context("--M", "4096", "--check")) == "gemmlab profile"
    monkeypatch.setattr("sys.argv", ["gemmlab", "profile", "--M", "4096", "--impl", "a b"])
    assert command_text(_profile_context("--M", "4096")) == "gemmlab profile --M 4096 --impl 'a b'"


def test_gemm_sizes_with_reduce_are_refused_sorted_whatever_the_order_given(capsys):
    # sorted, so one line for one mistake: a set's order changes from one process to the next
    code, out, err = run(capsys, "analyze", "--op", "reduce", "--impl", "shuffle", "--K", "8", "--M", "8", "--N", "8")
    assert code == 2 and err.strip() == "error: --K/--M/--N: for the GEMM ops; --op reduce takes --n"
    code, out, err = run(capsys, "analyze", "--op", "reduce", "--impl", "shuffle", "--M", "8")
    assert code == 2 and err.strip() == "error: --M: for the GEMM ops; --op reduce takes --n"


def test_a_reduce_problem_has_the_n_given_else_the_default():
    from gemmlab.profile.commands import DEFAULT_REDUCE_N, _problem

    given = dict(n="4096", batch=None, dtype=None, layout=None, out_dtype=None)
    assert _problem("reduce", given, 4096, 4096, 4096, 4096) == ReduceProblem(4096)
    assert _problem("reduce", {**given, "n": None}, 4096, 4096, 4096, None) == ReduceProblem(DEFAULT_REDUCE_N)


def test_dispatch_and_from_table_are_refused_by_a_caller_that_gives_no_resolver(monkeypatch):
    """The API sits above this layer and hands its resolvers in (gemmlab.cli does); a caller that
    does not gets one line, not a call of None on the GPU."""
    from gemmlab.ops.hgemm import OP
    from gemmlab.profile import commands

    monkeypatch.setattr(commands, "dispatch_resolver", None)
    monkeypatch.setattr(commands, "table_params", None)
    p = GemmProblem(256, 256, 256, dtype="bf16")
    with pytest.raises(BadArgumentError, match="^--impl dispatch: this caller gives no dispatch resolver"):
        commands.Selection.named(OP, p, "dispatch", None, False)
    s = commands.Selection.named(OP, p, "persistent", None, True)
    with pytest.raises(BadArgumentError, match="^--from-table: this caller gives no dispatch table"):
        s.on_gpu("NVIDIA H100 80GB HBM3", "sm_90", "256x256x256")


def test_a_table_pick_this_problem_refuses_gives_the_kernel_s_defaults(monkeypatch):
    import gemmlab.cli  # noqa: F401  (hands the API's resolvers to the profile command)
    from gemmlab.ops.hgemm import OP
    from gemmlab.profile import commands

    monkeypatch.setattr(commands, "table_params", lambda problem, name, gpu, arch: ({"BN": 96}, "a made-up entry"))
    s = commands.Selection.named(OP, GemmProblem(4096, 4096, 4096, dtype="bf16"), "persistent", None, True)
    s.on_gpu("NVIDIA H100 80GB HBM3", "sm_90", "4096x4096x4096")
    assert s.chosen == {"persistent": {}}
    assert s.lines == ["persistent: defaults (the table's pick breaks BN must be 64, 128, 192 or 256 here: "
                       "the kernel's defaults)"]


def test_a_zero_timeout_is_refused(capsys):
    code, out, err = run(capsys, "profile", "--impl", "cublas", "--timeout", "0")
    assert code == 2 and err.strip() == "error: --timeout 0: seconds one ncu run may take, a number more than 0"


def _kernel(label, status="OK", verified=True, **headline):
    return profiler.ProfiledKernel(label, "kernel", label, "k", status, "" if status == "OK" else "why",
                                   headline=headline, target={} if verified is None else {"verified": verified})


def test_the_side_by_side_table_cell_by_cell():
    """Failed runs (ERROR) have no column; each metric its own digits with digit groups, '-' for
    a figure ncu did not give; verified yes, no, or '-' where the run did not check."""
    kernels = [_kernel("a", duration_us=1234.56, dram_gbps=2500.4, smem_conflicts_ld=1234567.0),
               _kernel("gone", status="ERROR"), _kernel("b", status="FAIL", verified=False, duration_us=0.25),
               _kernel("c", verified=None)]
    table = profile_table(kernels, "t")
    assert [str(c.header) for c in table.columns] == ["metric", "a", "b", "c"]
    rows = {label: [col._cells[i] for col in table.columns[1:]] for i, label in enumerate(table.columns[0]._cells)}
    assert rows["Duration (us)"] == ["1,234.6", "0.2", "-"]
    assert rows["DRAM Bandwidth (GB/s)"] == ["2,500", "-", "-"]
    assert rows["Shared Bank Conflicts, loads"] == ["1,234,567", "-", "-"]
    assert rows["L2 Hit Rate (%)"] == ["-", "-", "-"]
    assert rows["verified"] == ["yes", "no", "-"]


@pytest.fixture
def profile_without_gpu(monkeypatch, tmp_path):
    """`gemmlab profile` with an H100 named, no GPU touched and no ncu run: profile_many gives each
    implementation the status `statuses` names (OK by default)."""
    import gemmlab.cuda.device as dev

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(dev, "device", lambda: None)
    monkeypatch.setattr(dev, "info", lambda: types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", arch="sm_90"))
    monkeypatch.setattr(N, "find_ncu", lambda: "/fake/ncu")
    monkeypatch.setattr(profiler, "ncu_version", lambda ncu: "2025.1")
    monkeypatch.setattr(profiler, "measure_dram_bandwidth",
                        lambda: {"method": "copy", "bytes": 2, "median_ms": 1.0, "gbps": 3000.0})
    statuses: dict = {}

    def profile_many(impls, problem, params_for, warmup, arch, on_kernel=None, **kw):
        out = []
        for i in impls:
            status = statuses.get(i.name, "OK")
            reason = "" if status == "OK" else f"{i.name} broke"
            k = profiler.ProfiledKernel(i.name, i.kind, i.name, "k", status, reason,
                                        headline={"duration_us": 1.0}, target={"verified": True})
            on_kernel(profiler.Plan(["_Zk"], 3, 1, params_for(i)), k)
            out.append(k)
        return out

    monkeypatch.setattr(profiler, "profile_many", profile_many)
    return statuses


def test_profile_keeps_the_api_s_choice_with_the_dispatch_row(capsys, tmp_path, profile_without_gpu):
    out_json = tmp_path / "p.json"
    code, out, err = run(capsys, "profile", "--op", "hgemm", "--dtype", "bf16", "--impl", "dispatch,persistent",
                         "--M", "256", "--N", "256", "--K", "256", "--db", str(tmp_path / "r.db"),
                         "--json", str(out_json))
    assert code == 0, err
    rows = {r["impl"]: r for r in json.loads(out_json.read_text())["rows"]}
    assert set(rows) == {"dispatch", "persistent"}
    chosen = rows["dispatch"]["extra"]["chosen"]
    assert chosen and rows["dispatch"]["extra"]["label"] == "dispatch"
    assert "chosen" not in rows["persistent"]["extra"]


def test_profile_s_error_names_the_first_failure_and_counts_the_others(capsys, tmp_path, profile_without_gpu):
    profile_without_gpu.update(vectorize="ERROR", naive="FAIL", blocktiling_1d="ERROR")
    code, out, err = run(capsys, "profile", "--impl", "naive,vectorize,blocktiling_1d,coalescing", "--M", "256",
                         "--N", "256", "--K", "256", "--db", str(tmp_path / "r.db"))
    assert code != 0 and err.strip() == "error: naive: naive broke (and 2 more)"
    profile_without_gpu.clear()
    profile_without_gpu.update(vectorize="ERROR")
    code, out, err = run(capsys, "profile", "--impl", "naive,vectorize", "--M", "256", "--N", "256", "--K", "256",
                         "--db", str(tmp_path / "r.db"))
    assert err.strip() == "error: vectorize: vectorize broke"


# -- profiler.py: one ncu run, its rows, the names, the files ---------------------------------

class FakeNcu:
    """subprocess.run as profile_one calls it: the profiling run (writes the report unless told not
    to, prints the target's line and `log`), then the report's raw page (`page`) and source page."""

    def __init__(self, monkeypatch, page: str = "", target: dict | None = None, log: str = "", report: bool = True,
                 import_log: str = "", timeout: bool = False):
        self.page, self.log, self.report, self.import_log, self.timeout = page, log, report, import_log, timeout
        self.target = {"impl": "x", "verified": True, "nvtx": True} if target is None else target
        self.commands: list[list[str]] = []
        monkeypatch.setattr(profiler.subprocess, "run", self)

    def __call__(self, cmd, **kw):
        import subprocess

        self.commands.append(cmd)
        if "--import" in cmd:
            return types.SimpleNamespace(stdout=self.page if "raw" in cmd else "", stderr=self.import_log, returncode=0)
        if self.timeout:
            raise subprocess.TimeoutExpired(cmd, kw["timeout"])
        if self.report:
            Path(cmd[cmd.index("--export") + 1]).write_bytes(b"report")
        out = PREFIX + json.dumps(self.target) + "\n" if self.target else ""
        return types.SimpleNamespace(stdout=out, stderr=self.log, returncode=0)


def _impl(name="hopper_simt", kind="kernel"):
    return types.SimpleNamespace(name=name, kind=kind)


def _one(monkeypatch, tmp_path, impl=None, plan=None, problem=None, **kw):
    plan = plan or profiler.Plan(["_Zmain", "_Zreduce"], 6, 2, {"BM": 128})
    monkeypatch.setattr(profiler, "plan_for", lambda *a: plan)
    return profiler.profile_one("ncu", impl or _impl(), problem or GemmProblem(1024, 1024, 1024), {}, 3, "sm_90",
                                tmp_path, **kw)


def test_a_split_k_run_gives_two_rows_each_with_its_own_figures(monkeypatch, tmp_path):
    FakeNcu(monkeypatch, page=(FIX / "raw-hopper_simt.csv").read_text(),
            target={"impl": "hopper_simt", "verified": True, "rel_err": 1e-7})
    plan, (main, reduce) = _one(monkeypatch, tmp_path)
    assert (main.label, reduce.label) == ("hopper_simt", "hopper_simt:sgemm_splitk_reduce")
    assert (main.status, reduce.status) == ("OK", "OK")
    assert list(main.metrics) == N.metric_names(), "the metrics asked for, not ncu's device attributes"
    raw_main = N.parse_raw_csv((FIX / "raw-hopper_simt.csv").read_text())[0]
    row = main.row(GemmProblem(1024, 1024, 1024), plan.params, "2025.1", plan.skip, plan.count)
    m = raw_main.metrics
    assert (row["launch_skip"], row["launch_count"]) == (6, 2)
    assert (row["grid"], row["block"]) == ("(32, 1, 4)", raw_main.fields["Block Size"])
    assert row["dram_bytes"] == m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]
    assert row["flops"] == 2 * m["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"]
    assert row["duration_us"] == raw_main.headline()["duration_us"] and row["verified"] is True
    assert row["extra"] == {"label": "hopper_simt", "fields": raw_main.fields}
    assert row["params"] == {"BM": 128} and row["ncu_version"] == "2025.1"


def test_a_row_keeps_its_source_summary_and_no_empty_fields():
    k = profiler.ProfiledKernel("a", "kernel", "a", "k", "OK", source={"samples": 3})
    assert k.row(GemmProblem(8, 8, 8), {}, "", 0, 1)["extra"] == {"label": "a", "source": {"samples": 3}}


def test_a_library_s_second_kernel_claims_no_tensor_flops():
    bf16 = GemmProblem(64, 64, 64, dtype="bf16")
    first = profiler.ProfiledKernel("cublas", "baseline", "cublas", "k1", "OK")
    second = profiler.ProfiledKernel("cublas", "baseline", "cublas:splitk", "k2", "OK")
    assert first.row(bf16, {}, "", 0, 16)["flops"] == 2 * 64 ** 3
    assert second.row(bf16, {}, "", 0, 16)["flops"] is None


def test_a_sum_s_passes_are_labelled_from_two(monkeypatch, tmp_path):
    lines = (FIX / "raw-naive.csv").read_text().splitlines()
    FakeNcu(monkeypatch, page="\n".join(lines + lines[2:] + lines[2:]) + "\n")
    _, kernels = _one(monkeypatch, tmp_path, impl=_impl("naive"), plan=profiler.Plan(["_Zk"], 9, 3, {}))
    assert [k.label for k in kernels] == ["naive", "naive:pass2", "naive:pass3"]


@pytest.mark.parametrize("verified, status, reason", [(True, "OK", ""), (None, "OK", ""),
                                                       (False, "FAIL", "verification failed: rel err 0.5")])
def test_a_failed_check_is_a_fail_with_the_target_s_reason(monkeypatch, tmp_path, verified, status, reason):
    target = {"impl": "naive", "nvtx": True, "reason": "rel err 0.5"}
    if verified is not None:  # --no-check: the target says nothing of it
        target["verified"] = verified
    FakeNcu(monkeypatch, page=(FIX / "raw-naive.csv").read_text(), target=target)
    _, (k,) = _one(monkeypatch, tmp_path, impl=_impl("naive"), plan=profiler.Plan(["_Zk"], 3, 1, {}))
    assert (k.status, k.reason) == (status, reason)


def test_the_target_is_told_not_to_check_and_a_baseline_is_picked_by_its_nvtx_range(monkeypatch, tmp_path):
    ncu_run = FakeNcu(monkeypatch, page=(FIX / "raw-cublas.csv").read_text())
    _, (k,) = _one(monkeypatch, tmp_path, impl=_impl("cublas", "baseline"), plan=profiler.Plan(None, 0, 16, {}),
                   check=False, source=False)
    cmd = ncu_run.commands[0]
    assert cmd[-1] == "--no-check" and cmd[cmd.index("--nvtx-include") + 1] == "gemmlab_profile/"
    assert "--section" not in cmd and k.status == "OK"
    ncu_run.commands.clear()
    _one(monkeypatch, tmp_path, impl=_impl("naive"), plan=profiler.Plan(["_Zk"], 3, 1, {}), source=True)
    cmd = ncu_run.commands[0]
    assert "--no-check" not in cmd and "--nvtx" not in cmd
    assert cmd[cmd.index("--section") + 1] == "SourceCounters"


def test_each_way_ncu_fails_is_its_own_error_row(monkeypatch, tmp_path):
    def reason(**kw):
        _, (k,) = _one(monkeypatch, tmp_path, impl=_impl("cublas", "baseline"), plan=profiler.Plan(None, 0, 16, {}),
                       timeout=30)
        assert k.status == "ERROR" and k.command.startswith("ncu --clock-control none")
        return k.reason

    FakeNcu(monkeypatch, timeout=True)
    assert reason() == "ncu did not finish within 30 s"
    FakeNcu(monkeypatch, target={"error": "boom"})
    assert reason() == "the target failed: boom"
    FakeNcu(monkeypatch, report=False, log="one\ntwo\nthree\nfour")
    assert reason() == "ncu wrote no report (exit 0): two | three | four"
    FakeNcu(monkeypatch, page=(FIX / "raw-cublas.csv").read_text(), target={"impl": "cublas", "nvtx": False})
    assert reason() == "no NVTX binding (cupy.cuda.nvtx or torch) to mark the baseline's launch"
    FakeNcu(monkeypatch, page="", import_log="==ERROR== could not read the report")
    assert reason() == "ncu: could not read the report"
    FakeNcu(monkeypatch, page="")
    assert reason() == "ncu's report holds no kernel"


def test_a_warning_beside_a_written_report_still_gives_the_rows_and_a_fatal_one_stops(monkeypatch, tmp_path):
    FakeNcu(monkeypatch, page=(FIX / "raw-naive.csv").read_text(), log="==ERROR== Failed to profile one replay pass")
    _, (k,) = _one(monkeypatch, tmp_path, impl=_impl("naive"), plan=profiler.Plan(["_Zk"], 3, 1, {}))
    assert k.status == "OK" and k.metrics["launch__grid_size"] == 1024
    FakeNcu(monkeypatch, page=(FIX / "raw-naive.csv").read_text(), log="==ERROR== Failed to find metric x__y.sum")
    with pytest.raises(N.NcuError, match="does not know a metric") as info:
        _one(monkeypatch, tmp_path, impl=_impl("naive"), plan=profiler.Plan(["_Zk"], 3, 1, {}))
    assert info.value.fatal


@pytest.mark.parametrize("kernel, short", [
    ("void gemmlab::sgemm_splitk_reduce<256>(int, float*)", "sgemm_splitk_reduce"),
    ("void k<gemmlab::Tile>(int)", "k"), ("splitKreduce_kernel", "splitKreduce_kernel")])
def test_short_kernel_names(kernel, short):
    assert profiler.short_kernel_name(kernel) == short


def test_ncu_s_version(monkeypatch):
    outputs = iter(["NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.1.0.0 (build 1)\n",
                    "ncu 9.9\n\n", "",
                    FileNotFoundError("no ncu there")])

    def run_ncu(*args, **kw):
        out = next(outputs)
        if isinstance(out, Exception):
            raise out
        return types.SimpleNamespace(stdout=out)

    monkeypatch.setattr(profiler.subprocess, "run", run_ncu)
    assert [profiler.ncu_version("ncu") for _ in range(4)] == ["2025.1.0.0", "ncu 9.9", "", ""]


def test_the_target_imports_this_gemmlab_before_anything_else_on_pythonpath(monkeypatch):
    src = str(Path(profiler.__file__).resolve().parents[2])
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert profiler._target_env()["PYTHONPATH"] == src + os.pathsep + "/elsewhere"
    monkeypatch.delenv("PYTHONPATH")
    assert profiler._target_env()["PYTHONPATH"] == src


def test_a_baseline_is_profiled_over_its_whole_nvtx_range():
    assert profiler.plan_for(_impl("cublas", "baseline"), GemmProblem(8, 8, 8), {}, 3, "sm_90") == \
        profiler.Plan(None, 0, profiler.BASELINE_LAUNCH_CAP, {})


def test_every_report_has_a_name_of_its_own(tmp_path):
    p = GemmProblem(64, 64, 64)
    names = []
    for _ in range(3):
        path = profiler.report_path(tmp_path, "naive", p)
        path.write_text("x")
        names.append(path.name)
    assert names == ["naive-64x64x64.ncu-rep", "naive-64x64x64-2.ncu-rep", "naive-64x64x64-3.ncu-rep"]


def test_profile_many_writes_reports_where_asked_and_hands_each_kernel_on(monkeypatch, tmp_path):
    monkeypatch.setattr(N, "find_ncu", lambda: "/fake/ncu")
    seen, handed = [], []

    def profile_one(ncu, impl, problem, params, warmup, arch, workdir, timeout, check, source):
        seen.append((impl.name, workdir, workdir.is_dir(), params, timeout, check, source))
        plan = profiler.Plan(None, 0, 16, params)
        return plan, [_kernel(impl.name), _kernel(impl.name + ":2")]

    monkeypatch.setattr(profiler, "profile_one", profile_one)
    out = profiler.profile_many([_impl("a"), _impl("b")], GemmProblem(8, 8, 8), lambda i: {"P": i.name}, 3, "sm_90",
                                reports=tmp_path / "reports", timeout=9, check=False,
                                on_kernel=lambda plan, k: handed.append((plan.params, k.label)))
    assert seen == [("a", tmp_path / "reports", True, {"P": "a"}, 9, False, False),
                    ("b", tmp_path / "reports", True, {"P": "b"}, 9, False, False)]
    assert [k.label for k in out] == ["a", "a:2", "b", "b:2"]
    assert handed == [({"P": "a"}, "a"), ({"P": "a"}, "a:2"), ({"P": "b"}, "b"), ({"P": "b"}, "b:2")]


# -- launch_graph.py ------------------------------------------------------------------------

def test_a_graph_never_launched_is_freed_without_a_driver(graph_driver):  # noqa: F811
    """Nothing was bound, built or instantiated: its finalizer (run by the collector) has nothing
    to free and must not fail; at exit it is not run at all (the context may be gone)."""
    drv = graph_driver()
    g = LaunchGraph(_launches())
    assert g._finalizer.atexit is False
    g._finalizer()
    assert not g._finalizer.alive and drv.destroyed == [] and drv.modes_at_destroy == []


# -- compile.py: the cache key, the cache folder, the entry's files ----------------------------

@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "nvrtc"


SOURCE = "extern \"C\" __global__ void k() {}\n"


def test_every_part_of_the_key_changes_it(monkeypatch):
    """The source, the options (less the include path, which names folders, not what they hold),
    the NVRTC version and the cache layout's version each make another entry."""
    monkeypatch.setattr(cc, "nvrtc_version", lambda: "13.5")
    base = cc.cache_key(SOURCE, "k", "sm_90", {"std": "c++17"})
    assert cc.cache_key(SOURCE, "k", "sm_90", {"std": "c++17"}) == base
    assert cc.cache_key(SOURCE + "// edited\n", "k", "sm_90", {"std": "c++17"}) != base
    assert cc.cache_key(SOURCE, "k", "sm_90", {"std": "c++20"}) != base
    assert cc.cache_key(SOURCE, "k", "sm_90", {"std": "c++17", "include_path": ["/somewhere/else"]}) == base
    monkeypatch.setattr(cc, "nvrtc_version", lambda: "13.6")
    assert cc.cache_key(SOURCE, "k", "sm_90", {"std": "c++17"}) != base
    monkeypatch.setattr(cc, "nvrtc_version", lambda: "13.5")
    monkeypatch.setattr(cc, "CACHE_VERSION", cc.CACHE_VERSION + 1)
    assert cc.cache_key(SOURCE, "k", "sm_90", {"std": "c++17"}) != base


def test_the_key_s_parts_do_not_run_into_each_other(monkeypatch):
    monkeypatch.setattr(cc, "nvrtc_version", lambda: "13.5")
    assert cc.cache_key(SOURCE, "0k", "sm_9", {}) != cc.cache_key(SOURCE, "k", "sm_90", {})


def test_a_header_renamed_changes_the_key(monkeypatch, tmp_path):
    """Its name is hashed with its bytes: the same text under another name is another include."""
    (tmp_path / "a.cuh").write_text("#define X 1\n")
    monkeypatch.setattr(cc, "KERNEL_DIR", tmp_path)
    before = cc._header_digest()
    (tmp_path / "a.cuh").rename(tmp_path / "b.cuh")
    assert cc._header_digest() != before


def test_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cc.cache_dir() == tmp_path / "mine" / "nvrtc"
    monkeypatch.delenv("GEMMLAB_CACHE")
    assert cc.cache_dir() == tmp_path / "xdg" / "gemmlab" / "nvrtc"


FILES = {"kernel.cubin": b"\x7fELF cubin", "meta.json": b"{}"}


def test_an_entry_whose_cubin_cannot_be_written_is_not_marked_complete(tmp_path, monkeypatch):
    """meta.json marks an entry complete, so it is written last: a cubin that fails leaves no
    meta.json and no temporary file, and the write reports False (it only costs speed)."""
    real = os.replace

    def replace(src, dst):
        if Path(dst).name == "kernel.cubin":
            raise OSError("disk full")
        real(src, dst)

    monkeypatch.setattr(cc.os, "replace", replace)
    entry = tmp_path / "entry"
    assert cc._write_entry(entry, FILES) is False
    assert os.listdir(entry) == []


def test_an_unwritable_cache_only_costs_speed(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "file"))
    assert cc._write_entry(cc.cache_dir() / "ab" / ("ab" * 32), FILES) is False
    assert cc.read_cache_entry("ab" * 32) is None


@pytest.mark.parametrize("key, files", [("ab" * 31, FILES), ("ab" * 33, FILES), ("AB" * 32, FILES),
                                        ("ab" * 32, {**FILES, "extra": b""}), ("ab" * 32, {"meta.json": b"{}"})])
def test_only_a_whole_entry_under_a_content_address_is_installed(private_cache, key, files):
    with pytest.raises(ValueError, match="not a gemmlab NVRTC cache entry"):
        cc.install_cache_entry(key, files)
    assert not private_cache.exists()


def test_an_absent_entry_reads_as_none(private_cache):
    assert cc.read_cache_entry("cd" * 32) is None
    cc.install_cache_entry("cd" * 32, FILES)
    assert cc.read_cache_entry("cd" * 32) == FILES


def test_use_cache_false_neither_reads_nor_writes_the_cache(private_cache):
    from gemmlab import registry

    spec = registry.get("naive")
    cached = cc.compile_kernel(spec, arch="sm_80")
    entry = private_cache / cached.cache_key[:2] / cached.cache_key
    meta = json.loads((entry / "meta.json").read_text())
    (entry / "meta.json").write_text(json.dumps({**meta, "mangled": "_Zwrong"}))
    fresh = cc.compile_kernel(spec, arch="sm_80", use_cache=False)
    assert not fresh.cached and fresh.mangled == cached.mangled
    assert json.loads((entry / "meta.json").read_text())["mangled"] == "_Zwrong", "left as it was"
    other = cc.compile_kernel(spec, arch="sm_90", use_cache=False)
    assert not (private_cache / other.cache_key[:2] / other.cache_key).exists()


@pytest.mark.parametrize("meta", ["{not json", json.dumps({"resources": {}}),
                                  json.dumps({"mangled": "_Z", "resources": 7, "compile_seconds": 1})])
def test_a_torn_or_stale_entry_is_compiled_again_and_written_over(private_cache, meta):
    from gemmlab import registry

    spec = registry.get("naive")
    first = cc.compile_kernel(spec, arch="sm_80")
    entry = private_cache / first.cache_key[:2] / first.cache_key
    (entry / "meta.json").write_text(meta)
    again = cc.compile_kernel(spec, arch="sm_80")
    assert not again.cached and again.mangled == first.mangled
    third = cc.compile_kernel(spec, arch="sm_80")
    assert third.cached and third.compile_seconds == again.compile_seconds, "the recorded compile time"


def test_the_toolkit_named_by_cuda_home_comes_first(tmp_path, monkeypatch):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "mma.h").write_text("//")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    cc.cuda_include_dir.cache_clear()
    try:
        assert cc.cuda_include_dir() == str(tmp_path / "include")
    finally:
        cc.cuda_include_dir.cache_clear()


def _fake_nvrtc(monkeypatch, result: str):
    import sys

    codes = types.SimpleNamespace(NVRTC_SUCCESS="success")
    nvrtc = types.SimpleNamespace(nvrtcResult=codes, nvrtcVersion=lambda: (result, 13, 2))
    bindings = types.SimpleNamespace(nvrtc=nvrtc)
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    cc.nvrtc_version.cache_clear()


def test_nvrtc_s_version_names_the_pip_release_and_a_failed_query_is_an_error(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"nvidia-cuda-nvrtc": "13.2.51"}[name])
    try:
        _fake_nvrtc(monkeypatch, "success")
        assert cc.nvrtc_version() == "13.2 (13.2.51)"
        _fake_nvrtc(monkeypatch, "NVRTC_ERROR_INTERNAL")
        with pytest.raises(cc.CompileError, match="NVRTC is not usable: NVRTC_ERROR_INTERNAL"):
            cc.nvrtc_version()
    finally:
        cc.nvrtc_version.cache_clear()


def test_every_ptxas_note_of_a_function_is_kept_and_shown():
    line = "ptxas info    : ({}) Potential Performance Loss: {} in the function '_Z1k'\n"
    (r,) = cc.parse_ptxas_log(line.format("C7511", "wgmma serialized") + line.format("C7510", "other")).values()
    assert r.perf_warnings == ("C7511: wgmma serialized", "C7510: other")
    assert r.perf_notes("k") == ["k: ptxas: potential performance loss: C7511: wgmma serialized",
                                 "k: ptxas: potential performance loss: C7510: other"]


def test_only_our_own_first_kernel_is_lined_up_with_our_sass(monkeypatch, tmp_path):
    """Split-K: the GEMM kernel's samples split at its main loop, the reduction's (a kernel of
    its own) never against the GEMM kernel's listing."""
    from .test_profile_source import page

    text = page("gemm_k", [(0x0, "FFMA R1, R1, R2, R1 ;", 0, 5)]) + page("reduce_k", [(0x0, "FADD R1, R1, R2 ;", 0, 3)])
    monkeypatch.setattr(profiler.subprocess, "run", lambda *a, **k: types.SimpleNamespace(stdout=text, stderr=""))
    asked = []
    monkeypatch.setattr(profiler, "_our_sass", lambda impl, params, arch: asked.append((impl, params)) or (None, None))
    plan = profiler.Plan(["_Zgemm", "_Zreduce"], 6, 2, {"BM": 128})
    results = [types.SimpleNamespace(kernel="gemm_k"), types.SimpleNamespace(kernel="reduce_k")]
    got = profiler.source_summaries("ncu", tmp_path / "r", "impl", plan, "sm_90", results)
    assert [s["samples"] for s in got] == [5, 3] and asked == [("impl", {"BM": 128})]
    # by name where ncu printed one: the reduction alone takes its own block, not the page's first
    (alone,) = profiler.source_summaries("ncu", tmp_path / "r", None, plan, "sm_90", results[1:])
    assert alone["samples"] == 3
