"""scripts/hgemm_variants.py without a GPU: which variants it times for the options given, starting
from the dispatch table's pick with --from-dispatch (the bench itself is replaced by a recorder)."""
import sys
from types import SimpleNamespace

import pytest

from .scripts_loader import load


def _module():
    return load("hgemm_variants.py")


@pytest.fixture
def timed(monkeypatch):
    """Runs the script's main with argv; returns {shape: [(variant name, its parameters), ...]}."""
    import gemmlab.harness.bench as bench

    seen = {}

    def fake_run_bench(impls, problems, options):
        (problem,) = problems
        seen[problem.shape] = [(i.name, dict(i.defaults)) for i in impls if i.name != "cublas"]
        seen.setdefault("C types", set()).add(problem.out_dtype)
        stats = SimpleNamespace(median=1.0)
        return [SimpleNamespace(impl=i.name, status="PASS", gflops=100.0, stats=stats) for i in impls]

    monkeypatch.setattr(bench, "run_bench", fake_run_bench)

    def run(argv, pick=None):
        mod = _module()
        if pick is not None:
            monkeypatch.setattr(mod, "dispatch_pick", lambda base, dtype, shape, out="fp32": dict(pick))
        monkeypatch.setattr(sys, "argv", ["hgemm_variants.py"] + argv)
        mod.main()
        return seen

    return run


def test_the_grid_of_the_options_given(timed, capsys):
    seen = timed(["--sizes", "4096", "--bn", "256", "--cm", "2", "--splitk", "0", "--balance", "0,1",
                  "--rows", "128x2,128x2p"])
    names = [n for n, _ in seen["4096x4096x4096"]]
    assert names == ["bal0", "defaults"], "ping-pong at BN 256 and BM 128 is refused, so left out"
    assert seen["4096x4096x4096"][0][1]["BALANCE"] == 0
    assert "| 4096 |" in capsys.readouterr().out


def test_from_dispatch_changes_only_the_options_given(timed):
    pick = {"BN": 192, "CM": 2, "STAGES": 4, "SPLITK": 0}
    seen = timed(["--sizes", "3072", "--from-dispatch", "--balance", "0,1"], pick=pick)
    variants = seen["3072x3072x3072"]
    assert [n for n, _ in variants] == ["bal0-bn192", "bn192"]
    assert all(v["BN"] == 192 and v["CM"] == 2 for _, v in variants), "the pick's tile and cluster kept"


def test_tf32_takes_no_rung5_rows(timed):
    seen = timed(["--dtype", "tf32", "--sizes", "1024", "--bn", "128", "--cm", "1", "--splitk", "1"])
    assert [n for n, _ in seen["1024x1024x1024"]] == ["bn128-s1"]


def test_rows_given_override_the_picks_arrangement(timed):
    """A ping-pong pick and --rows 128x2,128x2p: the cooperative column is measured too."""
    seen = timed(["--sizes", "4096", "--from-dispatch", "--rows", "128x2,128x2p"],
                 pick={"BN": 128, "CM": 2, "STAGES": 6, "PINGPONG": 1})
    assert [(n, v["PINGPONG"]) for n, v in seen["4096x4096x4096"]] == [("bn128-p6", 0), ("bn128-pp1-p6", 1)]


def test_a_16_bit_c_needs_16_bit_inputs(timed, capsys):
    with pytest.raises(SystemExit) as refused:
        timed(["--dtype", "tf32", "--out-dtype", "c16"])
    assert refused.value.code == 2 and "--out-dtype c16 is for 16-bit inputs" in capsys.readouterr().err
    seen = timed(["--dtype", "bf16", "--out-dtype", "c16", "--sizes", "1024", "--bn", "128", "--cm", "1"])
    assert seen["C types"] == {"bf16"}, "c16 is C in the inputs' own type"


def test_the_dispatch_pick_is_the_apis_choice_among_the_kernels_candidates(monkeypatch):
    import gemmlab.cuda.device as device
    from gemmlab import registry

    monkeypatch.setattr(device, "info", lambda index=0: SimpleNamespace(name="NVIDIA H100 80GB HBM3", arch="sm_90"))
    pick = _module().dispatch_pick(registry.get("persistent", "hgemm"), "bf16", (4096, 4096, 4096))
    assert pick["BN"] == 256 and pick["CM"] == 2, "the H100 table's best rung-5 parameters at 4096^3"
    assert not {"DTYPE", "B_KMAJOR", "A_MNMAJOR", "OUT16"} & set(pick), "the problem sets those"
    unknown = SimpleNamespace(name="some GPU", arch="sm_75")
    monkeypatch.setattr(device, "info", lambda index=0: unknown)
    assert _module().dispatch_pick(registry.get("persistent", "hgemm"), "bf16", (4096, 4096, 4096)) == {}
