"""Session 32's bad-input sweep (no GPU): refusals that came as exit 0 with nothing done, values the
problem overrode without a word, and messages that named the wrong rule. Each case was a real
command's behaviour before the fix (noted per test)."""
import pytest

import gemmlab
from gemmlab import registry
from gemmlab.errors import BadArgumentError

from .cli_lines import one_line, run


@pytest.mark.parametrize("args, needle", [
    (["--op", "hgemm", "--dtype", "tf32", "--impl", "wmma"], "wmma takes fp16 or bf16 inputs, not tf32"),
    (["--op", "hgemm", "--dtype", "bf16", "--impl", "wmma", "--layout", "nt"], "wmma"),
    (["--op", "hgemm", "--dtype", "bf16", "--impl", "wmma", "--out-dtype", "bf16"], "wmma"),
])
def test_bench_refuses_a_named_kernel_that_runs_none_of_the_problems(capsys, tmp_path, args, needle):
    """Was: a run stored with ERROR rows only, exit 0 (verify refused the same input in one line)."""
    code, out, err = run(capsys, "bench", *args, "--sizes", "256", "--db", tmp_path / "r.db")
    one_line(code, err, needle)
    assert "no GPU" not in err and not (tmp_path / "r.db").exists()


def test_bench_keeps_a_kernel_that_all_brought_in_and_one_that_takes_some_problems(tmp_path):
    """Only a named kernel with no runnable problem is refused: the others keep their ERROR rows."""
    from gemmlab import ops
    from gemmlab.harness.session import refuse_named_without_problems

    op = ops.get("hgemm")
    args = ops.shape_args("hgemm", sizes="256", dtype="tf32")
    problems = op.problems(args)
    impls = op.select("all", "tf32")
    refuse_named_without_problems(op, impls, "all", problems)  # all: no refusal
    mixed = op.problems(ops.shape_args("hgemm", sizes="127,256", dtype="bf16"))
    mma = op.select("mma_sync", "bf16")
    assert op.refusal(mma[0], mixed[0]) and not op.refusal(mma[0], mixed[1]), "the case must stay mixed"
    refuse_named_without_problems(op, mma, "mma_sync", mixed)  # runs one of the two: kept
    with pytest.raises(BadArgumentError, match="mma_sync needs K % 8 == 0"):
        refuse_named_without_problems(op, mma, "mma_sync", mixed[:1])


@pytest.mark.parametrize("command", [
    ["analyze", "--op", "hgemm", "--impl", "wmma", "--arch", "sm_90", "--no-store", "--params", "DTYPE=1"],
    ["analyze", "--op", "hgemm", "--impl", "persistent", "--arch", "sm_90", "--no-store", "--params", "OUT16=1"],
    ["verify", "--op", "hgemm", "--impl", "persistent", "--params", "B_KMAJOR=1"],
    ["bench", "--op", "hgemm", "--dtype", "bf16", "--impl", "persistent", "--params", "A_MNMAJOR=1", "--sizes", "256"],
    ["profile", "--op", "hgemm", "--impl", "wmma", "--params", "DTYPE=0", "--M", "256", "--N", "256", "--K", "256"],
])
def test_flags_the_problem_sets_are_refused_in_params(capsys, tmp_path, monkeypatch, command):
    """Was: exit 0 and the problem's value built (analyze showed DTYPE=0 for --params DTYPE=1)."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *command)
    one_line(code, err, "set by --dtype, --layout and --out-dtype, not by --params")


def test_compile_still_takes_dtype_in_params(capsys):
    """compile has no --dtype: --params DTYPE=1 is how it builds the bf16 instance, and it stays."""
    from gemmlab.harness.ui import params_for

    impls = registry.select("wmma", op="hgemm", with_baselines=False)
    assert params_for(impls, "DTYPE=1") == {"wmma": {"DTYPE": 1}}


def test_the_api_refuses_flags_the_operands_set():
    """Was: gemmlab.hgemm(..., impl=, params={'DTYPE': ...}) built the operands' type regardless."""
    from gemmlab.api import core
    from gemmlab.problem import GemmProblem

    with pytest.raises(BadArgumentError, match="params DTYPE: set by the operands' types") as info:
        core.choose("hgemm", GemmProblem(256, 256, 256, dtype="bf16"), (256, 256, 256), "persistent", {"DTYPE": 0},
                    "GPU A", "sm_90")
    assert "\n" not in str(info.value)
    with pytest.raises(BadArgumentError, match="params DTYPE"):
        gemmlab.explain(op="hgemm", shape=(256, 256, 256), dtype="bf16", impl="persistent", params={"DTYPE": 0},
                        gpu="GPU A", arch="sm_90")


