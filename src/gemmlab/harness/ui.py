"""What every command shows and parses the same way: the console, the progress bar, and
NAME=VALUE parameter lists."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import BadArgumentError

# Logs and pipes get wide tables instead of 80-column ones with truncated cells.
console = Console(width=None if sys.stdout.isatty() else 200)


def fmt_params(values: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items()) or "-"


def parse_params(text: str | None) -> dict[str, int]:
    """'BM=64,BN=128' -> {'BM': 64, 'BN': 128}."""
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadArgumentError(f"--params item {item!r} is not NAME=VALUE")
        try:
            out[key.strip()] = int(value)
        except ValueError:
            raise BadArgumentError(f"--params {key.strip()}={value!r} is not an integer") from None
    return out


def params_for(impls: list, params: str | None) -> dict[str, dict[str, int]]:
    """--params for the one kernel in --impl, checked against its constraints before any GPU work."""
    values = parse_params(params)
    if not values:
        return {}
    kernels = [i for i in impls if i.kind == "kernel"]
    if len(kernels) != 1:
        raise BadArgumentError("--params needs exactly one kernel in --impl")
    kernels[0].resolve(values)  # refuse a broken configuration before any GPU work
    return {kernels[0].name: values}


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)
