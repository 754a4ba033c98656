#!/usr/bin/env bash
# Everything the tpu backend needs measured on the chip, in one run (the chip's time is short):
#   bash benchmarks/device/tpu_all.sh [N]
# 1. installs numba/optree/pytest/hypothesis from the device's own index into /tmp/site;
# 2. the Mosaic probe of loop-carry forms (tpu_probe.py);
# 3. tests/test_tpu_{backend,rows,random}.py compiled by Mosaic on the chip (LANEWISE_TPU_TESTS_ON_CHIP=1);
# 4. each lowering of the primitive table compiled by Mosaic, its error in ulps (tpu_ops.py);
# 5. W2, a hand-written Pallas W2 and a held-out divergent kernel against jax.vmap(lax.while_loop)
#    (tpu_w2.py);
# 6. W1 against jax.jit of nested jax.vmap, over lw.config.tpu_block sizes (tpu_w1.py);
# 7. W3 (a scan per series over rows held in VMEM) against jax.jit(jax.vmap(lax.scan)) (tpu_w3.py);
# 8. MC, 10^8 paths of lw.random.normal in lanes against jax.random (threefry, rbg) (tpu_mc.py);
# 9. what checking row reads costs, eager and under jax.jit (tpu_bounds.py).
# SKIP_OPS=1 skips step 4, SKIP_TESTS=1 step 3, SKIP_W2/SKIP_W3/SKIP_MC/SKIP_BOUNDS=1 steps 5, 7, 8, 9;
# TESTS="tests/a.py tests/b.py" runs those files in step 3 (TESTS_TIMEOUT seconds, default 200).  Logs and tpu_{w1,w2,w3,mc,bounds}.json go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
export PIP_CONFIG_FILE=/dev/null PYTHONUNBUFFERED=1
python3 -m pip install -q --isolated --only-binary=:all: --index-url file:///opt/pypi/simple \
    --target /tmp/site numba optree pytest hypothesis 2>&1 | tail -2
export PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}:/tmp/site
python3 -c "import jax, lanewise; print(jax.__version__, jax.devices(), lanewise.__file__)"
[ -n "${PROBE:-}" ] && timeout 150 python3 benchmarks/device/tpu_probe.py 2>&1 | tee "$out/probe.log" | grep -v '^WARNING'
[ -z "${SKIP_OPS:-}" ] && timeout 200 python3 benchmarks/device/tpu_ops.py > "$out/tpu_ops.log" 2>&1 &&
grep -v '"max_ulps_vs_cpu_jax": [0-3]\.\|"mismatches_vs_cpu_jax": 0}' "$out/tpu_ops.log" | grep '^{' | cut -c1-200
[ -z "${SKIP_TESTS:-}" ] && LANEWISE_TPU_TESTS_ON_CHIP=1 timeout ${TESTS_TIMEOUT:-200} python3 -m pytest -q -p no:xdist -p no:cacheprovider \
    --tb=short ${TESTS:-tests/test_tpu_backend.py tests/test_tpu_rows.py tests/test_tpu_random.py} > "$out/chip_tests.log" 2>&1
grep -E '^(E  |FAILED|[0-9]+ (passed|failed))' "$out/chip_tests.log" | cut -c1-300 | head -40
[ -z "${SKIP_W2:-}" ] && timeout ${W2_TIMEOUT:-240} python3 benchmarks/device/tpu_w2.py "${1:-1536}" 2>&1 | tee "$out/tpu_w2.log" | grep -v '^WARNING'
timeout ${W1_TIMEOUT:-120} python3 benchmarks/device/tpu_w1.py 2>&1 | tee "$out/tpu_w1.log" | grep -v '^WARNING'
[ -z "${SKIP_W3:-}" ] && timeout ${W3_TIMEOUT:-240} python3 benchmarks/device/tpu_w3.py 2>&1 | tee "$out/tpu_w3.log" | grep -v '^WARNING'
[ -z "${SKIP_MC:-}" ] && timeout ${MC_TIMEOUT:-180} python3 benchmarks/device/tpu_mc.py 2>&1 | tee "$out/tpu_mc.log" | grep -v '^WARNING'
[ -z "${SKIP_BOUNDS:-}" ] && timeout ${BOUNDS_TIMEOUT:-180} python3 benchmarks/device/tpu_bounds.py 2>&1 | tee "$out/tpu_bounds.log" | grep -v '^WARNING'
