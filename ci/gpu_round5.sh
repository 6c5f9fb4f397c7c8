#!/usr/bin/env bash
# GPU-machine run for round 5's correctness work (issue 39), in steps
# (STEPS, default "probe tests", about 3 minutes):
#   probe   ci/gpu_round5_probe.py: what the driver itself does (lines "PROBE ...")
#   tests   the GPU tests this round added or touched (the default-in-body
#           result is printed as a "DEFAULT-IN-BODY" line)
#   suite   numba-cuda's own cudapy GPU tests with and without the package
#           imported (ci/numba_cuda_suite.py --gpu; about 9 minutes: run it
#           alone, STEPS=suite; carry .whl/filecheck-*.whl and .whl/suite/*.whl)
# Logs under $OUT.
set -u
source "$(dirname "$0")/gpu_env.sh"
STEPS=${STEPS:-probe tests}
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
if has probe; then
  echo "== probe"
  timeout 90 python3 ci/gpu_round5_probe.py 2>&1 | tee "$OUT/round5_probe.log" \
    | grep -E "^PROBE|Error"
fi
if has tests; then
  echo "== GPU tests"
  timeout 150 python3 -m pytest -q -rfEs -p no:cacheprovider -n 4 -s \
    tests/test_conditional_gpu.py tests/test_graphs_gpu.py 2>&1 | tee "$OUT/round5_tests.log" \
    | grep -E "DEFAULT-IN-BODY|passed|failed|FAILED|ERROR" | tail -20
fi
if has suite; then
  echo "== numba-cuda suite (cudapy, with and without the package imported)"
  timeout 580 python3 ci/numba_cuda_suite.py --gpu --test-deps .whl/filecheck-*.whl \
    .whl/suite/*.whl --timeout 270 --keep "$OUT/numba_cuda_suite" 2>&1 \
    | tee "$OUT/numba_cuda_suite.log" | tail -20
fi
