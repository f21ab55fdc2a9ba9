"""Search-space enumeration and filtering, against hand counts."""
import pytest

from gemmlab import registry
from gemmlab.errors import BadArgumentError
from gemmlab.tune.search import exhaustive, random_sample
from gemmlab.tune.space import axes, enumerate_space, parse_param_axes


def test_hand_counted_space():
    # rung 4 with BM, BN in {32, 64}, BK = 8, TM in {4, 8}: 8 points. Threads = BM*BN/TM.
    # (32,32,4): 256 thr, A 256 % 256 ok, B 256 ok -> kept; (32,32,8): 128 thr -> kept;
    # (32,64,4): 512 thr, A tile 256 % 512 -> dropped; (32,64,8): 256 -> kept;
    # (64,32,4): 512 -> A 512 ok, B 256 % 512 dropped; (64,32,8): 256 -> kept;
    # (64,64,4): 1024 -> A 512 % 1024 dropped; (64,64,8): 512 -> kept.
    spec = registry.get("blocktiling_1d")
    report = enumerate_space(spec, {"BM": (32, 64), "BN": (32, 64), "BK": (8,), "TM": (4, 8)})
    assert report.total == 8
    assert len(report.kept) == 5
    assert sum(report.dropped.values()) == 3
    assert set(report.dropped) == {"threads must split the A tile (BM*BK/1) evenly",
                                   "threads must split the B tile (BK*BN/1) evenly"}


def test_kept_points_build_where_the_kernel_itself_says_so(tmp_path, monkeypatch):
    """The constraints mirror the kernel's static_asserts: kept points spread over the space must
    compile (NVRTC, no GPU) - the kernel, not the constraints, is the judge (resolve alone applied
    the same constraints the enumeration did, so it could not fail)."""
    from gemmlab.cuda.compile import compile_kernel

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    spec = registry.get("warptiling")
    report = enumerate_space(spec)
    assert len(report.kept) >= 200, "the warptiling space must keep at least 200 points"
    picks = report.kept[:: max(1, len(report.kept) // 4)][:4] + [report.kept[-1]]
    for point in picks:
        ck = compile_kernel(spec, point, arch="sm_80")
        assert ck.resources.registers > 0, point


def test_axes_and_parsing():
    spec = registry.get("vectorize")
    assert axes(spec)["BM"] == (64, 128, 256)
    assert axes(spec, {"BM": (64,)})["BM"] == (64,)
    assert parse_param_axes(["BK=8,16", "TM=4"]) == {"BK": (8, 16), "TM": (4,)}
    with pytest.raises(BadArgumentError):
        parse_param_axes(["BK"])
    with pytest.raises(BadArgumentError):
        parse_param_axes(["BK=a"])
    assert parse_param_axes(["BK=8,16,8"]) == {"BK": (8, 16)}  # a value listed twice is one point
    with pytest.raises(BadArgumentError, match="BK is given twice"):
        parse_param_axes(["BK=8", "BK=16"])
    with pytest.raises(BadArgumentError):
        axes(spec, {"XX": (1,)})


def test_strategies():
    pts = [{"a": i} for i in range(10)]
    assert exhaustive(pts) == pts and exhaustive(pts, 3) == pts[:3]
    sample = random_sample(pts, 4, seed=1)
    assert len(sample) == 4 and all(p in pts for p in sample)
    assert random_sample(pts, 4, seed=1) == sample
