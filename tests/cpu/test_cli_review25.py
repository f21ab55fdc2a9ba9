"""Review 25's CLI findings, each refused in one line before any GPU work or database write (or
honoured): tune --devices and --seed, the tune strategy checked first, zero-sized tiles, compile
--arch, unknown implementation names and `ladder`, --alpha/--beta for reduce. No GPU needed."""
import pytest

from gemmlab import ops, registry
from gemmlab.cli import main
from gemmlab.cuda.device import gpu_available

HAS_GPU = gpu_available()[0]


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(code, out, err, needle):
    assert code == 2, (out, err)
    assert needle in err, err
    assert err.startswith("error: ") and "Traceback" not in out + err and len(err.strip().splitlines()) == 1, err


# --- 1. tune --devices ----------------------------------------------------------------------------

@pytest.mark.parametrize("devices, needle", [("-1", "GPU indices start at 0"), ("0,0", "names GPU 0 twice"),
                                             ("1,0,1", "names GPU 1 twice")])
def test_negative_and_repeated_devices_are_refused_even_in_a_dry_run(capsys, devices, needle):
    one_line(*run(capsys, "tune", "--impl", "naive", f"--devices={devices}", "--dry-run"), needle)


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two GPUs as far as tune's local path can tell; the sweep itself only records its options."""
    from gemmlab import envinfo
    from gemmlab.cuda import device
    from gemmlab.tune import tuner

    seen = {}

    def fake_tune(spec, problem, strategy, options, arch, *args, **kwargs):
        seen.update(options=options, arch=arch)
        return tuner.TuneSummary()

    def fake_env(index=0):
        seen["env_index"] = index
        return {"gpu": {"name": f"Fake GPU {index}", "compute_capability": "sm_90"}}

    monkeypatch.setattr(device, "device", lambda index=0: None)
    monkeypatch.setattr(envinfo, "gpu_count", lambda: 2)
    monkeypatch.setattr(envinfo, "collect_env", fake_env)
    monkeypatch.setattr(tuner, "tune", fake_tune)
    return seen


