"""Search strategies behind one small interface: ask() for the next point (None when
done), tell() what it measured. A new strategy is a new class here."""
from __future__ import annotations

import importlib.util
import random
from typing import Sequence

from ..errors import BadArgumentError


class Strategy:
    """Fixed order over the kept points: the base for exhaustive and random."""

    static = True  # the whole list is known up front (so it can be compiled up front)

    def __init__(self, points: Sequence[dict], axes: dict[str, tuple[int, ...]], budget: int | None = None,
                 seed: int = 0):
        self.points = self.order(list(points), seed)[: budget or None]
        self._next = 0

    def order(self, points: list[dict], seed: int) -> list[dict]:
        return points

    def ask(self) -> dict | None:
        if self._next >= len(self.points):
            return None
        self._next += 1
        return self.points[self._next - 1]

    def tell(self, point: dict, gflops: float | None) -> None:
        pass

    def prior(self, point: dict, gflops: float | None) -> None:
        """A point recorded by an earlier run (--resume). The fixed orders ask it again in its turn
        (the tuner skips it, and it counts toward the budget), so they need not hear of it."""


class Exhaustive(Strategy):
    pass


class RandomSample(Strategy):
    def order(self, points: list[dict], seed: int) -> list[dict]:
        random.Random(seed).shuffle(points)
        return points


class Bayes(Strategy):
    """Optuna's TPE over the parameters as categorical choices; proposals that break a
    constraint are told as failures and never run (they do not use the budget)."""

    static = False

    def __init__(self, points, axes, budget=None, seed=0):
        if importlib.util.find_spec("optuna") is None:
            raise BadArgumentError("--strategy bayes needs Optuna: pip install optuna")
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._valid = {tuple(sorted(p.items())) for p in points}
        self._budget = min(budget or len(points), len(points))
        self._asked = 0
        self._seen: set = set()
        self._dist = {n: optuna.distributions.CategoricalDistribution(list(v)) for n, v in axes.items()}
        self._study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
        self._trials: dict = {}
        self._rng = random.Random(seed)  # the fallback's pick: the seed's, not the set order's

    def ask(self) -> dict | None:
        if self._asked >= self._budget:
            return None
        for _ in range(200):
            trial = self._study.ask(self._dist)
            point = dict(trial.params)
            key = tuple(sorted(point.items()))
            if key in self._valid and key not in self._seen:
                self._seen.add(key)
                self._trials[key] = trial
                self._asked += 1
                return point
            self._study.tell(trial, state=__import__("optuna").trial.TrialState.FAIL)
        remaining = sorted(self._valid - self._seen)  # the sampler keeps repeating itself
        if not remaining:
            return None
        key = self._rng.choice(remaining)
        self._study.enqueue_trial(dict(key))  # a trial of the study all the same, so its result is told
        self._trials[key] = self._study.ask(self._dist)
        self._seen.add(key)
        self._asked += 1
        return dict(key)

    def tell(self, point: dict, gflops: float | None) -> None:
        trial = self._trials.pop(tuple(sorted(point.items())), None)
        if trial is not None:
            self._study.tell(trial, gflops or 0.0)

    def prior(self, point: dict, gflops: float | None) -> None:
        """A recorded trial (--resume): the study learns from it, and it counts toward the budget
        as the fixed orders' skipped points do, so --budget is the total over the runs."""
        import optuna

        key = tuple(sorted(point.items()))
        if key not in self._valid or key in self._seen:  # another space's point, or told already
            return
        self._study.add_trial(optuna.trial.create_trial(params=dict(key), distributions=self._dist,
                                                        value=gflops or 0.0))
        self._seen.add(key)
        self._asked += 1


STRATEGIES = {"exhaustive": Exhaustive, "random": RandomSample, "bayes": Bayes}


def exhaustive(points, budget=None, seed=0):
    return Exhaustive(points, {}, budget, seed).points


def random_sample(points, budget=None, seed=0):
    return RandomSample(points, {}, budget, seed).points
