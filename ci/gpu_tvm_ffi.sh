#!/usr/bin/env bash
# GPU-machine run for TVM-FFI functions (docs/tvm-ffi.md; a few minutes on an
# H200): apache-tvm-ffi and jax-tvm-ffi from the carried wheels (.whl-tvm/,
# installed to /tmp/site), the GPU tests (a C++ program calling a TVM-FFI
# function of a library built by aot.build among them), and
# benchmarks/tvm_ffi_calls.py (tvm_ffi_bench.json/.md in $OUT; the row ratio
# "tvm_ffi_kernel / CUDA C++" is the target, <= 1.1; the row "kernel in Numba's
# parameter layout (22)" is the C++ function launching 22 parameters, what the
# driver's part of the difference is), then benchmarks/tvm_ffi_calls_cpu.py on
# this machine's CPU (stub cuLaunchKernel; tvm_ffi_cpu.json/.log in $OUT), with
# the tree in .bench/base as its baseline when carried (git archive 7b94277
# numba_cuda_launch | tar -x -C .bench/base).
set -u
source "$(dirname "$0")/gpu_env.sh"
if ls .whl-tvm/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl-tvm/*.whl
fi
python3 -c "import tvm_ffi, jax_tvm_ffi, torch; print('tvm_ffi', tvm_ffi.__version__, 'torch', torch.__version__)"
status=0

echo "== GPU TVM-FFI tests"
timeout 300 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_tvm_ffi_gpu.py \
  2>&1 | tee "$OUT/tvm_ffi_gpu_tests.log" | tail -15
[ "${PIPESTATUS[0]}" = 0 ] || status=1

echo "== CPU TVM-FFI tests on the GPU machine (recording driver)"
timeout 200 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_tvm_ffi_cpu.py \
  tests/test_tvm_ffi_aot_cpu.py 2>&1 | tail -5
[ "${PIPESTATUS[0]}" = 0 ] || status=1

echo "== benchmark"
timeout 300 python3 benchmarks/tvm_ffi_calls.py --json "$OUT/tvm_ffi_bench.json" \
  --markdown "$OUT/tvm_ffi_bench.md" 2>&1 | tee "$OUT/tvm_ffi_bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "== benchmark, function bodies on this CPU (stub driver)"
base_args=()
[ -d .bench/base/numba_cuda_launch ] && base_args=(--baseline .bench/base)
timeout 400 python3 benchmarks/tvm_ffi_calls_cpu.py ${base_args[@]+"${base_args[@]}"} \
  --json "$OUT/tvm_ffi_cpu.json" 2>&1 | tee "$OUT/tvm_ffi_cpu.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "gpu_tvm_ffi.sh: $([ $status = 0 ] && echo all steps passed || echo a step FAILED)"
exit $status
