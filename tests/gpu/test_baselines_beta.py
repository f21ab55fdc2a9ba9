"""Every library baseline of every GEMM op (C = alpha*A@B + beta*C: sgemm, hgemm in each input
type, bgemm) against fp64 with beta != 0 on a fresh random C0, and with beta == 0 on a C0
poisoned with NaN (a baseline that reads C although beta == 0 leaks the NaN). The baselines
are enumerated from the registry, so a new one is covered without editing this file; one is
skipped only for its own unavailable_reason().

The Triton baseline is autotuned inside its first call at a new (M, N, K, beta == 0) key, and
each autotuning trial runs the in-place update of C again: without restore_value the first
call with beta != 0 compounds beta*C over every trial (relative error 0.33, issue 13). Its
tests use shapes no other test runs, so the call they check is the one that autotunes.
"""
import dataclasses

import pytest

from gemmlab import ops, registry
from gemmlab.ops import ShapeArgs
from gemmlab.ops.base import device_inputs
from gemmlab.ops.gemm_family import GemmOp

ALPHA, BETA = 0.75, -1.25
SHAPES = ((67, 45, 33), (128, 96, 80))  # odd in every dimension, and a second one past one tile
BATCH = 3  # matrices per problem of a batched op
# Used by no other test (the autotuner's cache lives as long as the process): a first call with
# beta != 0, and a beta != 0 call after the same shape was tuned with beta == 0.
TRITON_COLD_SHAPE = (71, 53, 39)
TRITON_AFTER_BETA0_SHAPE = (83, 61, 47)

GEMM_OPS = [op for op in ops.OPS.values() if isinstance(op, GemmOp)]
# (op, baseline, dtype): every baseline of every GEMM op, for every input type it takes
CASES = [(op, impl, dtype) for op in GEMM_OPS for impl in registry.all_impls(op.name)
         if impl.kind == "baseline" and not impl.ceiling
         for dtype in op.dtypes if not impl.dtypes or dtype in impl.dtypes]
CASE_IDS = [f"{op.name}-{impl.name}-{dtype}" for op, impl, dtype in CASES]


@pytest.fixture(scope="module")
def stream():
    from gemmlab.cuda.device import device

    return device().create_stream()


def _problem(op, shape, alpha, beta, dtype):
    M, N, K = shape
    problem = op.make_problem(M, N, K, alpha, beta, dtype, ShapeArgs())
    if hasattr(problem, "batch"):
        problem = dataclasses.replace(problem, batch=BATCH)
    return problem


def _runner(op, impl, dtype):
    reason = impl.unavailable_reason()
    if reason:
        pytest.skip(f"{impl.name} ({op.name}): {reason}")
    return op.prepare(impl, None, dtype)


def _run(runner, problem, inputs, stream):
    """One enqueue into a fresh copy of C0, finished: the output."""
    from gemmlab.cuda.device import sync_or_raise

    A, B, C0 = inputs
    C = device_inputs(C0.copy)
    runner.enqueue(problem, A, B, C, stream)
    sync_or_raise(stream)
    return C


def _inputs(op, problem, seed, *, poisoned: bool):
    """The op's own fresh inputs, with the state of C0 the test relies on checked first."""
    import cupy as cp

    inputs = device_inputs(op.make_inputs, problem, seed)
    C0 = inputs[2]
    if poisoned:
        assert bool(cp.isnan(C0).all()), "beta == 0: C0 should be all NaN"
    else:
        assert bool(cp.isfinite(C0).all()) and float(cp.abs(C0).max()) > 0.5, "beta != 0: C0 should be random"
    return inputs


def _verdict(op, problem, inputs, C):
    A, B, C0 = inputs
    return op.check(C, A, B, C0, problem)


def test_every_gemm_op_and_baseline_is_enumerated():
    """The enumeration cannot silently shrink: at least the baselines known today are there."""
    got = {(op.name, impl.name, dtype) for op, impl, dtype in CASES}
    assert {op.name for op in GEMM_OPS} >= {"sgemm", "hgemm", "bgemm"}
    want = {("sgemm", "cublas", "fp32"), ("sgemm", "torch", "fp32"), ("sgemm", "triton", "fp32"),
            ("hgemm", "cublas", "fp16"), ("hgemm", "cublas", "bf16"), ("hgemm", "cublas", "tf32"),
            ("bgemm", "cublas", "fp32"), ("bgemm", "torch", "fp32")}
    assert want <= got, f"missing: {sorted(want - got)}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op,impl,dtype", CASES, ids=CASE_IDS)
