"""`gemmlab bench/verify/list --op reduce` without a GPU: one clear line and exit 2 for bad
input or no GPU; the reduce tables (time, GB/s, share of copy, share of CUB) from fake points."""
import pytest

from gemmlab.cli import main
from gemmlab.cuda.device import gpu_available
from gemmlab.harness.bench import Point as ReducePoint
from gemmlab.harness.timing import Stats
from gemmlab.ops.reduce import OP as REDUCE
from gemmlab.problem import ReduceProblem

measure_order = REDUCE.measure_order

HAS_GPU = gpu_available()[0]


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("args,needle", [
    (["bench", "--op", "reduce", "--n", "abc"], "not an element count"),
    (["bench", "--op", "reduce", "--n", "0"], ">= 1"),
    (["bench", "--op", "reduce", "--impl", "nope"], "unknown kernel 'nope'"),
    (["bench", "--op", "reduce", "--impl", "naive"], "not reduce"),
    (["bench", "--op", "reduce", "--impl", "shuffle", "--params", "THREADS=100"], "power of two"),
    (["bench", "--op", "reduce", "--impl", "shuffle", "--params", "XX=1"], "no parameter 'XX'"),
    (["bench", "--op", "reduce", "--impl", "shuffle,sequential", "--params", "ELEMS=2"], "exactly one kernel"),
    (["verify", "--op", "reduce", "--n", "2^"], "not an element count"),
    (["verify", "--op", "reduce", "--impl", "cublas"], "not reduce"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, needle):
    code, out, err = run(capsys, *args)
    assert code == 2, (out, err)
    assert needle in err
    assert err.startswith("error: ") and "Traceback" not in err + out
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU message")
@pytest.mark.parametrize("cmd", ["bench", "verify"])
def test_no_gpu_is_one_line_exit_2(capsys, tmp_path, cmd):
    args = [cmd, "--op", "reduce", "--n", "1024"] + (["--db", str(tmp_path / "r.db")] if cmd == "bench" else [])
    code, out, err = run(capsys, *args)
    assert code == 2 and err.startswith("error: no GPU") and len(err.strip().splitlines()) == 1


def test_list_reduce(capsys):
    code, out, _ = run(capsys, "list", "--op", "reduce")
    assert code == 0
    for name in ("interleaved", "unroll_last_warp", "shuffle", "complete_unroll", "grid_stride_vec4", "single_pass",
                 "tile_queue", "cub", "torch", "copy"):
        assert name in out
    assert "vectorize" not in out


def _point(impl, kind, n, ms, nbytes_per=4, status="PASS"):
    return ReducePoint(impl, kind, ReduceProblem(n), status, stats=Stats((ms,) * 3), bytes_moved=nbytes_per * n,
                       grids=[1])


def test_tables_and_markdown():
    from gemmlab.harness.tables import bench_tables
    from gemmlab.harness.tables import failures_table, to_markdown

    n = 1 << 20
    pts = [_point("copy", "baseline", n, 0.004, 8), _point("cub", "baseline", n, 0.004),
           _point("shuffle", "kernel", n, 0.008), _point("single_pass", "kernel", n, 0.002),
           ReducePoint("sequential", "kernel", ReduceProblem(n), "FAIL", reason="off by 1")]
    tables = bench_tables(pts)
    titles = [t.title for t in tables]
    assert len(tables) == 5 and "time" in titles[0] and "GB/s" in titles[1] and "copy" in titles[2]
    assert "cub" in titles[3] and "speedup" in titles[4]
    md = {t.title: to_markdown(t) for t in tables}
    gbps = md[titles[1]]
    assert "| single_pass | 2,097 |" in gbps  # 4 MiB in 2 us
    assert "| copy | 2,097 |" in gbps  # 8 MiB in 4 us
    assert "| single_pass | 100.0% |" in md[titles[2]]
    assert "| single_pass | 200.0% |" in md[titles[3]]
    assert "| shuffle | 50.0% |" in md[titles[3]]
    assert "| single_pass | 4.00x |" in md[titles[4]]
    assert "| sequential | FAIL |" in md[titles[0]]
    # ladder rows first, then cub, torch, copy
    rows = [line.split("|")[1].strip() for line in md[titles[0]].splitlines()[4:]]
    assert rows == ["shuffle", "single_pass", "sequential", "cub", "copy"]
    assert failures_table(pts) is not None


def test_rows_fit_the_store(tmp_path):
    from gemmlab.store import ResultStore

    p = _point("single_pass", "kernel", 1000, 0.003)
    p.shares = {"share_copy": 0.5, "share_cub": 1.2}
    with ResultStore(tmp_path / "r.db") as store:
        run_id = store.start_run("bench", "test")
        store.add_result(run_id, **p.row())
        (row,) = store.results(op="reduce")
    assert row["M"] == 1000 and row["N"] == 1 and row["K"] == 1 and row["impl"] == "single_pass"
    assert row["gbps"] == pytest.approx(4000 / 3e3)
    assert row["extra"]["share_cub"] == 1.2 and row["extra"]["bytes"] == 4000


def test_measure_order_puts_the_references_first():
    from gemmlab import registry

    impls = registry.select("all", op="reduce")
    order = [i.name for i in measure_order(impls)]
    assert order[:2] == ["copy", "cub"] and order[2] == "interleaved" and len(order) == len(impls)
