#!/usr/bin/env bash
# Cold first call, A/B: a snapshot of an earlier tree against this one (on the device machine, or
# here: the install from the device's own index then fails harmlessly and the local packages serve).
#   bash benchmarks/device/cold_ab.sh BEFORE_TREE ROUNDS KERNEL...
# Each round runs, for each kernel and alternately for each tree, one fresh process with empty
# kernel caches (the cold first call) and one more on the caches it filled (the warm start),
# via benchmarks.realworld.run's `child` (import, then the first result).  Pinned to 2 cores,
# the bar's machine size.  Writes cold_ab.jsonl and a log to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
before=$1; rounds=$2; shift 2
export PIP_CONFIG_FILE=/dev/null JAX_PLATFORMS=cpu PYTHONUNBUFFERED=1 NUMBA_NUM_THREADS=2
python3 -m pip install -q --isolated --only-binary=:all: --index-url file:///opt/pypi/simple \
    --target /tmp/site numba optree 2>&1 | tail -2
out=${OUT:-/tmp/out}; mkdir -p "$out"
for round in $(seq "$rounds"); do
  for kernel in "$@"; do
    for tree in "$before" "$PWD"; do
      lw=$(mktemp -d); nb=$(mktemp -d)
      for start in cold warm; do
        line=$(cd "$tree" && LANEWISE_CACHE_DIR=$lw NUMBA_CACHE_DIR=$nb PYTHONPATH="$tree/src:$tree:/tmp/site" \
               taskset -c 0,1 python3 -m benchmarks.realworld.run child "$kernel" lanewise 2>>"$out/cold_ab.log" | tail -1)
        echo "{\"round\": $round, \"kernel\": \"$kernel\", \"tree\": \"$(basename "$tree")\", \"start\": \"$start\", \"t\": $line}" \
          | tee -a "$out/cold_ab.jsonl"
      done
      rm -rf "$lw" "$nb"
    done
  done
done
