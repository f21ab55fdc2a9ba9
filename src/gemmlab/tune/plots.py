"""Tuning plots (seed 000's heatmaps): GFLOP/s over two parameters, the best over all the
others, and the best-so-far curve against the trial count. PNG files, matplotlib (Agg)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..outputs import make_folder


def _timed(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r.get("status") == "PASS" and r.get("gflops")]


def default_axes(rows: Sequence[dict]) -> list[tuple[str, str]]:
    """(BM, BN) and (TM, TN) when present, else the two most varied parameters."""
    timed = _timed(rows)
    if not timed:
        return []
    names = list(timed[0]["params"])
    varied = [n for n in names if len({r["params"][n] for r in timed}) > 1]
    pairs = [(a, b) for a, b in (("BM", "BN"), ("TM", "TN")) if a in varied and b in varied]
    if not pairs and len(varied) >= 2:
        varied.sort(key=lambda n: -len({r["params"][n] for r in timed}))
        pairs = [(varied[0], varied[1])]
    return pairs


def heatmap(rows: Sequence[dict], x: str, y: str, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    timed = _timed(rows)
    xs = sorted({r["params"][x] for r in timed})
    ys = sorted({r["params"][y] for r in timed})
    grid = np.full((len(ys), len(xs)), np.nan)
    for r in timed:
        i, j = ys.index(r["params"][y]), xs.index(r["params"][x])
        grid[i, j] = np.nanmax([grid[i, j], r["gflops"]])
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(xs), 1.0 + 0.8 * len(ys)))
    image = ax.imshow(grid, cmap="viridis", origin="lower", aspect="auto")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    for i in range(len(ys)):
        for j in range(len(xs)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j] / 1000:.1f}", ha="center", va="center", color="white", fontsize=8)
    fig.colorbar(image, ax=ax, label="GFLOP/s (best over the other parameters)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    make_folder(path.parent)  # remembered: a command failing after it leaves no empty plots/
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def best_so_far(rows: Sequence[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    best, curve = 0.0, []
    for r in rows:
        if r.get("status") == "PASS" and r.get("gflops"):
            best = max(best, r["gflops"])
        curve.append(best)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(curve) + 1), curve, drawstyle="steps-post")
    ax.set_xlabel("trial")
    ax.set_ylabel("best GFLOP/s so far")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    make_folder(path.parent)  # remembered: a command failing after it leaves no empty plots/
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def tune_plots(rows: Sequence[dict], out_dir: Path, impl: str, shape: str,
               axes: Sequence[tuple[str, str]] | None = None) -> list[Path]:
    paths = [best_so_far(rows, out_dir / f"tune_{impl}_{shape}_progress.png", f"{impl} at {shape}")]
    for x, y in axes or default_axes(rows):
        paths.append(heatmap(rows, x, y, out_dir / f"tune_{impl}_{shape}_{x}x{y}.png", f"{impl} at {shape}"))
    return paths
