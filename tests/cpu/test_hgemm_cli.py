"""`gemmlab bench/verify/list/compile --op hgemm` without a GPU: one clear line and exit 2 for
bad input (--dtype elsewhere, an unknown dtype, a shape a rung refuses); the hgemm rows and
tables from fake points."""
import pytest

from gemmlab.errors import BadArgumentError

from gemmlab.harness.bench import BenchOptions
from gemmlab.cli import main
from gemmlab.cuda.device import gpu_available
from gemmlab.harness.bench import Point as HgemmPoint, run_point
from gemmlab.ops.hgemm import hgemm_bytes
from gemmlab.problem import GemmProblem
from gemmlab.harness.tables import bench_tables, to_markdown
from gemmlab.harness.timing import Stats

HAS_GPU = gpu_available()[0]


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("args,needle", [
    (["bench", "--dtype", "bf16"], "--dtype is for --op hgemm"),
    (["bench", "--op", "reduce", "--dtype", "fp16"], "--dtype is for --op hgemm"),
    (["verify", "--dtype", "fp16"], "--dtype is for --op hgemm"),
    (["bench", "--op", "hgemm", "--dtype", "fp8"], "--dtype 'fp8': choose fp16, bf16 or tf32"),
    (["verify", "--op", "hgemm", "--dtype", "fp32"], "choose fp16, bf16 or tf32"),
    (["bench", "--op", "hgemm", "--impl", "naive"], "not hgemm"),
    (["bench", "--op", "hgemm", "--n", "5"], "--n is for --op reduce"),
    (["bench", "--op", "hgemm", "--impl", "mma_sync", "--params", "BN=96,WN=32"], "B swizzle"),
    (["verify", "--op", "hgemm", "--impl", "mma_sync", "--M", "127", "--N", "127", "--K", "127"],
     "mma_sync needs K % 8 == 0 and N % 8 == 0 (16-byte rows for cp.async); 127x127x127 has K = 127 and N = 127"),
    (["verify", "--op", "hgemm", "--impl", "all", "--M", "64", "--N", "64", "--K", "12"], "mma_sync needs K % 8"),
    (["verify", "--op", "fp64"], "choose sgemm, hgemm, bgemm or reduce"),
    (["compile", "--op", "hgemm", "--arch", "sm90"], "must look like sm_90"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, needle):
    code, out, err = run(capsys, *args)
    assert code == 2, (out, err)
    assert needle in err, err
    assert err.startswith("error: ") and "Traceback" not in err + out
    assert len(err.strip().splitlines()) == 1, err


def test_list_and_compile(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    code, out, err = run(capsys, "list", "--op", "hgemm")
    assert code == 0 and "wmma" in out and "mma_sync" in out and "cublas" in out
    code, out, err = run(capsys, "compile", "--op", "hgemm", "--arch", "sm_80", "--impl", "wmma")
    assert code == 0, err
    assert "wmma" in out


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU message")
@pytest.mark.parametrize("cmd", ["bench", "verify"])
def test_no_gpu_is_one_line(capsys, cmd):
    code, out, err = run(capsys, cmd, "--op", "hgemm", "--dtype", "bf16")
    assert code == 2 and "no GPU" in err and len(err.strip().splitlines()) == 1


def test_refused_shape_is_an_error_row_without_compiling():
    from gemmlab import registry

    p = GemmProblem(100, 100, 100, dtype="fp16")
    r = run_point(registry.get("mma_sync", "hgemm"), p, stream=None, options=BenchOptions())
    assert r.status == "ERROR" and r.reason.startswith("mma_sync needs K % 8 == 0")
    assert r.resources is None and r.stats is None


def test_rows_and_tables():
    p = GemmProblem(4096, 4096, 4096, dtype="bf16")
    assert hgemm_bytes(p) == 2 * 2 * 4096 ** 2 + 4 * 4096 ** 2
    pts = [HgemmPoint(name, kind, p, "PASS", stats=Stats((ms,))) for name, kind, ms in
           (("wmma", "kernel", 1.0), ("mma_sync", "kernel", 0.5), ("cublas", "baseline", 0.25))]
    row = pts[1].row()
    assert row["op"] == "hgemm" and row["dtype"] == "bf16"
    assert row["gflops"] == pytest.approx(2 * 4096 ** 3 / 0.5e6)
    assert row["gbps"] == pytest.approx(hgemm_bytes(p) / 0.5e6)
    text = "\n".join(to_markdown(t) for t in bench_tables(pts))
    assert "50.0%" in text and "2.00x" in text  # mma_sync: half of cuBLAS, twice wmma


def test_api_default_falls_back_only_when_unnamed():
    from gemmlab.ops.hgemm import choose_impl

    assert choose_impl(None, GemmProblem(64, 64, 64, dtype="bf16"), "sm_80") == "mma_sync"
    assert choose_impl(None, GemmProblem(64, 64, 12, dtype="bf16"), "sm_80") == "wmma"
    assert choose_impl(None, GemmProblem(64, 9, 64, dtype="fp16"), "sm_80") == "wmma"
    assert choose_impl("mma_sync", GemmProblem(64, 64, 12, dtype="fp16"), "sm_80") == "mma_sync"  # refused at launch
    # Hopper: rung 5 for any shape, rung 6 for fp32 inputs (tf32), which other GPUs refuse
    assert choose_impl(None, GemmProblem(64, 9, 64, dtype="bf16"), "sm_90") == "persistent"
    assert choose_impl(None, GemmProblem(64, 9, 64, dtype="tf32"), "sm_90") == "tf32_wgmma"
    with pytest.raises(BadArgumentError, match="tf32 on sm_90"):
        choose_impl(None, GemmProblem(64, 64, 64, dtype="tf32"), "sm_80")
