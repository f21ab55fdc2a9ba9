import pytest

from gemmlab.harness.timing import Stats, samples_needed


def test_stats():
    s = Stats((3.0, 1.0, 2.0, 10.0))
    assert s.median == 2.5 and s.min == 1.0 and s.mean == 4.0 and s.count == 4
    assert s.stdev == pytest.approx(4.083, rel=1e-3)
    assert Stats((2.0,)).stdev == 0.0
    assert s.as_fields()["t_median_ms"] == 2.5


def test_samples_needed():
    assert samples_needed(10.0, 10, 50.0, 1000) == 10  # long kernel: the repeat count rules
    assert samples_needed(0.01, 10, 50.0, 1000) == 1000  # tiny kernel: capped
    assert samples_needed(0.1, 10, 50.0, 1000) == 500
    assert samples_needed(0.0, 10, 50.0, 1000) == 1000
