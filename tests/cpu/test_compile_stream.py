"""The compile stream: a trial starts as soon as its own point is compiled, a failed compilation
is that point's ERROR row, and a compilation lost with its worker is redone by the fallback."""
from __future__ import annotations

from concurrent.futures import Future

from gemmlab import registry
from gemmlab.harness.tuned import canonical
from gemmlab.problem import GemmProblem
from gemmlab.tune.compile_pool import CompileOutcome, CompileStream, _Now
from gemmlab.tune.search import Exhaustive
from gemmlab.tune.space import enumerate_space
from gemmlab.tune.tuner import TuneOptions, tune


def _failed(exc: Exception) -> Future:
    f: Future = Future()
    f.set_exception(exc)
    return f


def test_a_lost_compilation_is_redone_by_the_fallback():
    point = {"BM": 64}
    stream = CompileStream({canonical({"BM": 64}): _failed(RuntimeError("KilledWorker"))},
                           fallback=lambda p: CompileOutcome(p, None, 0.5))
    assert stream.outcome(point).params == point


def test_without_a_fallback_the_loss_is_raised():
    stream = CompileStream({canonical({"BM": 64}): _failed(RuntimeError("pool broken"))})
    try:
        stream.outcome({"BM": 64})
    except RuntimeError as exc:
        assert "pool broken" in str(exc)
    else:
        raise AssertionError("a lost compilation without a fallback must not pass silently")


class _LoggingExecutor:
    """Compiles when asked (one _Now future per point) and runs each task at once, logging both."""

    restarts = 0

    def __init__(self, bad: dict):
        self.log: list[tuple[str, str]] = []
        self.bad = bad

    def compile(self, impl, points, arch):
        def one(p):
            self.log.append(("compile", canonical(p)))
            return CompileOutcome(p, None, 0.01, error="ptxas: too many resources" if p == self.bad else None)

        return CompileStream({canonical(p): _Now(lambda p=p: one(p)) for p in points})

    def run(self, tasks, on_result):
        for task in tasks:
            self.log.append(("trial", canonical(task["params"])))
            on_result(task, {"status": "PASS", "gflops": 1.0})


def test_trials_start_before_the_last_point_is_compiled():
    points = enumerate_space(registry.get("warptiling")).kept[:6]
    executor = _LoggingExecutor(bad=points[2])
    summary = tune(registry.get("warptiling"), GemmProblem(256, 256, 256), Exhaustive(points, {}),
                   TuneOptions(precompile=True), "sm_90", executor=executor)
    kinds = [k for k, _ in executor.log]
    assert kinds.index("trial") < len(kinds) - 1 - kinds[::-1].index("compile"), executor.log
    statuses = [t["status"] for t in summary.trials]
    assert statuses.count("ERROR") == 1 and statuses.count("PASS") == 5
    assert "too many resources" in next(t["reason"] for t in summary.trials if t["status"] == "ERROR")
    assert summary.compiled == 5
