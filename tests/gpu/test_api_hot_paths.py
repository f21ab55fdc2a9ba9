"""The plain calls' hot paths (api/calls.py, api/sum_calls.py): dense torch tensors and CuPy arrays are read
straight off the arrays and never reach the general path's Operand readers, and their results
are right (fp64 references; a C given NaN-poisoned where beta == 0). The general path is made to fail here, so a call that silently fell back to
it would fail the test rather than pass slowly."""
import numpy as np
import pytest

import gemmlab
from gemmlab.api import calls, core, frameworks, sum_calls
from gemmlab.errors import BadArgumentError

cp = pytest.importorskip("cupy")
torch = pytest.importorskip("torch")


@pytest.fixture
def no_general_path(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the general path ran: the hot path refused this call")

    monkeypatch.setattr(calls, "gemm_operands", refuse)
    monkeypatch.setattr(sum_calls, "sum_operand", refuse)


def _ref(A, B, C0=None, alpha=1.0, beta=0.0):
    a, b = (cp.asnumpy(cp.asarray(x)).astype(np.float64) for x in (A, B))
    out = alpha * a @ b
    if beta:
        out = out + beta * C0
    return out


def _rel(C, ref) -> float:
    return float(np.linalg.norm(cp.asnumpy(cp.asarray(C)).astype(np.float64) - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("impl", [None, "cublas", "vectorize"])
@pytest.mark.parametrize("shape", [(512, 512, 512), (129, 67, 200)])
def test_cupy_sgemm_hot_path(no_general_path, impl, shape):
    M, N, K = shape
    rng = cp.random.default_rng(sum(shape))
    A = rng.uniform(-1, 1, (M, K), dtype=cp.float32)
    B = rng.uniform(-1, 1, (K, N), dtype=cp.float32)
    C = gemmlab.sgemm(A, B, impl=impl)
    assert type(C) is cp.ndarray and C.shape == (M, N) and C.dtype == cp.float32
    assert _rel(C, _ref(A, B)) < 1e-5
    C0 = rng.uniform(-1, 1, (M, N), dtype=cp.float32)
    C1 = C0.copy()
    assert gemmlab.sgemm(A, B, C1, alpha=0.5, beta=-1.5, impl=impl) is C1
    assert _rel(C1, _ref(A, B, cp.asnumpy(C0).astype(np.float64), 0.5, -1.5)) < 1e-5
    poisoned = cp.full((M, N), cp.nan, dtype=cp.float32)  # beta == 0 never reads C
    gemmlab.sgemm(A, B, poisoned, impl=impl)
    assert _rel(poisoned, _ref(A, B)) < 1e-5


@pytest.mark.parametrize("out_dtype", [None, "fp16"])
def test_cupy_hgemm_hot_path_new_c_and_transposed_b(no_general_path, out_dtype):
    rng = cp.random.default_rng(3)
    A = rng.uniform(-1, 1, (384, 256), dtype=cp.float32).astype(cp.float16)
    W = rng.uniform(-1, 1, (200, 256), dtype=cp.float32).astype(cp.float16)
    ref = _ref(A, W.T)
    for B in (cp.ascontiguousarray(W.T), W.T):  # row-major B, and x @ W.T read in place
        C = gemmlab.hgemm(A, B, out_dtype=out_dtype)
        assert C.dtype == (cp.float16 if out_dtype else cp.float32)
        assert _rel(C, ref) < (2e-3 if out_dtype else 1e-5)


def test_cupy_hgemm_hot_path_fp16_c_in_place(no_general_path):
    rng = cp.random.default_rng(4)
    A = rng.uniform(-1, 1, (256, 128), dtype=cp.float32).astype(cp.float16)
    B = rng.uniform(-1, 1, (128, 320), dtype=cp.float32).astype(cp.float16)
    C = cp.full((256, 320), cp.nan, dtype=cp.float16)
    assert gemmlab.hgemm(A, B, C) is C
    assert _rel(C, _ref(A, B)) < 2e-3


def test_torch_hot_path_new_outputs(no_general_path):
    A = torch.randn(300, 200, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(200, 100, device="cuda", dtype=torch.bfloat16)
    ref = (A.double() @ B.double()).cpu().numpy()
    for out_dtype, want, tol in ((None, torch.float32, 1e-5), ("bf16", torch.bfloat16, 1e-2)):
        C = gemmlab.hgemm(A, B, out_dtype=out_dtype)
        assert C.dtype == want and C.device == A.device and C.shape == (300, 100)
        assert C.is_contiguous() and C.stride() == (100, 1), "a dense new C (made by empty_like of a template)"
        err = np.linalg.norm(C.double().cpu().numpy() - ref) / np.linalg.norm(ref)
        assert err < tol
        again = gemmlab.hgemm(A, B, out_dtype=out_dtype)
        assert again.data_ptr() != C.data_ptr(), "every call returns storage of its own"
        assert again.untyped_storage().nbytes() == C.numel() * C.element_size()
        assert torch.equal(again, C)


@pytest.mark.parametrize("family", ["cupy", "torch"])
def test_reduce_sum_hot_paths(no_general_path, family):
    host = np.random.default_rng(5).uniform(-1, 1, 100_003).astype(np.float32)
    x = cp.asarray(host) if family == "cupy" else torch.from_numpy(host).cuda()
    out = gemmlab.reduce_sum(x)
    assert (type(out) is cp.ndarray) if family == "cupy" else (out.device == x.device)
    assert out.shape == () and abs(float(out.item()) - host.astype(np.float64).sum()) < 1e-3
    if family == "torch":
        again = gemmlab.reduce_sum(x)
        assert again.data_ptr() != out.data_ptr() and again.dtype == torch.float32 and float(again) == float(out)


@pytest.mark.parametrize("family", ["torch", "cupy"])
def test_scalars_on_the_hot_paths(no_general_path, family):
    """Ints and NumPy reals are taken (converted once, no general path); None, strings and complex
    numbers are refused in one line, not a TypeError traceback or a string read as a number."""
    rng = np.random.default_rng(11)
    host = [rng.uniform(-1, 1, s).astype(np.float32) for s in ((64, 48), (48, 40), (64, 40))]
    A, B, C0 = (cp.asarray(h) if family == "cupy" else torch.from_numpy(h).cuda() for h in host)
    C = C0.copy() if family == "cupy" else C0.clone()
    gemmlab.sgemm(A, B, C, alpha=2, beta=np.float32(-0.5))
    assert _rel(C, _ref(A, B, host[2].astype(np.float64), 2.0, -0.5)) < 1e-5
    for bad in (None, "2.5", 1j):
        with pytest.raises(BadArgumentError, match=r"^gemmlab.sgemm: alpha must be a real number, not \w+$"):
            gemmlab.sgemm(A, B, C, alpha=bad)


def test_cupy_arrays_the_hot_path_passes_on_still_work():
    """A strided CuPy array and an empty dimension go to the general path, which copies or
    follows torch's rules (the fixture is not used here)."""
    rng = cp.random.default_rng(6)
    A = rng.uniform(-1, 1, (64, 96), dtype=cp.float32)[:, ::2]  # neither C nor F order
    B = rng.uniform(-1, 1, (48, 40), dtype=cp.float32)
    assert _rel(gemmlab.sgemm(A, B), _ref(A, B)) < 1e-5
    assert gemmlab.sgemm(A[:0], B).shape == (0, 40)


def test_what_the_cupy_hot_path_passes_on_is_refused_in_one_line():
    """The hot path returns NotImplemented for these; the general path then refuses each with
    its one-line BadArgumentError, as before the hot path existed."""
    rng = cp.random.default_rng(7)
    A16 = rng.uniform(-1, 1, (64, 32), dtype=cp.float32).astype(cp.float16)
    B16 = rng.uniform(-1, 1, (32, 48), dtype=cp.float32).astype(cp.float16)
    A32, B32 = A16.astype(cp.float32), B16.astype(cp.float32)
    cases = [
        (lambda: gemmlab.hgemm(A16, B16, beta=0.5), "beta != 0 needs C"),
        (lambda: gemmlab.hgemm(A16, B16, out_dtype="bf16"), "a bfloat16 C with fp16 inputs"),
        (lambda: gemmlab.hgemm(A32, B32, out_dtype="fp16"), "a float16 C with tf32 inputs"),
        (lambda: gemmlab.hgemm(A16, B16, cp.zeros((64, 48), cp.float32), out_dtype="fp16"), "C is float32"),
        (lambda: gemmlab.hgemm(A16, B16, cp.zeros((64, 47), cp.float16)), "C is 64x47"),
        (lambda: gemmlab.sgemm(A32, B32[:31]), "inner dimensions differ"),
        (lambda: gemmlab.sgemm(A16, B16), "dtype float16"),
        (lambda: gemmlab.hgemm(A16, B32), "both must have one dtype"),
        (lambda: gemmlab.sgemm(A32.reshape(4, 16, 32), B32), "must be 2-D"),
        (lambda: gemmlab.sgemm(A32, B32, impl=["cublas"]), "impl must be an implementation's name"),
        (lambda: gemmlab.hgemm(A16, B16, params=[("BN", 64)]), "params must be a mapping"),
        (lambda: gemmlab.reduce_sum(A32, impl=1), "impl must be"),
        (lambda: gemmlab.Matmul(A32, B32, impl=("cublas",)), "impl must be"),
    ]
    wrong = []
    for call, text in cases:
        try:
            call()
            wrong.append(f"no error, expected {text!r}")
        except BadArgumentError as exc:
            if text not in str(exc) or "\n" in str(exc):
                wrong.append(f"{exc} (expected {text!r})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("shape", [(1, 1), (1, 24), (24, 1), (40, 24)])
def test_new_outputs_have_torch_mm_strides(no_general_path, shape):
    """A new C is made by empty_like of a cached, expanded 1 x 1 template: its strides must be what
    torch.mm gives (a 1 x 1 or M x 1 output included, where an expanded 0-d template gave (0, 0))."""
    M, N = shape
    A = torch.randn(M, 16, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(16, N, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):  # the template made, then used
        C = gemmlab.hgemm(A, B)
        want = torch.mm(A, B, out_dtype=torch.float32)
        assert C.shape == want.shape and C.stride() == want.stride() and C.is_contiguous()
        assert torch.allclose(C, want, rtol=1e-3, atol=1e-3)


def test_a_first_call_inside_a_capture_keeps_no_template_of_the_capture_pool():
    """The first call of a shape made while torch.cuda.graph captures must not cache a template:
    one made there would live in the graph's private pool. Replay is right; the template is made
    by the next call outside the capture, from CuPy's memory, not torch's."""
    A = torch.randn(72, 40, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(40, 56, device="cuda", dtype=torch.bfloat16)
    key = (72, 56, torch.float32)
    frameworks.torch_outputs.pop(key, None)
    gemmlab.hgemm(torch.randn(8, 8, device="cuda", dtype=torch.bfloat16),
                  torch.randn(8, 8, device="cuda", dtype=torch.bfloat16))  # the path warmed, not this shape
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gemmlab.hgemm(A, B, torch.empty(72, 56, device="cuda"))  # the executor built before the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        C = gemmlab.hgemm(A, B)
    assert key not in frameworks.torch_outputs, "no template cached while capturing"
    graph.replay()
    torch.cuda.synchronize()
    assert torch.allclose(C, torch.mm(A, B, out_dtype=torch.float32), rtol=1e-3, atol=1e-3)
    del graph
    C2 = gemmlab.hgemm(A, B)
    template = frameworks.torch_outputs[key]
    assert C2.is_contiguous()
    ptr = template.data_ptr()
    torch_segments = [(s["address"], s["address"] + s["total_size"]) for s in torch.cuda.memory_snapshot()]
    assert not any(lo <= ptr < hi for lo, hi in torch_segments), "the template's element is not torch's memory"
    assert any(lo <= C2.data_ptr() < hi for lo, hi in torch_segments), "(the check sees torch's own outputs)"


@pytest.mark.parametrize("family", ["torch", "cupy"])
def test_a_warm_call_still_checks_what_each_call_passes(family):
    """Once a shape is in the thread's cache of calls (keyed by types, shape, layout and C type, not
    by the scalars or C's address), every call is still checked: a beta != 0 without C is refused
    in one line, a C of the wrong shape too, a misaligned C goes to the general path, another
    layout of B or another C type gets its own entry, and the scalars are the call's own."""
    M, N, K = 96, 80, 64
    if family == "torch":
        A = torch.randn(M, K, device="cuda", dtype=torch.float16)
        W = torch.randn(N, K, device="cuda", dtype=torch.float16)
        B = W.T.contiguous()
        host = lambda x: x.double().cpu().numpy()
        C0 = torch.randn(M, N, device="cuda")
        full = lambda shape, dt: torch.full(shape, float("nan"), device="cuda", dtype=dt)
        f16, f32 = torch.float16, torch.float32
        misaligned = torch.empty(M * N + 1, device="cuda")[1:].view(M, N)
    else:
        rng = cp.random.default_rng(9)
        A = rng.uniform(-1, 1, (M, K), dtype=cp.float32).astype(cp.float16)
        W = rng.uniform(-1, 1, (N, K), dtype=cp.float32).astype(cp.float16)
        B = cp.ascontiguousarray(W.T)
        host = lambda x: cp.asnumpy(x).astype(np.float64)
        C0 = rng.uniform(-1, 1, (M, N), dtype=cp.float32)
        full = lambda shape, dt: cp.full(shape, cp.nan, dtype=dt)
        f16, f32 = cp.float16, cp.float32
        misaligned = cp.empty(M * N + 1, dtype=cp.float32)[1:].reshape(M, N)
    ref = host(A) @ host(B)
    rel = lambda X, want: float(np.linalg.norm(host(X) - want) / np.linalg.norm(want))
    C = full((M, N), f32)
    for _ in range(3):  # made, then served by the cache
        assert rel(gemmlab.hgemm(A, B), ref) < 1e-5
        assert gemmlab.hgemm(A, B, C) is C and rel(C, ref) < 1e-5
    keys = [k for k in core._thread.hot_calls if k[:5] == ("hgemm", A.dtype, M, N, K)]
    assert len(keys) == 2, keys
    with pytest.raises(BadArgumentError, match="beta != 0 needs C"):
        gemmlab.hgemm(A, B, beta=0.5)
    with pytest.raises(BadArgumentError, match=f"C is {M}x{N - 1}"):
        gemmlab.hgemm(A, B, full((M, N - 1), f32))
    C1 = C0.copy() if family == "cupy" else C0.clone()
    assert gemmlab.hgemm(A, B, C1, alpha=0.5, beta=-1.5) is C1
    assert rel(C1, 0.5 * ref - 1.5 * host(C0)) < 1e-5, "the call's own alpha and beta"
    misaligned[...] = C0
    gemmlab.hgemm(A, B, misaligned, beta=1.0)
    assert rel(misaligned, ref + host(C0)) < 1e-5, "a misaligned C, through the general path"
    assert rel(gemmlab.hgemm(A, W.T), ref) < 1e-5, "B as a transposed view: an entry of its own"
    C16 = full((M, N), f16)
    assert gemmlab.hgemm(A, B, C16) is C16 and rel(C16, ref) < 2e-3
    assert gemmlab.hgemm(A, B, out_dtype="fp16").dtype == f16


def test_use_tuning_makes_every_thread_decide_again():
    """Executors are kept per thread; use_tuning empties every thread's, the calls' cache with
    them, so a shape called before in any thread decides again (with the database now named)."""
    import threading

    A = torch.randn(72, 40, device="cuda")
    B = torch.randn(40, 56, device="cuda")
    ref = (A.double() @ B.double()).cpu().numpy()
    seen, go, done = {}, threading.Event(), threading.Event()

    def other():
        gemmlab.sgemm(A, B)
        seen["caches"] = (core._thread.executors, core._thread.hot_calls)
        seen["before"] = len(core._thread.executors)
        done.set()
        go.wait(60)
        seen["after"] = gemmlab.sgemm(A, B).double().cpu().numpy()

    worker = threading.Thread(target=other)
    worker.start()
    assert done.wait(60)
    gemmlab.sgemm(A, B)
    assert seen["before"] >= 1 and core._thread.executors
    gemmlab.use_tuning(None)
    assert not core._thread.executors and not core._thread.hot_calls
    assert not any(seen["caches"]), "the other thread's executors and calls are dropped too"
    go.set()
    worker.join(60)
    C = gemmlab.sgemm(A, B)
    assert np.allclose(C.double().cpu().numpy(), ref, rtol=1e-4, atol=1e-4)
    assert np.allclose(seen["after"], ref, rtol=1e-4, atol=1e-4) and core._thread.executors


def test_the_templates_of_one_type_share_one_element_so_a_new_shape_makes_no_allocation():
    """Each new output shape gets a template, a view of the one element its type keeps (session 37:
    a new shape's first call made and imported an element of its own, about 75 us on an H100)."""
    A = torch.randn(300, 64, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(64, 48, device="cuda", dtype=torch.bfloat16)
    for M in (298, 299, 300):
        C = gemmlab.hgemm(A[:M], B)
        assert torch.allclose(C, torch.mm(A[:M], B, out_dtype=torch.float32), rtol=1e-3, atol=1e-3)
    elements = {frameworks.torch_outputs[(M, 48, torch.float32)].data_ptr() for M in (298, 299, 300)}
    assert len(elements) == 1, "one element for every template of the type"
    assert C.data_ptr() not in elements, "the outputs are new tensors, not the element"
