"""Measure the tuner's scaling: one kernel's whole space on one shape, swept by the local pool
on one GPU, by the local pool on N GPUs, and by Dask (--cluster local) on N GPUs, each from a
cold NVRTC cache and into its own database. Writes a Markdown table (docs/tuning.md cites it).
With --warm-cache every mode starts from one cache already holding every point (filled first,
untimed): the trials alone, as when a space is tuned again at another shape.

    python scripts/cluster_scaling.py --impl warptiling --size 4096 --gpus 0,1 --out OUT
    python scripts/cluster_scaling.py ... --modes local1   # one mode per call, same --out

Each mode's log is OUT/<mode>.log and its database OUT/<mode>.db; the table is rebuilt from
every mode found in OUT, so modes may be measured in separate calls.
"""
from __future__ import annotations

import argparse
import json
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gemmlab.errors import GemmlabError


def command(mode: str, impl: str, size: int, gpus: list[str], db: Path) -> list[str]:
    base = [sys.executable, "-m", "gemmlab.cli", "tune", "--impl", impl, "--M", str(size), "--N", str(size),
            "--K", str(size), "--db", str(db)]
    if mode == "local1":
        return base + ["--devices", gpus[0]]
    if mode == "localN":
        return base + ["--devices", ",".join(gpus)]
    if mode == "daskN":
        return base + ["--cluster", "local", "--devices", ",".join(gpus)]
    raise SystemExit(f"unknown mode {mode}")


FILL_CACHE = """
import sys
from gemmlab import registry
from gemmlab.cuda.device import info
from gemmlab.tune.compile_pool import compile_stream
from gemmlab.tune.space import enumerate_space
points = enumerate_space(registry.get(sys.argv[1])).kept
stream = compile_stream(sys.argv[1], points, info().arch)
failed = sum(1 for p in points if stream.outcome(p).error)
print(f"cache filled: {len(points)} points, {failed} refused by the compiler")
"""


def fill_cache(impl: str) -> str:
    cache = tempfile.mkdtemp(prefix="cache-shared-")
    env = {**__import__("os").environ, "GEMMLAB_CACHE": cache}
    subprocess.run([sys.executable, "-c", FILL_CACHE, impl], env=env, check=True)
    return cache


def measure(mode: str, args, out: Path, cache: str | None = None) -> None:
    db = out / f"{mode}.db"
    db.unlink(missing_ok=True)
    cmd = command(mode, args.impl, args.size, args.gpus, db)
    env = {**__import__("os").environ, "GEMMLAB_CACHE": cache or tempfile.mkdtemp(prefix=f"cache-{mode}-")}
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - start
    printable = " ".join(c if c != sys.executable else "python3" for c in cmd)
    (out / f"{mode}.log").write_text(f"$ {printable}\n{proc.stdout}\nexit {proc.returncode}; "
                                     f"end to end {seconds:.1f} s\n")
    (out / f"{mode}.json").write_text(json.dumps({"command": printable, "seconds": seconds,
                                                  "exit": proc.returncode}))
    print(f"{mode}: exit {proc.returncode}, {seconds:.1f} s", flush=True)


def summarise(mode: str, out: Path) -> dict | None:
    meta_path, log_path, db = out / f"{mode}.json", out / f"{mode}.log", out / f"{mode}.db"
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    log = log_path.read_text()
    walls = re.findall(r"wall ([\d.]+) s", log)
    compiled = re.findall(r"compiled (\d+) in ([\d.]+) s", log)
    rows, gpu = [], None
    if db.is_file():  # read only: a run that stopped before it stored anything has no database to make
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        con.row_factory = sqlite3.Row
        try:
            rows = con.execute("SELECT params, status, gflops FROM results").fetchall()
            gpu = con.execute("SELECT gpu FROM runs").fetchone()
        except sqlite3.Error:  # no tables yet: the tune run failed first (its log says why)
            pass
        finally:
            con.close()
    ranked = sorted((r for r in rows if r["status"] == "PASS"), key=lambda r: -r["gflops"])
    return {"mode": mode, "command": meta["command"], "end_to_end_s": meta["seconds"], "exit": meta["exit"],
            "sweep_s": float(walls[-1]) if walls else None,
            "compile_s": float(compiled[-1][1]) if compiled else None, "trials": len(rows),
            "pass": len(ranked), "gpu": gpu["gpu"] if gpu else None,
            "best": json.loads(ranked[0]["params"]) if ranked else None,
            "best_gflops": ranked[0]["gflops"] if ranked else None,
            "top": {r["params"]: r["gflops"] for r in ranked}}


def table(results: list[dict]) -> str:
    local1 = next((r for r in results if r["mode"] == "local1"), None)
    localn = next((r for r in results if r["mode"] == "localN"), None)
    lines = ["| mode | GPU | trials (PASS) | compile s | sweep wall s | end to end s | vs local pool, N GPUs | "
             "vs 1 GPU | best GFLOP/s | best point |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ratio_n = f"{r['sweep_s'] / localn['sweep_s']:.2f}x" if localn and r["sweep_s"] else "-"
        ratio_1 = f"{r['sweep_s'] / local1['sweep_s']:.2f}x" if local1 and r["sweep_s"] else "-"
        best = ",".join(f"{k}={v}" for k, v in (r["best"] or {}).items())
        lines.append(f"| {r['mode']} | {r['gpu']} | {r['trials']} ({r['pass']}) | {r['compile_s']} | {r['sweep_s']} | "
                     f"{r['end_to_end_s']:.1f} | {ratio_n} | {ratio_1} | {r['best_gflops'] or 0:,.0f} | {best} |")
    lines.append("")
    # the same best point within noise: each mode's best, as measured by every other mode
    for r in results:
        key = json.dumps(r["best"], sort_keys=True)
        seen = []
        for other in results:
            match = next((g for p, g in other["top"].items() if json.dumps(json.loads(p), sort_keys=True) == key), None)
            rank = sorted(other["top"].values(), reverse=True).index(match) + 1 if match is not None else None
            seen.append(f"{other['mode']}: {match:,.0f} (rank {rank})" if match is not None else f"{other['mode']}: -")
        lines.append(f"- best of {r['mode']} as measured by " + "; ".join(seen))
    lines.append("")
    lines += [f"- `{r['mode']}`: `{r['command']}`" for r in results]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default="warptiling")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--modes", default="daskN,localN,local1")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--warm-cache", action="store_true", help="every mode from a cache holding every point")
    args = ap.parse_args()
    unknown = set(args.modes.split(",")) - {"local1", "localN", "daskN"}
    if unknown:
        ap.error(f"--modes: unknown {', '.join(sorted(unknown))}; choose from local1, localN, daskN")
    args.gpus = args.gpus.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    cache = fill_cache(args.impl) if args.warm_cache else None
    for mode in args.modes.split(","):
        measure(mode, args, args.out, cache)
    results = [r for m in ("local1", "localN", "daskN") if (r := summarise(m, args.out))]
    text = table(results)
    (args.out / "scaling.md").write_text(text)
    print(text)
    failed = [f"{r['mode']} (exit {r['exit']})" for r in results if r["exit"]]
    if failed:  # the table keeps what the others measured; the run still fails, in one line
        raise GemmlabError(f"{', '.join(failed)} failed: see {args.out}/<mode>.log")


if __name__ == "__main__":
    from gemmlab.errors import run_script

    sys.exit(run_script(main))
