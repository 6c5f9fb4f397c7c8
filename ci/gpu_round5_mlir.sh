#!/usr/bin/env bash
# GPU-machine run of round 5 (about 9 minutes on an H200): carry .whl-mlir
# (ci/repack_mlir_wheel.sh: the numba-cuda-mlir tree) and .whl-tvm
# (apache-tvm-ffi, jax-tvm-ffi wheels). Steps (STEPS, default all):
#   probe  what the driver does with recording states (ci/gpu_round5_probe.py)
#   both   the whole suite with numba-cuda and numba-cuda-mlir, and examples
#   gpu    (instead of both, for a short lease) the GPU-marked tests only
#   mlir   numba-cuda uninstalled (the machine is fresh each lease): the
#          numba-cuda-mlir GPU and CPU tests and example, and `import
#          numba_cuda_launch` not importing numba.cuda; with suite-mlir too,
#          every GPU-marked test there (numba-cuda's skip)
# Logs under $OUT.
set -u
source "$(dirname "$0")/gpu_env.sh"
if ls .whl-tvm/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl-tvm/*.whl
fi
STEPS=${STEPS:-probe both mlir}
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
if has probe; then
  echo "== probe"
  timeout 60 python3 ci/gpu_round5_probe.py 2>&1 | tee "$OUT/round5_probe.log" | grep -E "^PROBE|Error"
fi
if has both; then
  echo "== suite, numba-cuda and numba-cuda-mlir"
  timeout 320 python3 -m pytest -q -rfE -p no:cacheprovider -n 12 tests 2>&1 \
    | tee "$OUT/tests_both.log" | grep -E "DEFAULT-IN-BODY|passed|failed|FAILED|ERROR" | tail -40
  for e in mlir_converging_loop tvm_ffi_axpy converging_solver; do
    echo "-- examples/$e.py"; timeout 60 python3 examples/$e.py 2>&1 | tail -2
  done
fi
if has gpu; then
  echo "== GPU-marked tests, numba-cuda and numba-cuda-mlir"
  # -v: one line per finished test, so a test that never ends shows as the
  # one missing; faulthandler prints the stacks of a test past 60 s
  timeout 200 python3 -m pytest -v -rfE -p no:cacheprovider -n 12 -m gpu \
    -o faulthandler_timeout=60 tests > "$OUT/tests_gpu.log" 2>&1
  grep -E "^(FAILED|ERROR)|Timeout|passed|failed" "$OUT/tests_gpu.log" | tail -40
fi
if has mlir; then
  echo "== without numba-cuda"
  python3 -m pip uninstall -y -q numba-cuda 2>&1 | tail -1
  python3 -c "import sys, numba_cuda_launch; print('numba.cuda imported:', 'numba.cuda' in sys.modules)"
  timeout 150 python3 -m pytest -q -rfE -p no:cacheprovider -n 12 tests/test_mlir_only_gpu.py \
    tests/test_mlir_only_cpu.py tests/test_mlir_cpu.py tests/test_versions.py 2>&1 \
    | tee "$OUT/tests_mlir_only.log" | grep -E "passed|failed|FAILED|ERROR" | tail -20
  if has suite-mlir; then  # every GPU-marked test there (numba-cuda's skip, saying so)
    timeout 300 python3 -m pytest -q -rfEs -p no:cacheprovider -n 12 -m gpu \
      -o faulthandler_timeout=120 tests 2>&1 \
      | tee "$OUT/tests_gpu_mlir_only.log" | grep -E "passed|failed|FAILED|ERROR" | tail -20
  fi
  echo "-- examples/mlir_converging_loop.py"
  timeout 60 python3 examples/mlir_converging_loop.py 2>&1 | tail -2
fi
