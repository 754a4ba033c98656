#!/usr/bin/env bash
# The thread-scaling run on the device machine (13 cores; see DEVELOPERS.md and the issue):
#   bash benchmarks/device/threads.sh [harness arguments...]
# Installs what the machine lacks from its own package index into /tmp/site (at the end of
# PYTHONPATH, so the machine's JAX and NumPy stay first), keeps JAX on the CPU, runs
# `python -m benchmarks.threads` with the given arguments and copies the results to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PIP_CONFIG_FILE=/dev/null JAX_PLATFORMS=cpu PYTHONUNBUFFERED=1
python3 -m pip install -q --isolated --only-binary=:all: --index-url file:///opt/pypi/simple \
    --target /tmp/site numba optree matplotlib numexpr 2>&1 | tail -3
# LW_TREE: another copy of the repository to measure (a committed snapshot carried along)
tree=${LW_TREE:-$PWD}
cd "$tree"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$tree/src:$tree:/tmp/site"
python3 -c 'import numpy, numba, jax, os, platform; print("numpy", numpy.__version__, "numba", numba.__version__,
"jax", jax.__version__, "cores", len(os.sched_getaffinity(0)), platform.processor())'
out=${OUT:-/tmp/out}; mkdir -p "$out"
python3 -m benchmarks.threads --out "$out/threads.json" "$@" 2>&1 | tee "$out/threads.log"
