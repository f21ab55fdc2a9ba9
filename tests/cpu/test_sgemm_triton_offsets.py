"""The Triton baseline's kernel read as source (Triton need not be installed): its offsets.

An operand may hold more than 2^31 elements (M*K, K*N or M*N) while M, N and K stay below
MAX_DIM; an int32 product index * stride wraps there and the kernel read and wrote the wrong
addresses. Every product with a stride must be taken in int64 (`.to(tl.int64)` before the
multiply); what stays int32 (the indices, the masks, the grid) must keep a margin below 2^31.
tests/gpu/test_triton_past_2_31.py runs the kernel on such problems.
"""
import ast
import inspect

from gemmlab.ops import sgemm_triton
from gemmlab.problem import MAX_DIM

DIMS = {"M", "N", "K"}  # row-major contiguous operands: their strides are the dimensions
POINTERS = ("a_ptr", "b_ptr", "c_ptr")


def _build_tree():
    return ast.parse(inspect.getsource(sgemm_triton._build))


def _kernel():
    kernels = [f for f in ast.walk(_build_tree()) if isinstance(f, ast.FunctionDef) and f.name == "sgemm"]
    assert len(kernels) == 1, "the Triton kernel (def sgemm inside _build) not found"
    return kernels[0]


def _is_to_int64(node) -> bool:
    """x.to(tl.int64)"""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to"
            and len(node.args) == 1 and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "int64")


def _wide_names(kernel) -> set[str]:
    """Names assigned an expression with a .to(tl.int64) in it, or another such name."""
    wide: set[str] = set()
    while True:
        more = {a.targets[0].id for a in ast.walk(kernel)
                if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)
                and _is_wide(a.value, wide)} - wide
        if not more:
            return wide
        wide |= more


def _is_wide(expr, wide: set[str]) -> bool:
    return any(_is_to_int64(n) or (isinstance(n, ast.Name) and n.id in wide) for n in ast.walk(expr))


def _stride_products(expr):
    """The products `index * M|N|K` in expr: (the index expression, the stride's name)."""
    for node in ast.walk(expr):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for index, stride in ((node.left, node.right), (node.right, node.left)):
                if isinstance(stride, ast.Name) and stride.id in DIMS:
                    yield index, stride.id


def _address_expressions(kernel) -> dict[str, list]:
    """Each pointer argument's address expressions: the sums whose leftmost term is the pointer."""
    found: dict[str, list] = {p: [] for p in POINTERS}
    for node in ast.walk(kernel):
        if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Add):
            continue
        left = node.left
        while isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add):
            left = left.left
        if isinstance(left, ast.Name) and left.id in found:
            found[left.id].append(node)
    return found


def test_triton_kernel_multiplies_every_stride_in_int64():
    """A's rows by K, B's rows (k0 + rk) by N, C's rows by N: each index is promoted to int64
    before the product (the int32 version, `rm[:, None] * K`, fails here)."""
    kernel = _kernel()
    wide = _wide_names(kernel)
    products = list(_stride_products(kernel))
    narrow = [ast.unparse(index) + " * " + stride for index, stride in products if not _is_wide(index, wide)]
    assert not narrow, f"int32 index * stride in the Triton kernel (wraps past 2^31 elements): {narrow}"
    addresses = _address_expressions(kernel)
    for pointer in POINTERS:
        strided = [s for expr in addresses[pointer] for _, s in _stride_products(expr)]
        assert strided, f"no address of {pointer} with a stride product found: {addresses[pointer]}"


def test_triton_kernel_int32_indices_and_grid_keep_their_margin():
    """What stays int32: the indices pid * BM + arange(BM) and k0 + BK stay below 2^31 for
    dimensions up to MAX_DIM, and the grid (cdiv(M, BM) * cdiv(N, BN) programs) reaches 2^31
    only for a C of 2^41 elements (8 TiB) or more."""
    configs = [tuple(c.value for c in t.elts) for node in ast.walk(_build_tree()) if isinstance(node, ast.comprehension)
               and isinstance(node.iter, ast.Tuple) for t in node.iter.elts]
    assert configs and all(len(c) == 5 for c in configs), configs
    bm, bn, bk = (max(c[i] for c in configs) for i in range(3))
    assert MAX_DIM + max(bm, bn, bk) < 2**31
    smallest = min(min(c[0] for c in configs), min(c[1] for c in configs))
    assert smallest >= 64  # tiles <= (M/64 + 1) (N/64 + 1) <= M N / 1024 for M, N >= 64 (else <= 2^25)
    # the claim at its bound: a C of 2^41 elements (2^20 x 2^21) in the smallest tiles stays below 2^31 programs
    assert -(-2**20 // smallest) * -(-2**21 // smallest) < 2**31
