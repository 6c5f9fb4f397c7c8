#!/usr/bin/env bash
# GPU-machine run for several GPUs in one process and across processes
# (nvidia-h200-x2; up to 9 minutes: split it with STEPS to stay within one
# device command): the two-GPU tests (tests/test_devices_gpu.py,
# the "needs 2 GPUs" tests of tests/test_gpu.py and tests/test_jax_gpu.py,
# whose output the log keeps, the driver probe's line included) with the
# CPU model of the same (tests/test_devices_cpu.py), the two-process JAX
# example (examples/jax_multiprocess.py), and benchmarks/devices.py (a
# launch on device 1 of 2 against device 0). Logs and devices.json under
# $OUT (or ./gpu-out). Exits 1 if a step failed, 2 with fewer than 2 GPUs.
# STEPS selects steps (default: all): tests bench example.
#   bash ci/gpu_two.sh
#   STEPS=tests bash ci/gpu_two.sh; STEPS="bench example" bash ci/gpu_two.sh
set -u
source "$(dirname "$0")/gpu_env.sh"
STEPS=${STEPS:-tests bench example}
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "GPUs: $NGPU"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,pci.bus_id --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -4
if [ "$NGPU" -lt 2 ]; then
  echo "gpu_two.sh needs 2 GPUs (nvidia-h200-x2); $NGPU here"
  exit 2
fi
status=0

if has tests; then
echo "== two-GPU tests"
timeout 300 python3 -m pytest -q -rfEsP -p no:cacheprovider -n 4 \
  tests/test_devices_gpu.py tests/test_devices_cpu.py \
  tests/test_gpu.py::test_second_device_context \
  tests/test_jax_gpu.py::test_sharded_jit_over_two_gpus_equals_one_gpu \
  tests/test_jax_gpu.py::test_multiprocess_example_two_gpus \
  2>&1 | tee "$OUT/two_gpu_tests.log" | grep -v '^\[Gloo\]' | tail -60
[ "${PIPESTATUS[0]}" = 0 ] || status=1
grep -c "SKIPPED.*needs 2 GPUs" "$OUT/two_gpu_tests.log" | sed 's/^/skipped for want of 2 GPUs: /'
fi

if has bench; then
echo "== benchmark: a launch on device 1 of 2 against device 0"
timeout 120 python3 benchmarks/devices.py --json "$OUT/devices.json" 2>&1 \
  | tee "$OUT/devices_bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

if has example; then
echo "== two processes, one GPU each (examples/jax_multiprocess.py)"
timeout 130 python3 examples/jax_multiprocess.py --timeout 110 2>&1 \
  | tee "$OUT/jax_multiprocess.log" | grep -v '^\[Gloo\]' | tail -6
[ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
echo "gpu_two.sh: $([ $status = 0 ] && echo all steps passed || echo a step FAILED)"
exit $status