def test_one_named_device_is_the_one_tuned_on(capsys, tmp_path, fake_gpus):
    code, out, err = run(capsys, "tune", "--impl", "naive", "--devices", "1", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert fake_gpus["options"].devices == [1], "--devices 1 must not run on GPU 0"
    assert fake_gpus["env_index"] == 1  # the run is stored under the GPU that ran it


def test_no_device_named_keeps_the_inherited_gpu(capsys, tmp_path, fake_gpus):
    code, out, err = run(capsys, "tune", "--impl", "naive", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert fake_gpus["options"].devices == [None] and fake_gpus["env_index"] == 0


@pytest.mark.parametrize("extra", [[], ["--cluster", "local"]])
def test_a_device_past_the_gpus_present_is_refused_before_the_database(capsys, tmp_path, fake_gpus, monkeypatch,
                                                                     extra):
    if extra:
        pytest.importorskip("distributed")
        from gemmlab.tune import cluster

        monkeypatch.setattr(cluster, "connect", lambda *a, **k: pytest.fail("connected with a GPU not there"))
    db = tmp_path / "r.db"
    one_line(*run(capsys, "tune", "--impl", "naive", "--devices", "0,2", "--db", str(db), *extra),
             "--devices 0,2: this machine has 2 GPU(s) (0..1)")
    assert not db.exists()


def test_a_worker_is_pinned_through_the_parents_visible_devices(monkeypatch):
    from gemmlab.tune.worker import visible_id

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert visible_id(1) == "5", "index 1 of what this process sees is GPU 5"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_id(1) == "1"


# --- 2. tune --seed, and the strategy before the GPU ------------------------------------------------

@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_a_seed_optuna_refuses_is_refused_by_the_cli(capsys, seed):
    one_line(*run(capsys, "tune", "--impl", "naive", "--strategy", "bayes", f"--seed={seed}", "--dry-run"), "--seed")


def test_the_largest_seed_is_taken(capsys):
    # the random strategy takes the same seed and needs no Optuna (CI installs the test extra only)
    code, out, err = run(capsys, "tune", "--impl", "naive", "--strategy", "random", f"--seed={2**32 - 1}", "--dry-run")
    assert code == 0, err


def test_a_missing_optuna_is_found_before_the_gpu_and_the_database(capsys, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "optuna" else real(name, *a))
    db = tmp_path / "r.db"
    one_line(*run(capsys, "tune", "--impl", "naive", "--strategy", "bayes", "--db", str(db)), "needs Optuna")
    assert not db.exists()


# --- 3. zero-sized tiles ----------------------------------------------------------------------------

# Every parameter that sizes a tile, a thread's share of one, or a block: 0 is no kernel.
SIZES = {"BLOCK", "BM", "BN", "BK", "TM", "TN", "WM", "WN", "WNITER", "NT", "NUM_THREADS", "TS", "RM", "RN", "D", "S",
         "DM", "DN", "STAGES", "THREADS", "ELEMS", "UNROLL"}


@pytest.mark.parametrize("spec", registry.kernels(), ids=lambda s: f"{s.op}-{s.name}")
def test_no_tile_size_may_be_zero(spec):
    for param in (p.name for p in spec.params if p.name in SIZES):
        assert spec.failed_constraints({**spec.defaults, param: 0}), f"{spec.name} takes {param}=0"


@pytest.mark.parametrize("args", [["--impl", "vectorize", "--params", "BK=0"],
                                  ["--impl", "autotuned", "--params", "BM=0"],
                                  ["--impl", "double_buffering", "--params", "BM=0"],
                                  ["--op", "hgemm", "--impl", "wmma", "--params", "BK=0"],
                                  ["--op", "bgemm", "--impl", "batched_pipeline", "--params", "BK=0"]])
def test_a_zero_tile_is_one_line(capsys, args):
    one_line(*run(capsys, "bench", *args), "must be >= 1")


def test_tune_drops_zero_tiles(capsys):
    code, out, err = run(capsys, "tune", "--impl", "vectorize", "--param", "BK=0", "--dry-run")
    assert code == 0, err
    assert "1 points, 0 kept" in out.replace("\n", " ") and "must be >= 1" in out


# --- 4. compile --arch ------------------------------------------------------------------------------

@pytest.mark.parametrize("arch, needle", [("sm_52", "is not supported"), ("sm_9x", "must look like sm_90"),
                                          ("sm_", "must look like sm_90"), ("sm_80a", "is not supported"),
                                          ("sm_90f", "is not supported"), ("sm_70", "is not supported"),
                                          ("sm_090", "must look like sm_90")])
def test_an_arch_gemmlab_cannot_build_for_is_one_line_before_any_compilation(capsys, arch, needle):
    code, out, err = run(capsys, "compile", "--arch", arch)
    one_line(code, out, err, needle)
    assert "sm_80" in err and "sm_NNa from sm_90" in err and "FAILED" not in out


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90", "sm_90a"])  # sm_75 built the first rungs before
def test_the_usual_archs_are_taken(capsys, tmp_path, monkeypatch, arch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    code, out, err = run(capsys, "compile", "--arch", arch, "--impl", "naive")
    assert code == 0, err


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU: compile takes its architecture")
def test_compile_without_a_gpu_says_to_pass_arch(capsys):
    one_line(*run(capsys, "compile", "--impl", "naive"), "pass --arch (e.g. --arch sm_90)")


# --- 5. unknown names, and `ladder` -----------------------------------------------------------------

def test_an_unknown_name_lists_its_ops_names_whole(capsys):
    code, out, err = run(capsys, "bench", "--impl", "NAIVE")
    one_line(code, out, err, "did you mean 'naive'?")
    assert "gemmlab list --op sgemm" in err and "interleaved" not in err  # reduce's names are not sgemm's
    assert "triton" in err and "characters)" not in err, "the line is cut"
    code, out, err = run(capsys, "bench", "--op", "reduce", "--impl", "nope")
    one_line(code, out, err, "gemmlab list --op reduce: interleaved")
    assert "vectorize" not in err


def test_ladder_is_a_keyword_for_every_command():
    rungs = [k for k in registry.kernels("sgemm") if k.rung is not None]
    assert registry.select("ladder", op="sgemm") == rungs
    assert registry.select("ladder,cublas,naive", op="sgemm") == rungs + [registry.get("cublas")]
    hgemm = ops.get("hgemm")
    fp16 = [i.name for i in hgemm.select("ladder", "fp16")]
    assert "tf32_wgmma" not in fp16 and "wmma" in fp16, "ladder keeps what takes the dtype, as all does"
    assert "tf32_wgmma" in [i.name for i in hgemm.select("ladder,tf32_wgmma", "fp16")]  # named: kept


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU: bench would run")
def test_bench_takes_ladder(capsys, tmp_path):
    one_line(*run(capsys, "bench", "--impl", "ladder", "--sizes", "64", "--db", str(tmp_path / "r.db")), "no GPU")


# --- 6. --alpha/--beta for reduce -------------------------------------------------------------------

@pytest.mark.parametrize("command", ["bench", "verify", "profile"])
@pytest.mark.parametrize("option", ["--alpha", "--beta"])
def test_scalars_for_reduce_are_refused(capsys, command, option):
    one_line(*run(capsys, command, "--op", "reduce", option, "2"), f"{option} is for the GEMM ops")


def test_the_gemm_scalars_keep_their_defaults():
    bench = ops.shape_args("sgemm", M=8, N=8, K=8, alpha=None, beta=None)
    assert (bench.alpha, bench.beta) == (1.0, 0.0)
    verify = ops.shape_args("sgemm", M=8, N=8, K=8, alpha=None, beta=None, scalars=(1.5, -0.75))
    assert (verify.alpha, verify.beta) == (1.5, -0.75)
    assert ops.shape_args("hgemm", M=8, N=8, K=8, alpha=2.0, beta=None).alpha == 2.0


def test_bench_api_refuses_an_alpha_even_of_one(capsys):
    one_line(*run(capsys, "bench", "--api", "sgemm", "--alpha", "1"), "--alpha: not taken with --api")
