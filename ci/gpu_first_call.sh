#!/usr/bin/env bash
# One GPU-machine run for the first-call work (issue 40): the handler-cache
# tests on the GPU (jax_kernel handlers and a cache=True launch site loaded in
# new processes, checked against NumPy), the CPU cache tests, then the
# compile-time benchmark (cold, frame readers cached, from the cache) with a
# GPU's images. Logs and JSON under $OUT.
set -u
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
echo "== tests"
timeout "${TEST_TIMEOUT:-400}" python3 -m pytest -q -rfEs -p no:cacheprovider -n 4 \
  tests/test_handler_cache_gpu.py tests/test_handler_cache_cpu.py tests/test_jax_gpu.py \
  2>&1 | tee "$OUT/first_call_tests.log" | tail -30
echo "== compile time"
timeout 500 python3 benchmarks/compile_time.py --runs "${RUNS:-3}" --json "$OUT/compile_time.json" \
  2>&1 | tee "$OUT/compile_time.log" | tail -25
