"""`gemmlab profile` without ncu or without a GPU: one clear line; ncu's failures as one line;
the ncu command line that picks exactly the wanted launch."""
import pytest

import json

from gemmlab.cli import main
from gemmlab.cuda.device import gpu_available
from gemmlab.errors import BadArgumentError
from gemmlab.problem import BatchedGemmProblem, GemmProblem, ReduceProblem, problem_from_dict, problem_to_dict
from gemmlab.profile import ncu as N
from gemmlab.profile.target import PREFIX, parse_target_line


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_no_ncu_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GEMMLAB_NCU", str(tmp_path / "no-such-ncu"))
    code, out, err = run(capsys, "profile", "--impl", "naive,vectorize", "--db", str(tmp_path / "r.db"))
    assert code == 2 and err.startswith(f"error: GEMMLAB_NCU={str(tmp_path / 'no-such-ncu')!r} is not a runnable file")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("args,needle", [
    (["profile", "--impl", "nope"], "unknown kernel 'nope'"),
    (["profile", "--op", "gemv"], "--op 'gemv'"),
    (["profile", "--impl", "naive", "--n", "1024"], "--n is for --op reduce"),
    (["profile", "--impl", "naive,vectorize", "--params", "BM=64"], "exactly one kernel"),
    (["profile", "--impl", "vectorize", "--params", "TM=3"], "TM must divide BM"),
    (["analyze", "--impl", "cublas"], "names no kernel"),
    (["analyze", "--impl", "naive", "--dtype", "bf16"], "--dtype is for --op hgemm"),
    (["analyze", "--op", "reduce", "--impl", "shuffle", "--batch", "2"], "--batch is for --op bgemm"),
    (["analyze", "--op", "hgemm", "--impl", "persistent", "--dtype", "fp64"], "fp64"),
    (["profile", "--op", "hgemm", "--dtype", "fp64"], "fp64"),
    (["profile", "--impl", "naive", "--layout", "nt"], "--layout is for --op hgemm"),
    (["profile", "--op", "hgemm", "--impl", "mma_sync", "--dtype", "tf32"], "mma_sync takes fp16 or bf16 inputs"),
    (["profile", "--op", "bgemm", "--impl", "nope"], "unknown kernel 'nope'"),
])
def test_bad_input_is_one_line(capsys, args, needle):
    code, out, err = run(capsys, *args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("output,needle,fatal", [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
     "on the target device 0.", "may not read the GPU's performance counters", True),
    ("==ERROR== Failed to initialize the profiler: LibraryNotLoaded", "could not start its profiler", True),
    ("==ERROR== Failed to find metric smsp__nope.sum", "does not know a metric", True),
    ("==PROF== Disconnected from process 12\n==WARNING== No kernels were profiled.", "profiled no kernel", False),
    ("==ERROR== The application returned an error code (1).", "ncu: The application returned an error code", False),
])
def test_diagnose_ncu_output(output, needle, fatal):
    problem = N.diagnose(output)
    assert problem is not None and needle in str(problem) and problem.fatal == fatal
    assert "\n" not in str(problem)


def test_clean_output_has_no_problem():
    assert N.diagnose("==PROF== Connected to process 1\n==PROF== Profiling \"k\": 0%....100% - 9 passes\n") is None


def test_command_picks_exactly_the_wanted_launch(tmp_path):
    cmd = N.profile_command("ncu", ["python", "-m", "t"], tmp_path / "r.ncu-rep", kernels=["_Zk1"], skip=3, count=1)
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    assert cmd[cmd.index("--kernel-name-base") + 1] == "mangled" and cmd[cmd.index("--kernel-name") + 1] == "_Zk1"
    assert cmd[cmd.index("--launch-skip") + 1] == "3" and cmd[cmd.index("--launch-count") + 1] == "1"
    assert cmd[cmd.index("--") + 1:] == ["python", "-m", "t"]
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert metrics == N.metric_names() and len(set(metrics)) == len(metrics)
    two = N.profile_command("ncu", ["t"], tmp_path / "r", kernels=["_Za", "_Zb"], skip=6, count=2)
    assert two[two.index("--kernel-name") + 1] == "regex:^(_Za|_Zb)$"
    lib = N.profile_command("ncu", ["t"], tmp_path / "r", kernels=None, skip=0, count=16, nvtx_range="gemmlab_profile")
    assert "--kernel-name" not in lib and lib[lib.index("--nvtx-include") + 1] == "gemmlab_profile/"


