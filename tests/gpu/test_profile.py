"""`gemmlab profile` on two kernels of the ladder: every metric comes back as a number, the rows
are stored, and ncu's theoretical occupancy agrees with gemmlab's own calculator."""
import json

import pytest

from gemmlab.cli import main
from gemmlab.profile import ncu as N
from gemmlab.profile import rows, sass

pytestmark = pytest.mark.skipif(N.find_ncu() is None, reason="ncu (Nsight Compute) is not installed")


def test_profile_two_rungs_gives_every_metric(tmp_path, capsys):
    db, csv, js = tmp_path / "r.db", tmp_path / "p.csv", tmp_path / "p.json"
    code = main(["profile", "--impl", "smem_blocking,vectorize", "--M", "1024", "--N", "1024", "--K", "1024",
                 "--db", str(db), "--csv", str(csv), "--json", str(js)])
    out = capsys.readouterr()
    if code != 0 and "performance counters" in out.err:
        pytest.skip(out.err.strip())
    assert code == 0, out.err
    stored = rows.select(rows.connect(db), "profiles")
    assert [r["impl"] for r in stored] == ["smem_blocking", "vectorize"]
    for r in stored:
        assert r["status"] == "OK" and r["verified"] == 1
        for m in N.METRICS:
            assert isinstance(r[m.key], float), f"{r['impl']}: {m.key} ({m.name}) is {r[m.key]!r}"
        for name in N.metric_names():
            assert r["metrics"].get(name) is not None, f"{r['impl']}: {name} missing"
        assert r["registers"] > 0 and r["duration_us"] > 0 and 0 < r["achieved_occupancy_pct"] <= 100
        assert r["dram_bytes"] > 0 and r["flops"] >= 2 * 1024 ** 3
    small, vec = stored
    assert small["smem_static"] == 8192 and vec["smem_static"] == 8192
    assert vec["duration_us"] < small["duration_us"], "rung 6 must beat rung 3"
    # the side-by-side table, and the CSV/JSON copies
    for label in ("Achieved Occupancy (%)", "Stall MIO Throttle (cycles/inst)", "smem_blocking", "vectorize"):
        assert label in out.out
    assert csv.read_text().count("\n") == 3 and len(json.loads(js.read_text())["rows"]) == 2
    bw = rows.select(rows.connect(db), "bandwidth")
    assert len(bw) == 1 and bw[0]["gbps"] > 500


def test_ncu_theoretical_occupancy_matches_the_calculator(tmp_path, capsys):
    db = tmp_path / "r.db"
    code = main(["profile", "--impl", "blocktiling_1d,hopper_simt", "--M", "2048", "--N", "2048", "--K", "2048",
                 "--db", str(db)])
    out = capsys.readouterr()
    if code != 0 and "performance counters" in out.err:
        pytest.skip(out.err.strip())
    assert code == 0, out.err
    from gemmlab import registry
    from gemmlab.cuda.device import info
    from gemmlab.problem import GemmProblem
    from gemmlab.profile.analysis import analyze

    stored = rows.select(rows.connect(db), "profiles")
    assert {r["impl"] for r in stored} == {"blocktiling_1d", "hopper_simt"}, "a row per kernel profiled"
    checked = set()
    for r in stored:
        if r["kernel"] and "splitk" in r["kernel"]:
            continue
        a = analyze(registry.get(r["impl"]), r["params"], info().arch, GemmProblem(2048, 2048, 2048),
                    with_sass=False)
        assert a.resources.registers == r["registers"]
        assert 100 * a.occupancy.occupancy == pytest.approx(r["theoretical_occupancy_pct"], abs=0.5), r["impl"]
        checked.add(r["impl"])
    assert checked == {"blocktiling_1d", "hopper_simt"}, "each kernel's own launch compared, not only a helper's"


@pytest.mark.skipif(sass.find_tool() is None, reason="no cuobjdump or nvdisasm")
def test_analyze_on_the_gpu_machine(capsys):
    assert main(["analyze", "--impl", "vectorize", "--no-store"]) == 0
    assert "SASS instruction mix" in capsys.readouterr().out


def test_profile_reduce_rungs(tmp_path, capsys):
    db = tmp_path / "r.db"
    code = main(["profile", "--op", "reduce", "--impl", "interleaved,shuffle", "--n", str(1 << 22), "--db", str(db)])
    out = capsys.readouterr()
    if code != 0 and "performance counters" in out.err:
        pytest.skip(out.err.strip())
    assert code == 0, out.err
    stored = rows.select(rows.connect(db), "profiles")
    assert {r["impl"] for r in stored} == {"interleaved", "shuffle"}
    for r in stored:
        assert r["op"] == "reduce" and r["elements"] == 1 << 22 and r["status"] == "OK" and r["verified"] == 1
        for m in N.METRICS:
            assert isinstance(r[m.key], float), f"{r['impl']}: {m.key}"
    first = [r for r in stored if r["extra"]["label"] == r["impl"]]
    assert len(first) == 2  # each sum's first pass, then its later passes as impl:passN


