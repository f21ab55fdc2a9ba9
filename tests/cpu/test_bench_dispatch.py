"""`gemmlab bench --impl dispatch`: the API's choice per problem (resolved for a named GPU, so no
GPU is needed), its stand-ins under the name `dispatch`, their place in one run, one table and
one stored run, and the one-line refusals. The GPU is faked where the run itself is exercised."""
from types import SimpleNamespace

import pytest

from gemmlab import ops, registry
from gemmlab.api import core, dispatch, tuning
from gemmlab.apichoice import resolve
from gemmlab.cli import main
from gemmlab.harness import bench as harness_bench
from gemmlab.harness import dispatched
from gemmlab.harness.tables import bench_tables
from gemmlab.harness.timing import Stats
from gemmlab.problem import BatchedGemmProblem, GemmProblem, ReduceProblem
from gemmlab.store import ResultStore

TMA = {"BM": 128, "BN": 256, "BK": 16, "STAGES": 3, "GROUP": 8, "ORDER": 3, "SPLITK": 0}
TABLE = {"gpus": [{"gpu": "GPU A", "arch": "sm_90", "command": "c", "entries": [
    {"op": "sgemm", "dtype": "fp32", "shape": [1024, 1024, 1024],
     "candidates": [{"impl": "tma_ffma", "params": TMA, "figure": 30.0},
                    {"impl": "cublas", "params": {}, "figure": 29.0}]},
    {"op": "sgemm", "dtype": "fp32", "shape": [4096, 4096, 4096],
     "candidates": [{"impl": "cublas", "params": {}, "figure": 51.0},
                    {"impl": "bigtile", "params": {}, "figure": 41.0}]},
    {"op": "sgemm", "dtype": "fp32", "shape": [8192, 8192, 8192],
     "candidates": [{"impl": "bigtile", "params": {}, "figure": 52.0},
                    {"impl": "cublas", "params": {}, "figure": 50.0}]},
]}]}


@pytest.fixture
def no_tuning(monkeypatch):
    monkeypatch.delenv("GEMMLAB_DB", raising=False)
    monkeypatch.setattr(tuning, "_named", None)
    monkeypatch.setattr(tuning, "_cache", {})
    ops.names()  # the registry filled, as a bench run has it


@pytest.fixture
def table(monkeypatch, no_tuning):
    monkeypatch.setattr(dispatch, "_tables", TABLE)


def _shipped_h100() -> dict:
    return next(t for t in dispatch.tables()["gpus"] if "H100" in t["gpu"])


def test_the_resolver_gives_the_shipped_tables_choice_on_a_named_gpu(no_tuning):
    """At every sgemm and hgemm shape of the H100 table: its fastest candidate that the API's own
    rules accept there, with that candidate's parameters, and the table entry named."""
    h100 = _shipped_h100()
    checked = 0
    for entry in h100["entries"]:
        if entry["op"] not in ("sgemm", "hgemm"):
            continue
        problem = GemmProblem(*entry["shape"], 1.0, 0.0, entry["dtype"], out_dtype=entry.get("out_dtype", "fp32"))
        accepted = next(c for c in entry["candidates"]
                        if not (core.refusal(entry["op"], c["impl"], problem, h100["arch"])
                                or core.slow_path(entry["op"], c["impl"], problem)))
        name, params, where = resolve(problem, h100["gpu"], h100["arch"])
        assert (name, params) == (accepted["impl"], accepted["params"]), entry["shape"]
        assert where.startswith(f"table: dispatch.json: {h100['gpu']}, {entry['op']} {entry['dtype']} ")
        checked += 1
    assert checked > 20


def test_the_resolver_skips_refusals_and_falls_back_like_a_call(table):
    name, params, where = resolve(GemmProblem(1024, 1024, 1024), "GPU A", "sm_90")
    assert (name, params) == ("tma_ffma", TMA) and where == "table: dispatch.json: GPU A, sgemm fp32 1024x1024x1024"
    name, _, where = resolve(GemmProblem(1024, 1024, 1023), "GPU A", "sm_90")  # rows TMA cannot describe
    assert name == "cublas" and "; skipped tma_ffma: " in where
    name, _, where = resolve(GemmProblem(1024, 1024, 1024), "GPU A", "sm_80")  # tma_ffma needs sm_90a
    assert name == "cublas" and "skipped tma_ffma" in where
    name, params, where = resolve(GemmProblem(4096, 4096, 4096), "GPU Z", "sm_75")
    assert (name, params) == ("cublas", {}) and "fallback" in where
    name, _, where = resolve(GemmProblem(4096, 4096, 4096, dtype="bf16", layout="nt"), "GPU A", "sm_90")
    assert name == "cublas" and "transposed operand" in where  # what a call with x @ W.T runs


