"""The bgemm op without a GPU: sizes, sweep, rows, tables and one-line refusals."""
import pytest

from gemmlab.cli import main
from gemmlab.cuda.device import gpu_available
from gemmlab.errors import BadArgumentError
from gemmlab.harness.bench import Point
from gemmlab.harness.tables import bench_tables, to_markdown
from gemmlab.harness.timing import Stats
from gemmlab.ops import ShapeArgs, get
from gemmlab.ops.bgemm import OP, parse_batched, strides
from gemmlab.problem import BatchedGemmProblem

HAS_GPU = gpu_available()[0]


def test_sizes():
    assert parse_batched("8x512", None) == (8, 512, 512, 512)
    assert parse_batched("3x65x33x17", None) == (3, 65, 33, 17)
    assert parse_batched("100x200x300", 4) == (4, 100, 200, 300)
    with pytest.raises(BadArgumentError, match="BATCHxN"):
        parse_batched("100x200x300", None)
    ps = OP.problems(ShapeArgs(sizes="2x64,3x65x33x17", alpha=1.5, beta=0.5))
    assert [p.shape for p in ps] == ["2x64x64x64", "3x65x33x17"] and ps[1].beta == 0.5
    (one,) = OP.problems(ShapeArgs(M=5, N=6, K=7, batch=9))
    assert (one.batch, one.M, one.N, one.K) == (9, 5, 6, 7)
    assert get("bgemm") is OP and one.op == "bgemm"


def test_batch_without_sizes_applies_to_the_defaults_and_the_sweep():
    """--batch 7 alone: the default sizes at 7 batches each (it read them as MxNxK and failed on
    '256x128'), and verify's sweep at 7 batches (it ignored --batch; session 26's review)."""
    assert [p.shape for p in OP.problems(ShapeArgs(batch=7))] == [
        "7x128x128x128", "7x256x256x256", "7x512x512x512", "7x1024x1024x1024", "7x2048x2048x2048"]
    assert {p.batch for p in OP.sweep(ShapeArgs(batch=7))} == {7}
    assert len({p.batch for p in OP.sweep(ShapeArgs())}) > 1


def test_a_size_named_twice_is_measured_once():
    """As for the GEMM ops' --sizes: 8x512 and 8x512x512x512 are one problem."""
    assert [p.shape for p in OP.problems(ShapeArgs(sizes="8x512,8x512,8x512x512x512,2x64"))] == [
        "8x512x512x512", "2x64x64x64"]


def test_sweep_has_poisoned_and_scaled_runs():
    sweep = OP.sweep(ShapeArgs())
    assert len(sweep) == 18 and {(p.alpha, p.beta) for p in sweep} == {(1.0, 0.0), (1.5, -0.75)}
    assert any(p.batch > 65535 // 1000 for p in sweep) and any(p.M == 1 for p in sweep)


def test_work_and_strides():
    p = BatchedGemmProblem(3, 5, 7, batch=4)
    assert p.flops == 4 * 2 * 3 * 5 * 7 and p.min_bytes == 4 * 4 * (21 + 35 + 15)
    assert strides(p) == (21, 35, 15)
    with pytest.raises(BadArgumentError, match="batch"):
        BatchedGemmProblem(3, 5, 7, batch=0)


def test_rows_and_tables():
    p = BatchedGemmProblem(64, 64, 64, batch=8)
    pts = [Point("batched_pipeline", "kernel", p, "PASS", stats=Stats((0.5,))),
           Point("cublas", "baseline", p, "PASS", stats=Stats((0.25,)))]
    row = pts[0].row()
    assert row["op"] == "bgemm" and row["extra"] == {"batch": 8} and row["M"] == 64
    assert row["gflops"] == pytest.approx(8 * 2 * 64 ** 3 / 0.5e6)
    text = "\n".join(to_markdown(t) for t in bench_tables(pts))
    assert "| batched_pipeline | 50.0% |" in text and "8x64x64x64" in text


@pytest.mark.parametrize("args,needle", [
    (["bench", "--batch", "4"], "--batch is for --op bgemm"),
    (["bench", "--op", "bgemm", "--dtype", "fp16"], "--dtype is for --op hgemm"),
    (["bench", "--op", "bgemm", "--sizes", "7x8x9"], "BATCHxN"),
    (["bench", "--op", "reduce", "--sizes", "1024"], "use --n for --op reduce"),
    (["list", "--op", "bgemmm"], "choose sgemm, hgemm, bgemm or reduce"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, needle):
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_list_shows_the_ladder_and_baselines(capsys):
    assert main(["list", "--op", "bgemm"]) == 0
    out = capsys.readouterr().out
    assert "batched_pipeline" in out and "cublas" in out and "torch" in out


def test_geometry_puts_the_batch_on_z():
    from gemmlab import registry
    from gemmlab.errors import ConstraintError

    spec = registry.get("batched_pipeline", "bgemm")
    v = spec.resolve()
    g = spec.launch(BatchedGemmProblem(300, 513, 7, batch=3), v)
    assert g.grid == (-(-513 // v["BN"]), -(-300 // v["BM"]), 3) and g.block == (v["NT"], 1, 1) and g.shmem == 4 * v["STAGES"] * v["BK"] * (v["BM"] + v["PADA"] + v["BN"])
    assert spec.launch(BatchedGemmProblem(8, 8, 8, batch=70000), v).grid[2] == 65535  # the kernel loops past it
    with pytest.raises(ConstraintError):
        spec.resolve({"STAGES": 1})