def test_profile_tensor_core_rungs_and_cublas(tmp_path, capsys):
    """--op hgemm: rung 5 built for bf16, B given transposed and a bf16 C, and cuBLAS on the same
    problem; the tensor pipe reads busy for rung 5 and idle for an FFMA rung's profile above."""
    from gemmlab.cuda.device import info

    if info().arch != "sm_90":
        pytest.skip("rung 5 (wgmma) needs sm_90")
    db = tmp_path / "r.db"
    code = main(["profile", "--op", "hgemm", "--impl", "persistent,cublas", "--dtype", "bf16", "--layout", "nt",
                 "--out-dtype", "bf16", "--M", "2048", "--N", "2048", "--K", "2048", "--db", str(db)])
    out = capsys.readouterr()
    if code != 0 and "performance counters" in out.err:
        pytest.skip(out.err.strip())
    assert code == 0, out.err
    stored = rows.select(rows.connect(db), "profiles")
    main_rows = {r["impl"]: r for r in stored if r["extra"]["label"] == r["impl"]}
    assert set(main_rows) == {"persistent", "cublas"}
    for r in main_rows.values():
        assert r["op"] == "hgemm" and (r["dtype"], r["layout"], r["out_dtype"]) == ("bf16", "nt", "bf16")
        assert r["status"] == "OK" and r["flops"] == 2 * 2048 ** 3
        for m in N.METRICS:
            assert isinstance(r[m.key], float), f"{r['impl']}: {m.key} ({m.name}) is {r[m.key]!r}"
    ours = main_rows["persistent"]
    assert ours["verified"] == 1 and "hgemm_persistent" in ours["kernel"]
    assert (ours["params"]["DTYPE"], ours["params"]["B_KMAJOR"], ours["params"]["OUT16"]) == (1, 1, 1)
    assert ours["tensor_pipe_pct"] > 40, "rung 5 keeps the tensor cores busy"
    assert "Tensor Pipe Busy (% of peak)" in out.out and "2048x2048x2048 nt C bf16" in out.out


def test_profile_source_splits_rung5s_warp_samples_at_its_k_loop(tmp_path, capsys):
    """--source: ncu's warp-state samples per SASS instruction, lined up with the disassembly of
    the same kernel and split at the K loop analyze finds (profile/source.py)."""
    from gemmlab.cuda.device import info

    if info().arch != "sm_90":
        pytest.skip("rung 5 (wgmma) needs sm_90")
    if sass.find_tool() is None:
        pytest.skip("no cuobjdump or nvdisasm to line the samples up with")
    db = tmp_path / "r.db"
    code = main(["profile", "--op", "hgemm", "--impl", "persistent", "--dtype", "bf16", "--M", "4096", "--N", "4096",
                 "--K", "4096", "--source", "--db", str(db)])
    out = capsys.readouterr()
    if code != 0 and "performance counters" in out.err:
        pytest.skip(out.err.strip())
    assert code == 0, out.err
    (row,) = rows.select(rows.connect(db), "profiles")
    s = row["extra"]["source"]
    assert s["samples"] > 0 and s["aligned"], s.get("note")
    loop, rest = s["regions"]["main loop"], s["regions"]["outside the main loop"]
    assert loop["samples_pct"] + rest["samples_pct"] == pytest.approx(100.0)
    assert loop["reasons"] and rest["reasons"] and s["hottest"]
    assert "warp samples; main loop 0x" in out.out and "outside the main loop:" in out.out


def test_profile_dispatch_profiles_what_the_api_runs(tmp_path, capsys):
    db = tmp_path / "r.db"
    code = main(["profile", "--op", "hgemm", "--impl", "dispatch,persistent", "--from-table", "--dtype", "bf16",
                 "--M", "1000", "--N", "3000", "--K", "2000", "--db", str(db)])
    out = capsys.readouterr()
    if code != 0 and "performance counters" in out.err:
        pytest.skip(out.err.strip())
    assert code == 0, out.err
    (row,) = [r for r in rows.select(rows.connect(db), "profiles") if r["extra"]["label"] == "dispatch"]
    assert row["impl"] == "dispatch" and row["status"] == "OK" and row["duration_us"] > 0
    assert "dispatch at 1000x3000x2000: " in out.out
    if row["impl_kind"] == "kernel":
        assert row["verified"] == 1
    from gemmlab.apichoice import table_params
    from gemmlab.cuda.device import info
    from gemmlab.problem import GemmProblem

    (ours,) = [r for r in rows.select(rows.connect(db), "profiles") if r["extra"]["label"] == "persistent"]
    want, _ = table_params(GemmProblem(1000, 3000, 2000, dtype="bf16"), "persistent", info().name, info().arch)
    if not want:
        pytest.skip(f"the dispatch table has no rung-5 entry for {info().name}")
    assert ours["status"] == "OK" and all(ours["params"][k] == v for k, v in want.items()), "--from-table's pick"
    assert row["extra"]["chosen"]["impl"] in ("persistent", "cublas"), "which implementation dispatch stood for"
