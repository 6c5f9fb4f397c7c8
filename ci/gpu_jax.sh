#!/usr/bin/env bash
# GPU-machine run for the JAX interop (a few minutes on an H200): the GPU JAX
# tests (the jax.export round trip across two processes included), the
# two-process example when 2 GPUs are visible, and benchmarks/jax_overhead.py.
# Logs and results (jax_bench.json, jax_bench.md) go to $OUT (or ./gpu-out).
# Wheels in .whl/ (brainevent 0.2.1, brainunit, saiunit, array_api_compat for
# the benchmark's brainevent row) are installed to /tmp/site first.
set -u
source "$(dirname "$0")/gpu_env.sh"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "GPUs: $NGPU"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import jax, numba, numpy; print('jax', jax.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, jax.devices())"
status=0

echo "== GPU JAX tests"
timeout 200 python3 -m pytest -q -rfEs -p no:cacheprovider -n 2 tests/test_jax_gpu.py \
  -k "not multiprocess" 2>&1 | tee "$OUT/jax_gpu_tests.log" | tail -15
[ "${PIPESTATUS[0]}" = 0 ] || status=1

if [ "$NGPU" -ge 2 ]; then
  echo "== two processes, one GPU each (examples/jax_multiprocess.py)"
  timeout 150 python3 examples/jax_multiprocess.py --timeout 120 2>&1 \
    | tee "$OUT/jax_multiprocess.log" | grep -v '^\[Gloo\]' | tail -6
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
else
  echo "== two-process example skipped: $NGPU GPU(s)"
fi

echo "== benchmark"
timeout 240 python3 benchmarks/jax_overhead.py --json "$OUT/jax_bench.json" \
  --markdown "$OUT/jax_bench.md" 2>&1 | tee "$OUT/jax_bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "gpu_jax.sh: $([ $status = 0 ] && echo all steps passed || echo a step FAILED)"
exit $status
