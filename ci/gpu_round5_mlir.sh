#!/usr/bin/env bash
# GPU-machine run for numba-cuda-mlir as a first-class base (issue 38): the
# numba-cuda-mlir tree from .whl-mlir/ (ci/repack_mlir_wheel.sh); first the
# whole suite with both compilers, then numba-cuda uninstalled (the machine is
# fresh each lease) and the suite again: numba-cuda's tests skip, the
# numba-cuda-mlir GPU tests and examples run. Results under $OUT.
set -u
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
if [ -z "${ONLY_MLIR:-}" ]; then
  echo "== suite, numba-cuda and numba-cuda-mlir"
  timeout 330 python3 -m pytest -q -rfE -p no:cacheprovider -n 12 -m "not slow" tests 2>&1 \
    | tee "$OUT/tests_both.log" | tail -15
fi
echo "== without numba-cuda"
python3 -m pip uninstall -y -q numba-cuda 2>&1 | tail -1
python3 -c "import numba_cuda_launch, sys; print('numba.cuda imported:', 'numba.cuda' in sys.modules)"
timeout 200 python3 -m pytest -q -rfE -p no:cacheprovider -n 12 tests 2>&1 \
  | tee "$OUT/tests_mlir_only.log" | tail -12
timeout 60 python3 examples/mlir_converging_loop.py 2>&1 | tail -2
