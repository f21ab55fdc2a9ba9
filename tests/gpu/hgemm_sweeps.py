"""What the hgemm GPU test modules share: one failure list for a verify sweep, and the skips for
a baseline that is missing here or a Hopper-only rung on another GPU."""
import pytest


def assert_all_pass(results):
    bad = [f"{r.impl} {r.problem.shape} {r.problem.layout} C {r.problem.out_dtype} a={r.problem.alpha} "
           f"b={r.problem.beta}: {r.status} {r.reason}" for r in results if r.status != "PASS"]
    assert not bad, "\n".join(bad)


def hopper() -> bool:
    from gemmlab.cuda.device import info

    return info().arch == "sm_90"


def skip_unavailable(impl):
    if impl.kind == "baseline" and impl.unavailable_reason():
        pytest.skip(impl.unavailable_reason())
    if getattr(impl, "arch", None) == "sm_90a" and not hopper():
        pytest.skip(f"{impl.name} needs sm_90a (Hopper)")
