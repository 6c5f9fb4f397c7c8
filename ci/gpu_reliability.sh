#!/usr/bin/env bash
# GPU-machine run for the reliability report: fault tests, compute-sanitizer
# (memcheck, racecheck) over the GPU launch tests, concurrency and leaks.
set -u
source "$(dirname "$0")/gpu_env.sh"
if [ -n "${ONLY_CYCLES:-}" ]; then
  python3 benchmarks/reliability.py --only-cycles --json "$OUT/reliability_cycles.json" --cycles "${CYCLES:-1000}" 2>&1 | tail -4
  exit 0
fi
echo "== fault tests"
python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_gpu_faults.py 2>&1 | tail -15
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  echo "== compute-sanitizer $tool"
  timeout 280 "$SAN" --tool $tool --report-api-errors no --error-exitcode 86 --print-limit 20 \
    python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "not threads and not many_threads" \
    > "$OUT/sanitizer_$tool.log" 2>&1
  echo "exit $?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitizer_$tool.log" | tail -3
done
echo "== concurrency and leaks"
python3 benchmarks/reliability.py --json "$OUT/reliability.json" --cycles "${CYCLES:-1000}" 2>&1 | tail -8