def test_the_resolver_reads_the_tuning_database_named_by_gemmlab_db(table, tmp_path, monkeypatch):
    spec = registry.get("bigtile", "sgemm")
    tuned = {**spec.defaults, "BM": 64, "NT": 128, "MINB": 2}
    assert not spec.failed_constraints(tuned)
    db = tmp_path / "tune.db"
    with ResultStore(db) as store:
        run = store.start_run("tune", "t", {"gpu": {"name": "GPU A"}})
        store.add_result(run, op="sgemm", impl="bigtile", impl_kind="kernel", params=tuned, M=8192, N=8192, K=8192,
                         dtype="fp32", status="PASS", gflops=1.0)
    monkeypatch.setenv("GEMMLAB_DB", str(db))
    name, params, where = resolve(GemmProblem(8192, 8192, 8192), "GPU A", "sm_90")
    assert (name, params) == ("bigtile", tuned) and f"parameters from the tuning database {db}" in where


def test_the_resolver_takes_every_op(no_tuning):
    h100 = _shipped_h100()
    for problem in (BatchedGemmProblem(512, 512, 512, batch=16), ReduceProblem(1 << 20)):
        name, _, where = resolve(problem, h100["gpu"], h100["arch"])
        assert registry.get(name, problem.op).op == problem.op and where.startswith("table: ")


def test_the_resolver_reads_a_batched_problem_as_m_n_k_then_batch(no_tuning):
    """At each bgemm entry of the H100 table, a call of that shape is decided by that entry: the
    dispatch reads (M, N, K, batch), so a batch count read as M would send 16 512^3 GEMMs to the
    128^3 x 256 entry."""
    h100 = _shipped_h100()
    shapes = [tuple(e["shape"]) for e in h100["entries"] if e["op"] == "bgemm"]
    assert len(shapes) > 1
    for m, n, k, batch in shapes:
        _, _, where = resolve(BatchedGemmProblem(m, n, k, batch=batch), h100["gpu"], h100["arch"])
        assert where.endswith(f", bgemm fp32 {m}x{n}x{k}x{batch}"), (m, n, k, batch, where)


def test_a_fallback_is_not_reported_as_a_table_entry(table):
    # no table decided: `bench --impl dispatch` says why (no table for the GPU), not "table: fallback"
    name, params, where = resolve(GemmProblem(4096, 4096, 4096), "GPU Z", "sm_75")
    assert (name, params) == ("cublas", {})
    assert where == "no table for GPU Z (sm_75) for sgemm fp32: the fallback (cublas)", where


def test_dispatch_expands_to_one_stand_in_per_problem(table):
    problems = [GemmProblem(1024, 1024, 1024), GemmProblem(4096, 4096, 4096), GemmProblem(8192, 8192, 8192)]
    slot = dispatched.slot(problems, resolve, "GPU A", "sm_90")
    kernel, library, default = (slot.at(p) for p in problems)
    assert {p.impl.name for p in (kernel, library, default)} == {"dispatch"}
    assert (kernel.chosen, kernel.impl.kind, kernel.impl.same_as) == ("tma_ffma", "kernel", "tma_ffma")
    assert kernel.impl.defaults == registry.get("tma_ffma").resolve(TMA) == kernel.params
    assert kernel.line("1024x1024x1024").startswith("dispatch at 1024x1024x1024: tma_ffma BM=128,BN=256,BK=16")
    assert (default.chosen, default.params) == ("bigtile", registry.get("bigtile").defaults)
    assert library.record == {"impl": "cublas", "where": "table: dispatch.json: GPU A, sgemm fp32 4096x4096x4096"}
    assert registry.get("tma_ffma").name == "tma_ffma", "the registry keeps its own entries"


def test_hgemm_stand_ins_are_the_ops_own_implementations(no_tuning):
    """16-bit problems: each stand-in is the hgemm kernel (its DTYPE flag and all) or hgemm's cuBLAS."""
    h100 = _shipped_h100()
    problems = [GemmProblem(*e["shape"], 1.0, 0.0, "bf16") for e in h100["entries"]
                if e["op"] == "hgemm" and e["dtype"] == "bf16"]
    slot = dispatched.slot(problems, resolve, h100["gpu"], h100["arch"])
    kinds = set()
    for problem in problems:
        pick = slot.at(problem)
        name, params, _ = resolve(problem, h100["gpu"], h100["arch"])
        assert (pick.impl.op, pick.impl.name, pick.impl.same_as) == ("hgemm", "dispatch", name)
        chosen = registry.get(name, "hgemm")
        assert pick.impl.defaults == (chosen.resolve(params) if chosen.kind == "kernel" else {})
        kinds.add(pick.impl.kind)
    assert kinds == {"kernel", "baseline"}, "the H100 bf16 table picks both a kernel and cuBLAS somewhere"


def test_a_library_choice_is_the_library_under_another_name():
    cublas = registry.get("cublas", "sgemm")
    stand_in = dispatched.stand_in("sgemm", "cublas", {})
    assert (stand_in.name, stand_in.kind, stand_in.same_as) == ("dispatch", "baseline", "cublas")
    assert stand_in._enqueue is cublas._enqueue and stand_in._available is cublas._available
    assert stand_in.unavailable_reason() == cublas.unavailable_reason()
    assert registry.get("cublas", "sgemm") is cublas