def test_tune_refuses_an_infinite_timeout(capsys, tmp_path):
    """Was: accepted (min=1), then every Dask trial's wait broke with OverflowError."""
    code, out, err = run(capsys, "tune", "--impl", "vectorize", "--timeout", "inf", "--dry-run",
                         "--db", tmp_path / "r.db")
    one_line(code, err, "--timeout inf")


@pytest.mark.parametrize("args", [
    ["--arch", "sm_80", "--impl", "tma_ffma"],
    ["--arch", "sm_80", "--op", "hgemm", "--impl", "tma_wgmma"],
])
def test_compile_refuses_when_no_named_kernel_builds_for_the_arch(capsys, args):
    """Was: one row "skipped: needs sm_90a" and exit 0, nothing built (analyze said it in one line)."""
    code, out, err = run(capsys, "compile", *args)
    one_line(code, err, "not built for sm_80 (needs sm_90a)")


def test_compile_with_some_kernels_for_the_arch_still_skips_the_others_in_rows():
    from gemmlab.archs import refuse_if_none_builds

    refuse_if_none_builds(registry.select("naive,tma_ffma", op="sgemm", with_baselines=False), "sm_80")
    with pytest.raises(BadArgumentError, match="tma_ffma: not built for sm_80"):
        refuse_if_none_builds(registry.select("tma_ffma", op="sgemm", with_baselines=False), "sm_80")


@pytest.mark.parametrize("impl, name", [("hopper_simt", "GROUP"), ("persistent", "GROUP_M")])
def test_a_value_past_a_c_int_is_refused_by_the_spec(impl, name):
    """Was: passed the constraints, then NVRTC's "cannot determine which instance" (tune kept 24,660
    such points)."""
    spec = registry.get(impl, "hgemm" if impl == "persistent" else "sgemm")
    with pytest.raises(BadArgumentError, match=f"{name} must be at most 2147483647"):
        spec.resolve({name: 2**31})
    assert spec.failed_constraints({**spec.defaults, name: 2**40})


def test_bank_padding_refuses_pad_zero_as_its_kernel_does():
    """Was: PAD=0 passed PAD % 4 == 0, and the kernel's static_assert(PAD > 0) failed in NVRTC."""
    with pytest.raises(BadArgumentError, match="PAD must be a positive multiple of 4"):
        registry.get("bank_padding").resolve({"PAD": 0})


@pytest.mark.parametrize("given, rule", [
    ({"PINGPONG": 2}, "PINGPONG must be 0 or 1"),
    ({"CONSUMERS": 3}, "CONSUMERS must be 1 or 2"),
])
def test_the_refusal_names_the_given_parameters_own_rule(given, rule):
    """Was: the first broken constraint in the spec's order (the accumulator count, shared memory)."""
    spec = registry.get("persistent", "hgemm")
    with pytest.raises(BadArgumentError, match=rule):
        spec.resolve(given)


def test_profile_says_the_databases_problem_before_a_missing_ncu(capsys, tmp_path, monkeypatch):
    """Was: "ncu was not found", and the foreign --db only once ncu was there."""
    db = tmp_path / "other.db"
    db.write_bytes(b"not a database at all, " * 64)
    before = db.read_bytes()
    monkeypatch.setenv("GEMMLAB_NCU", str(tmp_path / "no-such-ncu"))
    code, out, err = run(capsys, "profile", "--impl", "naive", "--db", db)
    one_line(code, err, "is not a usable gemmlab results database")
    assert db.read_bytes() == before
