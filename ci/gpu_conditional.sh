#!/usr/bin/env bash
# GPU-machine run for conditional graph nodes and the kernel-side
# intrinsics (set_conditional, griddepcontrol): the probe of the driver's
# behaviour (ci/gpu_conditional_probe.py), the conditional-node tests (GPU
# and CPU), the converging-solver example under compute-sanitizer, the
# solver benchmark and the JAX while_loop measurement. Logs and JSON under
# $OUT. STEPS selects steps (default: all): probe tests example bench jax.
set -u
source "$(dirname "$0")/gpu_env.sh"
STEPS=${STEPS:-probe tests bench example jax}
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
if has probe; then
  echo "== probe"
  timeout 120 python3 ci/gpu_conditional_probe.py 2>&1 | tee "$OUT/probe.log"
fi
if has tests; then
  echo "== tests"
  timeout 200 python3 -m pytest -q -rfEs -p no:cacheprovider -n 8 \
    tests/test_conditional_gpu.py tests/test_conditional_cpu.py tests/test_graphs_gpu.py \
    2>&1 | tee "$OUT/tests.log" | tail -40
fi
if has bench; then
  echo "== solver benchmark"
  timeout 90 python3 benchmarks/conditional.py --json "$OUT/conditional.json" 2>&1 \
    | tee "$OUT/bench.log"
fi
if has example; then
  echo "== example (compute-sanitizer memcheck; API errors not reported: numba-cuda's"
  echo "   driver binding probes symbols with cuGetProcAddress at start)"
  timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
    python3 examples/converging_solver.py 2>&1 | tee "$OUT/sanitizer.log" | tail -12
  echo "exit ${PIPESTATUS[0]}"
fi
if has jax; then
  echo "== JAX while_loop"
  timeout 200 python3 benchmarks/jax_while.py --hlo --json "$OUT/jax_while.json" \
    --settings "${JAX_SETTINGS:-XLA defaults,command buffers with WHILE,command buffers off}" 2>&1 \
    | tee "$OUT/jax_while.log"
fi
