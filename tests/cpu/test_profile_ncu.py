"""Real Nsight Compute output captured on an H200 (tests/fixtures/ncu, see capture.sh there):
the metric names against `ncu --query-metrics`, the raw CSV parsed into numbers, and ncu's
occupancy against gemmlab's calculator."""
from pathlib import Path

import pytest

from gemmlab.profile import ncu as N
from gemmlab.profile.occupancy import occupancy

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
# Not hardware counters: ncu computes them (launch statistics, the occupancy calculation),
# so `--query-metrics` does not list them; they must come back as numbers in a real CSV.
COMPUTED_BY_NCU = {"sm__maximum_warps_per_active_cycle_pct"}
# Added after the fixtures were captured (capture.sh lists every metric gemmlab asks for, so the
# next capture covers them): the tensor pipe, read on H100s by scripts/hopper_profile.sh (58% for
# rung 2, 91% for rung 5 at 4096^3, docs/tensor-cores.md). tests/gpu/test_profile.py checks that
# a real ncu run returns it as a number.
# The L2 throughput (session 24) likewise; ncu's SpeedOfLight section computed it in the
# fixture's rung-6 capture (checked below), so the name is one this ncu knows on Hopper.
L2_THROUGHPUT = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
NOT_IN_FIXTURE = {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", L2_THROUGHPUT}
NOT_IN_FIXTURE_KEYS = {m.key for m in N.METRICS if m.name in NOT_IN_FIXTURE}


def raw(name: str) -> list[N.KernelResult]:
    return N.parse_raw_csv((FIX / f"raw-{name}.csv").read_text())


def test_fixture_is_from_hopper():
    text = (FIX / "versions.txt").read_text()
    assert "NVIDIA H200" in text and "Nsight Compute" in text
    assert "GH100" in (FIX / "query-metrics.filtered.txt").read_text().splitlines()[0]


def test_every_metric_name_is_known_to_ncu_on_hopper():
    bases = N.parse_query_metrics((FIX / "query-metrics.filtered.txt").read_text())
    full = N.parse_query_metrics((FIX / "query-metrics-suffix.filtered.txt").read_text())
    sections = N.parse_raw_csv((FIX / "sections-vectorize.csv").read_text())[0]
    assert NOT_IN_FIXTURE <= set(N.metric_names()), "a metric no longer asked for: drop it from NOT_IN_FIXTURE"
    assert 0 < sections.value(L2_THROUGHPUT) <= 100  # ncu's SpeedOfLight section has it on Hopper
    for name in N.metric_names():
        if name in NOT_IN_FIXTURE:
            assert N.base_name(name) not in bases, f"{name} is in the fixture now: drop it from NOT_IN_FIXTURE"
            continue
        if name.startswith("launch__") or name in COMPUTED_BY_NCU:
            assert sections.value(name) is not None, f"{name}: ncu computed no value"
            continue
        assert N.base_name(name) in bases, f"{name}: base metric not listed by ncu --query-metrics"
        assert name in full, f"{name}: suffix not listed by ncu --query-metrics-mode suffix"


def test_parse_one_launch_of_rung1():
    (r,) = raw("naive")
    assert r.kernel.startswith("void sgemm_naive<32>(int, int, int, float")
    assert r.fields["Block Size"] == "(32, 32, 1)" and r.fields["Grid Size"] == "(32, 32, 1)" and r.fields["CC"] == "9.0"
    h = r.headline()
    assert h["duration_us"] == pytest.approx(4420.96)
    assert h["registers"] == 32 and h["smem_static"] == 0 and h["smem_dynamic"] == 0
    assert h["theoretical_occupancy_pct"] == 100 and 0 < h["achieved_occupancy_pct"] <= 100
    assert all(isinstance(v, float) for k, v in h.items() if k not in NOT_IN_FIXTURE_KEYS), h
    assert r.units["gpu__time_duration.sum"] == "ns" and r.units["dram__bytes.sum.per_second"] == "byte/s"
    # numbers printed with thousands separators ("1,980,000") are read as numbers
    assert r.value("sm__cycles_elapsed.avg.per_second") > 1e9
    assert r.value("launch__grid_size") == 1024 and r.value("launch__block_size") == 1024


def test_parse_split_k_gemm_as_two_kernels():
    main, reduce = raw("hopper_simt")
    assert "sgemm_hopper_simt<128, 256, 16" in main.kernel and reduce.kernel.startswith("sgemm_splitk_reduce(")
    assert main.fields["Grid Size"] == "(32, 1, 4)"  # 32 tiles x 4 K-slices at 1024^3
    assert main.headline()["smem_dynamic"] == 99328 and main.headline()["registers"] == 241
    assert main.headline()["duration_us"] > reduce.headline()["duration_us"] > 0


def test_parse_cublas_picked_by_nvtx():
    (r,) = raw("cublas")
    assert "gemmlab_profile" in next(v for k, v in r.fields.items() if "Push/Pop" in k)
    assert r.kernel.startswith("sm80_xmma_gemm_f32f32") and "ffma" in r.kernel
    assert r.headline()["registers"] == 224


def test_rung6_has_vectorized_shared_loads_and_fewer_stalls_than_rung1():
    (naive,), (vec,) = raw("naive"), raw("vectorize")
    assert vec.headline()["duration_us"] * 10 < naive.headline()["duration_us"]
    assert vec.headline()["warp_cycles_per_issue"] < naive.headline()["warp_cycles_per_issue"]
    assert vec.headline()["smem_static"] == 8192


def test_sections_csv_skips_the_log_lines_and_agrees_with_the_metrics_run():
    text = (FIX / "sections-vectorize.csv").read_text()
    assert text.startswith("==") and "GEMMLAB_TARGET" in text  # ncu's and the target's lines before the table
    (s,) = N.parse_raw_csv(text)
    (r,) = raw("vectorize")
    for name in ("launch__registers_per_thread", "sm__maximum_warps_per_active_cycle_pct",
                 "launch__shared_mem_per_block_static"):
        assert s.value(name) == r.value(name)


@pytest.mark.parametrize("name", ["naive", "vectorize", "hopper_simt", "cublas", "hgemm-persistent"])
def test_calculator_agrees_with_ncu(name):
    for r in raw(name):
        m = r.metrics
        o = occupancy("sm_90", int(m["launch__block_size"]), int(m["launch__registers_per_thread"]),
                      int(m["launch__shared_mem_per_block_static"]), int(m["launch__shared_mem_per_block_dynamic"]),
                      int(m["launch__barrier_count"]))
        # ncu caps the barrier limit at the block cap; 16 barriers (rung 5) allow 4 blocks
        assert min(o.blocks_by.get("barriers", 32), 32) == m["launch__occupancy_limit_barriers"], r.kernel
        assert 100 * o.occupancy == pytest.approx(m["sm__maximum_warps_per_active_cycle_pct"]), r.kernel
        assert o.blocks_by["registers"] == m["launch__occupancy_limit_registers"]
        assert o.blocks_by["threads"] == m["launch__occupancy_limit_warps"]
        assert o.blocks_by["blocks per SM"] == m["launch__occupancy_limit_blocks"]
        # shared memory: ncu counts against the carve-out the driver chose (no larger than the
        # occupancy needs), gemmlab against the largest; never fewer blocks than ncu's
        assert o.blocks_by["shared memory"] >= m["launch__occupancy_limit_shared_mem"]


def test_a_real_hgemm_page_gives_the_tensor_pipe():
    """raw-hgemm-persistent.csv: `gemmlab profile --op hgemm --impl persistent --dtype bf16` at 2048^3
    on an H100 (capture.sh's hgemm part, session 17): the metric the SGEMM fixtures predate is read
    from a real page as a share, beside the kernel's own launch figures."""
    (r,) = raw("hgemm-persistent")
    assert r.kernel.startswith("void hgemm_persistent<1, 0, 0, 0, 256, 4, 2, 1, 8, 128, 2, 0")
    h = r.headline()
    assert 50 < h["tensor_pipe_pct"] <= 100 and h["tensor_pipe_pct"] > h["dram_throughput_pct"]
    assert h["registers"] == 168 and h["smem_dynamic"] == 230400
    # every metric but the L2 throughput, asked for only since session 24 (tests/gpu/test_profile.py reads it)
    assert all(isinstance(v, float) for k, v in h.items() if k != "l2_throughput_pct"), h
