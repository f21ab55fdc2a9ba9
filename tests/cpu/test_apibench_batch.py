"""The host-time batch of `gemmlab bench --api` shrinks for long calls, so a row's rounds do not
spend most of the run draining the GPU's queue, and never below a size the clock resolves."""
from gemmlab import apibench


def test_short_calls_keep_the_full_batch():
    assert apibench.host_batch(5e-6) == apibench.HOST_BATCH
    assert apibench.host_batch(0.0) == apibench.HOST_BATCH


def test_long_calls_queue_at_most_the_drain_budget():
    work_s = 0.02  # an 8192^3 SGEMM
    batch = apibench.host_batch(work_s)
    assert batch < apibench.HOST_BATCH
    assert batch * work_s <= apibench.DRAIN_S


def test_the_batch_never_falls_below_ten():
    assert apibench.host_batch(5.0) == 10


def test_host_us_runs_each_function_batch_times_a_round():
    counts = [0, 0]
    syncs = []
    fns = [lambda: counts.__setitem__(0, counts[0] + 1), lambda: counts.__setitem__(1, counts[1] + 1)]
    hosts = apibench._host_us(fns, lambda: syncs.append(1), rounds=3, batch=7)
    assert counts == [10 + 3 * 8, 10 + 3 * 8]  # 10 warm-up calls each, then 3 rounds of 1 untimed + 7
    assert len(syncs) == 1 + 3 * 2
    assert all(h >= 0 for h in hosts)


def test_the_table_shows_the_clocks_beside_the_figures():
    rows = [apibench.Row("hgemm torch bf16", "4096x4096x4096", "torch.mm", 16.0, 690.0, "TFLOP/s", loop_mhz=1620),
            apibench.Row("hgemm torch bf16", "4096x4096x4096", "Matmul.execute()", 6.0, 660.0, "TFLOP/s", "cublas",
                         730.0, loop_mhz=1590, bench_mhz=1980, probe_us=4.9),
            apibench.Row("hgemm torch bf16", "64x64x64", "torch.mm", 16.0, 0.1, "TFLOP/s")]
    text = apibench.to_markdown(rows, "gemmlab bench --api hgemm")
    assert "| 4096x4096x4096 | torch.mm | - | 16.0 | - | 690.0 | - | - | 1620 | - |" in text
    assert "| 90% | 1590 / 1980 | 4.9 |" in text
    assert text.rstrip().splitlines()[-1].endswith("| - | - | - | - |"), "no NVML, no probe: dashes"
    assert "host probe us" in text.splitlines()[2], "the probe column is explained above the tables"


def test_a_loop_reports_its_lowest_clock_or_none_without_nvml():
    calls = []
    ((seconds, mhz, probe, top),) = apibench._loops([lambda: calls.append(1)], lambda: None, 0.01)
    assert len(calls) == 1 + apibench.LOOP_REPEATS * 5 and seconds >= 0  # a warm-up, then the loops
    assert mhz is None or mhz > 0
    assert top is None or top >= (mhz or 0)
    assert probe > 0


def test_the_probe_reads_the_hosts_speed_outside_the_timed_loops(monkeypatch):
    """One reading just before each loop, outside its timed span (the clock read after the
    reading, the loop's calls and sync between the two clock reads); the median reported."""
    events, readings = [], iter([3.0, 9.0, 2.0])
    real_clock = apibench.time.perf_counter
    monkeypatch.setattr(apibench, "host_probe_us", lambda: events.append("p") or next(readings))
    monkeypatch.setattr(apibench.time, "perf_counter", lambda: events.append("t") or real_clock())
    ((_, _, probe, _),) = apibench._loops([lambda: events.append("c")], lambda: events.append("s"), 0.01)
    assert probe == 3.0  # the median of 3.0, 9.0 and 2.0: one reading, never a mean of two phases
    assert apibench.LOOP_REPEATS % 2 == 1
    assert "".join(events) == "cs" + ("pt" + "c" * 5 + "st") * apibench.LOOP_REPEATS


def test_the_calls_loops_take_turns_and_each_keeps_its_own_figures(monkeypatch):
    """Loop by loop, every call in turn (a GPU warming over the group weighs on all alike), each
    call's median and lowest clock its own."""
    from gemmlab.cuda import nvml

    order, lows, probes = [], iter([1500, 1400, 1600, 1300, 1700, 1450]), iter([2.0, 4.0, 9.0, 4.5, 2.5, 5.0])

    class Sampler:
        def __enter__(self):
            self.min_clock, self.max_supported_clock = next(lows), 1980
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(nvml, "ClockSampler", Sampler)
    monkeypatch.setattr(apibench, "host_probe_us", lambda: next(probes))
    results = apibench._loops([lambda: order.append("a"), lambda: order.append("b")], lambda: None, 0.01)
    assert "".join(order) == "ab" + ("a" * 5 + "b" * 5) * apibench.LOOP_REPEATS
    assert [mhz for _, mhz, _, _ in results] == [1500, 1300], "each call's lowest over its own loops"
    assert [probe for _, _, probe, _ in results] == [2.5, 4.5], "each call's median over its own readings"
    assert all(top == 1980 and seconds >= 0 for seconds, _, _, top in results)


def test_a_probe_reading_is_per_repetition_of_its_workload(monkeypatch):
    ticks = iter([10.0, 10.0 + apibench.PROBE_CALLS * 2e-6])
    monkeypatch.setattr(apibench.time, "perf_counter", lambda: next(ticks))
    assert abs(apibench.host_probe_us() - 2.0) < 1e-6


def test_the_live_line_shows_the_probe_where_there_is_one():
    """The console line of each row, as `gemmlab bench --api` prints it while it runs."""
    row = apibench.Row("sgemm torch", "512x512x512", "gemmlab.sgemm(A, B)", 7.1, 19.4, "TFLOP/s", "cublas",
                       15.8, loop_mhz=1980, bench_mhz=1965, probe_us=3.5)
    line = apibench.live_line(row)
    assert line.endswith("1980 / 1965 MHz  probe 3.5 us") and "bench 15.8" in line and "7.1 us/call" in line
    row.probe_us = None
    assert apibench.live_line(row).endswith("1980 / 1965 MHz")


def test_the_work_estimate_is_a_warm_call_not_the_first():
    """The first call builds what a plan keeps (a graph, a captured library call): timed alone it
    would shrink every loop of the block to a few calls."""
    import time

    made = []

    def call():
        if not made:
            time.sleep(0.05)  # the first call: building
        made.append(1)

    seconds = apibench._work_seconds(call, lambda: None)
    assert len(made) == 1 + 5 and seconds < 0.01
