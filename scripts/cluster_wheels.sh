#!/usr/bin/env bash
# Downloads, on a machine with a package index, the wheels that the GPU machines lack for the Dask
# back end (`gemmlab tune --cluster`), into ./.whl (or $1): scripts/gpu_check.sh installs what it
# finds there, so tests/gpu/test_tune.py's Dask test runs on the device instead of skipping. Carry
# the folder with the call (the device tool's carry: [".whl"], about 4 MB).
# Only the packages the device image does not already hold: dask and distributed and their own
# small dependencies. click, jinja2, packaging, psutil, pyyaml and fsspec come with the image's
# torch, typer and accelerate; a copy here would shadow those on PYTHONPATH. bokeh (the dashboard)
# is left out: it needs pandas, and the tuner runs without a dashboard.
# The device's Python is 3.12 on x86_64 (KINDS.md); override with PY_VERSION / PLATFORM.
set -euo pipefail
dest=${1:-$(cd "$(dirname "$0")/.." && pwd)/.whl}
mkdir -p "$dest"
"${PYTHON:-python3}" -m pip download -q --dest "$dest" --only-binary=:all: --no-deps \
    --python-version "${PY_VERSION:-3.12}" --implementation cp \
    --platform "${PLATFORM:-manylinux_2_28_x86_64}" --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
    "dask>=2024.8" "distributed>=2024.8" cloudpickle msgpack toolz tornado sortedcontainers \
    tblib zict partd locket
ls "$dest"
