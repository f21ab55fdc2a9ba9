"""The kernels' workspaces are one block per stream and thread, shared by the executors built for
that stream (api/shared_workspaces.py, session 38): rung 14's stream-K held 33 MiB per executor,
16.9 GB for the 512 executors of a program whose shapes change. Stream-K's flags (and the
persistent rung's split-K flags) must be zero before a launch, and another shape's partial tiles
lie where a larger shape's flags go: an executor that finds another has used the block clears
its flags first. Here executors of several shapes and kinds take turns on one block, back to back
without a wait, each result against fp64; a user's capture records a workspace of its own."""
import numpy as np
import pytest

cp = pytest.importorskip("cupy")

N, K = 4096, 1024
# rung 14 (bigtile, 128 x 256 tiles): stream-K at 700 rows (96 tiles: flags end at float 96, where
# its partial-tile slots begin) and at 1200 (160 tiles: its flags cover that slot), split-K planes at 300
STREAMK_SMALL, STREAMK_LARGE, PLANES = 700, 1200, 300


def _executors(stream):
    from gemmlab.api import core
    from gemmlab.api.launches import launching_on

    core.setup()
    with launching_on(stream.ptr):  # as core.executor builds a call's
        return {M: core.new_executor("sgemm", "fp32", (M, N, K), "bigtile", params, (False, False))
                for M, params in ((STREAMK_LARGE, {"STREAMK": 1}), (STREAMK_SMALL, {"STREAMK": 1}),
                                  (PLANES, {"STREAMK": 0, "SPLITK": 2}))}


def _check(X, W, outs):
    x, w = cp.asnumpy(X).astype(np.float64), cp.asnumpy(W).astype(np.float64)
    for M, C in outs.items():
        ref = x[:M] @ w
        err = np.abs(cp.asnumpy(C) - ref).max() / np.abs(ref).max()
        assert err < 1e-5, f"{M}x{N}x{K}: relative error {err:.2e}"


def _operands(seed):
    rng = np.random.default_rng(seed)
    X = cp.asarray(rng.standard_normal((STREAMK_LARGE, K), dtype=np.float32))
    W = cp.asarray(rng.standard_normal((K, N), dtype=np.float32))
    return X, W


def test_stream_k_and_split_k_executors_of_one_stream_share_a_block_and_stay_exact():
    stream = cp.cuda.Stream(non_blocking=True)
    executors = _executors(stream)
    kinds = {M: type(ex).__name__ for M, ex in executors.items()}
    assert set(kinds.values()) == {"KernelGemm"}, kinds
    blocks = {id(ex.workspace) for ex in executors.values()}
    assert len(blocks) == 1, "the largest need first: one block serves every shape"
    assert executors[STREAMK_SMALL].graph.scratch.flag_bytes == 4 * 96
    assert executors[STREAMK_LARGE].graph.scratch.flag_bytes == 4 * 160
    assert executors[PLANES].graph.scratch.flag_bytes == 0 and executors[PLANES].reduce is not None
    X, W = _operands(38)
    outs = {M: cp.full((M, N), np.nan, dtype=cp.float32) for M in executors}
    order = [STREAMK_SMALL, STREAMK_LARGE, STREAMK_SMALL, PLANES, STREAMK_LARGE, PLANES, STREAMK_SMALL]
    with stream:
        for rounds in range(3):
            for M in order:
                outs[M].fill(np.nan)
                executors[M].run(X.data.ptr, W.data.ptr, outs[M].data.ptr, 1.0, 0.0, stream.ptr)
            stream.synchronize()
            _check(X, W, outs)
    assert all(ex.graph.graph_launches >= 3 for ex in executors.values()), "through their graphs"


def test_a_users_capture_records_a_workspace_of_its_own_and_replays_beside_the_streams_calls():
    """Warmed up on the stream it then captures, an executor holds that stream's block; the user's
    graph must not record it, or a replay on another stream races with every call still made on
    the stream (the case cuBLASLt's captured_call covers too)."""
    stream, other = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    executors = _executors(stream)
    X, W = _operands(39)
    outs = {M: cp.full((M, N), np.nan, dtype=cp.float32) for M in executors}
    recorded = executors[STREAMK_SMALL]
    run = lambda M, s: executors[M].run(X.data.ptr, W.data.ptr, outs[M].data.ptr, 1.0, 0.0, s)  # noqa: E731
    with stream:
        run(STREAMK_SMALL, stream.ptr)  # warmed up on the stream, through its graph
        stream.begin_capture()
        run(STREAMK_SMALL, stream.ptr)
        graph = stream.end_capture()
    scratch = recorded.graph.scratch
    assert scratch._private is not None and scratch._private.ptr != scratch.ptr
    assert all(slot.value == scratch.ptr for slot in scratch.slots), "the shared block again after the capture"
    outs[STREAMK_SMALL].fill(np.nan)
    cp.cuda.runtime.deviceSynchronize()
    for _ in range(10):  # the user's graph on `other`, the other shapes on the stream, at the same time
        graph.launch(stream=other)
        with stream:
            run(STREAMK_LARGE, stream.ptr)
            run(PLANES, stream.ptr)
    other.synchronize()
    stream.synchronize()
    _check(X, W, outs)


def test_the_persistent_rungs_split_k_executors_share_a_block_and_stay_exact():
    from gemmlab.api import core
    from gemmlab.api.launches import launching_on

    core.setup()
    stream = cp.cuda.Stream(non_blocking=True)
    shapes = [(512, 512, 8192), (1024, 1024, 8192), (768, 1536, 4096)]
    with launching_on(stream.ptr):
        executors = {s: core.new_executor("hgemm", "bf16", s, "persistent", None, (False, False)) for s in shapes}
    sliced = {s: ex for s, ex in executors.items() if getattr(ex, "graph", None) is not None and ex.graph.scratch}
    if len(sliced) < 2:
        pytest.skip(f"split-K ran for fewer than two of {shapes} here")
    assert len({id(ex.workspace) for ex in sliced.values()}) <= 2, "shared, save a block grown for a larger need"
    torch = pytest.importorskip("torch")
    gen = torch.Generator(device="cuda").manual_seed(40)
    ins = {s: (torch.randn(s[0], s[2], device="cuda", generator=gen).to(torch.bfloat16),
               torch.randn(s[2], s[1], device="cuda", generator=gen).to(torch.bfloat16)) for s in sliced}
    outs = {s: cp.full((s[0], s[1]), np.nan, dtype=cp.float32) for s in sliced}
    torch.cuda.synchronize()
    with stream:
        for _ in range(3):
            for s, ex in sliced.items():
                A, B = ins[s]
                ex.run(A.data_ptr(), B.data_ptr(), outs[s].data.ptr, 1.0, 0.0, stream.ptr)
    stream.synchronize()
    for s in sliced:
        A, B = (t.double().cpu().numpy() for t in ins[s])
        ref = A @ B
        err = np.abs(cp.asnumpy(outs[s]) - ref).max() / np.abs(ref).max()
        assert err < 1e-4, f"{s}: relative error {err:.2e}"