def test_numbers_as_ncu_prints_them():
    assert N.to_number("1,048,576") == 1048576 and N.to_number("98.55") == 98.55 and N.to_number("n/a") is None
    assert N.to_number("") is None and N.to_number("(256, 1, 1)") is None and N.to_number("-3.5") == -3.5


def test_target_line():
    out = "==PROF== Connected\nhello\n" + PREFIX + '{"impl": "naive", "verified": true}\n==PROF== Disconnected\n'
    assert parse_target_line(out) == {"impl": "naive", "verified": True}
    assert parse_target_line("nothing") is None


def test_metric_table_covers_the_issue():
    keys = set(N.METRIC_KEYS)
    for needed in ("duration_us", "achieved_occupancy_pct", "theoretical_occupancy_pct", "warp_cycles_per_issue",
                   "stall_mio_throttle", "stall_barrier", "stall_long_scoreboard", "stall_short_scoreboard",
                   "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "dram_gbps",
                   "l2_hit_rate_pct", "l2_throughput_pct", "smem_conflicts_ld", "smem_conflicts_st", "registers", "smem_dynamic",
                   "smem_static"):
        assert needed in keys


def test_plans_count_every_launch_of_one_call(tmp_path, monkeypatch):
    """--launch-skip/--launch-count from the launches one call makes: split-K GEMMs launch two
    kernels, multi-pass reductions launch one kernel once per pass."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    from gemmlab import registry
    from gemmlab.profile.profiler import plan_for, target_args

    simple = plan_for(registry.get("vectorize"), GemmProblem(1024, 1024, 1024), {}, 3, "sm_90")
    assert len(simple.kernels) == 1 and simple.skip == 3 and simple.count == 1
    split = plan_for(registry.get("hopper_simt"), GemmProblem(1024, 1024, 1024), {}, 3, "sm_90")
    assert len(split.kernels) == 2 and "splitk_reduce" in split.kernels[1]
    assert split.skip == 6 and split.count == 2  # matches the captured ncu run (raw-hopper_simt.csv)
    lib = plan_for(registry.get("cublas"), GemmProblem(64, 64, 64), {}, 3, "sm_90")
    assert lib.kernels is None and lib.skip == 0
    args = target_args(GemmProblem(8, 16, 32, 1.5, 0.0))
    assert args[0] == "--problem" and problem_from_dict(json.loads(args[1])) == GemmProblem(8, 16, 32, 1.5, 0.0)

    from gemmlab.ops.reduce_passes import plan

    spec = registry.select("interleaved", op="reduce")[0]
    passes = len(plan(spec, spec.defaults, 1 << 20))
    assert passes >= 2
    p = plan_for(spec, ReduceProblem(1 << 20), {}, 3, "sm_90")
    assert len(p.kernels) == 1 and p.count == passes and p.skip == 3 * passes
    assert problem_from_dict(json.loads(target_args(ReduceProblem(1000))[1])) == ReduceProblem(1000)


def test_problems_travel_to_the_target_as_data():
    problems = [GemmProblem(8, 16, 32, 1.5, -0.5), GemmProblem(8, 16, 32, dtype="bf16", layout="tn", out_dtype="bf16"),
                GemmProblem(8, 16, 32, dtype="tf32", layout="nt"), BatchedGemmProblem(3, 5, 7, batch=4),
                ReduceProblem(12345)]
    for p in problems:
        d = problem_to_dict(p)
        assert d["op"] == p.op and problem_from_dict(json.loads(json.dumps(d))) == p
    with pytest.raises(BadArgumentError, match="not a hgemm problem"):
        problem_from_dict({"op": "hgemm", "M": 1, "N": 1, "K": 1, "dtype": "bf16", "batch": 2})
    with pytest.raises(BadArgumentError, match="a sgemm problem was given as hgemm"):
        problem_from_dict({"op": "hgemm", "M": 1, "N": 1, "K": 1})
    with pytest.raises(BadArgumentError, match="M must be >= 1"):
        problem_from_dict({"op": "sgemm", "M": 0, "N": 1, "K": 1})


@pytest.mark.parametrize("args,needle", [
    (["--impl", "naive", "--problem", "{not json"], "take JSON"),
    (["--impl", "naive", "--problem", "[1, 2]"], "a JSON object"),
    (["--impl", "naive", "--params", "3", "--M", "8", "--N", "8", "--K", "8"], "a JSON object"),
    (["--impl", "naive", "--problem", '{"op": "sgemm", "M": -1, "N": 1, "K": 1}'], "M must be >= 1"),
])
def test_the_target_refuses_a_bad_problem_in_its_last_line(capsys, args, needle):
    from gemmlab.profile import target

    assert target.main(args) == 2
    info = parse_target_line(capsys.readouterr().out)
    assert needle in info["error"]


def test_an_hgemm_plan_filters_on_the_kernel_the_target_builds(tmp_path, monkeypatch):
    """The target's runner builds rung 5 with the problem's flags (DTYPE, B_KMAJOR, A_MNMAJOR,
    OUT16); ncu filters on that build's mangled name, so the plan must compile the same one."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    from gemmlab import registry
    from gemmlab.cuda.compile import compile_kernel
    from gemmlab.ops.hgemm import OP
    from gemmlab.profile.profiler import plan_for

    spec = registry.get("persistent", "hgemm")
    nt16 = GemmProblem(4096, 4096, 4096, dtype="bf16", layout="nt", out_dtype="bf16")
    plan = plan_for(spec, nt16, {"BN": 128}, 3, "sm_90")
    built = compile_kernel(spec, OP.build_params(spec, {"BN": 128}, "bf16", "nt", "bf16"), arch="sm_90")
    assert plan.kernels == [built.mangled] and plan.skip == 3 and plan.count == 1, "split-K sums inside the kernel"
    assert plan.params["BN"] == 128 and (plan.params["DTYPE"], plan.params["B_KMAJOR"], plan.params["OUT16"]) == (1, 1, 1)
    nn = plan_for(spec, GemmProblem(4096, 4096, 4096, dtype="bf16"), {"BN": 128}, 3, "sm_90")
    assert nn.kernels != plan.kernels, "another layout and C type is another kernel"
    assert OP.build_params(spec, plan.params, "bf16", "nt", "bf16") == plan.params, "the target rebuilds it as is"


