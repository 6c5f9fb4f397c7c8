#!/usr/bin/env bash
# One GPU-machine run for round 4's work, in steps (STEPS, default all):
#   tests     every test (GPU and CPU), then every example
#   round4    the conditional-node probe and the converging solver under
#             compute-sanitizer; the solver and dependent-launch benchmarks
#   ab        base against head (.bench/base, see ci/bench_ab.sh): launch
#             overhead, the JAX handler's cost, compile time
# Carry .whl (filecheck, cffi) and .whl-mlir (ci/repack_mlir_wheel.sh).
# Logs and JSON under $OUT.
set -u
source "$(dirname "$0")/gpu_env.sh"
STEPS=${STEPS:-tests round4 ab}
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
if has tests; then
  echo "== tests"
  timeout "${TEST_TIMEOUT:-330}" python3 -m pytest -q -rfEs -p no:cacheprovider -n 12 tests \
    2>&1 | tee "$OUT/tests.log" | tail -30
  echo "== examples"
  for e in examples/*.py; do
    case "$e" in examples/_*|examples/jax_multiprocess.py) continue;; esac
    echo "-- $e"
    timeout 100 python3 "$e" 2>&1 | tail -2
  done
fi
if has round4; then
  STEPS="probe example" bash "$(dirname "$0")/gpu_conditional.sh"
  echo "== solver benchmark"
  timeout 120 python3 benchmarks/conditional.py --json "$OUT/conditional.json" 2>&1 | tail -30
  echo "== dependent launches"
  timeout 120 python3 benchmarks/dependent_launch.py --json "$OUT/dependent.json" 2>&1 | tail -14
fi
if has ab; then
  RUNS=${AB_RUNS:-2} bash "$(dirname "$0")/bench_ab.sh" ${AB_BENCH:-launch_overhead jax_overhead compile_time}
fi