def test_split_and_place_keep_the_users_order():
    assert dispatched.split("triton,cublas") == ("triton,cublas", None)
    assert dispatched.split("triton, dispatch,cublas") == ("triton,cublas", ("cublas",))
    assert dispatched.split("dispatch") == ("", ())
    impls = [SimpleNamespace(name=n) for n in ("triton", "cublas", "copy")]
    slot = dispatched.Slot({})
    assert [i.name for i in dispatched.place(impls, slot, ("cublas",))] == ["triton", "dispatch", "cublas", "copy"]
    assert [i.name for i in dispatched.place(impls, slot, ())][-1] == "dispatch"


def _fake_gpu(monkeypatch, gpu="GPU A", arch="sm_90"):
    """A device that is never touched: every point is made by a fake run_point that records which
    implementation it was given."""
    from gemmlab.cuda import device as cuda_device

    given = []
    monkeypatch.setattr(cuda_device, "device", lambda index=0: SimpleNamespace(create_stream=lambda: None))
    monkeypatch.setattr(cuda_device, "info", lambda index=0: SimpleNamespace(name=gpu, arch=arch, sm_count=132))
    monkeypatch.setattr(ops.get("sgemm"), "timing_inputs", lambda problem, seed: None, raising=False)

    def run_point(impl, problem, stream, options, inputs=None, done=None):
        given.append((impl.name, getattr(impl, "same_as", None), problem.shape))
        return harness_bench.Point(impl.name, impl.kind, problem, "PASS", params=dict(impl.defaults),
                                   stats=Stats((1.0 if impl.kind == "kernel" else 2.0,)))

    monkeypatch.setattr(harness_bench, "run_point", run_point)
    return given


def test_a_run_times_each_problems_pick_in_one_table(table, monkeypatch):
    given = _fake_gpu(monkeypatch)
    problems = [GemmProblem(1024, 1024, 1024), GemmProblem(4096, 4096, 4096)]
    slot = dispatched.slot(problems, resolve, "GPU A", "sm_90")
    points = harness_bench.run_bench([registry.get("cublas", "sgemm"), slot], problems, harness_bench.BenchOptions())
    assert given == [("cublas", None, "1024x1024x1024"), ("dispatch", "tma_ffma", "1024x1024x1024"),
                     ("cublas", None, "4096x4096x4096"), ("dispatch", "cublas", "4096x4096x4096")]
    rows = [p.row() for p in points if p.impl == "dispatch"]
    assert [r["extra"]["dispatch"]["impl"] for r in rows] == ["tma_ffma", "cublas"]
    assert rows[0]["params"] == registry.get("tma_ffma").resolve(TMA) and rows[0]["impl_kind"] == "kernel"
    tables = bench_tables(points)
    share = next(t for t in tables if str(t.title).startswith("share of cublas"))
    assert [str(c) for c in share.columns[0]._cells] == ["cublas", "dispatch"]
    assert [c._cells[1] for c in share.columns[1:]] == ["200.0%", "100.0%"]
    assert not any(str(t.title).startswith("speedup") for t in tables), "dispatch climbs no ladder"


def test_bench_cli_prints_each_choice_and_stores_one_run(table, monkeypatch, tmp_path, capsys):
    _fake_gpu(monkeypatch)
    db = tmp_path / "r.db"
    code = main(["bench", "--impl", "dispatch,cublas", "--sizes", "1024,1024x1024x1023,4096", "--db", str(db)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "dispatch at 1024x1024x1024: tma_ffma BM=128,BN=256" in out
    assert "dispatch at 1024x1024x1023: cublas (table: dispatch.json: GPU A, sgemm fp32 1024x1024x1024; skipped " \
           "tma_ffma" in out
    with ResultStore(db) as store:
        (run,) = store.runs()
        rows = store.results(run["id"])
    shapes = ((1024, 1024), (1024, 1023), (4096, 4096))
    assert [(r["impl"], r["M"], r["K"]) for r in rows] == [(n, m, k) for m, k in shapes for n in ("dispatch", "cublas")]
    assert [r["extra"]["dispatch"]["impl"] for r in rows if r["impl"] == "dispatch"] == ["tma_ffma", "cublas", "cublas"]


@pytest.mark.parametrize("args,needle", [
    (["bench", "--impl", "dispatch", "--params", "BM=64"], "--params is for a named kernel: dispatch runs"),
    (["bench", "--impl", "dispatch,naive,vectorize", "--params", "BM=64"], "exactly one kernel"),
    (["verify", "--impl", "dispatch"], "--impl dispatch is for gemmlab bench"),
])
def test_dispatch_refusals_are_one_line(capsys, args, needle):
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: ") and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