def test_beta_nonzero(op, impl, dtype, shape, stream):
    """alpha = 0.75, beta = -1.25 on a fresh random C0: beta*C0 is as large as the product, so a
    baseline that drops, repeats or mis-scales it is off by tens of percent."""
    runner = _runner(op, impl, dtype)
    problem = _problem(op, shape, ALPHA, BETA, dtype)
    assert not op.refusal(impl, problem), op.refusal(impl, problem)
    inputs = _inputs(op, problem, seed=1300 + sum(shape), poisoned=False)
    verdict = _verdict(op, problem, inputs, _run(runner, problem, inputs, stream))
    assert verdict.passed, f"{op.name} {impl.name} {dtype} {problem.shape} a={ALPHA} b={BETA}: {verdict.reason}"


@pytest.mark.parametrize("alpha", (1.0, ALPHA))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op,impl,dtype", CASES, ids=CASE_IDS)
def test_beta_zero_never_reads_c(op, impl, dtype, shape, alpha, stream):
    """beta == 0 with C0 all NaN: a baseline that reads C (0 * NaN = NaN) or leaves an element
    unwritten fails the NaN check of the comparison."""
    runner = _runner(op, impl, dtype)
    problem = _problem(op, shape, alpha, 0.0, dtype)
    assert not op.refusal(impl, problem), op.refusal(impl, problem)
    inputs = _inputs(op, problem, seed=1400 + sum(shape), poisoned=True)
    verdict = _verdict(op, problem, inputs, _run(runner, problem, inputs, stream))
    assert verdict.nan_count == 0 and verdict.passed, (
        f"{op.name} {impl.name} {dtype} {problem.shape} a={alpha} b=0: {verdict.reason}")


def _triton_tuned_keys(M, N, K) -> set:
    """The Triton autotuner's cache keys for (M, N, K) (empty before the kernel is built)."""
    from gemmlab.ops import sgemm_triton

    if sgemm_triton._kernel is None:
        return set()
    autotuner = sgemm_triton._kernel[1]
    return {key for key in autotuner.cache if tuple(key[:3]) == (M, N, K)}


@pytest.mark.parametrize("after_beta0", (False, True), ids=("cold", "after_beta0"))
def test_triton_first_call_with_beta(after_beta0, stream):
    """The call that autotunes (a shape never seen; or one tuned with beta == 0 only, since beta
    == 0 is part of the key) returns the right C = alpha*A@B + beta*C0, and the same bits as the
    next call, which reuses the chosen config without autotuning."""
    import cupy as cp

    op = ops.get("sgemm")
    impl = registry.get("triton", "sgemm")
    runner = _runner(op, impl, "fp32")
    shape = TRITON_AFTER_BETA0_SHAPE if after_beta0 else TRITON_COLD_SHAPE
    assert not _triton_tuned_keys(*shape), f"{shape} was autotuned before this test: pick a shape of its own"
    if after_beta0:  # tune the beta == 0 kernel at this shape first (C0 NaN: never read)
        problem0 = _problem(op, shape, ALPHA, 0.0, "fp32")
        inputs0 = _inputs(op, problem0, seed=1500, poisoned=True)
        verdict0 = _verdict(op, problem0, inputs0, _run(runner, problem0, inputs0, stream))
        assert verdict0.passed, f"beta = 0 at {problem0.shape}: {verdict0.reason}"
        assert len(_triton_tuned_keys(*shape)) == 1
    problem = _problem(op, shape, ALPHA, BETA, "fp32")
    inputs = _inputs(op, problem, seed=1501, poisoned=False)
    tuned_before = _triton_tuned_keys(*shape)

    first = _run(runner, problem, inputs, stream)
    tuned_after = _triton_tuned_keys(*shape)
    assert len(tuned_after) == len(tuned_before) + 1, (
        f"the beta != 0 call at {problem.shape} should have autotuned (a new key); keys before "
        f"{sorted(map(str, tuned_before))}, after {sorted(map(str, tuned_after))}")
    verdict = _verdict(op, problem, inputs, first)
    assert verdict.passed, f"first (autotuning) call, {problem.shape} a={ALPHA} b={BETA}: {verdict.reason}"

    second = _run(runner, problem, inputs, stream)
    assert _triton_tuned_keys(*shape) == tuned_after  # no new tuning
    assert bool(cp.array_equal(first, second)), "the autotuning call and the next one disagree"
