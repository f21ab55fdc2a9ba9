import pytest

from gemmlab.errors import BadArgumentError
from gemmlab.problem import GemmProblem, parse_shape


def test_parse_shape():
    assert parse_shape("4096") == (4096, 4096, 4096)
    assert parse_shape("1000x3000x2000") == (1000, 3000, 2000)
    assert parse_shape("127^3") == (127, 127, 127)
    for bad in ("x", "0", "-5", "1x2", "4.5", ""):
        with pytest.raises(BadArgumentError):
            parse_shape(bad)


@pytest.mark.parametrize("size", ["40^396", "1^3024", "12^3^38", "10x20x30^3", "１０２４", "1_024", "4096x", "1e3"])
def test_a_size_with_stray_characters_is_refused_not_misread(size):
    """'^3' ends a single N only, digits are ASCII: '40^396' was read as 4096, '１０２４' as 1024."""
    with pytest.raises(BadArgumentError, match=r"size .* (is not an integer or MxNxK|must be N, N\^3 or MxNxK)"):
        parse_shape(size)


@pytest.mark.parametrize("size,dims", [("4096", (4096,) * 3), ("127^3", (127,) * 3), (" 1024 ", (1024,) * 3),
                                       ("1000x3000x2000", (1000, 3000, 2000)), ("1000X3000X2000", (1000, 3000, 2000))])
def test_sizes_people_write_still_parse(size, dims):
    assert parse_shape(size) == dims


def test_counts():
    p = GemmProblem(2, 3, 4)
    assert p.flops == 2 * 2 * 3 * 4
    assert p.min_bytes == 4 * (2 * 4 + 4 * 3 + 2 * 3)
    assert GemmProblem(2, 3, 4, beta=1.0).min_bytes == p.min_bytes + 4 * 6


@pytest.mark.parametrize("dims", [(0, 1, 1), (1, -1, 1), (1, 1, 2.5), (True, 1, 1)])
def test_bad_dims(dims):
    with pytest.raises(BadArgumentError):
        GemmProblem(*dims)


@pytest.mark.parametrize("dim", ["M", "N", "K"])
def test_the_bound_leaves_room_to_round_up_to_whole_tiles(dim):
    """A dimension just below 2^31 would overflow the kernels' 32-bit (K + BK - 1) / BK and k0 += BK:
    the bound stops 2^16 short of 2^31, with every tile (BM x CM, BK) well inside that margin."""
    from gemmlab.problem import MAX_DIM

    dims = {"M": 1, "N": 1, "K": 1}
    assert MAX_DIM + 2**16 == 2**31
    GemmProblem(**{**dims, dim: MAX_DIM})
    with pytest.raises(BadArgumentError, match=r"up to 2\^31 - 65536"):
        GemmProblem(**{**dims, dim: MAX_DIM + 1})
    with pytest.raises(BadArgumentError, match=r"past 2\^31 - 65536"):
        parse_shape(f"{dims['M']}x{dims['N']}x{MAX_DIM + 1}")
