"""gemmlab tune over tensor-core (hgemm) kernels: the problem's dtype fixes the DTYPE flag, every
row records its dtype, and --resume and the tuned lookup keep fp16, bf16 and fp32 apart."""
import json

import pytest

from gemmlab import registry
from gemmlab.cli import main
from gemmlab.harness.tuned import best_params, tried_points
from gemmlab.problem import GemmProblem
from gemmlab.store import ResultStore
from gemmlab.tune.search import Exhaustive
from gemmlab.tune.space import enumerate_space
from gemmlab.tune.tuner import TuneOptions, tune

FAKE = "tests.cpu.fake_tasks:misbehave"


def _params(row) -> dict:
    return json.loads(row["params"]) if isinstance(row["params"], str) else row["params"]


def test_dry_run_holds_dtype_fixed(capsys):
    spec = registry.get("persistent")
    both = enumerate_space(spec)
    assert main(["tune", "--op", "hgemm", "--impl", "persistent", "--dtype", "bf16", "--dry-run"]) == 0
    out = capsys.readouterr().out
    one = enumerate_space(spec, {"DTYPE": (1,)})
    assert f"{one.total} points, {len(one.kept)} kept" in out
    assert one.total * 2 == both.total, "DTYPE is not an axis of the search"
    assert {p["DTYPE"] for p in one.kept} == {1}


@pytest.mark.parametrize("args,needle", [
    (["--impl", "single_pass"], "reduce kernel: gemmlab tune takes sgemm and hgemm"),
    (["--impl", "persistent", "--dtype", "fp32"], "--dtype 'fp32'"),
    (["--impl", "persistent", "--dtype", "tf32"], "takes fp16 or bf16 inputs, not tf32"),
    (["--impl", "persistent", "--dtype", "bf16", "--param", "DTYPE=0"], "set by --dtype bf16"),
    (["--impl", "mma_sync", "--K", "4097"], "needs K % 8 == 0"),
    (["--impl", "warptiling", "--dtype", "bf16"], "--dtype 'bf16'"),
    (["--op", "hgemm", "--impl", "warptiling"], "warptiling is a kernel of sgemm"),
])
def test_what_cannot_be_tuned_is_one_line(capsys, args, needle):
    assert main(["tune", *args, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def test_rows_carry_the_dtype_and_lookups_keep_dtypes_apart(tmp_path):
    spec = registry.get("persistent")
    points = enumerate_space(spec, {"DTYPE": (1,)}).kept[:4]
    store = ResultStore(tmp_path / "r.db")
    bf16 = GemmProblem(1024, 1024, 1024, dtype="bf16")
    run = store.start_run("tune", "test", {"gpu": {"name": "FakeGPU"}})
    options = TuneOptions(task_path=FAKE, precompile=False, timeout_s=5.0)
    summary = tune(spec, bf16, Exhaustive(points, {}), options, "sm_90a", store, run, "FakeGPU")
    assert len(summary.trials) == 4
    rows = store.results(run_id=run)
    assert {r["dtype"] for r in rows} == {"bf16"} and {r["op"] for r in rows} == {"hgemm"}
    assert all(_params(r)["DTYPE"] == 1 for r in rows)
    assert len(tried_points(store, "FakeGPU", spec.name, bf16)) == 4
    fp16 = GemmProblem(1024, 1024, 1024, dtype="fp16")
    assert tried_points(store, "FakeGPU", spec.name, fp16) == {}, "--resume is per dtype"
    other = GemmProblem(1024, 1024, 2048, dtype="bf16")
    assert tried_points(store, "FakeGPU", spec.name, other) == {}, "and per shape: another K is untried"
    assert best_params(store, "FakeGPU", spec.name, fp16) is None, "bf16 tuning does not choose fp16 parameters"
    params, shape, _ = best_params(store, "FakeGPU", spec.name, GemmProblem(2048, 2048, 2048, dtype="bf16"))
    assert params["DTYPE"] == 1 and shape == "1024x1024x1024"
