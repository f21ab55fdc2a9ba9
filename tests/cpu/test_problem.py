import pytest

from gemmlab.errors import BadArgumentError
from gemmlab.problem import MAX_DIM, BatchedGemmProblem, GemmProblem, ReduceProblem, parse_shape, size_label


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
    dims = {"M": 1, "N": 1, "K": 1}
    assert MAX_DIM + 2**16 == 2**31
    GemmProblem(**{**dims, dim: MAX_DIM})
    with pytest.raises(BadArgumentError, match=r"up to 2\^31 - 65536"):
        GemmProblem(**{**dims, dim: MAX_DIM + 1})
    with pytest.raises(BadArgumentError, match=r"past 2\^31 - 65536"):
        parse_shape(f"{dims['M']}x{dims['N']}x{MAX_DIM + 1}")


def test_a_size_at_the_bound_parses():
    # the bound is the largest size the kernels take, not the first they refuse
    assert parse_shape(f"1x1x{MAX_DIM}") == (1, 1, MAX_DIM)


def test_a_cube_with_spaces_around_parses():
    # a quoted '--size " 4096^3 "' is a cube as ' 1024 ' is a single N
    assert parse_shape(" 127^3 ") == (127, 127, 127)


def test_a_batched_size_is_refused_for_a_single_gemm_not_cut_to_three_dimensions():
    """'8x1000x300x200' (bgemm's BATCHxMxNxK) given to sgemm or hgemm: refused, not run as 8x1000x300."""
    with pytest.raises(BadArgumentError, match=r"must be N, N\^3 or MxNxK"):
        parse_shape("8x1000x300x200")


def test_a_negative_size_is_refused_as_out_of_range_not_as_a_non_integer():
    # the one-line error names what is wrong: -5 is an integer, below 1
    with pytest.raises(BadArgumentError, match=r"size '-5' must have every dimension >= 1"):
        parse_shape("-5")


def test_the_batch_count_has_the_dimensions_bound():
    # a batch loop steps b += gridDim.z in 32 bits: the same 2^16 margin as M, N and K
    BatchedGemmProblem(1, 1, 1, batch=MAX_DIM)
    with pytest.raises(BadArgumentError, match=r"batch count up to 2\^31 - 65536"):
        BatchedGemmProblem(1, 1, 1, batch=MAX_DIM + 1)


def test_a_sum_takes_up_to_2_40_minus_1_elements():
    assert ReduceProblem((1 << 40) - 1).n == (1 << 40) - 1
    with pytest.raises(BadArgumentError, match=r"at most 2\^40 - 1 elements"):
        ReduceProblem(1 << 40)


@pytest.mark.parametrize("n, label", [(1 << 20, "2^20"), ((1 << 20) + 7, "2^20+7"), ((1 << 20) - 63, "2^20-63"),
                                      ((1 << 20) + 64, "1048640"), (4096 + 7, "2^12+7"), (2048 + 7, "2055"),
                                      (16, "2^4"), (8, "8"), (1000, "1000")])
def test_size_labels_name_powers_of_two_and_near_misses_only(n, label):
    """A sum's shape in tables: a power of two from 2^4 as 2^k, one from 2^12 within 63 elements as
    2^k+d (the odd tails the kernels are checked at), anything else as its count."""
    assert size_label(n) == label


@pytest.mark.parametrize("layout", ["", "n", "ntt", "NT"])
def test_a_layout_is_two_letters_of_n_and_t(layout):
    # a_transposed and b_transposed read layout[0] and layout[1]: anything else is refused in one
    # line here, not an IndexError or a silent "nn" later
    with pytest.raises(BadArgumentError, match=r"must be one of nn, nt, tn, tt"):
        GemmProblem(1, 1, 1, layout=layout)
