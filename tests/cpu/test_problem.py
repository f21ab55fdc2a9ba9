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


def test_counts():
    p = GemmProblem(2, 3, 4)
    assert p.flops == 2 * 2 * 3 * 4
    assert p.min_bytes == 4 * (2 * 4 + 4 * 3 + 2 * 3)
    assert GemmProblem(2, 3, 4, beta=1.0).min_bytes == p.min_bytes + 4 * 6


@pytest.mark.parametrize("dims", [(0, 1, 1), (1, -1, 1), (1, 1, 2.5), (True, 1, 1)])
def test_bad_dims(dims):
    with pytest.raises(BadArgumentError):
        GemmProblem(*dims)
