#!/usr/bin/env bash
# One GPU-machine run of everything that needs a GPU (tests, examples, and
# with BENCH=1 the benchmarks). Carry .whl (brainevent for the JAX
# benchmark, filecheck/cffi for numba-cuda's suite) and .whl-mlir (the
# numba-cuda-mlir tree from ci/repack_mlir_wheel.sh). Results under $OUT.
#   bash ci/gpu_all.sh            tests and examples
#   BENCH=1 bash ci/gpu_all.sh    benchmarks only
#   SUITE=1 bash ci/gpu_all.sh    numba-cuda's cudapy tests with and without the package
set -u
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
if [ -n "${SUITE:-}" ]; then
  timeout 560 python3 ci/numba_cuda_suite.py --gpu --test-deps .whl/filecheck-*.whl .whl/suite/*.whl \
    --timeout 540 ${SUITE_ARGS:-} 2>&1 | tee "$OUT/suite.log" | tail -30
  exit
fi
if [ -z "${BENCH:-}" ]; then
  echo "== tests"
  timeout 400 python3 -m pytest -q -rfEs -p no:cacheprovider -n 12 tests 2>&1 | tee "$OUT/tests.log" | tail -25
  echo "== examples (every one in examples/; tests/test_readme_examples.py runs them too)"
  for e in examples/*.py; do
    case "$e" in examples/_*) continue;; esac  # shared by the examples, not one
    [ "$e" = examples/jax_multiprocess.py ] && continue  # below, with its own timeout
    echo "-- $e"
    timeout 120 python3 "$e" 2>&1 | tail -2
  done
  timeout 150 python3 examples/jax_multiprocess.py --timeout 120 2>&1 | grep -v '^\[Gloo\]' | tail -4
  exit
fi
echo "== benchmarks"
timeout 150 python3 benchmarks/launch_overhead.py --json "$OUT/bench.json" --launches 300000 2>&1 | tail -12
timeout 150 python3 benchmarks/devicearray_overhead.py --json "$OUT/devicearray.json" 2>&1 | tail -20
timeout 100 python3 benchmarks/cupy_call_breakdown.py --json "$OUT/cupy_breakdown.json" 2>&1 | tail -16
timeout 170 python3 benchmarks/graphs.py --json "$OUT/graphs.json" --plot "$OUT/graphs.png" 2>&1 | tail -30
timeout 150 python3 benchmarks/jax_overhead.py --json "$OUT/jax.json" --markdown "$OUT/jax.md" 2>&1 | tail -14
timeout 100 python3 benchmarks/events_leak.py --json "$OUT/events.json" 2>&1 | tail -8
timeout 120 python3 benchmarks/aot_launch.py --json "$OUT/aot.json" 2>&1 | tail -8
timeout 150 python3 benchmarks/kernel_sources.py --json "$OUT/kernel_sources.json" 2>&1 | tail -14
