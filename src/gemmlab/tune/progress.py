"""The sweep's live view: one bar per GPU model and a line per worker, each with its trials
per second (the figure that says whether adding a worker helped)."""
from __future__ import annotations

import threading
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from ..harness.ui import console


class RateColumn(ProgressColumn):
    """Trials per second since the task's first trial (rich's own speed is a short window)."""

    def render(self, task) -> Text:
        elapsed = task.elapsed or 0.0
        return Text(f"{task.completed / elapsed:5.2f} trials/s" if task.completed and elapsed > 0 else "", style="cyan")


class SweepProgress:
    def __init__(self, totals: dict[str, int]):
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                                 TimeElapsedColumn(), console=console, transient=True)
        self._models = {m: self.progress.add_task(f"tuning on {m}", total=n) for m, n in totals.items()}
        self._workers: dict[str, int] = {}
        self._lock = threading.Lock()
        self.started = time.monotonic()

    def __enter__(self) -> "SweepProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def advance(self, model: str, row: dict) -> None:
        self.progress.advance(self._models[model])
        worker = (row.get("extra") or {}).get("worker")
        if not worker or worker == "local":
            return
        with self._lock:
            if worker not in self._workers:
                self._workers[worker] = self.progress.add_task(f"  worker {worker}", total=None)
        self.progress.advance(self._workers[worker])