def test_flops_of_a_profiled_launch():
    from gemmlab.profile.profiler import executed_flops, shape_fields

    ffma = {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1000.0}
    assert executed_flops(GemmProblem(8, 8, 8), ffma) == 2000.0, "CUDA cores: what ran"
    assert executed_flops(BatchedGemmProblem(8, 8, 8, batch=2), ffma) == 2000.0
    assert executed_flops(GemmProblem(8, 8, 8, dtype="bf16"), ffma) == 2 * 8 ** 3, "tensor cores: 2MNK"
    assert executed_flops(GemmProblem(8, 8, 8, dtype="bf16"), ffma, main=False) is None, "not a library's 2nd kernel"
    assert executed_flops(GemmProblem(8, 8, 8), {}) is None and executed_flops(ReduceProblem(8), ffma) is None
    assert shape_fields(GemmProblem(2, 3, 4, dtype="fp16", layout="nt")) == {
        "M": 2, "N": 3, "K": 4, "dtype": "fp16", "layout": "nt", "out_dtype": "fp32"}
    assert shape_fields(BatchedGemmProblem(2, 3, 4, batch=5))["batch"] == 5
    assert shape_fields(ReduceProblem(9)) == {"elements": 9}


@pytest.mark.skipif(gpu_available()[0], reason="this machine has a GPU: the no-GPU message cannot be seen here")
def test_reduce_without_gpu_is_one_line(capsys, monkeypatch, tmp_path):
    """With an ncu to run (a stub: profile looks for ncu before the GPU), the no-GPU refusal is
    the line, and no database is made."""
    ncu = tmp_path / "ncu"
    ncu.write_text("#!/bin/sh\nexit 0\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("GEMMLAB_NCU", str(ncu))
    db = tmp_path / "r.db"
    code, out, err = run(capsys, "profile", "--op", "reduce", "--impl", "shuffle", "--n", "4096", "--db", str(db))
    assert code == 2 and err.startswith("error: no GPU"), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert not db.exists()


def test_dispatch_is_profiled_as_the_kernel_it_stands_for(tmp_path, monkeypatch):
    """profile --impl dispatch: the API's choice under the name `dispatch`; ncu's target runs the
    implementation it stands for with the chosen parameters (the same kernel, by mangled name)."""
    import types

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    from gemmlab import registry
    from gemmlab.harness import dispatched
    from gemmlab.profile import profiler

    problem = GemmProblem(1024, 1024, 1024, dtype="bf16")
    stand = dispatched.stand_in("hgemm", "persistent", {"BN": 64, "STAGES": 8})
    seen = []
    monkeypatch.setattr(profiler.subprocess, "run",
                        lambda cmd, **k: seen.append(cmd) or types.SimpleNamespace(stdout="", stderr="", returncode=1))
    plan, (k,) = profiler.profile_one("ncu", stand, problem, dict(stand.defaults), 3, "sm_90", tmp_path)
    assert k.label == "dispatch" and k.status == "ERROR" and "wrote no report" in k.reason
    cmd = seen[0]
    target = cmd[cmd.index("--") + 1:]
    assert target[target.index("--impl") + 1] == "persistent"
    real = profiler.plan_for(registry.get("persistent", "hgemm"), problem, {"BN": 64, "STAGES": 8}, 3, "sm_90")
    assert cmd[cmd.index("--kernel-name") + 1] == real.kernels[0] == plan.kernels[0]
    assert json.loads(target[target.index("--params") + 1]) == real.params
    named = profiler.profile_one("ncu", registry.get("persistent", "hgemm"), problem, {}, 3, "sm_90", tmp_path)[1][0]
    assert named.label == "persistent" and "--impl persistent" in named.command


def test_profile_dispatch_refuses_params(capsys):
    code, out, err = run(capsys, "profile", "--op", "hgemm", "--impl", "dispatch", "--params", "BN=128")
    assert code == 2 and "--params is for a named kernel" in err and len(err.strip().splitlines()) == 1


def test_from_table_takes_the_tables_best_parameters_of_each_named_kernel(capsys):
    from gemmlab.apichoice import table_params

    params, where = table_params(GemmProblem(4096, 4096, 4096, dtype="bf16"), "persistent", "NVIDIA H100 80GB HBM3",
                                 "sm_90")
    assert params and "DTYPE" not in params and "OUT16" not in params, "the problem's flags are not the table's"
    assert "4096x4096x4096" in where and "persistent" in where
    none, why = table_params(GemmProblem(1024, 1024, 1024), "vectorize", "NVIDIA H100 80GB HBM3", "sm_90")
    assert none == {} and "no vectorize entry" in why and "its defaults" in why
    code, out, err = run(capsys, "profile", "--op", "hgemm", "--impl", "persistent", "--from-table", "--params", "BN=64")
    assert code == 2 and "--from-table takes the table's parameters" in err


def test_from_table_reads_the_entries_measured_with_the_problems_c_type():
    """A bf16 problem writing a bf16 C: the table's entry measured with a bf16 C decides, whose best
    persistent tile differs from the fp32-C entry's at the same shape (CM 1 against 2 on the H100)."""
    from gemmlab.api import dispatch
    from gemmlab.apichoice import table_params

    h100 = next(t for t in dispatch.tables()["gpus"] if "H100" in t["gpu"])
    best = {}
    for e in h100["entries"]:
        if e["op"] == "hgemm" and e["dtype"] == "bf16" and e["shape"] == [4096, 4096, 4096]:
            best[e.get("out_dtype", "fp32")] = next(c["params"] for c in e["candidates"] if c["impl"] == "persistent")
    for out in ("fp32", "bf16"):
        params, _ = table_params(GemmProblem(4096, 4096, 4096, dtype="bf16", out_dtype=out), "persistent",
                                 h100["gpu"], h100["arch"])
        assert params == {k: v for k, v in best[out].items() if k in params}, out
    assert {k: v for k, v in best["fp32"].items() if k in params} != params, "the two entries must differ to tell"


def test_the_selection_on_a_gpu_it_does_not_need(monkeypatch):
    """What profile runs, resolved for a named GPU with none here: --from-table's parameters and
    the API's choice for an H100; on an A100 the wgmma rungs are refused, each with a line."""
    import gemmlab.cli  # noqa: F401  (hands the API's resolvers to the profile command)
    from gemmlab.ops.hgemm import OP
    from gemmlab.profile.commands import Selection

    p = GemmProblem(4096, 4096, 4096, dtype="bf16")
    s = Selection.named(OP, p, "dispatch,persistent,cublas", None, True)
    s.on_gpu("NVIDIA H100 80GB HBM3", "sm_90", "4096x4096x4096")
    assert [i.name for i in s.impls] == ["dispatch", "persistent", "cublas"]
    assert s.chosen["persistent"]["BN"] == 256 and s.chosen["dispatch"]["BN"] == 256, "the table's pick, both ways"
    assert s.lines[0].startswith("dispatch at 4096x4096x4096: persistent") and s.lines[1].startswith("persistent: BN=256")
    a100 = Selection.named(OP, p, "ladder", None, False)
    a100.on_gpu("NVIDIA A100-SXM4-80GB", "sm_80", "4096x4096x4096")
    assert [i.name for i in a100.impls] == ["wmma", "mma_sync"]
    assert any(r.startswith("persistent: not built for sm_80") for r in a100.refused)
    with pytest.raises(BadArgumentError, match="tma_wgmma: not built for sm_80"):
        Selection.named(OP, p, "tma_wgmma", None, False).on_gpu("NVIDIA A100-SXM4-80GB", "sm_80", "x")


def test_from_table_leaves_a_transposed_layout_to_the_kernels_defaults():
    """The table measured row-major operands: for tf32 in layout tn its 128 x 256 pick would break
    the layout's constraint (rung 6 transposes B's tiles in registers there), so the defaults run, said."""
    import gemmlab.cli  # noqa: F401
    from gemmlab.ops.hgemm import OP
    from gemmlab.profile.commands import Selection

    tn = GemmProblem(4096, 4096, 4096, dtype="tf32", layout="tn")
    s = Selection.named(OP, tn, "tf32_wgmma", None, True)
    s.on_gpu("NVIDIA H100 80GB HBM3", "sm_90", "4096x4096x4096 tn")
    assert s.chosen["tf32_wgmma"] == {} and "the table measured layout nn, not tn" in s.lines[0]
    assert s.lines[0].startswith("tf32_wgmma: defaults (")
    nn = Selection.named(OP, GemmProblem(4096, 4096, 4096, dtype="tf32"), "tf32_wgmma", None, True)
    nn.on_gpu("NVIDIA H100 80GB HBM3", "sm_90", "4096x4096x4096")
    assert nn.chosen["tf32_wgmma"] and "4096x4096x4096" in nn.lines[0]
